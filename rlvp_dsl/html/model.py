"""What goes where in the HTML credit report: scored episodes -> plain data (pure Python).

`build_report(program, scored, sources)` decides everything the page shows; the
templates (`render.py`) only lay it out and the page's script only draws it:

* one `RuleRow` per rule: fires, discharges, expiries, episodes hit, total credit,
  Pearson r of the per-episode total with the outcome (`rlvp_dsl.report.summarise`),
  the rule's file and line, and a `Histogram` of per-episode totals split by outcome;
* one episode record per episode (`episode_record`), a JSON-ready dict: its events
  in order, each credit placed on the event of its ``event_index`` with its value,
  explanation and rule line; an obligation's credit also names the *other* event of
  the obligation (the opening event for a discharge, the deadline event for an
  expiry), and that event carries a mark pointing back;
* the rule files as numbered lines, so that a credit links to ``#src-F-LN``.

Nothing here reads a file or imports jinja2: it is unit-tested on values
(tests/unit/test_html_report.py).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import attrs

from ..compare import Comparison
from ..compile import Program
from ..events import CALL, Credit, Episode, Event
from ..report import RuleSummary, Summary, summarise

#: Characters of a tool result shown before "show all"; the page keeps up to `RESULT_LIMIT`.
RESULT_PREVIEW = 160
RESULT_LIMIT = 4000
#: An outcome at or above this counts as a success in the histograms (tau2: 0 or 1).
OUTCOME_SPLIT = 0.5
#: Histogram bars: one per distinct per-episode total up to this many, else equal-width bins.
MAX_BARS = 12


@attrs.frozen
class Histogram:
    """Per-episode totals of one rule, binned, each bin split by the episode's outcome.

    Attributes:
        labels: one text per bar (``-0.5``, or ``[-1, -0.5)`` for a bin).
        low / high / unknown: episodes per bar with outcome below `OUTCOME_SPLIT`, at or
            above it, and with no outcome; all three ``[n_bars]``.
    """

    labels: tuple[str, ...]
    low: tuple[int, ...]
    high: tuple[int, ...]
    unknown: tuple[int, ...]

    @property
    def tallest(self) -> int:
        return max((a + b + c for a, b, c in zip(self.low, self.high, self.unknown)), default=0)


@attrs.frozen
class RuleRow:
    """One row of the summary table: a rule's `rlvp_dsl.report.RuleSummary` (fires, discharges,
    expiries, episodes, total, per episode, outcome correlation), where the rule is written, and
    its histogram."""

    index: int
    summary: RuleSummary
    source: int | None  # index into Report.sources; None for a generated rule
    line: int
    histogram: Histogram

    @property
    def name(self) -> str:
        return self.summary.name


@attrs.frozen
class SourceText:
    """A rule file, as the page shows it: its path and its lines (line k is ``lines[k - 1]``)."""

    index: int
    path: str
    lines: tuple[str, ...]


@attrs.frozen
class Report:
    """Everything the report page shows.

    Attributes:
        title: the page title (the rule file).
        summary: `rlvp_dsl.report.Summary` over all episodes.
        rules: one `RuleRow` per rule, in rule-file order.
        episodes: one `episode_record` dict per episode, in input order.
        sources: the rule files named by the rules' locations.
    """

    title: str
    summary: Summary
    rules: tuple[RuleRow, ...]
    episodes: tuple[dict[str, Any], ...]
    sources: tuple[SourceText, ...]

    def data_json(self) -> str:
        """The episodes and rule names as JSON that is safe inside ``<script>`` (no ``<``, ``>``, ``&``)."""
        doc = {"rules": [r.name for r in self.rules], "episodes": list(self.episodes)}
        return script_safe_json(doc)


@attrs.frozen
class SideBySide:
    """`rlvp-score --compare --html`: the reports of rule files A and B on the same episodes, and their
    `rlvp_dsl.compare.Comparison`.  The page shows the comparison, A's and B's rule tables side by
    side, and the episodes (their timelines and credits) under B."""

    a: Report
    b: Report
    comparison: Comparison


def script_safe_json(doc: Any) -> str:
    """``json.dumps(doc)`` with ``<``, ``>``, ``&`` and the two JavaScript line separators escaped,
    so that no text of a trajectory can close the ``<script>`` element it is embedded in."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def split_location(location: str) -> tuple[str, int]:
    """``"rules/x.rlvp:42:1"`` -> ``("rules/x.rlvp", 42)``; ``(location, 0)`` when it has no line."""
    parts = location.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], int(parts[1])
    return location, 0


