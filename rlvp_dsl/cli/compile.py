"""`rlvp-compile`: check and compile rule files, or derive one from a tool manifest.

rlvp-compile rules/*.rlvp                        # check + compile; diagnostics; exit 0/1/2
rlvp-compile rules/x.rlvp --json                 # diagnostics as JSON
rlvp-compile rules/x.rlvp --emit-program -o p.json   # the compiled program (canonical JSON)
rlvp-compile --auto-from-tags tools.json -o build/derived.rlvp
rlvp-compile --explain-code RV201                  # a code's cause, fix and example (docs/diagnostics.md)
"""

from __future__ import annotations

import argparse
import json
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
from ..diagnostics import MAX_PER_FILE, Diagnostic, counted, has_errors, render_json, render_text, sort_and_cap
from ..input_files import NotARegularFile, check_regular, read_stdin_bytes
from ..loader import read_source
from ..pipeline import check_file, check_text

#: The name rule text read from standard input (``-``) carries in diagnostics.
STDIN_NAME = "<stdin>"


#: The most examples per property `--check` takes: more runs for hours and finds nothing 200 do not.
MAX_EXAMPLES = 100_000

#: What `--check` needs beyond the core install, and the one line that installs it.
CHECK_NEEDS = "hypothesis"
CHECK_INSTALL = "pip install 'hypothesis>=6.100'"


def _parser() -> argparse.ArgumentParser:
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
        default=200,
        metavar="N",
        help=f"with --check: examples per property (default 200, at most {MAX_EXAMPLES:,})",
    )
    return p


def _write(path: str, text: str) -> bool:
    """Write an output file (making missing folders); on failure print the error and return False."""
    return write_output("rlvp-compile", path, text)


#: File endings of JSON data: a "rule file" named so is a manifest or a trajectory given by mistake.
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


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


def _read_stdin_rules() -> tuple[str | None, str]:
    """The rule text on standard input (``-``), or (None, why not)."""
    try:
        data = read_stdin_bytes()
    except OSError as exc:
        return None, exc.strerror or str(exc)
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"standard input is not UTF-8 text (byte {exc.start})"


