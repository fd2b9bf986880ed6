"""Parsing a trajectory file's JSON: orjson when it is installed (the ``fast`` extra), json
otherwise, with the same values and the same error messages either way (docs/readers.md,
"Speed: orjson").  `rlvp_dsl.readers._base.load_json_text` turns a syntax error into a
`ReaderError` at ``file:line:col`` with `json_problem`'s sentence.
"""

from __future__ import annotations

import json
from typing import Any

try:  # optional (the `fast` extra): about twice as fast as json on trajectory files
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None


def loads(text: str | bytes) -> Any:
    """Parse JSON text: with orjson when it is installed, else with json -- the same values either way.

    orjson refuses some text json accepts (``NaN``, integers beyond 64 bits, lone surrogates)
    and phrases its errors differently, so anything orjson refuses goes to json: the value,
    or the `json.JSONDecodeError` (its ``msg``, ``lineno``, ``colno``), is json's own.

    Raises:
        json.JSONDecodeError: the text is not valid JSON.
    """
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


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
    rest = text[exc.pos:].strip()
    # nothing after the error, or a few characters of a cut-off value (`"refusal": nul`)
    if not rest or exc.msg.startswith("Unterminated") or (len(rest) < 16 and rest[-1] not in "}]"):
        msg += " -- the text ends early: is the file truncated?"
    return msg