def linked_event(credit: Credit) -> tuple[int, str] | None:
    """The other event of an obligation credit (`Credit.related_event`), and what happened there.

    A discharge lands on the discharging event and links the event that ``opened`` the
    obligation; an expiry lands on the opening event and links the event where the
    deadline passed: ``expired``, or ``episode ended`` when the episode ended first
    (`Credit.deadline` ``end``).  None for other credits.
    """
    if credit.related_event is None:
        return None
    if credit.trigger == "discharge":
        return credit.related_event, "opened"
    if credit.trigger == "expire":
        return credit.related_event, "episode ended" if credit.deadline == "end" else "expired"
    return None


#: Decimal places to which a credit total is compared with zero (as rlvp-score's CSV rounds it):
#: a sum like -4e-17 is zero, not a penalty.
SIGN_DECIMALS = 9


def sign_of(x: float) -> str:
    """``pos``, ``neg`` or ``zero``: the class that colours a credit or a total (green, red, grey),
    by its sign after rounding to `SIGN_DECIMALS` places."""
    rounded = round(x, SIGN_DECIMALS)
    return "pos" if rounded > 0 else ("neg" if rounded < 0 else "zero")


def _number_text(x: float) -> str:
    return f"{x:+.3g}" if x else "0"


def histogram(totals: Sequence[float], outcomes: Sequence[float | None], max_bars: int = MAX_BARS) -> Histogram:
    """Bin per-episode totals (``[n_episodes]``) and split each bin by outcome.

    One bar per distinct total when there are at most `max_bars` (rule weights make few
    distinct totals), else `max_bars` equal-width bins over [min, max].
    """
    if not totals:
        return Histogram((), (), (), ())
    distinct = sorted(set(round(t, 9) for t in totals))
    if len(distinct) <= max_bars:
        labels = tuple(_number_text(v) for v in distinct)
        where = {v: k for k, v in enumerate(distinct)}
        bar_of = [where[round(t, 9)] for t in totals]
    else:
        lo, hi = distinct[0], distinct[-1]
        width = (hi - lo) / max_bars
        labels = tuple(
            f"[{lo + k * width:+.3g}, {lo + (k + 1) * width:+.3g}{']' if k == max_bars - 1 else ')'}"
            for k in range(max_bars)
        )
        bar_of = [min(max_bars - 1, int((t - lo) / width)) for t in totals]
    n = len(labels)
    low, high, unknown = [0] * n, [0] * n, [0] * n
    for bar, outcome in zip(bar_of, outcomes):
        if outcome is None:
            unknown[bar] += 1
        elif outcome >= OUTCOME_SPLIT:
            high[bar] += 1
        else:
            low[bar] += 1
    return Histogram(labels, tuple(low), tuple(high), tuple(unknown))


def _finite(x: float | None) -> float | None:
    """`x`, or None for a missing or non-finite number (JSON has no NaN; the page shows n/a)."""
    return float(x) if x is not None and math.isfinite(x) else None


def _shorten(text: str, limit: int) -> tuple[str, int]:
    """``(text cut to limit characters, the full length)``."""
    return (text if len(text) <= limit else text[:limit]), len(text)


def _arguments_text(event: Event) -> str:
    if event.arguments:
        return json.dumps(dict(event.arguments), ensure_ascii=False, sort_keys=False, default=str)
    return event.raw_arguments or ""