def _derive(args) -> int:
    from ..manifests.derive import derive_text, is_derived_file
    from ..manifests import ManifestError, load_manifest

    if (
        args.output
        and os.path.isfile(args.output)
        and os.path.getsize(args.output)
        and not args.force
        and not is_derived_file(args.output)
    ):
        print(
            f"rlvp-compile: error: -o {args.output} exists and was not derived by rlvp-compile --auto-from-tags "
            "(a hand-written rule file?): write to another path, or add --force to replace it",
            file=sys.stderr,
        )
        return EXIT_USAGE

    try:
        check_regular(args.auto_from_tags)
        manifest = load_manifest(args.auto_from_tags)
    except FileNotFoundError:
        print(f"rlvp-compile: error: manifest not found: {args.auto_from_tags}", file=sys.stderr)
        return EXIT_USAGE
    except IsADirectoryError:
        print(f"rlvp-compile: error: {args.auto_from_tags} is a directory, not a manifest file", file=sys.stderr)
        return EXIT_USAGE
    except (ManifestError, ValueError) as exc:
        if args.auto_from_tags.lower().endswith((".jsonl", ".ndjson", ".traj", ".rlvp")):
            what = "a rule file" if args.auto_from_tags.lower().endswith(".rlvp") else "a trajectory"
            print(
                f"rlvp-compile: error: {args.auto_from_tags} is {what}, not a tool manifest: --auto-from-tags "
                "reads a manifest (rlvp tools, tau2, MCP tools/list, OpenAI tools)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        print(f"rlvp-compile: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERRORS
    except OSError as exc:
        print(f"rlvp-compile: error: cannot read {args.auto_from_tags}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    if not manifest.tools:
        print(f"rlvp-compile: warning: {args.auto_from_tags} declares no tools", file=sys.stderr)
    for note in manifest.notes:
        if "no annotations" in note:  # an assumption the user should see, not only a comment
            print(f"rlvp-compile: warning: {args.auto_from_tags}: {note}", file=sys.stderr)
    drop: dict[str, str] = {}
    evidence, status = "", EXIT_OK
    if args.validate:
        status, drop, evidence = _validate(manifest, args)
        if not evidence:  # nothing to go on: the error is said
            return status
    text = derive_text(manifest, drop=drop)
    # The file first, then the evidence table: a reader that stops early (`| head`) loses no file.
    if args.output:
        if not _write(args.output, text):
            return EXIT_USAGE
        if evidence:
            print(evidence)
        print(
            f"{args.output}: derived {counted(len(manifest.tools), 'tool')} from {args.auto_from_tags}", file=sys.stderr
        )
    else:
        if evidence:
            print(evidence, file=sys.stderr)
        sys.stdout.write(text)
    return status


def _validate(manifest, args) -> tuple[int, dict[str, str], str]:
    """Score the derived rules on --validate trajectories: the exit status so far (1 when a file
    could not be read: the others are still used), the harmful rules to drop with --drop-harmful,
    and the evidence table ("" when there is none; printed once the rules are written: stdout
    when they go to -o, else stderr)."""
    from ..manifests.derive import derive_text
    from ..manifests.validate import render, validate
    from ..pipeline import loads
    from ..readers import ReaderError, read_report

    missing = [p for p in args.validate if not os.path.exists(p)]
    if missing:
        print(f"rlvp-compile: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE, {}, ""
    try:
        report = read_report(args.validate, keep_going=True)
    except ReaderError as exc:
        print(f"rlvp-compile: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERRORS, {}, ""
    for error in report.errors:
        print(f"rlvp-compile: error: {error}", file=sys.stderr)
    evidence, used = validate(loads(derive_text(manifest), manifest.path), report.episodes)
    if not used:
        print(
            "rlvp-compile: error: --validate found no episodes with an outcome in " + ", ".join(args.validate),
            file=sys.stderr,
        )
        return EXIT_INPUT_ERRORS, {}, ""
    harmful = {
        e.name: (
            f"penalised {e.success_rate:.1%} of successful and {e.failure_rate:.1%} of failed episodes in --validate"
        )
        for e in evidence
        if e.harmful
    }
    if harmful and not args.drop_harmful:
        print(
            f"rlvp-compile: warning: {counted(len(harmful), 'derived rule penalises', 'derived rules penalise')} success more often than failure: "
            f"{', '.join(harmful)} (--drop-harmful leaves them out)",
            file=sys.stderr,
        )
    status = EXIT_INPUT_ERRORS if report.errors else EXIT_OK
    return status, harmful if args.drop_harmful else {}, render(evidence, used)


def _describe(ruleset) -> str:
    kinds = Counter(r.kind for r in ruleset.rules)
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return f"{counted(len(ruleset.rules), 'rule')} ({parts or 'none'}), {counted(len(ruleset.tools), 'tool')}"


def _explain_code(args) -> int:
    from ..diagnostic_docs import explain

    if args.rules or args.auto_from_tags:
        print("rlvp-compile: error: --explain-code takes no rule files or manifest", file=sys.stderr)
        return EXIT_USAGE
    text = explain(args.explain_code)
    if text is None:
        from ..diagnostics import CODES, quoted

        print(
            f"rlvp-compile: error: unknown diagnostic code {quoted(args.explain_code)} (the codes: {', '.join(CODES)}; "
            "all of them in docs/diagnostics.md)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(text)
    return EXIT_OK


def _check_available() -> bool:
    """Whether `--check` can run (hypothesis installed); if not, say how to install it."""
    import importlib.util

    if importlib.util.find_spec(CHECK_NEEDS) is not None:
        return True
    print(
        f"rlvp-compile: error: --check needs {CHECK_NEEDS}, which is not installed; install it with: {CHECK_INSTALL}",
        file=sys.stderr,
    )
    return False


def _hypothesis_home() -> None:
    """Keep Hypothesis's cache out of the user's directory: it goes to ~/.cache/rlvp/hypothesis
    (or $XDG_CACHE_HOME/rlvp/hypothesis) unless HYPOTHESIS_STORAGE_DIRECTORY says otherwise;
    where that cannot be created, to a temporary folder."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    import tempfile

    from hypothesis.configuration import set_hypothesis_home_dir

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    home = os.path.join(cache, "rlvp", "hypothesis")
    try:
        os.makedirs(home, exist_ok=True)
    except OSError:
        home = os.path.join(tempfile.gettempdir(), f"rlvp-hypothesis-{os.getuid() if hasattr(os, 'getuid') else 0}")
    set_hypothesis_home_dir(home)


def _conflict(args) -> str:
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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.explain_code is not None:
        return _explain_code(args)
    problem = _conflict(args)
    if problem:
        print(f"rlvp-compile: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.output:
        clobbered = clobbers_input(
            args.output, [*args.rules, args.auto_from_tags, args.manifest, *(args.validate or [])]
        )
        if clobbered:
            print(
                f"rlvp-compile: error: -o {args.output} would overwrite the input {clobbered}: write it somewhere else",
                file=sys.stderr,
            )
            return EXIT_USAGE
    if args.force and not args.auto_from_tags:
        print("rlvp-compile: error: --force goes with --auto-from-tags MANIFEST -o PATH", file=sys.stderr)
        return EXIT_USAGE
    if (args.validate or args.drop_harmful) and not args.auto_from_tags:
        print("rlvp-compile: error: --validate and --drop-harmful go with --auto-from-tags MANIFEST", file=sys.stderr)
        return EXIT_USAGE
    if args.drop_harmful and not args.validate:
        print("rlvp-compile: error: --drop-harmful needs --validate TRAJECTORIES (the evidence)", file=sys.stderr)
        return EXIT_USAGE
    if args.auto_from_tags:
        if args.rules:
            print("rlvp-compile: error: give either rule files or --auto-from-tags, not both", file=sys.stderr)
            return EXIT_USAGE
        return _derive(args)
    if not args.rules:
        _parser().print_usage(sys.stderr)
        print("rlvp-compile: error: no rule files given", file=sys.stderr)
        return EXIT_USAGE
    if args.output and len(args.rules) != 1:
        print("rlvp-compile: error: -o takes one rule file", file=sys.stderr)
        return EXIT_USAGE
    if args.rules.count("-") > 1:
        print("rlvp-compile: error: standard input (-) can be read once", file=sys.stderr)
        return EXIT_USAGE

    if (args.manifest or args.examples != 200) and not args.check:
        print("rlvp-compile: error: --manifest and --examples go with --check", file=sys.stderr)
        return EXIT_USAGE
    if not 1 <= args.examples <= MAX_EXAMPLES:
        print(
            f"rlvp-compile: error: --examples must be between 1 and {MAX_EXAMPLES:,} (got {args.examples:,})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.check:
        if not _check_available():
            return EXIT_USAGE
        _hypothesis_home()
    if args.manifest:
        from ..manifests import ManifestError, load_manifest

        try:
            check_regular(args.manifest)
            args.loaded_manifest = load_manifest(args.manifest)
        except FileNotFoundError:
            print(f"rlvp-compile: error: manifest not found: {args.manifest}", file=sys.stderr)
            return EXIT_USAGE
        except IsADirectoryError:
            print(f"rlvp-compile: error: {args.manifest} is a directory, not a manifest file", file=sys.stderr)
            return EXIT_USAGE
        except NotARegularFile as exc:
            print(f"rlvp-compile: error: cannot read {args.manifest}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        except (ManifestError, OSError, ValueError) as exc:
            print(f"rlvp-compile: error: {exc}", file=sys.stderr)
            return EXIT_INPUT_ERRORS
    status = EXIT_OK
    all_json = []
    totals = {"passed": 0, "failed": 0, "without_tests": [], "not_run": []}
    for path in args.rules:
        if path == "-":
            text, why = _read_stdin_rules()
            source, problems = (None, []) if text is None else (True, [])
        else:
            text, why = None, ""
            source, problems = read_source(path)
        if source is None:
            if why:
                problems = [Diagnostic("RV001", why)]
            message = problems[0].message if problems else f"cannot read {path}"
            status = max(status, decided(EXIT_USAGE))
            totals["not_run"].append(path)
            if args.json:
                all_json.append({"file": path, "ok": False, "error": message, "diagnostics": [], "dropped": 0})
            else:
                print(f"rlvp-compile: error: {message}", file=sys.stderr)
            continue
        result = check_text(text, STDIN_NAME, lints=True) if path == "-" else check_file(path, lints=True)
        path = STDIN_NAME if path == "-" else path
        if not result.ok and path.lower().endswith(_DATA_SUFFIXES) and not args.json:
            print(f"rlvp-compile: error: {_not_a_rule_file(path)}", file=sys.stderr)
            status = max(status, decided(EXIT_USAGE))
            totals["not_run"].append(path)
            continue
        kept, dropped = sort_and_cap(result.diagnostics, args.max_diagnostics)
        failed = has_errors(result.diagnostics) or (args.warnings_as_errors and result.diagnostics)
        if failed:
            status = max(status, decided(EXIT_INPUT_ERRORS))
        if args.json:
            all_json.append({"file": path, "ok": result.ok, **json.loads(render_json(kept, dropped=dropped))})
        elif kept:
            print(render_text(kept, result.sources, dropped=dropped), file=sys.stderr)
        if failed:
            totals["not_run"].append(path)
            continue
        if args.check or args.test:
            if args.check:
                status = max(status, decided(_run_check(path, result.ruleset, args)))
            if args.test:
                outcomes = _run_tests(path, result.ruleset, totals, quiet=args.json)
                if args.json:
                    all_json[-1]["tests"] = outcomes
                failed_tests = sum(not o["passed"] for o in outcomes)
                status = max(status, decided(EXIT_INPUT_ERRORS if failed_tests else EXIT_OK))
            continue
        if not args.json:
            print(f"{path}: ok: {_describe(result.ruleset)}", file=sys.stderr)
        if args.emit_program or args.output:
            program_text = json_text(result.ruleset.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            if args.output:
                if not _write(args.output, program_text):
                    return EXIT_USAGE
                if not args.json:
                    print(f"{path}: wrote the compiled program (canonical JSON) to {args.output}", file=sys.stderr)
            else:
                sys.stdout.write(program_text)
    if args.json:  # always a list: one object per rule file
        print(json_text(all_json, indent=2, ensure_ascii=False))
    if args.test:
        status = max(status, _test_summary(totals, len(args.rules), sys.stderr if args.json else sys.stdout))
    return status


def _test_summary(totals: dict, files: int, out) -> int:
    """Print `N passed, M failed` (and what did not run); the exit status "no tests ran" earns.

    Like pytest (which exits 5 when it collects no test), a `--test` run that ran no test at all
    is not a success: exit 1 with ``no tests ran``. A file that could not be read (exit 2) or has
    errors (exit 1) already has its message; it is named again here only beside tests that ran.
    """
    ran = totals["passed"] + totals["failed"]
    not_run = totals["not_run"]
    if not ran and not_run:
        return EXIT_OK  # each file's error is printed; "0 passed, 0 failed" would hide it
    if not ran:
        which = ", ".join(totals["without_tests"])
        print(
            f"rlvp-compile: error: no tests ran: {which} {'has' if files == 1 else 'have'} no `test` blocks "
            "(docs/testing-rules.md)",
            file=sys.stderr,
        )
        return decided(EXIT_INPUT_ERRORS)
    line = f"{totals['passed']} passed, {totals['failed']} failed"
    if not_run:
        line += f"; not run: {', '.join(not_run)} (see the errors above)"
    print(line, file=out)
    return EXIT_OK


def _run_tests(path: str, ruleset, totals: dict, quiet: bool = False) -> list[dict]:
    """Run one file's test blocks and print PASS/FAIL lines (none when `quiet`: --json has
    them); returns each test as ``{name, location, passed, failures}``."""
    from ..compile import compile_ruleset
    from ..testing.rule_tests import run_tests

    say = (lambda *a: None) if quiet else print
    outcomes = run_tests(compile_ruleset(ruleset))
    if not outcomes:
        totals["without_tests"].append(path)
        say(f"{path}: no tests (no `test` blocks)")
    for outcome in outcomes:
        if outcome.passed:
            totals["passed"] += 1
            say(f"PASS {path}: {outcome.name}")
            continue
        totals["failed"] += 1
        say(f"FAIL {path}: {outcome.name} ({outcome.location})")
        for failure in outcome.failures:
            say(f"     {failure}")
    return [
        {"name": o.name, "location": o.location, "passed": o.passed, "failures": list(o.failures)} for o in outcomes
    ]


def _run_check(path: str, ruleset, args) -> int:
    """`--check` for one rule file: print each property's result; the exit status it earns."""
    from ..compile import compile_ruleset
    from ..testing.properties import check_program, render

    program = compile_ruleset(ruleset)
    manifest = getattr(args, "loaded_manifest", None)
    source = f"the manifest {args.manifest}" if manifest is not None else "the rule file's tool table"
    if not (manifest.tools if manifest is not None else program.tools):
        where = f"the manifest {args.manifest} declares" if manifest is not None else f"{path} declares"
        print(
            f"rlvp-compile: error: --check generates calls of known tools, and {where} none: declare tools "
            '(`tool NAME : TAGS`, `tools from "..."`) or pass --manifest MANIFEST',
            file=sys.stderr,
        )
        return EXIT_USAGE
    results = check_program(program, tools=manifest, tools_source=source, examples=args.examples)
    header = (
        f"{path}: {counted(len(program.rules), 'rule')}, episodes over {source}, "
        f"{counted(args.examples, 'example')} per property"
    )
    print(render(results, program, header))
    failed = any(r.status == "fail" or (r.status == "warn" and args.warnings_as_errors) for r in results)
    return EXIT_INPUT_ERRORS if failed else EXIT_OK


def run() -> None:
    """Run as a console script (``python -m``; the installed ``rlvp-compile`` is `rlvp_dsl.cli.compile_command`)."""
    console(main, "rlvp-compile")


if __name__ == "__main__":
    run()
