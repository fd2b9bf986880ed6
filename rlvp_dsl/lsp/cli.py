"""`rlvp-lsp`'s command line: ``rlvp-lsp [--stdio]`` serves the language server protocol over
standard input and output until the editor says exit.  Exit status 0 when the editor ends the
session (``shutdown``, ``exit``), 1 when it exits without ``shutdown``, 2 for a usage error or a
missing pygls (the extra ``lsp``)."""

from __future__ import annotations

import argparse
import logging
import sys

from ..cli import EXIT_OK, EXIT_USAGE, version_text
from ..cli.options import ArgumentParser

#: The exit status of a session the client ended without ``shutdown`` (the protocol's rule).
EXIT_ENDED = 1

#: What to run when pygls is not installed.
INSTALL_HINT = "pip install 'rlvp[lsp]'  (pygls 2.1 and lsprotocol)"


#: The libraries of the extra ``lsp``: an import error naming one of them means the extra is missing.
_SERVER_LIBRARIES = frozenset({"pygls", "lsprotocol", "cattrs"})


def parser() -> argparse.ArgumentParser:
    """The argument parser: ``--stdio`` (the default, and the only transport)."""
    p = ArgumentParser(
        prog="rlvp-lsp",
        description="Language server for .rlvp rule files (diagnostics, hover, definitions, references, "
        "completion, outline, quick fixes, formatting), over standard input and output. See docs/lsp.md.",
    )
    p.add_argument("--stdio", action="store_true", help="talk over standard input/output (the default)")
    p.add_argument("--version", action="version", version=version_text("rlvp-lsp"))
    return p


class OneLineFormatter(logging.Formatter):
    """A log record as one line on standard error, ``rlvp-lsp: warning: MESSAGE (ValueError: ...)``:
    a message the client sent that pygls cannot read is the client's mistake, told in a line, never
    a traceback (a message of several lines, as pygls's "Unable to deserialize message" and its
    traceback, keeps its first)."""

    def format(self, record: logging.LogRecord) -> str:
        text = (record.getMessage().splitlines() or [""])[0]
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        return f"rlvp-lsp: {record.levelname.lower()}: {text}"


def _one_line_logging() -> None:
    """Warnings and errors of the server and of pygls, one line each on standard error."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Run the server until the client exits; the exit status: 0 after the client's ``shutdown`` then
    ``exit``, 1 for an ``exit`` without ``shutdown`` (or the client gone), 2 when pygls is missing."""
    parser().parse_args(argv)
    _one_line_logging()
    try:
        from .server import serve
    except ImportError as exc:
        library = (exc.name or "").split(".")[0]
        if library not in _SERVER_LIBRARIES:
            raise  # a bug of ours, not a missing extra
        print(f"rlvp-lsp: error: {library} is not installed: {INSTALL_HINT}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if serve() else EXIT_ENDED
