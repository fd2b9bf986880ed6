"""DAPO's dynamic sampling: resample the groups whose outcomes are all equal (Yu et al. 2025, DAPO,
section 3.2), and `SamplingResult`, what one iteration's sampling gave the loop (with or without it).

A group whose rewards are all equal has advantage 0 under GRPO's group normalisation, so it gives
no gradient; DAPO drops it and generates groups on new tasks in its place, until the batch is full
or ``dapo_max_rounds`` rounds were spent.  Every episode generated counts in
``rollout/episodes_generated``, dropped ones included, so methods compare on equal cost.
"""

from __future__ import annotations

from typing import Callable, Sequence

import attrs
import torch

from rlvp_dsl.advantages import constant_groups
from trainer.types import Rollout

#: A group: ``num_generations`` rollouts of one task.
Group = list[Rollout]


@attrs.frozen
class SamplingResult:
    """What one iteration's sampling produced.

    Attributes:
        groups: the groups to train on, ``[n_groups][G]``.
        generated: every group generated, round by round, ``[round][group][G]`` (kept and dropped;
            round 0 is the same for every method: the success rate is measured on it).
        dropped_groups: zero-variance groups discarded (DAPO).
        message: why sampling stopped early, or "".
    """

    groups: list[Group]
    generated: list[list[Group]]
    dropped_groups: int = 0
    message: str = ""

    @classmethod
    def one_round(cls, groups: list[Group]) -> SamplingResult:
        """The groups of a single round, all trained on (every method but ``dapo``)."""
        return cls(groups, [groups])

    @property
    def rounds(self) -> int:
        """Generation rounds used."""
        return len(self.generated)

    @property
    def first_round(self) -> list[Group]:
        """The groups of round 0, ``[group][G]``."""
        return self.generated[0]

    @property
    def episodes_generated(self) -> int:
        """Every episode generated this iteration, kept or dropped."""
        return sum(len(group) for round_groups in self.generated for group in round_groups)


def dynamic_sampling(
    generate: Callable[[int, int], list[Group]],
    n_groups: int,
    max_rounds: int,
) -> SamplingResult:
    """Generate groups, keep those whose outcome rewards differ (`rlvp_dsl.advantages.constant_groups`,
    the test the advantage uses), generate more until ``n_groups`` are kept or ``max_rounds`` rounds
    were spent.

    Args:
        generate: ``generate(round, n) -> n groups`` (new tasks each call).
        n_groups: groups wanted (the batch size in groups).
        max_rounds: cap on generation rounds (>= 1).

    Returns:
        `SamplingResult`.  Fallback when the cap is hit with fewer than ``n_groups``
        live groups: train on the live groups collected (possibly none -- then the
        iteration is dead and says so in ``message``); surplus live groups beyond
        ``n_groups`` are dropped (DAPO) but their episodes are counted.

    Raises:
        ValueError: ``max_rounds < 1`` or ``n_groups < 1``.
    """
    if max_rounds < 1:
        raise ValueError(f"'dapo_max_rounds' must be at least 1 (got {max_rounds})")
    if n_groups < 1:
        raise ValueError(f"'tasks_per_iteration' must be at least 1 (got {n_groups})")
    kept: list[Group] = []
    generated: list[list[Group]] = []
    dropped = 0
    while len(kept) < n_groups and len(generated) < max_rounds:
        # each round asks for as many groups as are still missing (DAPO over-samples prompts the same way)
        new = generate(len(generated), n_groups - len(kept))
        generated.append(new)
        for group in new:
            if _all_equal(group):
                dropped += 1
            else:
                kept.append(group)
    message = ""
    if len(kept) < n_groups:
        message = (
            f"dynamic sampling stopped at the cap of {max_rounds} rounds with {len(kept)}/{n_groups} "
            f"groups of differing rewards; training on those"
            + (" (none: no gradient this iteration)" if not kept else "")
        )
    return SamplingResult(kept[:n_groups], generated, dropped, message)


def _all_equal(group: Sequence[Rollout]) -> bool:
    """Whether the group's outcomes are all equal (its advantages would all be 0)."""
    rewards = torch.tensor([[float(r.outcome) for r in group]], dtype=torch.float64)  # (1, G)
    return bool(constant_groups(rewards)[0])
