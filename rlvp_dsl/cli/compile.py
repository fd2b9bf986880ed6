"""`rlvp-compile`: check and compile rule files, or derive one from a tool manifest.

rlvp-compile rules/*.rlvp                        # check + compile; diagnostics; exit 0/1/2
rlvp-compile rules/x.rlvp --json                 # diagnostics as JSON
rlvp-compile rules/x.rlvp --emit-program -o p.json   # the compiled program (canonical JSON)
rlvp-compile --auto-from-tags tools.json -o build/derived.rlvp
rlvp-compile --explain-code RV201                  # a code's cause, fix and example (docs/diagnostics.md)
rlvp-compile --fmt [--check] rules/*.rlvp          # the canonical layout, in place (--check: a diff, exit 1)

`main` reads the command line and refuses contradictions (cli/compile_args.py), then runs one
mode: --explain-code (here), --auto-from-tags (cli/auto_from_tags.py), --fmt (here: each file
formatted by `rlvp_dsl.syntax.fmt.format_source`), or the rule files: each checked, its
diagnostics printed, then compiled (here), tested (--test) or property-checked (--check; both
cli/rule_testing.py).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import (
    EXIT_INPUT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    Stop,
    console,
    json_text,
    refuse,
    stopped,
    write_output,
)
from .auto_from_tags import derive_rules
from .compile_args import CompileArgs, parser, rule_files_problem, usage_problem
from .rule_testing import (
    CheckSettings,
    RuleTestTally,
    load_check_manifest,
    prepare_check,
    print_test_summary,
    rule_test_json,
    run_check,
    run_tests,
)
from ..diagnostics import (
    Diagnostic,
    RuleError,
    counted,
    diagnostics_fields,
    has_errors,
    render_text,
    sort_and_cap,
)
from ..input_files import read_stdin_bytes
from ..loader import read_source
from ..pipeline import CheckResult, check_file, check_text
from ..source import undecodable
from ..syntax.fmt import format_source

if TYPE_CHECKING:
    from ..ir import RuleSet
    from ..testing.rule_tests import RuleTestResult

#: The name rule text read from standard input (``-``) carries in diagnostics.
STDIN_NAME = "<stdin>"

#: File endings of JSON data: a "rule file" named so is a manifest or a trajectory given by mistake.
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


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


def main(argv: list[str] | None = None) -> int:
    """Run rlvp-compile on `argv` (default: the process's); the exit status: 0 ok, 1 errors in the
    input (or a failed test or property), 2 usage or I/O error."""
    command_line = parser()
    args = CompileArgs(**vars(command_line.parse_args(argv)))
    try:
        if args.explain_code is not None:
            return _explain_code(args.explain_code, args)
        refuse(usage_problem(args))
        if args.auto_from_tags:
            return derive_rules(
                args.auto_from_tags,
                output=args.output,
                force=args.force,
                validate=args.validate,
                drop_harmful=args.drop_harmful,
            )
        if not args.rules:
            command_line.print_usage(sys.stderr)
            raise Stop(EXIT_USAGE, "no rule files given")
        if args.fmt:
            refuse("standard input (-) can be read once" if args.rules.count("-") > 1 else "")
            return _format_files(args.rules, check=args.check, max_diagnostics=args.max_diagnostics)
        refuse(rule_files_problem(args))
        return _compile_files(args, _check_settings(args) if args.check else None)
    except Stop as stop:
        return stopped("rlvp-compile", stop)


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
        text, problem = _stdin_text()
        return check_text(text, STDIN_NAME, lints=True) if text is not None else problem
    source, problems = read_source(path)
    if source is None:
        return problems[0].message if problems else f"cannot read {path}"
    return check_file(path, lints=True)


def _stdin_text() -> tuple[str | None, str]:
    """The rule text on standard input (a BOM dropped) and "", or None and why it cannot be read."""
    try:
        data = read_stdin_bytes()
    except OSError as exc:
        return None, exc.strerror or str(exc) or "cannot read standard input"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"standard input is not UTF-8 text: {undecodable(exc)}"


# ---- --fmt ------------------------------------------------------------------------------------


def _format_files(paths: list[str], *, check: bool, max_diagnostics: int) -> int:
    """`--fmt [--check]`: each file formatted in turn (`_format_file`), then one summary line on
    standard error; the worst exit status (0 formatted or already so, 1 with --check: a file is not
    formatted, 2 a file cannot be read, written or parsed)."""
    tally: Counter[str] = Counter()
    statuses = [_format_file(path, check, max_diagnostics, tally) for path in paths]
    done = "would be reformatted" if check else "reformatted"
    parts = [f"{counted(tally['changed'], 'file')} {done}", f"{tally['same']} already formatted"]
    if tally["failed"]:
        parts.append(f"{tally['failed']} not formatted (errors above)")
    print("rlvp-compile: " + ", ".join(parts), file=sys.stderr)
    return max(statuses, default=EXIT_OK)


def _format_file(path: str, check: bool, max_diagnostics: int, tally: Counter[str]) -> int:
    """Format one rule file (``-``: standard input, printed formatted), counted in `tally` as
    ``changed``, ``same`` or ``failed``; its exit status.  With `check`, nothing is written: a file
    that would change gets its unified diff on standard output (exit 1).  A file that does not
    parse gets its diagnostics on standard error and is left as it is (exit 2)."""
    name = STDIN_NAME if path == "-" else path
    if path == "-":
        text, problem = _stdin_text()
    else:
        source, problems = read_source(path)
        text, problem = (source.text, "") if source else (None, problems[0].message)
    if text is None:
        print(f"rlvp-compile: error: {problem}", file=sys.stderr)
        tally["failed"] += 1
        return EXIT_USAGE
    try:
        formatted = format_source(text, path=name)
    except RuleError as exc:
        tally["failed"] += 1
        if name.lower().endswith(_DATA_SUFFIXES):
            print(f"rlvp-compile: error: {_not_a_rule_file(name)}", file=sys.stderr)
            return EXIT_USAGE
        kept, dropped = sort_and_cap(exc.diagnostics, max_diagnostics)
        print(render_text(kept, exc.sources, dropped=dropped), file=sys.stderr)
        return EXIT_USAGE
    tally["same" if formatted == text else "changed"] += 1
    if check:
        if formatted == text:
            return EXIT_OK
        sys.stdout.write(layout_diff(name, text, formatted))
        return EXIT_INPUT_ERRORS
    if path == "-":
        sys.stdout.write(formatted)
    elif formatted != text:
        problem = _replace_file(path, formatted)
        if problem:
            tally["changed"] -= 1
            tally["failed"] += 1
            print(f"rlvp-compile: error: cannot write {path}: {problem}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{path}: reformatted", file=sys.stderr)
    return EXIT_OK


def layout_diff(name: str, old: str, new: str) -> str:
    """The unified diff from `old` to `new` (``--- NAME`` / ``+++ NAME (formatted)``, 3 lines of
    context); a last line without a newline is marked as diff marks it.  Line endings the
    formatter makes ``\n`` (CRLF, CR) are said in one line before it (``NAME: line endings CRLF
    -> LF``), not shown as every line changed."""
    out = []
    if "\r" in old and "\r" not in new:
        ending = "CRLF" if "\r\n" in old else "CR"
        out.append(f"{name}: line endings {ending} -> LF\n")
        old = old.replace("\r\n", "\n").replace("\r", "\n")
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), name, name + " (formatted)"):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _replace_file(path: str, text: str) -> str:
    """Write `text` over the file at `path` atomically: a temporary file beside it (the file's
    permissions), then a rename over it (over a symbolic link's target, the link kept); "" or why not."""
    target = os.path.realpath(path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        fd, tmp = tempfile.mkstemp(
            prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=os.path.dirname(target)
        )
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        return exc.strerror or str(exc)
    return ""


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
