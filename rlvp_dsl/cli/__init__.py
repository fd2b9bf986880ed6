"""Command-line tools: `rlvp-compile` and `rlvp-score` (thin layers over the library).

The exit codes of all three CLIs (`rlvp-train` too), as ruff and ty use them: 0 ok,
1 the input has errors, 2 usage or I/O error; 130 interrupted (Ctrl-C), as shells do.

* ``compile.py`` -- `rlvp-compile`'s main and the rule files' mode; ``compile_args.py`` its
  options and their contradictions; ``auto_from_tags.py`` --auto-from-tags; ``rule_testing.py``
  --test and --check.
* ``score.py`` -- `rlvp-score`'s main: options, rule file, trajectories; ``score_notes.py`` the
  domains and the notes on the data; ``score_output.py`` what it prints and writes.
* here -- what the commands share: exit codes, argparse types, `json_text`, `write_output`,
  `Stop` (an error that ends a command), the guarded streams and the console-script entry.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO, TypeVar

_T = TypeVar("_T")

EXIT_OK = 0
EXIT_INPUT_ERRORS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def package_version() -> str:
    """The installed version of the ``rlvp`` distribution (``--version`` of all three CLIs);
    ``"unknown"`` when run from a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlvp")
    except PackageNotFoundError:
        return "unknown (not installed)"


def version_text(prog: str) -> str:
    """``rlvp-compile 0.1.0 (Python 3.11.9)``: what ``--version`` prints."""
    import platform

    return f"{prog} {package_version()} (Python {platform.python_version()})"


def whole_number(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=`` for whole numbers of at least `minimum` (and at most `maximum`): a bad
    value is a usage error naming the flag (``--steps: must be at least 1 (got 0)``), never a traceback."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {value})")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum} (got {value})")
        return value

    return parse


def nonempty(what: str = "a path") -> Callable[[str], str]:
    """An argparse ``type=`` refusing an empty value (``-o ""``, ``--csv ""``): a usage error naming
    the flag (``--csv: needs a path (got an empty one)``), not an option silently not given."""
    import argparse

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"needs {what} (got an empty one)")
        return text

    return parse


def json_text(value: object, *, indent: int | None = None, sort_keys: bool = False, ensure_ascii: bool = True) -> str:
    """`json.dumps` that always writes valid JSON: a NaN or infinite number (an outcome
    read as NaN, a correlation of a constant column) becomes ``null``; tuples are written as lists."""
    import json
    import math

    def finite(v: object) -> object:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(value), allow_nan=False, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


class Stop(Exception):
    """Ends a command early with exit status `code`, after one line ``PROG: error: MESSAGE`` on
    standard error (printed by `stopped`; none when `message` is empty: what had to be said is said)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def refuse(problem: str) -> None:
    """Raise `Stop` (exit 2: a usage error) with `problem`; nothing when it is ""."""
    if problem:
        raise Stop(EXIT_USAGE, problem)


def stopped(prog: str, stop: Stop) -> int:
    """Print `stop`'s message as ``PROG: error: MESSAGE`` (when it has one); its exit status."""
    if stop.message:
        print(f"{prog}: error: {stop.message}", file=sys.stderr)
    return stop.code


def clobbers_input(path: str, inputs: Iterable[str | None]) -> str:
    """The input that writing `path` would overwrite (a rule file, a manifest, a trajectory, or a
    trajectory file inside an input folder), or "" when none: `--csv run.jsonl` must not
    replace the run it scores."""
    if path == "-" or not os.path.isfile(path):
        return ""
    target = os.path.realpath(path)
    for item in inputs:
        if item in (None, "-") or not os.path.exists(item):
            continue
        if os.path.isfile(item) and os.path.samefile(item, path):
            return item
        if (
            os.path.isdir(item)
            and target.startswith(os.path.realpath(item) + os.sep)
            and target.lower().endswith((".json", ".jsonl", ".ndjson", ".traj", ".rlvp"))
        ):
            return path
    return ""


def write_output(prog: str, path: str, text: str) -> bool:
    """Write an output file, making its missing parent folders; on failure print one line
    (``prog: error: cannot write PATH: REASON``, naming a parent that is a file) and return False."""
    try:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        parent = os.path.dirname(path)
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and os.path.exists(parent) and not os.path.isdir(parent):
            reason = f"{parent} is a file, not a folder"
        print(f"{prog}: error: cannot write {path}: {reason}", file=sys.stderr)
        return False
    return True


class GuardedStream:
    """Standard output or error, as a command writes it, such that a closed pipe (``| head``) or a full
    device (``> /dev/full``) ends no command half-way: the first failed write is remembered (`lost`:
    the error), the stream's descriptor then points to /dev/null, and the command goes on, so the
    files it writes (``-o``, ``--csv``, ``--html``) are still written.  Everything else is the
    wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.lost: OSError | None = None

    def _guard(self, action: Callable[..., _T], *args: object) -> _T | None:
        if self.lost is not None:
            return None
        try:
            return action(*args)
        except OSError as exc:  # BrokenPipeError, ENOSPC, EIO
            self.lost = exc
            try:
                fd = self._stream.fileno()
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)  # what is still buffered goes nowhere, and exit flushes quietly
                os.close(devnull)
            except (OSError, ValueError, AttributeError):
                pass
            return None

    def write(self, text: str) -> int:
        self._guard(self._stream.write, text)
        return len(text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def __getattr__(self, name: str) -> Any:  # the wrapped stream's attributes, whatever their types
        return getattr(self._stream, name)


def console(main: Callable[[], int | None], prog: str = "rlvp") -> None:
    """Run a CLI `main() -> exit code` as a console script, with its standard streams guarded
    (`GuardedStream`): output is flushed and checked before exit; a closed pipe (`| head`) ends
    quietly with the command's own status; a write error on standard output (a full disk) is one
    line on standard error and exit 2, never exit 0 with the output cut short; Ctrl-C exits 130
    quietly."""
    out, err = GuardedStream(sys.stdout), GuardedStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        code = main()
    except SystemExit as exc:  # argparse's --help, --version and usage errors
        code = exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    code = EXIT_OK if code is None else code
    out.flush()
    err.flush()
    if out.lost is not None and not isinstance(out.lost, BrokenPipeError):
        print(f"{prog}: error: cannot write to standard output: {out.lost.strerror or out.lost}", file=sys.stderr)
        err.flush()
        code = max(code, EXIT_USAGE)
    sys.exit(code)


def launch(module: str, prog: str) -> None:
    """A console script: import the command's `module` (``rlvp_dsl.cli.compile``) and run its
    ``main`` under `console`.  The import happens here, so Ctrl-C while the command's libraries
    load (lark, torch: seconds on a busy machine) exits 130 quietly, as it does later."""
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    console(main, prog)


def compile_command() -> None:
    """The ``rlvp-compile`` console script."""
    launch("rlvp_dsl.cli.compile", "rlvp-compile")


def score_command() -> None:
    """The ``rlvp-score`` console script."""
    launch("rlvp_dsl.cli.score", "rlvp-score")
