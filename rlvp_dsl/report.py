"""Summaries of scored episodes: per rule, per episode, and against the outcome.

Pure Python (no numpy): `summarise(program, scored)` where `scored` is a list of
(episode, credits).  The correlation is Pearson's r between a rule's per-episode
total credit and the episode's outcome reward, over episodes that have an outcome;
it is None when either side has no variance.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import attrs

from .compile import Program
from .events import Credit, Episode


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation of two equal-length sequences; None if undefined (n < 2 or no variance)."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return sxy / math.sqrt(sxx * syy)


@attrs.frozen
class RuleSummary:
    """One rule over all episodes.

    Attributes:
        fires: credits given (events hit), all outcomes of the rule counted.
        discharges / expiries: for obligations.
        episodes: episodes with at least one credit from the rule.
        total: summed credit; per_episode: total / number of episodes.
        outcome_correlation: Pearson r of the per-episode total with the outcome reward.
    """

    name: str
    kind: str
    location: str
    fires: int
    discharges: int
    expiries: int
    episodes: int
    total: float
    per_episode: float
    outcome_correlation: float | None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Summary:
    episodes: int
    events: int
    calls: int
    with_outcome: int
    mean_outcome: float | None
    mean_process_total: float
    process_outcome_correlation: float | None
    rules: tuple[RuleSummary, ...]

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["rules"] = [r.to_json() for r in self.rules]
        return out


def summarise(program: Program, scored: Sequence[tuple[Episode, Sequence[Credit]]]) -> Summary:
    """Summarise credits per rule and against the outcome."""
    n = len(scored)
    per_rule_totals: dict[str, list[float]] = {r.name: [0.0] * n for r in program.rules}
    counts = {r.name: [0, 0, 0, set()] for r in program.rules}
    process_totals = [0.0] * n
    for k, (_, credits) in enumerate(scored):
        for c in credits:
            per_rule_totals[c.rule][k] += c.value
            process_totals[k] += c.value
            entry = counts[c.rule]
            entry[0] += 1
            entry[1] += c.trigger == "discharge"
            entry[2] += c.trigger == "expire"
            entry[3].add(k)
    have = [k for k, (ep, _) in enumerate(scored) if ep.outcome is not None]
    outcomes = [float(scored[k][0].outcome) for k in have]
    rules = []
    for i, rule in enumerate(program.rules):
        totals = per_rule_totals[rule.name]
        fires, discharges, expiries, eps = counts[rule.name]
        rules.append(RuleSummary(
            rule.name, rule.kind, program.locations[i], fires, discharges, expiries, len(eps),
            sum(totals), sum(totals) / n if n else 0.0,
            pearson([totals[k] for k in have], outcomes),
        ))
    return Summary(
        episodes=n,
        events=sum(len(ep.events) for ep, _ in scored),
        calls=sum(len(ep.calls) for ep, _ in scored),
        with_outcome=len(have),
        mean_outcome=sum(outcomes) / len(outcomes) if outcomes else None,
        mean_process_total=sum(process_totals) / n if n else 0.0,
        process_outcome_correlation=pearson([process_totals[k] for k in have], outcomes),
        rules=tuple(rules),
    )


def fixed(x: float, spec: str = "+.3f") -> str:
    """`format(x, spec)` for a fixed-point `spec` (``+.2f``) that never shows a negative zero:
    -0.0, or -0.0004 at 3 places, is ``+0.000`` (``0.000`` without ``+``)."""
    text = format(x, spec)
    if text.startswith("-") and not text.strip("-0."):
        text = format(0.0, spec)
    return text


def _fmt(x: float | None, spec: str = "+.3f") -> str:
    return "n/a" if x is None else fixed(x, spec)


def render_summary(summary: Summary) -> str:
    """A plain-text table (Markdown-compatible) of the summary."""
    lines = [
        f"episodes: {summary.episodes}   events: {summary.events}   tool calls: {summary.calls}   "
        f"with outcome: {summary.with_outcome}   mean outcome: {_fmt(summary.mean_outcome, '.3f')}",
        f"mean process credit per episode: {fixed(summary.mean_process_total)}   "
        f"corr(process total, outcome): {_fmt(summary.process_outcome_correlation)}",
        "",
        "| rule | kind | fires | discharged | expired | episodes hit | total | per episode | corr w/ outcome |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary.rules:
        lines.append(
            f"| {r.name} | {r.kind} | {r.fires} | {r.discharges} | {r.expiries} | {r.episodes} | "
            f"{fixed(r.total, '+.2f')} | {fixed(r.per_episode)} | {_fmt(r.outcome_correlation)} |"
        )
    return "\n".join(lines)
