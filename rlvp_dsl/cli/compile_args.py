"""rlvp-compile's command line: its options (`parser`, read into `CompileArgs`) and the mistakes
among them, refused before anything is read (`usage_problem` for every mode, `rule_files_problem`
for the rule files' mode)."""

from __future__ import annotations

import argparse
import dataclasses

from .options import ArgumentParser
from . import clobbers_input, nonempty, version_text, whole_number
from .rule_testing import DEFAULT_EXAMPLES, MAX_EXAMPLES
from ..diagnostics import MAX_PER_FILE


@dataclasses.dataclass(frozen=True)
class CompileArgs:
    """rlvp-compile's command line as `parser` reads it: one field per option (see its help)."""

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
    fmt: bool


def parser() -> argparse.ArgumentParser:
    """rlvp-compile's options (their names are `CompileArgs`'s fields)."""
    p = ArgumentParser(
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
        "deterministic) on generated episodes; exit 1 when one fails (docs/testing-rules.md). "
        "With --fmt: check the layout only, write nothing, print a diff of each file not formatted "
        "and exit 1 when there is one",
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
    p.add_argument(
        "--fmt",
        action="store_true",
        help="rewrite the rule files in the canonical layout, in place, comments kept (only a file whose "
        "text changes is written); - prints standard input formatted; a file that does not parse is "
        "left untouched (exit 2). See docs/language.md, Formatting",
    )
    return p


def usage_problem(args: CompileArgs) -> str:
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


def _first_given(flags: tuple[tuple[str, object], ...]) -> str | None:
    """The first flag of ``(flag, given)`` pairs that was given, else None."""
    return next((flag for flag, given in flags if given), None)


def _conflict(args: CompileArgs) -> str:
    """A flag that does nothing in this mode (so the user's intent would be silently dropped), or ""."""
    if args.fmt:
        flag = _first_given(
            (
                ("--auto-from-tags", args.auto_from_tags),
                ("--emit-program", args.emit_program),
                ("-o", args.output),
                ("--json", args.json),
                ("--test", args.test),
                ("--warnings-as-errors", args.warnings_as_errors),
                ("--manifest", args.manifest),
                ("--examples", args.examples != DEFAULT_EXAMPLES),
            )
        )
        if flag:
            return (
                f"{flag} does not go with --fmt (it rewrites the layout of rule files; "
                "--fmt --check checks the layout only)"
            )
        return ""
    if args.auto_from_tags:
        flag = _first_given(
            (
                ("--emit-program", args.emit_program),
                ("--json", args.json),
                ("--test", args.test),
                ("--check", args.check),
                ("--warnings-as-errors", args.warnings_as_errors),
                ("--max-diagnostics", args.max_diagnostics != MAX_PER_FILE),
            )
        )
        if flag:
            return (
                f"{flag} does not go with --auto-from-tags (it writes rules; check them afterwards with "
                "rlvp-compile RULES.rlvp)"
            )
        return ""
    if (args.test or args.check) and (args.emit_program or args.output):
        flag = "--emit-program" if args.emit_program else "-o"
        return f"{flag} writes the compiled program: it does not go with --test or --check (run them apart)"
    if args.check and args.json:
        return "--check prints a text report: it does not go with --json"
    return ""


def rule_files_problem(args: CompileArgs) -> str:
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
