"""Request bodies read the one way every route reads them, and the one shape of what is wrong with them.

* `BadInput` -- a request that cannot be answered (a 422): a message, the ``record`` and ``field``.
* `parse_json` -- a JSON body (``/get_reward``, ``/verify``, a token envelope): a UTF-8 BOM
  skipped, parsed by the readers' own JSON path (`rlvp_dsl.readers.errors.load_json_text`: orjson
  when installed, the same values and messages either way), so the same mistake gets the same
  words on every route as on ``/score`` and in ``rlvp-score``: ``request.json:1:15: invalid JSON:
  ...``, ``request.json: the body is empty ...``, ``... nested more than 200 levels deep``.
* `checked_signal` -- ``?error_signal=``: a name of `rlvp_dsl.readers.ERROR_SIGNALS` or a 422
  listing them (with a did-you-mean for a near miss).
* `reader_problem` -- a `rlvp_dsl.readers.ReaderError` as the request shows it: the server's
  private path replaced by the request's file name, the record made explicit for a JSONL line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rlvp_dsl.diagnostics import did_you_mean
from rlvp_dsl.readers import ERROR_SIGNALS, ReaderError
from rlvp_dsl.readers.errors import json_kind as json_kind, load_json_text  # (json_kind: the routes' messages)
from rlvp_dsl.readers.json_text import MAX_DEPTH, NOT_PARSED, fast_loads_bytes, nested_too_deep
from rlvp_dsl.source import undecodable

#: The file name a body is read under when the request gives none (``/score``'s ``?name=``); the
#: JSON bodies of the other routes are named so too, in messages.
DEFAULT_NAME = "request.json"

_LINE_COLUMN = re.compile(r":(\d+):(\d+)$")


class BadInput(ValueError):
    """A request that cannot be scored (answered 422): its message names the record and field.

    Attributes:
        record: where in the body (``simulations[3].messages[5]``, ``line 7``), or ``""``.
        field: the offending field, or ``""``.
        errors: when no record of a many-record body could be read, each record's problem
            (`problem_json`), in body order; else empty.
    """

    def __init__(self, message: str, record: str = "", field: str = "", errors: Sequence[dict[str, str]] = ()) -> None:
        super().__init__(message)
        self.record = record
        self.field = field
        self.errors = list(errors)


def parse_json(body: bytes, name: str = DEFAULT_NAME) -> Any:
    """The JSON value of a request body.

    Args:
        body: the body as received (a UTF-8 BOM at its start is skipped, as the readers skip it).
        name: the name the body goes by in messages.

    Raises:
        BadInput: the body is empty, not UTF-8, not valid JSON (``name:line:col: invalid JSON:
            ...``, the readers' sentence), or nested more than `MAX_DEPTH` levels deep (record:
            where, ``m[0][0][0][0]...``).
    """
    value = fast_loads_bytes(body)  # orjson on the bytes, when it takes them (most bodies)
    if value is NOT_PARSED:  # json, on the text: its values, and the readers' messages
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{name}: not UTF-8 text: {undecodable(exc)}") from None
        if not text.strip():
            raise BadInput(f"{name}: the body is empty (expected a JSON object)")
        try:
            value = load_json_text(text, name)
        except ReaderError as exc:
            raise BadInput(str(exc)) from None
    where = nested_too_deep(value)
    if where is not None:
        raise BadInput(
            f'{name}: {where}: arrays and objects nested more than {MAX_DEPTH} levels deep (docs/readers.md, "Limits")',
            record=where,
        )
    return value


def checked_signal(name: str | None) -> str | None:
    """``?error_signal=``: `name` when it is one of `rlvp_dsl.readers.ERROR_SIGNALS` (None: the format's
    default).

    Raises:
        BadInput: another name (field ``error_signal``; a near miss says which was meant).
    """
    if name is None or name in ERROR_SIGNALS:
        return name
    hint = did_you_mean(name, ERROR_SIGNALS)
    hint = f" ({hint})" if hint else ""
    raise BadInput(
        f"?error_signal= must be one of the names {', '.join(ERROR_SIGNALS)}; got {name!r}{hint}",
        field="error_signal",
    )


def reader_problem(exc: ReaderError, path: str, name: str, *, inside: str = "") -> BadInput:
    """A reader's error on the body written to `path`, as the request shows it.

    Args:
        exc: the reader's error.
        path: where the server wrote the body (never shown: `name` replaces it).
        name: the request's file name.
        inside: the envelope key the file came from (``trajectory``), or ``""``: the message then
            reads ``request.json: trajectory:1:9: invalid JSON ...`` and the record starts with it.

    Returns:
        The `BadInput` with the reader's record and field; an error placed at ``line:col`` of a
        JSONL file with no record names ``line N`` as its record.
    """
    file = exc.file.replace(path, name)
    record = exc.record
    located = _LINE_COLUMN.search(file)
    if not record and located and name.lower().endswith((".jsonl", ".ndjson")):
        record = f"line {located.group(1)}"
    if inside:
        file = f"{name}: {inside}{file[len(name) :]}" if file.startswith(name) else f"{inside}: {file}"
        record = f"{inside}: {record}" if record else inside
    message = str(ReaderError(file, exc.record, exc.field, exc.detail.replace(path, name)))
    return BadInput(message, record=record, field=exc.field)


def problem_json(problem: BadInput) -> dict[str, str]:
    """``{"record", "field", "message"}``: one entry of an answer's ``errors`` list."""
    return {"record": problem.record, "field": problem.field, "message": str(problem)}