def episode_record(
    number: int,
    episode: Episode,
    credits: Sequence[Credit],
    rule_index: Mapping[str, int],
    source_index: Mapping[str, int],
    result_limit: int = RESULT_LIMIT,
) -> dict[str, Any]:
    """One episode as the page's script draws it (JSON-ready).

    Keys: ``n`` (its position), ``id``, ``source``, ``domain``, ``outcome``, ``total`` (process
    credit), ``calls``, ``rule_totals`` (rule -> summed credit, rules that gave any), ``hit``
    (rule indices that gave credit), ``chips`` (per rule that gave credit, in rule order: ``r``,
    ``rule``, ``total`` and ``sign``, `sign_of` the total: what colours its chip), ``unplaced``
    (credits naming an event the episode does not have), and ``events``: per event ``index``,
    ``kind``, text or call fields (``tool``, ``args``, ``status``, ``error``, ``result`` cut to
    `result_limit`, ``result_len``), ``signals`` (name -> number, None where not finite; only
    on events that carry signals),
    ``credits`` (those on it: ``rule``, ``r``, ``value``, ``reason``, ``kind``, ``trigger``,
    ``location``, ``src``, ``line``, ``link`` = the obligation's other event or None) and
    ``marks`` (obligation credits elsewhere that name this event).
    """
    events = []
    for e in episode.events:
        row: dict[str, Any] = {"index": e.index, "kind": e.kind, "credits": [], "marks": []}
        if e.kind == CALL:
            result, result_len = _shorten(e.result, result_limit)
            row.update(
                tool=e.tool,
                args=_arguments_text(e),
                status=e.status,
                error=e.error_text,
                result=result,
                result_len=result_len,
            )
            if e.requestor != "assistant":
                row["requestor"] = e.requestor
        else:
            row["text"] = e.text
        if e.signals:  # the environment's numbers after the event (goals_remaining, ...)
            row["signals"] = {str(k): _finite(v) if isinstance(v, (int, float)) else None for k, v in e.signals.items()}
        events.append(row)
    totals: dict[str, float] = {}
    unplaced = []
    for c in credits:
        link = linked_event(c)
        item = {
            "rule": c.rule,
            "r": rule_index.get(c.rule, -1),
            "value": c.value,
            "reason": c.reason,
            "kind": c.kind,
            "trigger": c.trigger,
            "location": c.location,
            "src": source_index.get(c.span.file),
            "line": c.span.line,
            "link": None,
        }
        totals[c.rule] = totals.get(c.rule, 0.0) + c.value
        if not 0 <= c.event_index < len(events):
            unplaced.append(item)
            continue
        if link is not None and 0 <= link[0] < len(events):
            item["link"] = {"event": link[0], "what": link[1]}
            events[link[0]]["marks"].append(
                {"rule": c.rule, "r": item["r"], "event": c.event_index, "trigger": c.trigger, "what": link[1]}
            )
        events[c.event_index]["credits"].append(item)
    return {
        "n": number,
        "id": episode.id,
        "source": episode.source,
        "domain": episode.meta.get("domain"),
        "outcome": _finite(episode.outcome),
        "total": sum(c.value for c in credits),
        "calls": len(episode.calls),
        "rule_totals": totals,
        "hit": sorted({rule_index[c.rule] for c in credits if c.rule in rule_index}),
        "chips": [
            {"r": rule_index[rule], "rule": rule, "total": total, "sign": sign_of(total)}
            for rule, total in sorted(totals.items(), key=lambda x: rule_index.get(x[0], -1))
            if rule in rule_index
        ],
        "unplaced": unplaced,
        "events": events,
    }


def build_report(
    program: Program,
    scored: Sequence[tuple[Episode, Sequence[Credit]]],
    sources: Mapping[str, Any] | None = None,
    *,
    title: str = "",
    result_limit: int = RESULT_LIMIT,
) -> Report:
    """Decide what the report shows.

    Args:
        program: the compiled `Program` (its rules and their locations).
        scored: ``[(episode, program.score(episode))]``.
        sources: rule file path -> its text (a ``str`` or a `SourceFile`: ``check_file(...).sources``).
        title: the page title (default: the first rule file).
        result_limit: characters of each tool result kept in the page.

    Returns:
        `Report`.
    """
    sources = dict(sources or {})
    paths = list(sources)
    texts = [sources[p] if isinstance(sources[p], str) else sources[p].text for p in paths]
    source_index = {p: k for k, p in enumerate(paths)}
    rule_index = {r.name: k for k, r in enumerate(program.rules)}
    summary = summarise(program, scored)
    outcomes = [ep.outcome for ep, _ in scored]
    rows = []
    for k, rs in enumerate(summary.rules):
        per_episode = [sum(c.value for c in credits if c.rule == rs.name) for _, credits in scored]
        path, line = split_location(rs.location)
        rows.append(RuleRow(k, rs, source_index.get(path), line, histogram(per_episode, outcomes)))
    episodes = tuple(
        episode_record(n, ep, credits, rule_index, source_index, result_limit) for n, (ep, credits) in enumerate(scored)
    )
    files = tuple(SourceText(k, p, tuple(t.split("\n"))) for k, (p, t) in enumerate(zip(paths, texts)))
    return Report(title or (paths[0] if paths else "rlvp credit report"), summary, tuple(rows), episodes, files)
