"""`rlvp-score RULES TRAJECTORY...`: score real trajectories with a rule file.

    rlvp-score rules/tau2_airline.rlvp ../shared/data/tau2_simulations          # summary per rule
    rlvp-score rules/tau2_airline.rlvp run.json --explain                          # every credit, with why
    rlvp-score rules/swe.rlvp trajs/ --json > score.json                           # everything as JSON
    rlvp-score rules/tau2_airline.rlvp runs/ --domain airline --csv episodes.csv    # one domain; a row per episode
    cat run.jsonl | rlvp-score rules/x.rlvp -                                      # standard input
    cat rules/x.rlvp | rlvp-score - runs/                                          # the rule file on standard input
    rlvp-score --compare rules/a.rlvp rules/b.rlvp runs/                           # B against A, paired CIs

`main` refuses contradictions among the options, loads the rule file, reads the trajectories,
keeps the episodes of the --domain asked for (cli/score_notes.py), scores them, and prints or
writes the results (cli/score_output.py).  With --compare, `_compare` scores the same episodes under
two rule files, measures them (rlvp_dsl/compare.py) and prints or writes that (cli/score_compare.py).
The JSON document and the CSV columns are described in
docs/scoring.md.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import TYPE_CHECKING

import attrs

from . import (
    EXIT_INPUT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    Stop,
    clobbers_input,
    console,
    json_text,
    refuse,
    stopped,
)
from .score_args import ScoreArgs, parser

# What scoring needs (the rule file's checker and compiler, the readers, the reports) is imported by
# the function that uses it, once the command line has parsed: ``--help``, ``--version`` and a usage
# error import none of it (tests/unit/test_score_imports.py).
if TYPE_CHECKING:
    from .score_output import Scored
    from ..compile import Program
    from ..events import Episode
    from ..pipeline import CheckResult
    from ..readers import ErrorSignal, ReadReport
    from ..source import SourceFile

#: File endings of trajectories: a rule file named so is almost surely the arguments swapped.
_TRAJECTORY_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


@attrs.frozen
class Results:
    """What rlvp-score scored: the compiled `program` and its `sources` (for the HTML report), the
    trajectories' `report`, the episodes per `domains` read, and each kept episode with its credits."""

    program: Program
    sources: dict[str, SourceFile]
    report: ReadReport
    domains: Counter[str | None]
    scored: list[Scored]


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


