"""Validation of derived rules against evidence (``rlvp-compile --auto-from-tags M --validate T``).

A rule derived from tags is a guess about what good behaviour looks like.  Trajectories
that carry an outcome are evidence: for each rule, how often it fires as a **penalty**
(a negative credit) on successful episodes and on failed ones, and the Pearson
correlation of its per-episode total with the outcome.  A penalty that fires on a larger
share of successful episodes than of failed ones punishes what succeeds: it is flagged
*harmful* (``--drop-harmful`` leaves it out of the derived file), with its evidence.

An episode is successful when its outcome is at least `SUCCESS` (0.5: tau2 rewards are 0
or 1).  Episodes without an outcome are not evidence and are left out.
"""

from __future__ import annotations

from typing import Iterable

import attrs

from ..compile import Program
from ..events import Episode
from ..report import fixed, pearson

#: The outcome at or above which an episode counts as successful.
SUCCESS = 0.5


@attrs.frozen
class RuleEvidence:
    """What the trajectories say about one rule.

    Attributes:
        name, kind: the rule.
        penalised_successes / successes: successful episodes where it gave a penalty / all of them.
        penalised_failures / failures: the same for failed episodes.
        correlation: Pearson r of the rule's per-episode total with the outcome (None: undefined).
        harmful: a penalty that hits a larger share of successes than of failures.
    """

    name: str
    kind: str
    penalised_successes: int
    successes: int
    penalised_failures: int
    failures: int
    correlation: float | None

    @property
    def success_rate(self) -> float:
        return self.penalised_successes / self.successes if self.successes else 0.0

    @property
    def failure_rate(self) -> float:
        return self.penalised_failures / self.failures if self.failures else 0.0

    @property
    def harmful(self) -> bool:
        return self.penalised_successes > 0 and self.success_rate > self.failure_rate


def validate(program: Program, episodes: Iterable[Episode]) -> tuple[list[RuleEvidence], int]:
    """Evidence per rule of `program` over the episodes that have an outcome.

    Returns:
        (one `RuleEvidence` per rule in source order, how many episodes were used).
    """
    names = [r.name for r in program.rules]
    kinds = {r.name: r.kind for r in program.rules}
    totals: dict[str, list[float]] = {n: [] for n in names}
    penalised: dict[str, list[bool]] = {n: [] for n in names}
    outcomes: list[float] = []
    for episode in episodes:
        if episode.outcome is None:
            continue
        outcomes.append(float(episode.outcome))
        per_rule = {n: 0.0 for n in names}
        hit = {n: False for n in names}
        for credit in program.score(episode):
            per_rule[credit.rule] += credit.value
            hit[credit.rule] |= credit.value < 0
        for n in names:
            totals[n].append(per_rule[n])
            penalised[n].append(hit[n])
    success = [o >= SUCCESS for o in outcomes]
    out = []
    for n in names:
        out.append(
            RuleEvidence(
                n,
                kinds[n],
                sum(1 for p, s in zip(penalised[n], success) if p and s),
                sum(success),
                sum(1 for p, s in zip(penalised[n], success) if p and not s),
                len(success) - sum(success),
                pearson(totals[n], outcomes),
            )
        )
    return out, len(outcomes)


def render(evidence: list[RuleEvidence], n_episodes: int) -> str:
    """A Markdown table of the evidence, harmful rules marked."""
    lines = [
        f"validation on {n_episodes} episodes with an outcome (success: outcome >= {SUCCESS:g})",
        "",
        "| rule | kind | penalised on successes | penalised on failures | corr w/ outcome | verdict |",
        "|---|---|---:|---:|---:|---|",
    ]
    for e in evidence:
        corr = "n/a" if e.correlation is None else fixed(e.correlation)
        verdict = "HARMFUL: penalises success more often than failure" if e.harmful else "ok"
        lines.append(
            f"| {e.name} | {e.kind} | {e.penalised_successes}/{e.successes} ({e.success_rate:.1%}) "
            f"| {e.penalised_failures}/{e.failures} ({e.failure_rate:.1%}) | {corr} | {verdict} |"
        )
    lines.append("")
    lines.append(
        "corr w/ outcome: Pearson r of the rule's per-episode total credit with the outcome; "
        "for a penalty, > 0 means it goes with failure (as it should)"
    )
    return "\n".join(lines)
