"""What `rlvp-score` prints and writes from the scored episodes: the summary text (per rule; per
domain or file with `--by`), every credit with its reason (`--explain`), the JSON document
(`--json`), one CSV row per episode (`--csv`) and the HTML report (`--html`).

The JSON document and the CSV columns are described in docs/scoring.md.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import write_output
from ..diagnostics import counted
from ..report import fixed, render_summary, summarise
from .score_notes import domain_of

if TYPE_CHECKING:
    from ..compile import Program
    from ..events import Credit, Episode
    from ..readers import ReadReport
    from ..source import SourceFile

#: An episode and its credits, as `Program.score` gives them.
Scored = tuple["Episode", "list[Credit]"]

#: The fixed CSV columns (then ``rule:NAME`` per rule), in order.
_COLUMNS = (
    "id",
    "source",
    "domain",
    "outcome",
    "events",
    "calls",
    "malformed_calls",
    "orphan_results",
    "ambiguous_results",
    "total",
)

#: Decimal places kept in CSV numbers: float sums (0.1 + 0.2) are shown as 0.3, never 0.30000000000000004.
CSV_DECIMALS = 9


def groups(scored: Sequence[Scored], by: str | None) -> list[tuple[str, list[Scored]]]:
    """The scored episodes split by ``domain`` or ``file`` (`by`), sorted by key; one group ``all`` when `by` is None."""
    if by is None:
        return [("all", list(scored))]
    out: dict[str, list[Scored]] = {}
    for episode, credits in scored:
        key = episode.source if by == "file" else (domain_of(episode) or "(no domain)")
        out.setdefault(key, []).append((episode, credits))
    return sorted(out.items())


def summary_text(
    program: Program,
    scored: Sequence[Scored],
    report: ReadReport,
    *,
    rules: str,
    domains: Sequence[str],
    by: str | None,
) -> str:
    """The text report: one line on what was read (the `rules` file, files skipped, read errors,
    unpaired results, the `domains` kept), then the summary per rule (`render_summary`), once per
    group with `by`."""
    episodes = [episode for episode, _ in scored]
    orphans = sum(int(episode.meta.get("orphan_results", 0)) for episode in episodes)
    ambiguous = sum(int(episode.meta.get("ambiguous_results", 0)) for episode in episodes)
    head = (
        f"rules: {rules} ({counted(len(program.rules), 'rule')})   skipped files: {len(report.skipped)}"
        + (f"   read errors: {len(report.errors)}" if report.errors else "")
        + (f"   orphan tool results (matching no call): {orphans}" if orphans else "")
        + (
            f"   ambiguous tool results (could be a same-name call's; skipped by error rules): {ambiguous}"
            if ambiguous
            else ""
        )
        + (f"   domain: {', '.join(domains)}" if domains else "")
    )
    if by is None:
        return head + "\n" + render_summary(summarise(program, scored))
    parts = [
        f"\n== {by} {key}: {counted(len(part), 'episode')}\n{render_summary(summarise(program, part))}"
        for key, part in groups(scored, by)
    ]
    return "\n".join([head, *parts])


def explain_text(scored: Sequence[Scored], limit: int) -> str:
    """Every credit of the first `limit` episodes (0: all) under the event it is on, with its rule,
    location and reason (`--explain`)."""
    lines = []
    for k, (episode, credits) in enumerate(scored):
        if limit and k >= limit:
            lines.append(f"... {len(scored) - limit} more episodes (use --limit 0 for all)")
            break
        total = sum(c.value for c in credits)
        outcome = "n/a" if episode.outcome is None else f"{episode.outcome:g}"
        lines.append(
            f"== {episode.id}  outcome={outcome}  events={len(episode.events)}  "
            f"calls={len(episode.calls)}  process total={fixed(total, '+.2f')}"
        )
        by_event: dict[int, list[Credit]] = {}
        for c in credits:
            by_event.setdefault(c.event_index, []).append(c)
        for event in episode.events:
            if event.kind != "call" and event.index not in by_event:
                continue
            tool = event.tool if event.tool is not None else "(no tool name)"
            label = f"call {tool}" if event.kind == "call" else f"{event.kind} turn"
            status = f" [{event.status}]" if event.kind == "call" and event.status != "ok" else ""
            if event.kind == "call" and event.status == "malformed" and event.error_text:
                status = f" [malformed: {event.error_text[:200]}]"
            lines.append(f"  [{event.index:>3}] {label}{status}")
            for c in by_event.get(event.index, []):
                lines.append(f"        {fixed(c.value, '+.2f')} {c.rule} ({c.location}): {c.reason}")
    return "\n".join(lines)


def _episode_row(program: Program, episode: Episode, credits: Sequence[Credit]) -> dict[str, str | float | None]:
    """One episode's fixed columns (`_COLUMNS`: text, numbers, None when unknown)."""
    return {
        "id": episode.id,
        "source": episode.source,
        "domain": domain_of(episode),
        "outcome": episode.outcome,
        "events": len(episode.events),
        "calls": len(episode.calls),
        "malformed_calls": sum(e.status == "malformed" for e in episode.calls),
        "orphan_results": int(episode.meta.get("orphan_results", 0)),
        "ambiguous_results": int(episode.meta.get("ambiguous_results", 0)),
        "total": sum(c.value for c in credits),
    }


