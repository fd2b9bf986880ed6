"""What `rlvp-score --compare A B TRAJECTORY...` prints and writes: the comparison's text (a table per
rule and for the total, the rank moves, the verdict), its JSON document (`--json`), one CSV row per
rule (`--csv`) and the HTML report with A and B side by side (`--html`).  docs/scoring.md, "Comparing
two rule sets"."""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from . import EXIT_OK, EXIT_USAGE, json_text, write_output
from ..diagnostics import counted

if TYPE_CHECKING:
    from ..compare import Comparison, Difference, RankMove, RuleComparison
    from ..compile import Program
    from ..events import Credit, Episode
    from ..source import SourceFile

    #: One side: the compiled rule file, its sources (for the HTML report), its scored episodes.
    Side = tuple[Program, Mapping[str, SourceFile], Sequence[tuple[Episode, Sequence[Credit]]]]

#: The CSV columns, in order (empty where a value is undefined).
CSV_COLUMNS = (
    "rule",
    "in_a",
    "in_b",
    "corr_a",
    "corr_b",
    "corr_diff",
    "corr_low",
    "corr_high",
    "live_a",
    "live_b",
    "live_diff",
    "live_low",
    "live_high",
)
#: Credits one side alone gives, shown per moved episode in the text (all of them in the JSON).
SHOWN_CREDITS = 3


@attrs.frozen
class CompareOutputs:
    """The paths and outputs of one --compare run: rule files `a` and `b`, and --json, --csv, --html."""

    a: str
    b: str
    json: bool = False
    csv: str | None = None
    html: str | None = None


def _num(x: float | None, spec: str = "+.3f") -> str:
    from ..report import fixed

    return "n/a" if x is None else fixed(x, spec)


def _diff(d: Difference) -> str:
    if d.diff is None:
        return "n/a"
    ci = "" if d.ci95 is None else f" [{_num(d.ci95[0], '+.2f')}, {_num(d.ci95[1], '+.2f')}]"
    return f"{_num(d.diff, '+.2f')}{ci}"


def _live(share: float | None, dead: int) -> str:
    return "n/a" if share is None else f"{round(share * dead)}/{dead}"


def _where(row: RuleComparison) -> str:
    return "A B" if row.in_a and row.in_b else ("A" if row.in_a else "B")


def _credits(credits: Sequence[tuple[int, str, float]]) -> str:
    shown = [f"{rule}@{event} {_num(value, '+.2f')}" for event, rule, value in credits[:SHOWN_CREDITS]]
    more = len(credits) - SHOWN_CREDITS
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "") if shown else "-"


def _move_row(m: RankMove) -> str:
    return (
        f"| {m.id} | {_num(m.outcome, '.2f')} | {_num(m.total_a, '+.2f')} | {_num(m.total_b, '+.2f')} | "
        f"{m.rank_a:g} | {m.rank_b:g} | {m.change:+g} | {_credits(m.only_a)} | {_credits(m.only_b)} |"
    )


def comparison_text(comparison: Comparison, a: str, b: str) -> str:
    """The comparison as text (Markdown-compatible tables), its last line the verdict."""
    c = comparison
    lines = [
        f"A = {a}   B = {b}",
        f"episodes: {c.episodes}   with outcome: {c.with_outcome}   task groups (>= 2 episodes): {c.groups}   "
        f"outcome-dead: {c.dead}",
        f"B - A with a paired percentile bootstrap 95 % CI: {c.resamples} resamples (of the episodes for the "
        f"correlations, of the dead groups for the live shares), seed {c.seed}",
        "",
        "| rule | in | corr A | corr B | corr B - A [95 % CI] | live A | live B | live share B - A [95 % CI] |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in (c.total, *c.rules):
        corr, live = row.correlation, row.live_share
        lines.append(
            f"| {row.name} | {_where(row)} | {_num(corr.a)} | {_num(corr.b)} | {_diff(corr)} | "
            f"{_live(live.a, c.dead)} | {_live(live.b, c.dead)} | {_diff(live)} |"
        )
    lines += ["", f"episodes whose rank by process total moves most (1 = lowest total, of {c.episodes}):"]
    if c.moves:
        lines += [
            "| episode | outcome | total A | total B | rank A | rank B | change | credits only A gives | "
            "credits only B gives |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|",
            *(_move_row(m) for m in c.moves),
        ]
    else:
        lines.append("(none: every episode keeps its rank)")
    lines += ["", f"verdict: {c.verdict}"]
    return "\n".join(lines)


def comparison_json(comparison: Comparison, a: str, b: str) -> dict[str, Any]:
    """The JSON document: ``a``, ``b`` (the rule files), then `Comparison.to_json`'s keys."""
    return {"a": a, "b": b, **comparison.to_json()}


def comparison_csv(comparison: Comparison) -> str:
    """One CSV row per rule (the total first, named ``total``), columns `CSV_COLUMNS`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def cells(d: Difference) -> list[str]:
        low, high = d.ci95 if d.ci95 is not None else (None, None)
        return ["" if x is None else repr(float(x)) for x in (d.a, d.b, d.diff, low, high)]

    for row in (comparison.total, *comparison.rules):
        writer.writerow([row.name, int(row.in_a), int(row.in_b), *cells(row.correlation), *cells(row.live_share)])
    return out.getvalue()


def _write_html(path: str, comparison: Comparison, a: Side, b: Side, names: tuple[str, str]) -> bool:
    from ..html import build_report, render_comparison

    if path == "-":
        print("rlvp-score: error: --html needs a file path (the report is one HTML file), not -", file=sys.stderr)
        return False
    report_a = build_report(a[0], a[2], a[1], title=names[0])
    report_b = build_report(b[0], b[2], b[1], title=names[1])
    if not write_output("rlvp-score", path, render_comparison(report_a, report_b, comparison)):
        return False
    print(
        f"rlvp-score: wrote the HTML comparison of {counted(comparison.episodes, 'episode')} to {path}", file=sys.stderr
    )
    return True


def write_comparison(outputs: CompareOutputs, comparison: Comparison, a: Side, b: Side) -> int:
    """Write the --html report and the --csv rows, then print the JSON document (--json) or the text;
    the exit status: 0, or 2 when an output cannot be written."""
    if outputs.html is not None and not _write_html(outputs.html, comparison, a, b, (outputs.a, outputs.b)):
        return EXIT_USAGE
    if outputs.csv is not None:
        text = comparison_csv(comparison)
        if outputs.csv == "-":
            sys.stdout.write(text)
            return EXIT_OK
        if not write_output("rlvp-score", outputs.csv, text):
            return EXIT_USAGE
        print(f"rlvp-score: wrote {counted(len(comparison.rules) + 1, 'row')} to {outputs.csv}", file=sys.stderr)
    if outputs.json:
        print(json_text(comparison_json(comparison, outputs.a, outputs.b), indent=1, ensure_ascii=False))
    else:
        print(comparison_text(comparison, outputs.a, outputs.b))
    return EXIT_OK