def _usage_problem(args: ScoreArgs) -> str:
    """A contradiction among the options, or ""."""
    if args.csv == "-" and (args.json or args.explain):
        return "--csv - writes the CSV to stdout: it does not go with --json or --explain"
    if args.json and args.explain:
        return "--json already holds every credit with its reason: it does not go with --explain (text)"
    if args.limit and not args.explain:
        return "--limit goes with --explain"
    if args.trajectories.count("-") > 1:
        return "standard input (-) can be read once"
    if args.rules == "-" and "-" in args.trajectories:
        return (
            "standard input (-) can be read once: the rule file and a trajectory cannot both be -; "
            "give one of them as a file"
        )
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

    out: list[str] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            if not any(f.lower().endswith(FOLDER_SUFFIXES) for _, _, files in os.walk(path) for f in files):
                out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run rlvp-score on `argv` (default: the process's); the exit status: 0 ok, 1 errors in the
    input (the rule file, a trajectory file that could not be read), 2 usage or I/O error."""
    given = sys.argv[1:] if argv is None else argv
    if "--compare" in given and len([a for a in given if not a.startswith("-") or a == "-"]) < 3:
        print(f"rlvp-score: error: {COMPARE_USAGE}", file=sys.stderr)  # (argparse would say only "trajectories")
        return EXIT_USAGE
    args = ScoreArgs(**vars(parser().parse_args(argv)))
    from .score_notes import data_notes

    if (args.ray or args.ray_out is not None) and args.rules == "-":
        print(
            "rlvp-score: error: --ray reads the rule file from a file (every worker loads it), not standard input",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.ray or args.ray_out is not None:
        from ..integrations.ray import score_command

        return score_command(args)
    if args.compare:
        return _compare(args)
    try:
        refuse(_usage_problem(args))
        program, sources = _load_rules(args)
        if args.rules == "-":
            args = attrs.evolve(args, rules=STDIN_NAME)  # named so in the report, the JSON and the warnings
        report = _read_trajectories(args, program, _error_signal(args))
        episodes, domains = _choose_episodes(args, report)
    except Stop as stop:
        return stopped("rlvp-score", stop)
    scored = [(episode, program.score(episode)) for episode in episodes]
    for note in data_notes(program, episodes):
        print(f"rlvp-score: {note}", file=sys.stderr)
    return _write_and_print(args, Results(program, sources, report, domains, scored))


#: What --compare needs (said for too few paths, before argparse's generic message).
COMPARE_USAGE = "--compare needs two rule files and a trajectory: rlvp-score --compare A.rlvp B.rlvp TRAJECTORY..."


def _compare_problem(args: ScoreArgs) -> str:
    """A contradiction among the options of --compare, or "" (then `_usage_problem`'s of A and the trajectories)."""
    if len(args.trajectories) < 2:
        return COMPARE_USAGE
    for flag, used in (
        ("--explain", args.explain),
        ("--limit", args.limit),
        ("--by", args.by),
        ("--atif-out", args.atif_out),
    ):
        if used:
            return f"{flag} does not go with --compare (it compares the totals; score one rule file for {flag})"
    rules_b = args.trajectories[0]
    if rules_b == "-":
        return "--compare reads rule file B from a file, not standard input"
    if os.path.exists(args.rules) and os.path.exists(rules_b) and os.path.samefile(args.rules, rules_b):
        return f"A and B are the same file ({args.rules}): --compare needs two different rule files"
    for flag, path in (("--csv", args.csv), ("--html", args.html)):
        if path is not None and clobbers_input(path, [rules_b]):
            return f"{flag} {path} would overwrite the input {rules_b}: write it somewhere else"
    return _usage_problem(attrs.evolve(args, trajectories=args.trajectories[1:]))


def _compare(args: ScoreArgs) -> int:
    """rlvp-score --compare A B TRAJECTORY...: both rule files loaded, the episodes read (every file must
    read: a comparison of part of them would be said as one of all), scored under both, measured
    (`rlvp_dsl.compare.compare`) and printed or written (cli/score_compare.py)."""
    from ..compare import compare
    from ..diagnostics import counted
    from .score_compare import CompareOutputs, write_comparison

    rules_b, trajectories = args.trajectories[0], args.trajectories[1:]
    try:
        refuse(_compare_problem(args))
        program_a, sources_a = _load_rules(args)
        program_b, sources_b = _load_rules(attrs.evolve(args, rules=rules_b))
        try:
            report = _read_trajectories(attrs.evolve(args, trajectories=trajectories), program_a, _error_signal(args))
        except Stop as stop:
            raise Stop(EXIT_USAGE, stop.message) from None
        if report.errors:
            raise Stop(
                EXIT_USAGE,
                f"{counted(len({e.file for e in report.errors}), 'trajectory file')} did not read (above): --compare "
                "compares all the episodes given or none; fix the file or leave it out",
            )
        episodes, _ = _choose_episodes(attrs.evolve(args, trajectories=trajectories), report)
    except Stop as stop:
        return stopped("rlvp-score", stop)
    scored_a = [(episode, program_a.score(episode)) for episode in episodes]
    scored_b = [(episode, program_b.score(episode)) for episode in episodes]
    comparison = compare(scored_a, scored_b, [r.name for r in program_a.rules], [r.name for r in program_b.rules])
    rules_a = STDIN_NAME if args.rules == "-" else args.rules
    outputs = CompareOutputs(rules_a, rules_b, json=args.json, csv=args.csv, html=args.html)
    return write_comparison(outputs, comparison, (program_a, sources_a, scored_a), (program_b, sources_b, scored_b))


def _load_rules(args: ScoreArgs) -> tuple[Program, dict[str, SourceFile]]:
    """The compiled rule file and its sources (for the HTML report); its diagnostics printed
    (as JSON with --json) when it has errors.

    The rule file ``-`` is read from standard input (named ``<stdin>``), as `rlvp-compile -` reads it.

    Raises:
        Stop: the rule file is missing, a folder, a special file or a trajectory, or standard input
            cannot be read or is not UTF-8 (exit 2), or it has errors (exit 1).
    """
    from ..compile import compile_ruleset
    from ..diagnostics import diagnostics_fields, render_text, sort_and_cap

    result = _check_stdin() if args.rules == "-" else _check_rule_file(args.rules)
    if not result.ok or result.ruleset is None:
        kept, dropped = sort_and_cap(result.diagnostics)
        if args.json:
            name = STDIN_NAME if args.rules == "-" else args.rules
            document = {"rules": name, "ok": False, **diagnostics_fields(kept, dropped)}
            print(json_text(document, indent=1, ensure_ascii=False))
        else:
            print(render_text(kept, result.sources, dropped=dropped), file=sys.stderr)
        raise Stop(EXIT_INPUT_ERRORS)
    return compile_ruleset(result.ruleset), result.sources


#: The name of a rule file read from standard input (``-``), as rlvp-compile names it.
STDIN_NAME = "<stdin>"


def _check_stdin() -> CheckResult:
    """The rule text on standard input, checked (a BOM dropped).

    Raises:
        Stop: standard input cannot be read or is not UTF-8 text (exit 2).
    """
    from ..input_files import read_stdin_bytes
    from ..pipeline import check_text
    from ..source import undecodable

    try:
        data = read_stdin_bytes()
    except OSError as exc:
        raise Stop(EXIT_USAGE, f"cannot read standard input: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Stop(EXIT_USAGE, f"standard input is not UTF-8 text: {undecodable(exc)}") from None
    return check_text(text, STDIN_NAME, cache=True)


def _check_rule_file(path: str) -> CheckResult:
    """The rule file at `path`, checked (taken from the cache when unchanged).

    Raises:
        Stop: the file is missing, a folder, a special file, not UTF-8, or a trajectory (exit 2).
    """
    from ..input_files import NotARegularFile, check_regular
    from ..pipeline import check_file

    try:
        check_regular(path)
    except NotARegularFile as exc:
        raise Stop(EXIT_USAGE, f"cannot read {path}: {exc.strerror}") from None
    if not os.path.isfile(path):
        what = "is a directory, not a rule file" if os.path.isdir(path) else "rule file not found"
        raise Stop(EXIT_USAGE, f"{what}: {path}")
    result = check_file(path, cache=True)  # an unchanged rule file is not parsed nor checked again
    unreadable = next((d for d in result.diagnostics if d.code == "RV001" and d.span.line <= 0), None)
    if unreadable is not None:  # the rule file itself cannot be read (not UTF-8): an I/O error, as in rlvp-compile
        raise Stop(EXIT_USAGE, unreadable.message)
    if not result.ok and os.path.splitext(path)[1].lower() in _TRAJECTORY_SUFFIXES:
        raise Stop(
            EXIT_USAGE,
            f"{path} is not a rule file (it looks like a trajectory); the rule file "
            "comes first: rlvp-score RULES.rlvp TRAJECTORY...",
        )
    return result


def _error_signal(args: ScoreArgs) -> ErrorSignal | None:
    """The --format's default error signal extended by --error-prefix and --error-flag; None without them.

    Raises:
        Stop: --error-prefix or --error-flag without --format (exit 2).
    """
    if not (args.error_prefix or args.error_flag):
        return None
    if not args.format:
        raise Stop(EXIT_USAGE, "--error-prefix/--error-flag need --format (they extend that format's default)")
    from ..readers import DEFAULT_ERROR_SIGNALS

    return DEFAULT_ERROR_SIGNALS[args.format].extended(prefixes=args.error_prefix, flags=args.error_flag)


def _read_trajectories(args: ScoreArgs, program: Program, error_signal: ErrorSignal | None) -> ReadReport:
    """The episodes of every trajectory file, tool errors recognised by `error_signal` (None: each
    format's default); files that cannot be read are said, and left out.

    Raises:
        Stop: a path is missing (exit 2), or no episode was read (exit 1; what was found is listed).
    """
    from ..readers import ReaderError, read_report

    if not program.rules:
        print(f"rlvp-score: warning: {args.rules} has no rules: every credit is 0", file=sys.stderr)
    missing = [p for p in args.trajectories if p != "-" and not os.path.exists(p)]
    if missing:
        raise Stop(EXIT_USAGE, f"no such file or folder: {', '.join(missing)}")
    try:
        report = read_report(args.trajectories, format=args.format, error_signal=error_signal, keep_going=True)
    except ReaderError as exc:
        raise Stop(EXIT_INPUT_ERRORS, str(exc)) from None
    for error in report.errors:
        print(f"rlvp-score: error: {error}", file=sys.stderr)
    if not report.episodes:
        given = ", ".join("standard input" if t == "-" else t for t in args.trajectories)
        lines = [f"  skipped {skipped.path}: {skipped.reason}" for skipped in report.skipped]
        errors = [str(error.file or "") for error in report.errors]  # "path" or "path:line:col"
        lines += [
            f"  {file}: every episode of it was rejected (the errors above)"
            if any(e == file or e.startswith(f"{file}:") for e in errors)
            else f"  {file}: a trajectory file that holds no episodes (no simulations, entries or lines)"
            for file in report.files
        ]
        lines += [
            f"  {folder}: a folder with no trajectory files (*.json, *.jsonl, *.ndjson, *.traj)"
            for folder in _empty_folders(args.trajectories)
        ]
        if not lines and errors:  # every file failed to read: the errors above say it all
            raise Stop(EXIT_INPUT_ERRORS, f"no episodes could be read from {given} (the errors above)")
        raise Stop(EXIT_INPUT_ERRORS, "\n".join([f"no episodes found in {given}", *lines]))
    return report


def _choose_episodes(args: ScoreArgs, report: ReadReport) -> tuple[list[Episode], Counter[str | None]]:
    """The episodes of the --domain asked for (all without it), and the episodes per domain read;
    says what was left out, or warns when one summary blends domains.

    Raises:
        Stop: no episode is of the domains asked for (exit 1).
    """
    from .score_notes import domain_hints, domain_of, domains_text, select_domains

    episodes = list(report.episodes)
    domains = Counter(domain_of(e) for e in episodes)
    if not args.domain:
        if args.by != "domain" and len([d for d in domains if d is not None]) > 1:
            print(
                f"rlvp-score: warning: the episodes come from {len([d for d in domains if d])} domains "
                f"({domains_text(domains)}) and one summary blends them: --domain NAME keeps one, "
                "--by domain summarises each",
                file=sys.stderr,
            )
        return episodes, domains
    kept, note = select_domains(episodes, args.domain)
    hints = domain_hints(args.domain, domains)
    if not kept:
        raise Stop(
            EXIT_INPUT_ERRORS,
            f"no episodes of domain {', '.join(args.domain)} (found: {domains_text(domains)})"
            f"{'; ' + hints if hints else ''}",
        )
    if note:
        print(f"rlvp-score: {note}", file=sys.stderr)
        if hints:
            print(f"rlvp-score: warning: {hints}", file=sys.stderr)
    return kept, domains


def _write_and_print(args: ScoreArgs, results: Results) -> int:
    """Write the --html report and the --csv rows, then print the JSON document (--json) or the
    text report (--explain first); the exit status: 1 when a trajectory file could not be read
    (the others are scored), 2 when an output cannot be written."""
    from ..diagnostics import counted
    from .score_output import csv_text, explain_text, json_document, summary_text, write_csv, write_html

    program, report, scored = results.program, results.report, results.scored
    status = EXIT_INPUT_ERRORS if report.errors else EXIT_OK
    if args.html is not None and not write_html(args.html, program, scored, results.sources, args.rules):
        return EXIT_USAGE
    if args.atif_out is not None and not _write_atif(args.atif_out, results):
        return EXIT_USAGE
    if args.csv is not None:
        if not write_csv(args.csv, csv_text(program, scored)):
            return EXIT_USAGE
        if args.csv == "-":
            return status
        print(f"rlvp-score: wrote {counted(len(scored), 'episode')} to {args.csv}", file=sys.stderr)
    if args.json:
        document = json_document(
            program, scored, report, rules=args.rules, domains=results.domains, selected=args.domain, by=args.by
        )
        print(json_text(document, indent=1, ensure_ascii=False))
        return status
    if args.explain:
        print(explain_text(scored, args.limit))
        print()
    print(summary_text(program, scored, report, rules=args.rules, domains=args.domain, by=args.by))
    print(f"credit hash: {_scored_hash(scored)}")
    return status


def _write_atif(folder: str, results: Results) -> bool:
    """The scored episodes as ATIF files in `folder` (rlvp_dsl.readers.atif.write_atif); False (said) when it cannot be written."""
    from ..diagnostics import counted
    from ..readers.atif import write_atif

    try:
        rules = [r.name for r in results.program.rules]
        written = write_atif(folder, results.scored, rule_names=rules, keep=results.report.files)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"rlvp-score: error: cannot write --atif-out {folder}{where}: {exc.strerror or exc}", file=sys.stderr)
        return False
    print(f"rlvp-score: wrote {counted(len(written), 'ATIF trajectory')} to {folder}", file=sys.stderr)
    return True


def _scored_hash(scored: list[Scored]) -> str:
    """`credit_hash` of the scored episodes (the one `rlvp-score --ray` prints for the same input)."""
    from .score_hash import credit_hash, episode_digest

    return credit_hash([episode_digest(e.id, [(c.event_index, c.rule, c.value) for c in cs]) for e, cs in scored])


def run() -> None:
    """Run as a console script (``python -m``; the installed ``rlvp-score`` is `rlvp_dsl.cli.score_command`)."""
    console(main, "rlvp-score")


if __name__ == "__main__":
    run()
