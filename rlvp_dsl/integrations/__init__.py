"""rlvp credit inside the trainers people already use.

* `rlvp_dsl.integrations.trl` -- Hugging Face TRL: `RlvpReward` (a reward function,
  scalar or token mode) and `RlvpGRPOTrainer` / `RlvpAdvantageMixin` (per-token
  advantages in `GRPOTrainer`).  Extra ``trl``.
* `rlvp_dsl.integrations.verl` -- verl on Ray: the ``rlvp`` reward manager, the
  ``rlvp_token`` advantage estimator and the ``rlvp_tool_agent`` agent loop, registered
  through the ``verl.plugins`` entry point.  Extra ``verl``.

Each imports torch and its framework only when it is imported itself; the rest of
`rlvp_dsl` never does.  docs/integrations.md gives the supported versions.
"""
