"""`rlvp-score RULES TRAJECTORY...`: score real trajectories with a rule file.

    rlvp-score rules/tau2_airline.rlvp ../shared/data/tau2_simulations          # summary per rule
    rlvp-score rules/tau2_airline.rlvp run.json --explain                          # every credit, with why
    rlvp-score rules/swe.rlvp trajs/ --json > score.json                           # everything as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE, console, decided, json_text
from ..diagnostics import render_json, render_text, sort_and_cap
from ..pipeline import check_file
from ..compile import compile_ruleset
from ..report import render_summary, summarise


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvp-score",
        description="Score agent trajectories with an .rlvp rule file: per-call credits, a summary per rule, "
                    "and each rule's correlation with the outcome reward.",
        epilog="Formats: tau2 results, tau-bench v1, OpenAI chat (JSON/JSONL, MCP results), SWE-agent .traj. "
               "Exit codes: 0 ok, 1 errors in the input, 2 usage or I/O error.",
    )
    p.add_argument("rules", help="the .rlvp rule file")
    p.add_argument("trajectories", nargs="+", help="trajectory files or folders")
    p.add_argument("--format", choices=["tau2", "tau_bench_v1", "openai", "swe_agent"],
                   help="the trajectory format (default: detected per file)")
    p.add_argument("--explain", action="store_true", help="print every credit with its explanation")
    p.add_argument("--json", action="store_true", help="print the scores as JSON (per episode, per credit, summary)")
    p.add_argument("--limit", type=_count, default=0, metavar="N",
                   help="with --explain: show at most N episodes (0: all)")
    p.add_argument("--error-prefix", action="append", default=[], metavar="TEXT",
                   help="a tool result starting with TEXT is an error (adds to the default of --format, "
                        "which it needs)")
    p.add_argument("--error-flag", action="append", default=[], metavar="FIELD",
                   help="a tool message with FIELD true is an error (adds to the default of --format, "
                        "which it needs)")
    return p


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {value})")
    return value


def _undeclared_note(program, episodes) -> str:
    """A note when calls go to tools the rules do not declare (the wrong rule file?)."""
    counts: dict[str, int] = {}
    calls = 0
    for episode in episodes:
        for event in episode.calls:
            calls += 1
            if event.tool not in program.tools:
                counts[event.tool] = counts.get(event.tool, 0) + 1
    if not counts:
        return ""
    names = sorted(counts, key=lambda t: (-counts[t], str(t)))
    shown = ", ".join(str(n) for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return (f"note: {sum(counts.values())} of {calls} calls go to {len(counts)} tools the rules do not declare "
            f"({shown}); rules that name tools or tags never match them")


def _error_signal(args):
    if not (args.error_prefix or args.error_flag):
        return None
    from ..readers import DEFAULT_ERROR_SIGNALS

    return DEFAULT_ERROR_SIGNALS[args.format].extended(prefixes=args.error_prefix, flags=args.error_flag)


def _explain(scored, limit: int) -> str:
    lines = []
    for k, (episode, credits) in enumerate(scored):
        if limit and k >= limit:
            lines.append(f"... {len(scored) - limit} more episodes (use --limit 0 for all)")
            break
        total = sum(c.value for c in credits)
        outcome = "n/a" if episode.outcome is None else f"{episode.outcome:g}"
        lines.append(f"== {episode.id}  outcome={outcome}  events={len(episode.events)}  "
                     f"calls={len(episode.calls)}  process total={total:+.2f}")
        by_event: dict[int, list] = {}
        for c in credits:
            by_event.setdefault(c.event_index, []).append(c)
        for event in episode.events:
            if event.kind != "call" and event.index not in by_event:
                continue
            label = f"call {event.tool}" if event.kind == "call" else f"{event.kind} turn"
            status = f" [{event.status}]" if event.kind == "call" and event.status != "ok" else ""
            lines.append(f"  [{event.index:>3}] {label}{status}")
            for c in by_event.get(event.index, []):
                lines.append(f"        {c.value:+.2f} {c.rule} ({c.location}): {c.reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not os.path.isfile(args.rules):
        what = "is a directory, not a rule file" if os.path.isdir(args.rules) else "rule file not found"
        print(f"rlvp-score: error: {what}: {args.rules}", file=sys.stderr)
        return EXIT_USAGE
    result = check_file(args.rules)
    if not result.ok:
        kept, dropped = sort_and_cap(result.diagnostics)
        decided(EXIT_INPUT_ERRORS)
        if args.json:
            print(json_text({"rules": args.rules, "ok": False, **json.loads(render_json(kept, dropped=dropped))},
                             indent=1, ensure_ascii=False))
        else:
            print(render_text(kept, result.sources, dropped=dropped), file=sys.stderr)
        return EXIT_INPUT_ERRORS
    program = compile_ruleset(result.ruleset)
    if (args.error_prefix or args.error_flag) and not args.format:
        print("rlvp-score: error: --error-prefix/--error-flag need --format (they extend that format's default)",
              file=sys.stderr)
        return EXIT_USAGE

    from ..readers import ReaderError, read_report

    missing = [p for p in args.trajectories if not os.path.exists(p)]
    if missing:
        print(f"rlvp-score: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = read_report(args.trajectories, format=args.format, error_signal=_error_signal(args),
                             keep_going=True)
    except ReaderError as exc:
        print(f"rlvp-score: error: {exc}", file=sys.stderr)
        return decided(EXIT_INPUT_ERRORS)
    status = decided(EXIT_INPUT_ERRORS if report.errors else EXIT_OK)
    for error in report.errors:  # the other files are still scored; the exit status says 1
        print(f"rlvp-score: error: {error}", file=sys.stderr)
    if not report.episodes:
        print("rlvp-score: error: no episodes found in " + ", ".join(args.trajectories), file=sys.stderr)
        for skipped in report.skipped:
            print(f"  skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
        return EXIT_INPUT_ERRORS

    scored = [(episode, program.score(episode)) for episode in report.episodes]
    summary = summarise(program, scored)
    note = _undeclared_note(program, report.episodes)
    if note:
        print(f"rlvp-score: {note}", file=sys.stderr)
    if args.json:
        doc = {
            "rules": args.rules,
            "program": program.to_json(),
            "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
            "errors": [str(e) for e in report.errors],
            "summary": summary.to_json(),
            "episodes": [
                {
                    "id": episode.id,
                    "source": episode.source,
                    "outcome": episode.outcome,
                    "events": len(episode.events),
                    "calls": len(episode.calls),
                    "malformed_calls": sum(e.status == "malformed" for e in episode.calls),
                    "orphan_results": int(episode.meta.get("orphan_results", 0)),
                    "total": sum(c.value for c in credits),
                    "credits": [c.to_json() for c in credits],
                }
                for episode, credits in scored
            ],
        }
        print(json_text(doc, indent=1, ensure_ascii=False))
        return status
    if args.explain:
        print(_explain(scored, args.limit))
        print()
    orphans = sum(int(episode.meta.get("orphan_results", 0)) for episode in report.episodes)
    print(f"rules: {args.rules} ({len(program.rules)} rules)   skipped files: {len(report.skipped)}"
          + (f"   read errors: {len(report.errors)}" if report.errors else "")
          + (f"   orphan tool results (matching no call): {orphans}" if orphans else ""))
    print(render_summary(summary))
    return status


def run() -> None:
    """Console-script entry point."""
    console(main)


if __name__ == "__main__":
    run()
