"""The training methods compared, and DAPO's dynamic sampling.

| method          | process credit        | rules      | annealing | sampling          |
| --------------- | --------------------- | ---------- | --------- | ----------------- |
| ``grpo``        | none (outcome only)   | --         | --        | one round         |
| ``dapo``        | none                  | --         | --        | dynamic (resample)|
| ``scalar_fold`` | summed into reward    | ``rules``  | yes       | one round         |
| ``rlvp``        | token-attached        | ``rules``  | yes       | one round         |
| ``rlvp_auto``   | token-attached        | ``auto_rules`` (derived from tags) | yes | one round |
| ``rlvp_noanneal`` | token-attached      | ``rules``  | no        | one round         |

Rules are still *scored* for grpo and dapo (for the violations/discharges
metrics), they just never enter the advantage.
"""

from __future__ import annotations

from typing import Callable

import attrs
import torch

from rlvp_dsl.advantages import constant_groups


@attrs.frozen
class Method:
    """How one method turns rollouts into advantages.

    Attributes:
        name: the method's name.
        credit_mode: ``none`` | ``token`` | ``scalar`` (see rlvp_dsl.advantages).
        rules_field: config field naming its rule file (``rules`` or ``auto_rules``).
        anneal: whether the process weight is annealed (if the config enables it).
        dynamic_sampling: DAPO's drop-and-resample of zero-variance groups.
    """

    name: str
    credit_mode: str
    rules_field: str = "rules"
    anneal: bool = True
    dynamic_sampling: bool = False


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("grpo", "none"),
        Method("dapo", "none", dynamic_sampling=True),
        Method("scalar_fold", "scalar"),
        Method("rlvp", "token"),
        Method("rlvp_auto", "token", rules_field="auto_rules"),
        Method("rlvp_noanneal", "token", anneal=False),
    )
}


def get_method(name: str) -> Method:
    """The `Method` called ``name``.

    Raises:
        ValueError: unknown name (lists the known ones).
    """
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}") from None


@attrs.frozen
class SamplingResult:
    """What one iteration's (possibly dynamic) sampling produced.

    Attributes:
        groups: the groups to train on (each a list of rollouts).
        rounds: generation rounds used.
        episodes_generated: every episode generated this iteration, kept or dropped.
        dropped_groups: zero-variance groups discarded.
        message: why sampling stopped early, or "".
    """

    groups: list
    rounds: int
    episodes_generated: int
    dropped_groups: int
    message: str = ""


def dynamic_sampling(
    generate: Callable[[int, int], list[list]],
    n_groups: int,
    max_rounds: int,
) -> SamplingResult:
    """DAPO dynamic sampling: generate groups, keep those whose outcome rewards differ
    (`rlvp_dsl.advantages.constant_groups`, the test the advantage uses), generate more
    until ``n_groups`` are kept or ``max_rounds`` rounds were spent.

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
    kept: list = []
    generated = dropped = rounds = 0
    while len(kept) < n_groups and rounds < max_rounds:
        # each round asks for as many groups as are still missing (DAPO over-samples prompts the same way)
        new = generate(rounds, n_groups - len(kept))
        rounds += 1
        for group in new:
            generated += len(group)
            rewards = torch.tensor([[float(r.outcome) for r in group]], dtype=torch.float64)  # (1, G)
            if constant_groups(rewards)[0]:
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
    return SamplingResult(kept[:n_groups], rounds, generated, dropped, message)
