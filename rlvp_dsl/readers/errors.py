"""The readers' error: `ReaderError`, a trajectory file that cannot be read, and the helpers
that word it (`expected_got`) or raise it for invalid JSON (`load_json_text`).

(A tool *result* that signals an error -- TRL's ``{'error': ...}``, tau2's ``error: true``,
MCP's ``isError`` -- is recognised in `rlvp_dsl.readers.error_signals`.)
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping, TypeVar

from .json_text import json_problem, loads

T = TypeVar("T")
R = TypeVar("R")


class ReaderError(Exception):
    """A trajectory file that cannot be read: bad JSON or a bad record.

    The message is ``<file>: <record>: field '<field>': expected <expected>, got <got>``
    (parts that do not apply are left out); invalid JSON reads
    ``<file>:<line>:<col>: invalid JSON: <reason>``.

    Attributes:
        file: the file, as the caller named it.
        record: where in the file (``simulations[3].messages[5]``, ``line 7``), or ``""``.
        field: the offending field, or ``""``.
        detail: the rest of the message.
    """

    def __init__(self, file: str, record: str = "", field: str = "", detail: str = "") -> None:
        self.file = file
        self.record = record
        self.field = field
        self.detail = detail
        parts = [file]
        if record:
            parts.append(record)
        if field:
            parts.append(f"field {field!r}")
        if detail:
            parts.append(detail)
        super().__init__(": ".join(parts))


#: JSON's words for the values Python spells otherwise (``None``, ``True``, ``nan``).
_JSON_WORDS = {"None": "null", "True": "true", "False": "false", "nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (``a JSON array``, ``JSON null``), for messages."""
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return f"JSON {'true' if value else 'false'}"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    return "a JSON array" if isinstance(value, list) else "a JSON object"


def shown_value(value: Any) -> str:
    """A JSON value as a reader error shows it, in JSON's words: ``null``, ``true``, ``false``,
    ``NaN``, ``Infinity`` (what the file says, not Python's ``None``/``True``/``nan``), an object
    or array by its kind (``a JSON object``), numbers as written and text quoted
    (``'robot'``), cut to 60 characters."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    shown = repr(value)
    if value is None or isinstance(value, (bool, float)):
        shown = _JSON_WORDS.get(shown, shown)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return shown


def expected_got(expected: str, got: Any) -> str:
    """The ``expected X, got Y`` part of a reader error; ``got`` is shown briefly and in JSON's
    words (`shown_value`: ``got null``, never Python's ``got None``)."""
    return f"expected {expected}, got {shown_value(got)}"


def expected_field(expected: str, record: Mapping[str, Any], key: str) -> str:
    """`expected_got` for ``record[key]``; ``missing, expected X`` when `record` has no `key` (a
    JSON ``null`` is shown as ``null``, an absent key as missing)."""
    if key not in record:
        return f"missing, expected {expected}"
    return expected_got(expected, record[key])


def load_json_text(text: str, file: str, line_offset: int = 0) -> Any:
    """Parse JSON text, turning a syntax error into a :class:`ReaderError` with ``line:col``.

    Args:
        text: the JSON text.
        file: the file name used in the error message.
        line_offset: added to the reported line (for one line of a JSONL file).

    Raises:
        ReaderError: the text is not valid JSON.
    """
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        where = f"{file}:{exc.lineno + line_offset}:{exc.colno}"
        raise ReaderError(where, detail=f"invalid JSON: {json_problem(exc, text)}") from None


def each_record(records: Iterable[T], read: Callable[[int, T], R], record_errors: list[ReaderError] | None) -> list[R]:
    """``read(i, record)`` for every record of a file, in order.  With a `record_errors` list, a record
    whose reading raises a `ReaderError` is appended there and the others are still read (one bad
    simulation or entry loses itself, not its file: `read_report(..., keep_going=True)`); without
    one, the first error is raised."""
    if record_errors is None:
        return [read(i, record) for i, record in enumerate(records)]
    out = []
    for i, record in enumerate(records):
        try:
            out.append(read(i, record))
        except ReaderError as exc:
            record_errors.append(exc)
    return out
