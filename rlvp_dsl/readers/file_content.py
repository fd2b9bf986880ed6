"""A trajectory file's content, before any format reads it: its bytes (a file, or standard input
``-``), decoded and parsed as one JSON document or as JSONL (`load`).  A JSONL file with lines that
are not UTF-8 is still read: those lines are marked, and each is a record error of its own
(docs/readers.md, "Bad input"); any other file that is not UTF-8 is one error.  Used by
`rlvp_dsl.readers.loading`, which detects the format and dispatches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rlvp_dsl.input_files import read_input_bytes, read_stdin_bytes
from rlvp_dsl.source import undecodable

from .errors import ReaderError, load_json_text
from .json_text import NOT_PARSED, fast_loads_bytes, loads

#: Endings that always mean one JSON document per line.
JSONL_SUFFIXES = (".jsonl", ".ndjson")
#: The path that names standard input, and the name its episodes and errors carry.
STDIN = "-"
STDIN_NAME = "<stdin>"


def _read_bytes(path: Path, file: str) -> bytes:
    try:
        if file == STDIN:
            return read_stdin_bytes()
        return read_input_bytes(path)
    except OSError as exc:
        raise ReaderError(shown(file), detail=f"cannot read: {exc.strerror or exc}") from None


def _not_utf8(data: bytes, file: str, exc: UnicodeDecodeError) -> ReaderError:
    """The error of a file that is not UTF-8 text (saying so when it is compressed)."""
    hint = f" -- it is {_packed(data)}-compressed: decompress it first" if _packed(data) else ""
    return ReaderError(shown(file), detail=f"not UTF-8 text: {undecodable(exc)}{hint}")


def _packed(data: bytes) -> str:
    """The compression whose magic bytes start `data` (``gzip``, ...), or ""."""
    return {b"\x1f\x8b": "gzip", b"PK": "zip", b"BZ": "bzip2", b"\xfd7": "xz"}.get(data[:2], "")


def _escaped(data: bytes) -> str:
    """`data` (a BOM dropped) as text whose bytes that are not UTF-8 are kept as lone surrogates
    (``surrogateescape``): a JSONL file whose bad lines are each a record error
    (`rlvp_dsl.readers.openai_chat.read_openai_jsonl`), the other lines read."""
    return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="surrogateescape")


def shown(file: str) -> str:
    """The name `file` is shown by: ``<stdin>`` for ``-``."""
    return STDIN_NAME if file == STDIN else file


def _looks_like_jsonl(text: str) -> bool:
    """Text that is not one JSON document but whose first non-blank line is a JSON object or array."""
    for line in text.splitlines():
        if line.strip():
            try:
                return isinstance(loads(line), (dict, list))
            except ValueError:
                return False
    return False


@attrs.frozen
class Loaded:
    """A file's content: its `text` (``""`` when orjson parsed the bytes directly: only JSONL needs
    it), its parsed JSON `data` (None for JSONL), whether it is `jsonl`, and whether that text has
    `undecodable` lines (bytes that are not UTF-8, kept as lone surrogates: each such line is a
    record error)."""

    text: str
    data: Any
    jsonl: bool
    undecodable: bool = False


def load(path: Path, file: str) -> Loaded:
    """Read and parse one file (`Loaded`).  A JSONL file with lines that are not UTF-8 is read,
    those lines marked (docs/readers.md, "Bad input": a bad record, not the file); any other
    file that is not UTF-8 is an error.

    Raises:
        ReaderError: the file cannot be read, is empty, is not valid JSON nor JSONL, or is not
            UTF-8 text (and not JSONL).
    """
    data = _read_bytes(path, file)
    if path.suffix.lower() in JSONL_SUFFIXES and file != STDIN:
        try:
            return Loaded(data.decode("utf-8-sig"), None, True)
        except UnicodeDecodeError as exc:
            if _packed(data):
                raise _not_utf8(data, file, exc) from None
            return Loaded(_escaped(data), None, True, undecodable=True)
    parsed = fast_loads_bytes(data)
    if parsed is not NOT_PARSED:
        return Loaded("", parsed, False)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _undecodable_jsonl(data, file, exc)
    if not text.strip():
        raise ReaderError(shown(file), detail="the file is empty (expected a trajectory: JSON or JSONL)")
    try:
        return Loaded(text, load_json_text(text, shown(file)), False)
    except ReaderError:
        if _looks_like_jsonl(text):
            return Loaded(text, None, True)
        raise


def _undecodable_jsonl(data: bytes, file: str, exc: UnicodeDecodeError) -> Loaded:
    """A file (not named ``.jsonl``, or standard input) that is not UTF-8: JSONL with undecodable
    lines when it is JSONL (not one JSON document, its first line a JSON object or array), else
    the file's error.

    Raises:
        ReaderError: the file is not UTF-8 text and not JSONL (or compressed).
    """
    if not _packed(data):
        text = _escaped(data)
        try:
            load_json_text(text, shown(file))
        except ReaderError:
            if _looks_like_jsonl(text):
                return Loaded(text, None, True, undecodable=True)
    raise _not_utf8(data, file, exc) from None
