"""`rlvp-score RULES TRAJECTORY...`: score real trajectories with a rule file.

    rlvp-score rules/tau2_airline.rlvp ../shared/data/tau2_simulations          # summary per rule
    rlvp-score rules/tau2_airline.rlvp run.json --explain                          # every credit, with why
    rlvp-score rules/swe.rlvp trajs/ --json > score.json                           # everything as JSON
    rlvp-score rules/tau2_airline.rlvp runs/ --domain airline --csv episodes.csv    # one domain; a row per episode
    cat run.jsonl | rlvp-score rules/x.rlvp -                                      # standard input

The JSON document and the CSV columns are described in docs/scoring.md.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import json
import math
import os
import sys
from collections import Counter

from . import (
    EXIT_INPUT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    clobbers_input,
    console,
    decided,
    json_text,
    nonempty,
    version_text,
    whole_number,
    write_output,
)
from ..diagnostics import counted, quoted, render_json, render_text, sort_and_cap
from ..input_files import NotARegularFile, check_regular
from ..pipeline import check_file
from ..compile import compile_ruleset
from ..report import fixed, render_summary, summarise


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvp-score",
        description="Score agent trajectories with an .rlvp rule file: per-call credits, a summary per rule, "
        "and each rule's correlation with the outcome reward.",
        epilog="Formats: tau2 results, tau-bench v1, OpenAI chat (JSON/JSONL, MCP results), SWE-agent .traj. "
        "The JSON and CSV outputs: docs/scoring.md. "
        "Exit codes: 0 ok, 1 errors in the input, 2 usage or I/O error.",
    )
    p.add_argument("rules", help="the .rlvp rule file")
    p.add_argument("trajectories", nargs="+", help="trajectory files or folders; - reads standard input")
    p.add_argument("--version", action="version", version=version_text("rlvp-score"))
    p.add_argument(
        "--format",
        choices=["tau2", "tau_bench_v1", "openai", "swe_agent"],
        help="the trajectory format (default: detected per file)",
    )
    p.add_argument("--explain", action="store_true", help="print every credit with its explanation")
    p.add_argument("--json", action="store_true", help="print the scores as JSON (per episode, per credit, summary)")
    p.add_argument(
        "--limit", type=whole_number(0), default=0, metavar="N", help="with --explain: show at most N episodes (0: all)"
    )
    p.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="NAME",
        type=nonempty("a domain name"),
        help="score only the episodes of this domain (as the trajectory records it: tau2's "
        "domain_name, tau-bench's policy heading, a chat record's meta.domain); repeatable",
    )
    p.add_argument(
        "--by", choices=["domain", "file"], help="one summary per domain or per file instead of one over all episodes"
    )
    p.add_argument(
        "--csv",
        metavar="PATH",
        type=nonempty(),
        help="write one CSV row per episode (outcome, totals, each rule's total) to PATH; - for stdout",
    )
    p.add_argument(
        "--html",
        metavar="PATH",
        type=nonempty(),
        help="write the HTML credit report (one self-contained file: rules, episodes, timelines) to PATH",
    )
    p.add_argument(
        "--error-prefix",
        action="append",
        default=[],
        metavar="TEXT",
        type=nonempty("some text"),
        help="a tool result starting with TEXT is an error (adds to the default of --format, which it needs)",
    )
    p.add_argument(
        "--error-flag",
        action="append",
        default=[],
        metavar="FIELD",
        type=nonempty("a field name"),
        help="a tool message with FIELD true is an error (adds to the default of --format, which it needs)",
    )
    return p


def _undeclared_note(program, episodes) -> str:
    """A note when calls go to tools the rules do not declare (the wrong rule file?)."""
    counts: dict[str, int] = {}
    calls = 0
    for episode in episodes:
        for event in episode.calls:
            calls += 1
            if event.tool is not None and event.tool not in program.tools:  # no name: a malformed call
                counts[event.tool] = counts.get(event.tool, 0) + 1
    if not counts:
        return ""
    names = sorted(counts, key=lambda t: (-counts[t], str(t)))
    shown = ", ".join(str(n) for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return (
        f"note: {sum(counts.values()):,} of {counted(calls, 'call goes', 'calls go')} to "
        f"{counted(len(counts), 'tool')} the rules do not declare "
        f"({shown}); rules that name tools or tags never match them"
    )


def _bad_names_note(episodes) -> str:
    """A warning when calls have a tool name that is not text (``"name": 5``): a data problem, not
    the agent's; the calls are scored as malformed, and the first one is named."""
    problems = [
        f"{episode.source}: {problem}" for episode in episodes for problem in episode.meta.get("bad_tool_names", ())
    ]
    if not problems:
        return ""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    calls = "1 call has" if len(problems) == 1 else f"{len(problems)} calls have"
    return f"warning: {calls} a tool name that is not text (scored as malformed): {problems[0]}{more}"


