"""Experiments built on the trainer: methods x seeds and the paired mode (`compare`), learning
curves (`plots`), an environment's calibration (`calibrate`), and the same environments under TRL's
``GRPOTrainer`` (`trl_rollout`, `trl_runs`).  Nothing in the trainer's core imports them."""
