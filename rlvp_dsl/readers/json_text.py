"""Parsing a trajectory file's JSON: orjson when it is installed (the ``fast`` extra), json
otherwise, with the same values and the same error messages either way (docs/readers.md,
"Speed: orjson").  `rlvp_dsl.readers.errors.load_json_text` turns a syntax error into a
`ReaderError` at ``file:line:col`` with `json_problem`'s sentence.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:  # optional (the `fast` extra): about twice as fast as json on trajectory files
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None  # type: ignore[assignment]  # (absent without the `fast` extra: json is used)


#: The deepest nesting of arrays and objects a trajectory value may have (real trajectories nest
#: about ten levels).  Deeper values are refused where they are read: the code that handles
#: them (the scorer, the reports, json itself) recurses once per level, and Python's stack holds
#: about a thousand levels (docs/readers.md, "Limits").
MAX_DEPTH = 200

#: Strings and brackets, for `_depth_offset` (a string may hold brackets that do not count).
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class JSONTooDeep(json.JSONDecodeError):
    """JSON whose arrays and objects nest more than `MAX_DEPTH` levels; ``pos`` (``lineno``,
    ``colno``) is where that level opens.  A `json.JSONDecodeError`, so every caller that names
    a syntax error at ``file:line:col`` names this one the same way."""


def _depth_offset(text: str, limit: int = MAX_DEPTH) -> int:
    """The offset of the bracket that opens nesting level ``limit + 1`` in `text` (0 if none is found)."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif token in "]}":
            depth -= 1
    return 0


def too_deep(text: str | bytes) -> JSONTooDeep:
    """The `JSONTooDeep` error for `text`, placed where nesting passes `MAX_DEPTH`."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", errors="replace")
    return JSONTooDeep(f"arrays and objects nested more than {MAX_DEPTH} levels deep", text, _depth_offset(text))


def nested_too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Where parsed JSON `value` nests deeper than `limit` levels (``messages[0].content[0]``, cut
    to its first few steps), or None: an iterative walk, safe at any depth."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if depth > limit:
            steps = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path[:4]).lstrip(".")
            return (steps + ("..." if len(path) > 4 else "")) or "the top level"
        if isinstance(item, dict):
            stack.extend((v, depth + 1, path + (k,)) for k, v in item.items() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1, path + (k,)) for k, v in enumerate(item) if isinstance(v, (dict, list)))
    return None


def loads(text: str | bytes) -> Any:
    """Parse JSON text: with orjson when it is installed, else with json -- the same values either way.

    orjson refuses some text json accepts (``NaN``, integers beyond 64 bits, lone surrogates)
    and phrases its errors differently, so anything orjson refuses goes to json: the value,
    or the `json.JSONDecodeError` (its ``msg``, ``lineno``, ``colno``), is json's own.

    Arrays and objects nested deeper than json can parse (orjson: 1,024 levels; json: Python's
    stack) are a `JSONTooDeep` error, not a RecursionError.

    Raises:
        json.JSONDecodeError: the text is not valid JSON (`JSONTooDeep`: nested too deeply).
    """
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(text) from None


#: What `fast_loads_bytes` returns when it leaves the bytes to the exact path.
NOT_PARSED = object()


def fast_loads_bytes(data: bytes) -> Any:
    """A file's bytes parsed by orjson (an optional UTF-8 BOM skipped) -- no decoding to text
    first -- or `NOT_PARSED` when orjson is missing or refuses them: then the caller decodes
    and parses with `load_json_text`, which names the problem exactly as before."""
    if orjson is None:
        return NOT_PARSED
    try:
        return orjson.loads(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    except orjson.JSONDecodeError:
        return NOT_PARSED


def json_problem(exc: json.JSONDecodeError, text: str) -> str:
    """json's message as a whole sentence (``Unterminated string starting at`` names no place
    by itself), and a hint when the error is at the very end: the file was cut off."""
    msg = exc.msg + (" this position" if exc.msg.endswith(" at") else "")
    rest = text[exc.pos :].strip()
    # nothing after the error, an unterminated string, or a literal cut off (`"refusal": nul`);
    # not other text (`garbage`, data after a complete value): that is no cut file
    cut_literal = exc.msg != "Extra data" and any(
        word.startswith(rest) and word != rest for word in ("null", "true", "false")
    )
    if not rest or exc.msg.startswith("Unterminated") or cut_literal:
        msg += " -- the text ends early: is the file truncated?"
    return msg
