"""The training methods compared (DAPO's dynamic sampling itself: `trainer.dapo`).

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

import attrs


@attrs.frozen
class Method:
    """How one method turns rollouts into advantages.

    Attributes:
        name: the method's name.
        credit_mode: ``none`` | ``token`` | ``scalar`` (see rlvp_dsl.advantages).
        rules_field: config field naming its rule file (``rules`` or ``auto_rules``).
        anneal: whether the process weight is annealed (if the config enables it).
        dynamic_sampling: DAPO's drop-and-resample of zero-variance groups (`trainer.dapo`).
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