def _rule_totals(program: Program, credits: Sequence[Credit]) -> dict[str, float]:
    """Each rule's total credit in one episode (0.0 for a rule that gave none), rules in program order."""
    per_rule = {r.name: 0.0 for r in program.rules}
    for c in credits:
        per_rule[c.rule] = per_rule.get(c.rule, 0.0) + c.value
    return per_rule


def json_document(
    program: Program,
    scored: Sequence[Scored],
    report: ReadReport,
    *,
    rules: str,
    domains: Counter[str | None],
    selected: Sequence[str],
    by: str | None,
) -> dict[str, object]:
    """The `--json` document (docs/scoring.md): the `rules` file and its program, what was skipped
    or failed, the episodes per domain (`domains`; `selected` by --domain), the summary (and one
    per group with `by`), and each episode with its totals and credits."""
    return {
        "rules": rules,
        "program": program.to_json(),
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
        "errors": [str(e) for e in report.errors],
        "domains": {("" if d is None else d): n for d, n in sorted(domains.items(), key=lambda x: str(x[0]))},
        "selected_domains": list(selected),
        "summary": summarise(program, scored).to_json(),
        "groups": (
            [{"by": by, "key": key, "summary": summarise(program, part).to_json()} for key, part in groups(scored, by)]
            if by
            else []
        ),
        "episodes": [episode_json(program, episode, credits) for episode, credits in scored],
    }


def episode_json(program: Program, episode: Episode, credits: Sequence[Credit]) -> dict[str, object]:
    """One episode in the `--json` document (and in `rlvp serve`'s ``/score`` answer):
    `_episode_row`'s columns, ``rule_totals`` and ``credits``."""
    return {
        **_episode_row(program, episode, credits),
        "rule_totals": _rule_totals(program, credits),
        "credits": [c.to_json() for c in credits],
    }


def csv_number(value: float | None) -> str:
    """A CSV cell for a number: rounded to `CSV_DECIMALS` places, shortest form (``-2.8``, ``1``,
    ``0.125``), never ``-0``; ``None`` (and NaN) is the empty cell."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    rounded = round(float(value), CSV_DECIMALS)
    if rounded == 0:  # -0.0, and sums like -1e-17 that are zero up to rounding
        return "0"
    return f"{rounded:.15g}"


def csv_text(program: Program, scored: Sequence[Scored]) -> str:
    """One row per episode: the fixed columns of `_episode_row`, then ``rule:NAME`` per rule
    (numbers written by `csv_number`, text as it is, an unknown value as the empty cell)."""
    names = [r.name for r in program.rules]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*_COLUMNS, *(f"rule:{n}" for n in names)])
    for episode, credits in scored:
        row = _episode_row(program, episode, credits)
        per_rule = _rule_totals(program, credits)
        cells = [value if isinstance(value, str) else csv_number(value) for value in (row[k] for k in _COLUMNS)]
        writer.writerow(cells + [csv_number(per_rule[n]) for n in names])
    return buffer.getvalue()


def write_csv(path: str, text: str) -> bool:
    """The CSV to `path` (``-``: standard output), its folder created; False (said) when it cannot be written."""
    if path == "-":
        sys.stdout.write(text)
        return True
    return write_output("rlvp-score", path, text)


def write_html(
    path: str, program: Program, scored: Sequence[Scored], sources: dict[str, SourceFile], title: str
) -> bool:
    """The HTML report (rlvp_dsl/html) to `path`, its folder created; False (said) when it cannot be written."""
    from ..html import build_report, render_report

    if path == "-":
        print("rlvp-score: error: --html needs a file path (the report is one HTML file), not -", file=sys.stderr)
        return False
    if not write_output("rlvp-score", path, render_report(build_report(program, scored, sources, title=title))):
        return False
    print(f"rlvp-score: wrote the HTML report of {counted(len(scored), 'episode')} to {path}", file=sys.stderr)
    return True
