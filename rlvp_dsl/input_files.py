"""Opening a user's input file (a rule file, a trajectory, a manifest, a training config):
only regular files are read.

A device (``/dev/zero``, ``/dev/urandom``) never ends, so reading it grows memory without
bound; a FIFO (``mkfifo``, ``/dev/stdin`` of a pipe) blocks until a writer comes; a socket
cannot be opened.  `check_regular` refuses all three before the file is opened, with one
`NotARegularFile` (an `OSError`, so the callers' ``except OSError`` names the path and
``strerror``).  Standard input stays available to the commands as ``-`` (a file, a pipe or a
terminal; `read_stdin_bytes` refuses a device redirected there, ``- < /dev/zero``).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO, TextIO

#: What a path that is not a regular file is, by its mode (the name the error gives).
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


class NotARegularFile(OSError):
    """`path` is a device, a FIFO or a socket: reading it would never end, or block.

    ``strerror`` says what it is and what to give instead; ``filename`` is the path."""


def check_regular(path: str | os.PathLike[str], *, stdin: bool = True) -> None:
    """Raise `NotARegularFile` when `path` exists and is neither a regular file nor a folder
    (a missing path or a folder is left to ``open``, which names it as before); `stdin`: the
    message points to ``-`` (where the command reads standard input).

    Raises:
        NotARegularFile: a character or block device, a FIFO, or a socket.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing, or no permission: open() says which
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    instead = "give a file, or - to read standard input" if stdin else "give a regular file"
    raise NotARegularFile(errno.EINVAL, f"{kind}, not a regular file: {instead}", os.fspath(path))


def read_input_bytes(path: str | os.PathLike[str], *, stdin: bool = True) -> bytes:
    """The bytes of the regular file `path` (`stdin`: as in `check_regular`).

    Raises:
        NotARegularFile: `path` is a device, a FIFO or a socket (see `check_regular`).
        OSError: the file cannot be read (FileNotFoundError, IsADirectoryError, ...).
    """
    check_regular(path, stdin=stdin)
    with open(path, "rb") as handle:
        return handle.read()


def _is_null(fd: int) -> bool:
    """Whether descriptor `fd` is ``/dev/null`` (a device that ends at once: empty input)."""
    try:
        return os.fstat(fd).st_rdev == os.stat(os.devnull).st_rdev
    except OSError:
        return False


def read_stdin_bytes(stream: TextIO | BinaryIO | None = None) -> bytes:
    """All of standard input (`stream`, default ``sys.stdin``) as bytes.

    Raises:
        NotARegularFile: standard input is a device other than a terminal or ``/dev/null``
            (``< /dev/zero``: it would never end); its ``filename`` is ``<stdin>``.
    """
    import sys

    stream = sys.stdin if stream is None else stream
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's stand-in): read it
        fd, mode = None, 0
    if fd is not None and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and not os.isatty(fd) and not _is_null(fd):
        raise NotARegularFile(
            errno.EINVAL,
            "standard input is a device (such as /dev/zero), not a file, a pipe or "
            "a terminal: reading it would never end",
            "<stdin>",
        )
    if hasattr(stream, "buffer"):
        return stream.buffer.read()
    data = stream.read()  # a binary stream gives bytes, a text one str
    return data if isinstance(data, bytes) else data.encode("utf-8")
