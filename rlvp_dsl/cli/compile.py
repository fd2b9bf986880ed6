"""`rlvp-compile`: check and compile rule files, or derive one from a tool manifest.

rlvp-compile rules/*.rlvp                        # check + compile; diagnostics; exit 0/1/2
rlvp-compile rules/x.rlvp --json                 # diagnostics as JSON
rlvp-compile rules/x.rlvp --emit-program -o p.json   # the compiled program (canonical JSON)
rlvp-compile --auto-from-tags tools.json -o build/derived.rlvp
rlvp-compile --explain-code RV201                  # a code's cause, fix and example (docs/diagnostics.md)

`main` reads the command line, refuses contradictions, then runs one mode: --explain-code (here),
--auto-from-tags (cli/auto_from_tags.py), or the rule files: each checked, its diagnostics printed,
then compiled (here), tested (--test) or property-checked (--check; both cli/rule_testing.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import (
    EXIT_INPUT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    Stop,
    clobbers_input,
    console,
    diagnostics_fields,
    json_text,
    nonempty,
    refuse,
    stopped,
    version_text,
    whole_number,
    write_output,
)
from .auto_from_tags import derive_rules
from .rule_testing import (
    DEFAULT_EXAMPLES,
    MAX_EXAMPLES,
    CheckSettings,
    RuleTestTally,
    load_check_manifest,
    prepare_check,
    print_test_summary,
    rule_test_json,
    run_check,
    run_tests,
)
from ..diagnostics import MAX_PER_FILE, Diagnostic, counted, has_errors, render_text, sort_and_cap
from ..input_files import read_stdin_bytes
from ..loader import read_source
from ..pipeline import CheckResult, check_file, check_text

if TYPE_CHECKING:
    from ..ir import RuleSet
    from ..testing.rule_tests import RuleTestResult

#: The name rule text read from standard input (``-``) carries in diagnostics.
STDIN_NAME = "<stdin>"

#: File endings of JSON data: a "rule file" named so is a manifest or a trajectory given by mistake.
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


@dataclasses.dataclass(frozen=True)
class CompileArgs:
    """rlvp-compile's command line as `_parser` reads it: one field per option (see its help)."""

    rules: list[str]
    explain_code: str | None
    auto_from_tags: str | None
    output: str | None
    force: bool
    emit_program: bool
    validate: list[str] | None
    drop_harmful: bool
    json: bool
    max_diagnostics: int
    warnings_as_errors: bool
    test: bool
    check: bool
    manifest: str | None
    examples: int


@dataclasses.dataclass
class FileOutcome:
    """What one rule file came to: its name as shown (`<stdin>` for ``-``), the exit status it
    earns, and for ``--json`` whether it is ok, why it could not be read (None when it was read),
    its diagnostics (capped; `dropped` left out) and its tests' results (None unless --test ran them)."""

    path: str
    status: int
    ok: bool = False
    error: str | None = None
    diagnostics: Sequence[Diagnostic] = ()
    dropped: int = 0
    tests: list[RuleTestResult] | None = None


