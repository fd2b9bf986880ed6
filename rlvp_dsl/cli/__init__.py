"""Command-line tools: `rlvp-compile` and `rlvp-score` (thin layers over the library).

The exit codes of all three CLIs (`rlvp-train` too), as ruff and ty use them: 0 ok,
1 the input has errors, 2 usage or I/O error; 130 interrupted (Ctrl-C), as shells do.
"""

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


def whole_number(minimum: int | None = None):
    """An argparse ``type=`` for whole numbers of at least `minimum`: a bad value is a usage
    error naming the flag (``--steps: must be at least 1 (got 0)``), never a traceback."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {value})")
        return value

    return parse


def nonempty(what: str = "a path"):
    """An argparse ``type=`` refusing an empty value (``-o ""``, ``--csv ""``): a usage error naming
    the flag (``--csv: needs a path (got an empty one)``), not an option silently not given."""
    import argparse

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"needs {what} (got an empty one)")
        return text

    return parse


def json_text(value, **kwargs) -> str:
    """`json.dumps` that always writes valid JSON: a NaN or infinite number (an outcome
    read as NaN, a correlation of a constant column) becomes ``null``."""
    import json
    import math

    def finite(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(value), allow_nan=False, **kwargs)

def clobbers_input(path: str, inputs) -> str:
    """The input that writing `path` would overwrite (a rule file, a manifest, a trajectory, or a
    trajectory file inside an input folder), or "" when none: `--csv run.jsonl` must not
    replace the run it scores."""
    import os

    if path == "-" or not os.path.isfile(path):
        return ""
    target = os.path.realpath(path)
    for item in inputs:
        if item in (None, "-") or not os.path.exists(item):
            continue
        if os.path.isfile(item) and os.path.samefile(item, path):
            return item
        if os.path.isdir(item) and target.startswith(os.path.realpath(item) + os.sep) \
                and target.lower().endswith((".json", ".jsonl", ".ndjson", ".traj", ".rlvp")):
            return path
    return ""


def write_output(prog: str, path: str, text: str) -> bool:
    """Write an output file, making its missing parent folders; on failure print one line
    (``prog: error: cannot write PATH: REASON``, naming a parent that is a file) and return False."""
    import os
    import sys

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


#: The worst exit status a command has decided so far; `console` uses it when a closed
#: pipe interrupts the output, so `rlvp-compile bad.rlvp | head` still exits 1.
_decided = [EXIT_OK]


def decided(code: int) -> int:
    """Record an exit status the command has decided (the worst one wins); returns `code`."""
    _decided[0] = max(_decided[0], code)
    return code


def console(main) -> None:
    """Run a CLI `main() -> exit code` as a console script: a closed pipe (`| head`) ends
    quietly, Ctrl-C exits 130, and the exit code is the process's."""
    import os
    import sys

    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        code = _decided[0]
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    sys.exit(code)
