"""The credit maths the three trainers share (the compact trainer, TRL, verl).

    A[i, t] = mask[i, t] * A_out[i] + w * P[i, t]

* `outcome`: ``A_out``, GRPO's group-relative outcome advantage, and the groups it
  treats specially (constant groups, scalar mode's amplified groups);
* `tokens`: the combination with the token-attached process credit ``P``
  (`token_advantages`) and one batch's advantages (`compute_advantages`);
* `schedule`: the process weight ``w`` per iteration (`ProcessWeightSchedule`).

Layer 1 of docs/pipeline.md "Layers": imports torch and the language core
(`rlvp_dsl.attach`), never a trainer.
"""

from __future__ import annotations

from .outcome import (
    CONSTANT_RTOL,
    amplified_groups,
    constant_groups,
    group_outcome_advantages,
    outcome_advantages,
)
from .schedule import ProcessWeightSchedule
from .tokens import FLOAT32_MAX, Advantages, compute_advantages, process_scale, token_advantages

__all__ = [
    "CONSTANT_RTOL",
    "FLOAT32_MAX",
    "Advantages",
    "ProcessWeightSchedule",
    "amplified_groups",
    "compute_advantages",
    "constant_groups",
    "group_outcome_advantages",
    "outcome_advantages",
    "process_scale",
    "token_advantages",
]
