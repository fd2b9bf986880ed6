"""``rlvp-train``: the console script (`entry`), the train command (`train_command`: one run,
``--compare``, ``--paired``), ``rlvp-train plot`` (`plot_command`), and what they share (`common`).
``python -m trainer.cli`` runs the train command."""
