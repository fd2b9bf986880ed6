"""Summaries of scored episodes: per rule, per episode, and against the outcome.

Pure Python (no numpy): `summarise(program, scored)` where `scored` is a list of
(episode, credits).  The correlation is Pearson's r between a rule's per-episode
total credit and the episode's outcome reward, over episodes that have an outcome;
it is None when either side has no variance.

Sums are those of training (`rlvp_dsl.attach.overflowing_sums`): a call whose
credits sum past a float, or the calls that make an episode's total overflow, are
left out of every total and counted in `Summary.flagged_credits`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import attrs

from .attach import overflowing_sums
from .compile import Program
from .events import Credit, Episode


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation of two equal-length sequences; None if undefined (n < 2 or no variance)."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    xs, ys = _tame(xs), _tame(ys)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return sxy / math.sqrt(sxx * syy)


def _tame(values: Sequence[float]) -> Sequence[float]:
    """`values` scaled down when their squares could overflow (r does not depend on the scale)."""
    top = max((abs(v) for v in values), default=0.0)
    return [v / top for v in values] if top > 1e150 else values


def _mean(values: Sequence[float]) -> float:
    """The mean of finite values, finite even where their sum overflows."""
    n = len(values)
    if not n:
        return 0.0
    total = sum(values)
    return total / n if math.isfinite(total) else sum(v / n for v in values)


def _finite_credits(episode: Episode, credits: Sequence[Credit]) -> tuple[list[Credit], int]:
    """The credits of `episode` whose sums stay finite, and how many sums were flagged."""
    position = {e.index: k for k, e in enumerate(episode.calls)}
    values = [0.0] * len(position)
    unattached = 0.0
    for c in credits:
        k = position.get(c.event_index)
        if k is None:
            unattached += c.value
        else:
            values[k] += c.value
    notes: list[str] = []
    dropped = overflowing_sums(values, unattached, f"episode {episode.id!r}", "rules", notes)
    if not dropped:
        return list(credits), 0
    return [c for c in credits if position.get(c.event_index) not in dropped], len(notes)


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
    """All episodes: counts, means and one `RuleSummary` per rule.

    ``flagged_credits`` counts the credit sums left out because they overflow a float
    (`rlvp_dsl.attach.overflowing_sums`); a rule's ``total`` over many episodes can still
    exceed a float (then it is infinite), its ``per_episode`` mean stays finite.
    """

    episodes: int
    events: int
    calls: int
    with_outcome: int
    mean_outcome: float | None
    mean_process_total: float
    process_outcome_correlation: float | None
    rules: tuple[RuleSummary, ...]
    flagged_credits: int = 0

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["rules"] = [r.to_json() for r in self.rules]
        return out


def summarise(program: Program, scored: Sequence[tuple[Episode, Sequence[Credit]]]) -> Summary:
    """Summarise credits per rule and against the outcome."""
    n = len(scored)
    per_rule_totals: dict[str, list[float]] = {r.name: [0.0] * n for r in program.rules}
    counts = {r.name: [0, 0, 0] for r in program.rules}  # fires, discharges, expiries
    fired_in: dict[str, set[int]] = {r.name: set() for r in program.rules}  # the episodes it fired in
    process_totals = [0.0] * n
    flagged = 0
    for k, (episode, credits) in enumerate(scored):
        kept, dropped = _finite_credits(episode, credits)
        flagged += dropped
        for c in kept:  # the sums: without the calls whose sums overflow
            per_rule_totals[c.rule][k] += c.value
            process_totals[k] += c.value
        for c in credits:  # the counts: every time a rule fired
            entry = counts[c.rule]
            entry[0] += 1
            entry[1] += c.trigger == "discharge"
            entry[2] += c.trigger == "expire"
            fired_in[c.rule].add(k)
    have = [k for k, (ep, _) in enumerate(scored) if ep.outcome is not None]
    outcomes = [float(ep.outcome) for ep, _ in scored if ep.outcome is not None]  # (the episodes of `have`)
    rules = []
    for i, rule in enumerate(program.rules):
        totals = per_rule_totals[rule.name]
        fires, discharges, expiries = counts[rule.name]
        rules.append(
            RuleSummary(
                rule.name,
                rule.kind,
                program.locations[i],
                fires,
                discharges,
                expiries,
                len(fired_in[rule.name]),
                sum(totals),
                _mean(totals),
                pearson([totals[k] for k in have], outcomes),
            )
        )
    return Summary(
        episodes=n,
        events=sum(len(ep.events) for ep, _ in scored),
        calls=sum(len(ep.calls) for ep, _ in scored),
        with_outcome=len(have),
        mean_outcome=sum(outcomes) / len(outcomes) if outcomes else None,
        mean_process_total=_mean(process_totals),
        process_outcome_correlation=pearson([process_totals[k] for k in have], outcomes),
        rules=tuple(rules),
        flagged_credits=flagged,
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
        *(
            [
                f"flagged: {summary.flagged_credits} credit sum(s) overflow a float; those calls are left out of "
                "every total (as in training)"
            ]
            if summary.flagged_credits
            else []
        ),
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
