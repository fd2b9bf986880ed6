"""Source text and positions: where a diagnostic or a rule comes from.

Lines and columns are 1-based and count Unicode code points, as editors do.
"""

from __future__ import annotations

import bisect

import attrs


@attrs.frozen
class Span:
    """A region of a source file: ``file:line:col`` to ``end_line:end_col``."""

    file: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0

    @property
    def location(self) -> str:
        """``file:line:col`` -- the form editors and CI annotators understand (just ``file``
        for a problem with the whole file)."""
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"

    def to_json(self) -> dict[str, str | int]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line or self.line,
            "end_column": self.end_column or self.column,
        }


NO_SPAN = Span("<generated>", 0, 0)


@attrs.frozen
class SourceFile:
    """The text of one rule file, with a line index for positions and carets."""

    path: str
    text: str
    _line_starts: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        starts = [0]
        i = self.text.find("\n")
        while i >= 0:  # str.find, not a Python loop over every character (a 50 MB file)
            starts.append(i + 1)
            i = self.text.find("\n", i + 1)
        object.__setattr__(self, "_line_starts", tuple(starts))

    def line_text(self, line: int) -> str:
        """The text of 1-based line `line` without its newline ("" when out of range)."""
        if not 1 <= line <= len(self._line_starts):
            return ""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def span(self, start: int, end: int | None = None) -> Span:
        """The span of characters `start`..`end` (0-based offsets)."""
        line, col = self.position(start)
        end_line, end_col = self.position(start if end is None else end)
        return Span(self.path, line, col, end_line, end_col)

    @property
    def end_span(self) -> Span:
        return self.span(len(self.text))


def undecodable(exc: UnicodeDecodeError) -> str:
    """Where text stops being UTF-8, for an error message: ``line 4, column 31 (byte 0xe9)``.

    `exc` must come from decoding a whole file's bytes at once (``data.decode("utf-8")``, or
    ``"utf-8-sig"``: its ``object`` is then the bytes after the BOM); its ``object[start:end]`` are
    the bytes that are not UTF-8.  Lines and columns are 1-based, columns in code points (as
    `Span`), the bytes before the bad one on its line decoded with replacement characters."""
    data, start = exc.object, exc.start
    line_start = data.rfind(b"\n", 0, start) + 1
    column = len(data[line_start:start].decode("utf-8", errors="replace")) + 1
    shown = " ".join(f"0x{b:02x}" for b in data[start : max(exc.end, start + 1)][:4])
    line = data.count(b"\n", 0, start) + 1
    return f"line {line}, column {column} (byte {shown})"
