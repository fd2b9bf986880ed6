"""The pipeline as functions: read -> parse -> check -> compile.

`check_file` / `check_text` return everything a tool needs (rule set, diagnostics,
sources); `load_program` / `loads` are the strict versions that raise `RuleError`.

`load_program` (and `check_file`/`check_text` with ``cache=True``) keeps an error-free
check in the user's cache folder and reuses it while no input changed (`rlvp_dsl.check_cache`):
a hit imports neither lark nor the checker.  The stages are imported when a check runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import attrs

from .diagnostics import Diagnostic, RuleError, has_errors
from .ir import RuleSet
from .source import SourceFile

if TYPE_CHECKING:
    from .compile import Program
    from .loader import Parse


@attrs.frozen
class CheckResult:
    """The outcome of checking one rule file (and its includes)."""

    ruleset: RuleSet | None
    diagnostics: list[Diagnostic]
    sources: dict[str, SourceFile]

    @property
    def ok(self) -> bool:
        return self.ruleset is not None and not has_errors(self.diagnostics)


def _check(
    path: str,
    text: str | None,
    lints: bool,
    parse: Parse | None = None,
    cache: bool = False,
    overlay: Mapping[str, str] | None = None,
) -> CheckResult:
    cache = cache and parse is None and not overlay  # the language server's checks are never cached
    if cache:
        from . import check_cache

        hit = check_cache.lookup(path, text, lints)
        if hit is not None:
            return CheckResult(*hit)
    from .check import check
    from .loader import load_files, load_manifests

    files, sources, diagnostics = load_files(path, text=text, parse=parse, overlay=overlay)
    if has_errors(diagnostics):
        return CheckResult(None, diagnostics, sources)
    read_first = check_cache.manifest_inputs(files) if cache else []
    manifests, problems = load_manifests(files)
    ruleset, checked = check(files, manifests)
    problems = problems + checked
    if lints and not has_errors(problems):
        from .lints import lint
        from .usage_lints import usage_lint

        problems = problems + lint(ruleset) + usage_lint(ruleset, path)  # warnings RV3xx (lints.py, usage_lints.py)
    result = CheckResult(ruleset, diagnostics + problems, sources)
    if cache and result.ok:
        check_cache.store(path, text, lints, (ruleset, result.diagnostics, sources), read_first)
    return result


def check_file(path: str, *, lints: bool = False, cache: bool = False) -> CheckResult:
    """Parse and check a rule file and its includes; never raises for bad input.

    With `lints`, a file without errors is also linted (`rlvp_dsl.lints` and
    `rlvp_dsl.usage_lints`: RV3xx warnings, as `rlvp-compile` shows them).  With `cache`, an
    error-free result is kept in (and taken from) the user's cache folder (`rlvp_dsl.check_cache`):
    equal to the check's, diagnostics included."""
    return _check(path, None, lints, cache=cache)


def check_text(
    text: str,
    path: str = "<string>",
    *,
    lints: bool = False,
    parse: Parse | None = None,
    cache: bool = False,
    overlay: Mapping[str, str] | None = None,
) -> CheckResult:
    """Like `check_file` for text in memory (includes resolve relative to `path`; `parse` and
    `overlay` -- included files' texts used instead of the disk's --: see
    `rlvp_dsl.loader.load_files`; `cache` is ignored with either).

    Raises:
        TypeError: `text` is not a string (bytes: decode them first).
    """
    if not isinstance(text, str):
        raise TypeError(
            f"rule text must be a string (got {type(text).__name__}); "
            "for a file, call check_file(path) or load_program(path)"
        )
    return _check(path, text, lints, parse, cache, overlay)


def _program(result: CheckResult) -> Program:
    if not result.ok:
        raise RuleError(result.diagnostics, result.sources)
    assert result.ruleset is not None  # a file checked without errors has its rule set
    from .compile import compile_ruleset

    return compile_ruleset(result.ruleset)


def load_program(path: str) -> Program:
    """Read, check and compile a rule file (the check taken from the cache when no input changed:
    `rlvp_dsl.check_cache`).

    Raises:
        RuleError: the file (or an include) has errors; ``str(err)`` renders them.
    """
    return _program(check_file(path, cache=True))


def loads(text: str, path: str = "<string>") -> Program:
    """Check and compile rule text.  Not cached: the caller holds the text already, and generated
    texts (tests, tools) would fill the cache folder; ``check_text(text, path, cache=True)`` caches it.

    Raises:
        RuleError: the text has errors.
        TypeError: `text` is not a string.
    """
    return _program(check_text(text, path))