#: What a malformed call's problem says when its arguments (not its name or its length) are what broke it.
_BAD_ARGUMENTS = (
    "arguments are not valid JSON",
    "arguments must be a JSON object",
    "tool call is not valid JSON",
    "tool call arguments are not valid JSON",
)


def _bad_arguments_note(episodes) -> str:
    """A note when calls had arguments that are not a JSON object: they are scored as failed (malformed)
    calls, which is easy to miss without --explain."""
    calls = sum(
        1
        for episode in episodes
        for event in episode.calls
        if event.status == "malformed" and any(p in (event.error_text or "") for p in _BAD_ARGUMENTS)
    )
    if not calls:
        return ""
    had = "1 call had" if calls == 1 else f"{calls:,} calls had"
    return f"note: {had} malformed arguments (not a JSON object; scored as failed calls; --explain shows them)"


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
        lines.append(
            f"== {episode.id}  outcome={outcome}  events={len(episode.events)}  "
            f"calls={len(episode.calls)}  process total={fixed(total, '+.2f')}"
        )
        by_event: dict[int, list] = {}
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


#: File endings of trajectories: a rule file named so is almost surely the arguments swapped.
_TRAJECTORY_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


def domain_of(episode) -> str | None:
    """The episode's domain as its trajectory records it (``meta["domain"]``), or None."""
    domain = episode.meta.get("domain")
    return str(domain) if domain not in (None, "") else None


def _domains_text(counts: Counter) -> str:
    named = sorted(((d, n) for d, n in counts.items() if d is not None), key=lambda x: (-x[1], x[0]))
    text = ", ".join(f"{d} {n}" for d, n in named)
    if counts.get(None):
        text += ("; " if text else "") + f"{counts[None]} with no domain recorded"
    return text


def _domain_hints(wanted: list[str], counts: Counter) -> str:
    """Did-you-mean over the domains found, for each wanted domain that matched none (`airlin`: 'airline')."""
    found = {d.casefold(): d for d in counts if d is not None}
    hints = []
    for name in wanted:
        if name.casefold() not in found:
            close = difflib.get_close_matches(name.casefold(), sorted(found), n=1, cutoff=0.6)
            if close:
                hints.append(f"--domain {name}: did you mean {quoted(found[close[0]])}?")
    return "; ".join(hints)


def _select_domains(episodes, wanted: list[str]) -> tuple[list, str]:
    """The episodes of the `wanted` domains (case-insensitive), and a note on what was left out."""
    keep = {w.casefold() for w in wanted}
    kept = [e for e in episodes if (domain_of(e) or "").casefold() in keep]
    left = Counter(domain_of(e) for e in episodes if e not in kept)
    note = (
        f"--domain {', '.join(wanted)}: {counted(len(kept), 'episode')}; left out {_domains_text(left)}" if left else ""
    )
    return kept, note


def _groups(scored, by: str | None) -> list[tuple[str, list]]:
    if by is None:
        return [("all", scored)]
    out: dict[str, list] = {}
    for episode, credits in scored:
        key = episode.source if by == "file" else (domain_of(episode) or "(no domain)")
        out.setdefault(key, []).append((episode, credits))
    return sorted(out.items())


def _episode_row(program, episode, credits) -> dict:
    per_rule = {r.name: 0.0 for r in program.rules}
    for c in credits:
        per_rule[c.rule] = per_rule.get(c.rule, 0.0) + c.value
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
        "rules": per_rule,
    }


#: The CSV columns that hold numbers.
_NUMERIC_COLUMNS = frozenset(
    {"outcome", "events", "calls", "malformed_calls", "orphan_results", "ambiguous_results", "total"}
)

#: Decimal places kept in CSV numbers: float sums (0.1 + 0.2) are shown as 0.3, never 0.30000000000000004.
CSV_DECIMALS = 9


def csv_number(value) -> str:
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


def _csv_text(program, scored) -> str:
    """One row per episode: the fixed columns of `_episode_row`, then ``rule:NAME`` per rule
    (numbers written by `csv_number`)."""
    names = [r.name for r in program.rules]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = [
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
    ]
    writer.writerow(columns + [f"rule:{n}" for n in names])
    for episode, credits in scored:
        row = _episode_row(program, episode, credits)
        cells = [csv_number(row[k]) if k in _NUMERIC_COLUMNS else ("" if row[k] is None else row[k]) for k in columns]
        writer.writerow(cells + [csv_number(row["rules"][n]) for n in names])
    return buffer.getvalue()


