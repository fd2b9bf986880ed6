"""`rlvp-compile --test` and `--check`: a rule file's `test` blocks, and the built-in properties on
generated episodes (docs/testing-rules.md).

`prepare_check` and `load_check_manifest` make `--check` ready once per command; `run_tests` and
`run_check` act on one rule file and print its results; `print_test_summary` ends a `--test` run.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING, TextIO

from . import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE, Stop
from ..diagnostics import counted
from ..input_files import NotARegularFile, check_regular

if TYPE_CHECKING:
    from ..ir import RuleSet
    from ..manifests import Manifest
    from ..testing.rule_tests import RuleTestResult

#: The most examples per property `--check` takes: more runs for hours and finds nothing 200 do not.
MAX_EXAMPLES = 100_000

#: The examples per property `--check` takes unless `--examples` says otherwise.
DEFAULT_EXAMPLES = 200

#: What `--check` needs beyond the core install, and the one line that installs it.
CHECK_NEEDS = "hypothesis"
CHECK_INSTALL = "pip install 'hypothesis>=6.100'"


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    """How `--check` generates episodes: over `manifest`'s tools (read from `manifest_path`), or the
    rule file's own tool table when None; `examples` per property; `warnings_as_errors`: a ``warn``
    result fails the file too."""

    manifest: Manifest | None
    manifest_path: str | None
    examples: int
    warnings_as_errors: bool


@dataclasses.dataclass
class RuleTestTally:
    """What a `--test` run has run so far, over its rule files: tests `passed` and `failed`, the
    files `without_tests` (no `test` block) and the files `not_run` (unreadable, or with errors)."""

    passed: int = 0
    failed: int = 0
    without_tests: list[str] = dataclasses.field(default_factory=list)
    not_run: list[str] = dataclasses.field(default_factory=list)


def prepare_check() -> None:
    """Make `--check` ready: hypothesis installed, its cache out of the user's folder (`_hypothesis_home`).

    Raises:
        Stop: hypothesis is not installed (exit 2; the message says how to install it).
    """
    import importlib.util

    if importlib.util.find_spec(CHECK_NEEDS) is None:
        raise Stop(EXIT_USAGE, f"--check needs {CHECK_NEEDS}, which is not installed; install it with: {CHECK_INSTALL}")
    _hypothesis_home()


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


def load_check_manifest(path: str) -> Manifest:
    """The manifest of `--check --manifest PATH`.

    Raises:
        Stop: exit 2 when `path` is missing, a folder or not a regular file; exit 1 when it is no
            manifest (or cannot be read).
    """
    from ..manifests import ManifestError, load_manifest

    try:
        check_regular(path)
        return load_manifest(path)
    except FileNotFoundError:
        raise Stop(EXIT_USAGE, f"manifest not found: {path}") from None
    except IsADirectoryError:
        raise Stop(EXIT_USAGE, f"{path} is a directory, not a manifest file") from None
    except NotARegularFile as exc:
        raise Stop(EXIT_USAGE, f"cannot read {path}: {exc.strerror}") from None
    except (ManifestError, OSError, ValueError) as exc:
        raise Stop(EXIT_INPUT_ERRORS, str(exc)) from None


def run_tests(path: str, ruleset: RuleSet, tally: RuleTestTally, *, quiet: bool = False) -> list[RuleTestResult]:
    """Run one rule file's `test` blocks, count them in `tally` and print a PASS or FAIL line for
    each (none when `quiet`: ``--json`` holds them); each test's result."""
    from ..compile import compile_ruleset
    from ..testing.rule_tests import run_tests as run_test_blocks

    results = run_test_blocks(compile_ruleset(ruleset))
    if not results:
        tally.without_tests.append(path)
    lines = [f"{path}: no tests (no `test` blocks)"] if not results else []
    for result in results:
        if result.passed:
            tally.passed += 1
            lines.append(f"PASS {path}: {result.name}")
            continue
        tally.failed += 1
        lines.append(f"FAIL {path}: {result.name} ({result.location})")
        lines += [f"     {failure}" for failure in result.failures]
    if not quiet:
        for line in lines:
            print(line)
    return results


def rule_test_json(result: RuleTestResult) -> dict[str, object]:
    """One test's result in ``--test --json``: ``{name, location, passed, failures}``."""
    return {
        "name": result.name,
        "location": result.location,
        "passed": result.passed,
        "failures": list(result.failures),
    }


def print_test_summary(tally: RuleTestTally, files: int, out: TextIO) -> int:
    """Print `N passed, M failed` (and what did not run) to `out`; the exit status "no tests ran" earns.

    Like pytest (which exits 5 when it collects no test), a `--test` run that ran no test at all
    is not a success: exit 1 with ``no tests ran``. A file that could not be read (exit 2) or has
    errors (exit 1) already has its message; it is named again here only beside tests that ran.
    """
    ran = tally.passed + tally.failed
    if not ran and tally.not_run:
        return EXIT_OK  # each file's error is printed; "0 passed, 0 failed" would hide it
    if not ran:
        which = ", ".join(tally.without_tests)
        print(
            f"rlvp-compile: error: no tests ran: {which} {'has' if files == 1 else 'have'} no `test` blocks "
            "(docs/testing-rules.md)",
            file=sys.stderr,
        )
        return EXIT_INPUT_ERRORS
    line = f"{tally.passed} passed, {tally.failed} failed"
    if tally.not_run:
        line += f"; not run: {', '.join(tally.not_run)} (see the errors above)"
    print(line, file=out)
    return EXIT_OK


def run_check(path: str, ruleset: RuleSet, settings: CheckSettings) -> int:
    """`--check` for one rule file: print each property's result; the exit status it earns (2 when
    there are no tools to generate calls of, said here)."""
    from ..compile import compile_ruleset
    from ..testing.properties import check_program, render

    program = compile_ruleset(ruleset)
    manifest = settings.manifest
    source = f"the manifest {settings.manifest_path}" if manifest is not None else "the rule file's tool table"
    if not (manifest.tools if manifest is not None else program.tools):
        where = f"the manifest {settings.manifest_path} declares" if manifest is not None else f"{path} declares"
        print(
            f"rlvp-compile: error: --check generates calls of known tools, and {where} none: declare tools "
            '(`tool NAME : TAGS`, `tools from "..."`) or pass --manifest MANIFEST',
            file=sys.stderr,
        )
        return EXIT_USAGE
    results = check_program(program, tools=manifest, tools_source=source, examples=settings.examples)
    header = (
        f"{path}: {counted(len(program.rules), 'rule')}, episodes over {source}, "
        f"{counted(settings.examples, 'example')} per property"
    )
    print(render(results, program, header))
    failed = any(r.status == "fail" or (r.status == "warn" and settings.warnings_as_errors) for r in results)
    return EXIT_INPUT_ERRORS if failed else EXIT_OK