def _parser() -> argparse.ArgumentParser:
    """rlvp-compile's options (their names are `CompileArgs`'s fields)."""
    p = argparse.ArgumentParser(
        prog="rlvp-compile",
        description="Check and compile .rlvp rule files, or derive rules from a tool manifest.",
        epilog="Exit codes: 0 ok, 1 errors in the input, 2 usage or I/O error. "
        "Every diagnostic code, its cause and fix: docs/diagnostics.md (or --explain-code CODE).",
    )
    p.add_argument(
        "rules",
        nargs="*",
        help="rule files to check and compile; - reads one from standard input "
        "(its includes resolve from the current folder)",
    )
    p.add_argument("--version", action="version", version=version_text("rlvp-compile"))
    p.add_argument(
        "--explain-code",
        metavar="CODE",
        type=nonempty("a code (RV201)"),
        help="print what a diagnostic code (RV201, ...) means, its cause, its fix and an example",
    )
    p.add_argument(
        "--auto-from-tags",
        metavar="MANIFEST",
        type=nonempty(),
        help="derive a rule file from a tool manifest (rlvp, tau2, MCP tools/list, OpenAI tools)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        type=nonempty(),
        help="write the derived rules (with --auto-from-tags) or the compiled program (with --emit-program)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --auto-from-tags: let -o replace a file that rlvp did not derive (a hand-written one)",
    )
    p.add_argument("--emit-program", action="store_true", help="print the compiled program as canonical JSON")
    p.add_argument(
        "--validate",
        nargs="+",
        metavar="TRAJECTORIES",
        help="with --auto-from-tags: score the derived rules on trajectories with an outcome and "
        "report, per rule, how often it penalises successful vs failed episodes",
    )
    p.add_argument(
        "--drop-harmful",
        action="store_true",
        help="with --validate: leave out derived penalties that fire more on successes than failures",
    )
    p.add_argument("--json", action="store_true", help="print diagnostics as JSON: a list, one object per file")
    p.add_argument(
        "--max-diagnostics",
        type=whole_number(1),
        default=MAX_PER_FILE,
        metavar="N",
        help=f"most diagnostics shown per file (default {MAX_PER_FILE})",
    )
    p.add_argument("--warnings-as-errors", action="store_true", help="exit 1 when there are warnings")
    p.add_argument(
        "--test",
        action="store_true",
        help="run the `test` blocks of the rule files; exit 1 when one fails or when no test ran "
        "(no file has a `test` block)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check the built-in properties (bounded, not farmable, discharge once, reachable, "
        "deterministic) on generated episodes; exit 1 when one fails (docs/testing-rules.md)",
    )
    p.add_argument(
        "--manifest",
        metavar="MANIFEST",
        type=nonempty(),
        help="with --check: generate calls of this manifest's tools (default: the rule file's tools)",
    )
    p.add_argument(
        "--examples",
        type=whole_number(),
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"with --check: examples per property (default {DEFAULT_EXAMPLES}, at most {MAX_EXAMPLES:,})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run rlvp-compile on `argv` (default: the process's); the exit status: 0 ok, 1 errors in the
    input (or a failed test or property), 2 usage or I/O error."""
    parser = _parser()
    args = CompileArgs(**vars(parser.parse_args(argv)))
    try:
        if args.explain_code is not None:
            return _explain_code(args.explain_code, args)
        refuse(_usage_problem(args))
        if args.auto_from_tags:
            return derive_rules(
                args.auto_from_tags,
                output=args.output,
                force=args.force,
                validate=args.validate,
                drop_harmful=args.drop_harmful,
            )
        if not args.rules:
            parser.print_usage(sys.stderr)
            raise Stop(EXIT_USAGE, "no rule files given")
        refuse(_rule_files_problem(args))
        return _compile_files(args, _check_settings(args) if args.check else None)
    except Stop as stop:
        return stopped("rlvp-compile", stop)


def _usage_problem(args: CompileArgs) -> str:
    """A contradiction among the options of any mode (the first found), or ""."""
    problem = _conflict(args)
    if problem:
        return problem
    if args.output:
        clobbered = clobbers_input(
            args.output, [*args.rules, args.auto_from_tags, args.manifest, *(args.validate or [])]
        )
        if clobbered:
            return f"-o {args.output} would overwrite the input {clobbered}: write it somewhere else"
    if args.force and not args.auto_from_tags:
        return "--force goes with --auto-from-tags MANIFEST -o PATH"
    if (args.validate or args.drop_harmful) and not args.auto_from_tags:
        return "--validate and --drop-harmful go with --auto-from-tags MANIFEST"
    if args.drop_harmful and not args.validate:
        return "--drop-harmful needs --validate TRAJECTORIES (the evidence)"
    if args.auto_from_tags and args.rules:
        return "give either rule files or --auto-from-tags, not both"
    return ""


def _conflict(args: CompileArgs) -> str:
    """A flag that does nothing in this mode (so the user's intent would be silently dropped), or ""."""
    if args.auto_from_tags:
        given = [
            flag
            for flag, on in (
                ("--emit-program", args.emit_program),
                ("--json", args.json),
                ("--test", args.test),
                ("--check", args.check),
                ("--warnings-as-errors", args.warnings_as_errors),
                ("--max-diagnostics", args.max_diagnostics != MAX_PER_FILE),
            )
            if on
        ]
        if given:
            return (
                f"{given[0]} does not go with --auto-from-tags (it writes rules; check them afterwards with "
                "rlvp-compile RULES.rlvp)"
            )
        return ""
    if (args.test or args.check) and (args.emit_program or args.output):
        flag = "--emit-program" if args.emit_program else "-o"
        return f"{flag} writes the compiled program: it does not go with --test or --check (run them apart)"
    if args.check and args.json:
        return "--check prints a text report: it does not go with --json"
    return ""


def _rule_files_problem(args: CompileArgs) -> str:
    """A mistake in the options of the rule-file mode (the first found), or ""."""
    if args.output and len(args.rules) != 1:
        return "-o takes one rule file"
    if args.rules.count("-") > 1:
        return "standard input (-) can be read once"
    if (args.manifest or args.examples != DEFAULT_EXAMPLES) and not args.check:
        return "--manifest and --examples go with --check"
    if not 1 <= args.examples <= MAX_EXAMPLES:
        return f"--examples must be between 1 and {MAX_EXAMPLES:,} (got {args.examples:,})"
    return ""


def _check_settings(args: CompileArgs) -> CheckSettings:
    """`--check` made ready (`prepare_check`) and its settings, the --manifest read.

    Raises:
        Stop: hypothesis is missing, or the manifest cannot be read.
    """
    prepare_check()
    manifest = load_check_manifest(args.manifest) if args.manifest else None
    return CheckSettings(manifest, args.manifest, args.examples, args.warnings_as_errors)


def _explain_code(code: str, args: CompileArgs) -> int:
    """`--explain-code CODE`: print the code's cause, fix and example.

    Raises:
        Stop: rule files or a manifest given too, or an unknown code (exit 2).
    """
    from ..diagnostic_docs import explain
    from ..diagnostics import CODES, quoted

    if args.rules or args.auto_from_tags:
        raise Stop(EXIT_USAGE, "--explain-code takes no rule files or manifest")
    text = explain(code)
    if text is None:
        raise Stop(
            EXIT_USAGE,
            f"unknown diagnostic code {quoted(code)} (the codes: {', '.join(CODES)}; all of them in docs/diagnostics.md)",
        )
    print(text)
    return EXIT_OK


def _compile_files(args: CompileArgs, check: CheckSettings | None) -> int:
    """The rule-file mode: each file checked and acted on in turn (`_compile_file`), then the
    ``--json`` list (one object per file) and the `--test` summary; the worst exit status."""
    tally = RuleTestTally()
    outcomes = [_compile_file(path, args, check, tally) for path in args.rules]
    status = max((outcome.status for outcome in outcomes), default=EXIT_OK)
    if args.json:  # always a list: one object per rule file
        print(json_text([_json_entry(outcome) for outcome in outcomes], indent=2, ensure_ascii=False))
    if args.test:
        status = max(status, print_test_summary(tally, len(args.rules), sys.stderr if args.json else sys.stdout))
    return status


def _compile_file(path: str, args: CompileArgs, check: CheckSettings | None, tally: RuleTestTally) -> FileOutcome:
    """Check one rule file (``-``: standard input) and print its diagnostics (not with ``--json``);
    then, without errors, run its tests and properties (`--test`, `--check`), or say it is ok and
    emit its program (`--emit-program`, `-o`).

    Raises:
        Stop: the program cannot be written to `-o` (exit 2, said).
    """
    checked = _check_rules(path)
    if isinstance(checked, str):
        tally.not_run.append(path)
        if not args.json:
            print(f"rlvp-compile: error: {checked}", file=sys.stderr)
        return FileOutcome(path, EXIT_USAGE, error=checked)
    path = STDIN_NAME if path == "-" else path
    if not checked.ok and path.lower().endswith(_DATA_SUFFIXES) and not args.json:
        print(f"rlvp-compile: error: {_not_a_rule_file(path)}", file=sys.stderr)
        tally.not_run.append(path)
        return FileOutcome(path, EXIT_USAGE)
    kept, dropped = sort_and_cap(checked.diagnostics, args.max_diagnostics)
    if kept and not args.json:
        print(render_text(kept, checked.sources, dropped=dropped), file=sys.stderr)
    outcome = FileOutcome(path, EXIT_OK, ok=checked.ok, diagnostics=kept, dropped=dropped)
    failed = has_errors(checked.diagnostics) or (args.warnings_as_errors and bool(checked.diagnostics))
    if failed or checked.ruleset is None:  # no rule set only with errors
        tally.not_run.append(path)
        outcome.status = EXIT_INPUT_ERRORS
        return outcome
    ruleset = checked.ruleset
    if check is not None:
        outcome.status = max(outcome.status, run_check(path, ruleset, check))
    if args.test:
        outcome.tests = run_tests(path, ruleset, tally, quiet=args.json)
        if not all(result.passed for result in outcome.tests):
            outcome.status = max(outcome.status, EXIT_INPUT_ERRORS)
    if args.check or args.test:
        return outcome
    if not args.json:
        print(f"{path}: ok: {_describe(ruleset)}", file=sys.stderr)
    if args.emit_program or args.output:
        _emit_program(path, ruleset, args.output, quiet=args.json)
    return outcome


def _check_rules(path: str) -> CheckResult | str:
    """Check the rule file at `path` (``-``: the rule text on standard input), with lints; or why it
    cannot be read."""
    if path == "-":
        try:
            data = read_stdin_bytes()
        except OSError as exc:
            return exc.strerror or str(exc) or f"cannot read {path}"
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return f"standard input is not UTF-8 text (byte {exc.start})"
        return check_text(text, STDIN_NAME, lints=True)
    source, problems = read_source(path)
    if source is None:
        return problems[0].message if problems else f"cannot read {path}"
    return check_file(path, lints=True)


def _not_a_rule_file(path: str) -> str:
    """One line for a JSON file given as a rule file (that does not parse as one), saying what to do."""
    if path.lower().endswith(".traj") or path.lower().endswith((".jsonl", ".ndjson")):
        return (
            f"{path} is not a rule file (it looks like a trajectory): score trajectories with "
            f"rlvp-score RULES.rlvp {path}"
        )
    return (
        f"{path} is not a rule file (it is JSON): derive rules from a tool manifest with "
        f"rlvp-compile --auto-from-tags {path}; score a trajectory with rlvp-score RULES.rlvp {path}"
    )


def _describe(ruleset: RuleSet) -> str:
    """``8 rules (1 obligation, 7 violation), 14 tools``: what a clean rule file holds."""
    kinds = Counter(r.kind for r in ruleset.rules)
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return f"{counted(len(ruleset.rules), 'rule')} ({parts or 'none'}), {counted(len(ruleset.tools), 'tool')}"


def _emit_program(path: str, ruleset: RuleSet, output: str | None, *, quiet: bool) -> None:
    """Print the compiled program as canonical JSON, or write it to `output` and say so (unless `quiet`).

    Raises:
        Stop: `output` cannot be written (exit 2, said).
    """
    text = json_text(ruleset.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    if not write_output("rlvp-compile", output, text):
        raise Stop(EXIT_USAGE)
    if not quiet:
        print(f"{path}: wrote the compiled program (canonical JSON) to {output}", file=sys.stderr)


def _json_entry(outcome: FileOutcome) -> dict[str, object]:
    """One rule file in the ``--json`` list: ``{file, ok, diagnostics, dropped}``, with ``error``
    when it could not be read and ``tests`` when --test ran them."""
    if outcome.error is not None:
        return {"file": outcome.path, "ok": False, "error": outcome.error, **diagnostics_fields((), 0)}
    entry = {"file": outcome.path, "ok": outcome.ok, **diagnostics_fields(outcome.diagnostics, outcome.dropped)}
    if outcome.tests is not None:
        entry["tests"] = [rule_test_json(result) for result in outcome.tests]
    return entry


def run() -> None:
    """Run as a console script (``python -m``; the installed ``rlvp-compile`` is `rlvp_dsl.cli.compile_command`)."""
    console(main, "rlvp-compile")


if __name__ == "__main__":
    run()