def _write_csv(path: str, text: str) -> bool:
    if path == "-":
        sys.stdout.write(text)
        return True
    return write_output("rlvp-score", path, text)


def _write_html(path: str, program, scored, sources, title: str) -> bool:
    """The HTML report (rlvp_dsl/html) to `path`, its folder created; False (said) when it cannot be written."""
    from ..html import build_report, render_report

    if path == "-":
        print("rlvp-score: error: --html needs a file path (the report is one HTML file), not -", file=sys.stderr)
        return False
    if not write_output("rlvp-score", path, render_report(build_report(program, scored, sources, title=title))):
        return False
    print(f"rlvp-score: wrote the HTML report of {counted(len(scored), 'episode')} to {path}", file=sys.stderr)
    return True


def _reads_as_text(path: str) -> bool:
    """Whether `path` is a file whose start is UTF-8 text (no NUL byte): a binary file named `.rlvp` is not a
    rule file, and is not called one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the end of the 4 KiB read is still text
    return True


def _usage_problem(args) -> str:
    """A contradiction among the options, or ""."""
    if args.csv == "-" and (args.json or args.explain):
        return "--csv - writes the CSV to stdout: it does not go with --json or --explain"
    if args.json and args.explain:
        return "--json already holds every credit with its reason: it does not go with --explain (text)"
    if args.limit and not args.explain:
        return "--limit goes with --explain"
    if args.trajectories.count("-") > 1:
        return "standard input (-) can be read once"
    rule_files = [t for t in args.trajectories if t.lower().endswith(".rlvp") and _reads_as_text(t)]
    if rule_files:
        return (
            f"{rule_files[0]} is a rule file, not a trajectory: the rule file comes first, and once: "
            "rlvp-score RULES.rlvp TRAJECTORY..."
        )
    if (
        args.csv not in (None, "-")
        and args.html is not None
        and os.path.abspath(args.csv) == os.path.abspath(args.html)
    ):
        return f"--csv and --html name the same file ({args.csv}): give each its own"
    for flag, path, what in (("--csv", args.csv, "the CSV"), ("--html", args.html, "the report")):
        clobbered = clobbers_input(path, [args.rules, *args.trajectories]) if path is not None else None
        if clobbered:
            return f"{flag} {path} would overwrite the input {clobbered}: write {what} somewhere else"
    return ""


def _empty_folders(paths: list[str]) -> list[str]:
    """The folders among `paths` that hold no trajectory file (nothing ending .json, .jsonl,
    .ndjson, .traj): named in the "no episodes" error."""
    from ..readers.loading import FOLDER_SUFFIXES

    out = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            if not any(f.lower().endswith(FOLDER_SUFFIXES) for _, _, files in os.walk(path) for f in files):
                out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        print(f"rlvp-score: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_regular(args.rules)
    except NotARegularFile as exc:
        print(f"rlvp-score: error: cannot read {args.rules}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isfile(args.rules):
        what = "is a directory, not a rule file" if os.path.isdir(args.rules) else "rule file not found"
        print(f"rlvp-score: error: {what}: {args.rules}", file=sys.stderr)
        return EXIT_USAGE
    result = check_file(args.rules)
    if not result.ok and os.path.splitext(args.rules)[1].lower() in _TRAJECTORY_SUFFIXES:
        print(
            f"rlvp-score: error: {args.rules} is not a rule file (it looks like a trajectory); the rule file "
            "comes first: rlvp-score RULES.rlvp TRAJECTORY...",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not result.ok:
        kept, dropped = sort_and_cap(result.diagnostics)
        decided(EXIT_INPUT_ERRORS)
        if args.json:
            print(
                json_text(
                    {"rules": args.rules, "ok": False, **json.loads(render_json(kept, dropped=dropped))},
                    indent=1,
                    ensure_ascii=False,
                )
            )
        else:
            print(render_text(kept, result.sources, dropped=dropped), file=sys.stderr)
        return EXIT_INPUT_ERRORS
    program = compile_ruleset(result.ruleset)
    if (args.error_prefix or args.error_flag) and not args.format:
        print(
            "rlvp-score: error: --error-prefix/--error-flag need --format (they extend that format's default)",
            file=sys.stderr,
        )
        return EXIT_USAGE

    from ..readers import ReaderError, read_report

    if not program.rules:
        print(f"rlvp-score: warning: {args.rules} has no rules: every credit is 0", file=sys.stderr)
    missing = [p for p in args.trajectories if p != "-" and not os.path.exists(p)]
    if missing:
        print(f"rlvp-score: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = read_report(args.trajectories, format=args.format, error_signal=_error_signal(args), keep_going=True)
    except ReaderError as exc:
        print(f"rlvp-score: error: {exc}", file=sys.stderr)
        return decided(EXIT_INPUT_ERRORS)
    status = decided(EXIT_INPUT_ERRORS if report.errors else EXIT_OK)
    for error in report.errors:  # the other files are still scored; the exit status says 1
        print(f"rlvp-score: error: {error}", file=sys.stderr)
    if not report.episodes:
        print(
            "rlvp-score: error: no episodes found in "
            + ", ".join("standard input" if t == "-" else t for t in args.trajectories),
            file=sys.stderr,
        )
        for skipped in report.skipped:
            print(f"  skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
        for file in report.files:
            print(
                f"  {file}: a trajectory file that holds no episodes (no simulations, entries or lines)",
                file=sys.stderr,
            )
        for folder in _empty_folders(args.trajectories):
            print(f"  {folder}: a folder with no trajectory files (*.json, *.jsonl, *.ndjson, *.traj)", file=sys.stderr)
        return EXIT_INPUT_ERRORS

    episodes = list(report.episodes)
    domains = Counter(domain_of(e) for e in episodes)
    if args.domain:
        episodes, note = _select_domains(episodes, args.domain)
        if note and episodes:
            print(f"rlvp-score: {note}", file=sys.stderr)
            hints = _domain_hints(args.domain, domains)
            if hints:
                print(f"rlvp-score: warning: {hints}", file=sys.stderr)
        if not episodes:
            hints = _domain_hints(args.domain, domains)
            print(
                f"rlvp-score: error: no episodes of domain {', '.join(args.domain)} (found: "
                f"{_domains_text(domains)}){'; ' + hints if hints else ''}",
                file=sys.stderr,
            )
            return decided(EXIT_INPUT_ERRORS)
    elif args.by != "domain" and len([d for d in domains if d is not None]) > 1:
        print(
            f"rlvp-score: warning: the episodes come from {len([d for d in domains if d])} domains "
            f"({_domains_text(domains)}) and one summary blends them: --domain NAME keeps one, "
            "--by domain summarises each",
            file=sys.stderr,
        )

    scored = [(episode, program.score(episode)) for episode in episodes]
    groups = _groups(scored, args.by)
    summary = summarise(program, scored)
    for note in (_bad_names_note(episodes), _bad_arguments_note(episodes), _undeclared_note(program, episodes)):
        if note:
            print(f"rlvp-score: {note}", file=sys.stderr)
    if args.html is not None and not _write_html(args.html, program, scored, result.sources, args.rules):
        return decided(EXIT_USAGE)
    if args.csv is not None:
        if not _write_csv(args.csv, _csv_text(program, scored)):
            return decided(EXIT_USAGE)
        if args.csv == "-":
            return status
        print(f"rlvp-score: wrote {counted(len(scored), 'episode')} to {args.csv}", file=sys.stderr)
    if args.json:
        doc = {
            "rules": args.rules,
            "program": program.to_json(),
            "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
            "errors": [str(e) for e in report.errors],
            "domains": {("" if d is None else d): n for d, n in sorted(domains.items(), key=lambda x: str(x[0]))},
            "selected_domains": args.domain,
            "summary": summary.to_json(),
            "groups": (
                [{"by": args.by, "key": key, "summary": summarise(program, part).to_json()} for key, part in groups]
                if args.by
                else []
            ),
            "episodes": [
                {
                    **{k: v for k, v in _episode_row(program, episode, credits).items() if k != "rules"},
                    "rule_totals": _episode_row(program, episode, credits)["rules"],
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
    orphans = sum(int(episode.meta.get("orphan_results", 0)) for episode in episodes)
    ambiguous = sum(int(episode.meta.get("ambiguous_results", 0)) for episode in episodes)
    print(
        f"rules: {args.rules} ({counted(len(program.rules), 'rule')})   skipped files: {len(report.skipped)}"
        + (f"   read errors: {len(report.errors)}" if report.errors else "")
        + (f"   orphan tool results (matching no call): {orphans}" if orphans else "")
        + (
            f"   ambiguous tool results (could be a same-name call's; skipped by error rules): {ambiguous}"
            if ambiguous
            else ""
        )
        + (f"   domain: {', '.join(args.domain)}" if args.domain else "")
    )
    if args.by:
        for key, part in groups:
            print()
            print(f"== {args.by} {key}: {counted(len(part), 'episode')}")
            print(render_summary(summarise(program, part)))
        return status
    print(render_summary(summary))
    return status


def run() -> None:
    """Run as a console script (``python -m``; the installed ``rlvp-score`` is `rlvp_dsl.cli.score_command`)."""
    console(main, "rlvp-score")


if __name__ == "__main__":
    run()
