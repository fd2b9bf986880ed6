"""Spans (1-based lines, columns in code points) <-> LSP positions (0-based lines, columns in the
client's code units: UTF-16 unless the client chose another encoding)."""

from __future__ import annotations

from typing import Protocol

from lsprotocol import types

from ..source import SourceFile, Span


class Codec(Protocol):
    """What a position encoding offers (pygls's `PositionCodec`): the length of a text in its units."""

    def client_num_units(self, string: str) -> int: ...


def to_range(span: Span, source: SourceFile | None, codec: Codec) -> types.Range:
    """The LSP range of `span` in `source` (the text the span refers to).  A span with no line (a
    problem with a whole file) is the file's first position; without the source, columns are taken
    as they are (correct for ASCII lines)."""
    if span.line <= 0:
        return types.Range(types.Position(0, 0), types.Position(0, 0))
    end_line = span.end_line or span.line
    end_column = span.end_column or span.column
    return types.Range(_position(span.line, span.column, source, codec), _position(end_line, end_column, source, codec))


def _position(line: int, column: int, source: SourceFile | None, codec: Codec) -> types.Position:
    if source is None:
        return types.Position(line - 1, max(0, column - 1))
    text = source.line_text(line)
    return types.Position(line - 1, codec.client_num_units(text[: max(0, column - 1)]))


def from_position(position: types.Position, lines: list[str] | tuple[str, ...], codec: Codec) -> tuple[int, int]:
    """The 1-based (line, column in code points) of an LSP position in a document of `lines`."""
    if position.line >= len(lines):
        return position.line + 1, 1
    text = lines[position.line].rstrip("\r\n")
    units = 0
    for index, char in enumerate(text):
        if units >= position.character:
            return position.line + 1, index + 1
        units += codec.client_num_units(char)
    return position.line + 1, len(text) + 1


def contains(span: Span, line: int, column: int) -> bool:
    """Whether the 1-based (line, column) lies in `span` (its end included: a cursor just after a
    name is on it)."""
    if span.line <= 0:
        return False
    end_line, end_column = span.end_line or span.line, span.end_column or span.column
    return (span.line, span.column) <= (line, column) <= (end_line, end_column)
