"""The pipeline as functions: read -> parse -> check -> compile.

`check_file` / `check_text` return everything a tool needs (rule set, diagnostics,
sources); `load_program` / `loads` are the strict versions that raise `RuleError`.
"""

from __future__ import annotations

import attrs

from .check import check
from .compile import Program, compile_ruleset
from .diagnostics import Diagnostic, RuleError, has_errors
from .ir import RuleSet
from .lints import lint
from .loader import Parse, load_files, load_manifests
from .source import SourceFile
from .usage_lints import usage_lint


@attrs.frozen
class CheckResult:
    """The outcome of checking one rule file (and its includes)."""

    ruleset: RuleSet | None
    diagnostics: list[Diagnostic]
    sources: dict[str, SourceFile]

    @property
    def ok(self) -> bool:
        return self.ruleset is not None and not has_errors(self.diagnostics)


def _check(path: str, text: str | None, lints: bool, parse: Parse | None = None) -> CheckResult:
    files, sources, diagnostics = load_files(path, text=text, parse=parse)
    if has_errors(diagnostics):
        return CheckResult(None, diagnostics, sources)
    manifests, problems = load_manifests(files)
    ruleset, checked = check(files, manifests)
    problems = problems + checked
    if lints and not has_errors(problems):
        problems = problems + lint(ruleset) + usage_lint(ruleset, path)  # warnings RV3xx (lints.py, usage_lints.py)
    return CheckResult(ruleset, diagnostics + problems, sources)


def check_file(path: str, *, lints: bool = False) -> CheckResult:
    """Parse and check a rule file and its includes; never raises for bad input.

    With `lints`, a file without errors is also linted (`rlvp_dsl.lints` and
    `rlvp_dsl.usage_lints`: RV3xx warnings, as `rlvp-compile` shows them)."""
    return _check(path, None, lints)


def check_text(text: str, path: str = "<string>", *, lints: bool = False, parse: Parse | None = None) -> CheckResult:
    """Like `check_file` for text in memory (includes resolve relative to `path`; `parse`: see
    `rlvp_dsl.loader.load_files`).

    Raises:
        TypeError: `text` is not a string (bytes: decode them first).
    """
    if not isinstance(text, str):
        raise TypeError(
            f"rule text must be a string (got {type(text).__name__}); "
            "for a file, call check_file(path) or load_program(path)"
        )
    return _check(path, text, lints, parse)


def _program(result: CheckResult) -> Program:
    if not result.ok:
        raise RuleError(result.diagnostics, result.sources)
    assert result.ruleset is not None  # a file checked without errors has its rule set
    return compile_ruleset(result.ruleset)


def load_program(path: str) -> Program:
    """Read, check and compile a rule file.

    Raises:
        RuleError: the file (or an include) has errors; ``str(err)`` renders them.
    """
    return _program(check_file(path))


def loads(text: str, path: str = "<string>") -> Program:
    """Check and compile rule text.

    Raises:
        RuleError: the text has errors.
        TypeError: `text` is not a string.
    """
    return _program(check_text(text, path))
