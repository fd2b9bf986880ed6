"""Diagnostics are data: a code, a span, a message and a help line.

The stages (parse, check, load) return lists of `Diagnostic`; `render_text` and
`render_json` print them.  Codes are stable and documented in
``docs/diagnostics.md``: RV0xx input/output, RV1xx syntax, RV2xx meaning.

Text form (one per diagnostic)::

    rules/x.rlvp:12:7: error[RV201]: unknown tool 'serch'
       12 |   on call serch
          |           ^^^^^
       = help: did you mean 'search'?
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Iterable, Mapping, Sequence

import attrs

from .source import NO_SPAN, SourceFile, Span

ERROR = "error"
WARNING = "warning"

#: Most diagnostics printed per file; the rest are counted in one closing line.
MAX_PER_FILE = 10

#: Longest source line shown under a diagnostic; longer lines are cut around the caret.
MAX_LINE = 160

#: A token or name longer than this is shown cut (`shorten`): its first `SHOWN_CHARS` characters and its length.
MAX_TOKEN = 80
SHOWN_CHARS = 40

#: Longest message or help line kept whole; a longer one (a huge token that no site shortened) is cut in
#: the middle, so no diagnostic ever echoes a 50 MB input.
MAX_MESSAGE = 1000

#: Every code, with the one-line summary used in docs and `--explain-code`.
CODES: Mapping[str, str] = {
    "RV001": "a file cannot be read (missing, unreadable, not UTF-8)",
    "RV002": "a tool manifest cannot be understood",
    "RV003": "an include cycle",
    "RV004": "a rule set too large (more items than loader.MAX_ITEMS)",
    "RV101": "syntax error: unexpected token",
    "RV102": "a reserved word used as a name",
    "RV103": "a block or parenthesis is never closed",
    "RV104": "an invalid literal (string, number)",
    "RV105": "an invalid regular expression",
    "RV106": "nesting too deep",
    "RV201": "unknown tool",
    "RV202": "unknown tag",
    "RV203": "duplicate name (rule, tool or constant)",
    "RV204": "a weight of the wrong sign",
    "RV205": "a reference to an unbound argument",
    "RV206": "an obligation that can never be discharged",
    "RV207": "unknown constant",
    "RV208": "credit would land on a user message",
    "RV209": "an invalid value (count, cap, comparison)",
    "RV210": "a rule that can never fire",
    "RV211": "an expectation names an unknown rule",
    "RV212": "warning: a declared tag close to a standard tag, that no rule tests (a likely typo)",
    # lints (rlvp_dsl/lints.py): warnings about rules that compile but shape the gradient badly
    "RV301": "warning: credit that nothing can penalise (farmable-looking)",
    "RV302": "warning: two rules credit the same event for the same reason (double counting)",
    "RV303": "warning: an obligation whose discharge is implied by its open (it can never open)",
    "RV304": "warning: weights that dwarf the outcome reward",
    "RV305": "warning: a deadline that can never pass",
    # usage lints (rlvp_dsl/usage_lints.py): how the file is written
    "RV306": "warning: a rule set with no rules (it gives no credit)",
    "RV307": "warning: an argument name no tool is known to take, close to one that is (a likely typo)",
    "RV308": "warning: `same message` where a tool takes an argument called message",
}


def shorten(text: str) -> str:
    """`text` itself, or -- longer than `MAX_TOKEN` -- its first `SHOWN_CHARS` characters, "..." and its
    length: a 50 MB token is named, never echoed."""
    if len(text) <= MAX_TOKEN:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


def quoted(text: str, quote: str = "'") -> str:
    """`text` in quotes, shortened as `shorten` does (the length outside the quotes)."""
    if len(text) <= MAX_TOKEN:
        return f"{quote}{text}{quote}"
    return f"{quote}{text[:SHOWN_CHARS]}...{quote} ({len(text):,} characters)"


def _bounded(text: str) -> str:
    if len(text) <= MAX_MESSAGE:
        return text
    head, tail = text[: MAX_MESSAGE * 2 // 3], text[-(MAX_MESSAGE // 4) :]
    return f"{head} ... [{len(text) - len(head) - len(tail):,} characters not shown] ... {tail}"


@attrs.frozen
class Diagnostic:
    """One problem found in a rule file.

    Attributes:
        code: stable code such as ``RV201`` (see `CODES`).
        message: what is wrong, in the language's own words.
        span: where.
        help: how to fix it (may be empty).
        severity: ``error`` or ``warning``.
    """

    code: str
    message: str = attrs.field(converter=_bounded)
    span: Span = NO_SPAN
    help: str = attrs.field(default="", converter=_bounded)
    severity: str = ERROR

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "help": self.help,
            "span": self.span.to_json(),
            "location": self.span.location,
        }


def counted(n: int, noun: str, plural: str = "") -> str:
    """`n` and the noun, singular for 1: ``counted(1, "rule")`` is "1 rule", ``counted(3, "rule")`` "3 rules";
    `plural` for a noun that does not take an "s" (``counted(2, "call goes", "calls go")``)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A help line suggesting the closest candidate, or "" when none is close."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


def sort_and_cap(diagnostics: Iterable[Diagnostic], cap: int = MAX_PER_FILE) -> tuple[list[Diagnostic], int]:
    """Sort by (file, line, column, code) and keep at most `cap` per file.

    Returns:
        (kept diagnostics, number dropped).
    """
    ordered = sorted(
        set(diagnostics),
        key=lambda d: (d.span.file, d.span.line, d.span.column, d.code, d.message),
    )
    kept: list[Diagnostic] = []
    per_file: dict[str, int] = {}
    dropped = 0
    for d in ordered:
        n = per_file.get(d.span.file, 0)
        if n >= cap:
            dropped += 1
            continue
        per_file[d.span.file] = n + 1
        kept.append(d)
    return kept, dropped


def render_text(
    diagnostics: Sequence[Diagnostic],
    sources: Mapping[str, SourceFile],
    *,
    dropped: int = 0,
) -> str:
    """Render diagnostics as ``file:line:col: error[CODE]: message``, the source line, a caret, help."""
    out: list[str] = []
    for d in diagnostics:
        out.append(f"{d.span.location}: {d.severity}[{d.code}]: {d.message}")
        src = sources.get(d.span.file)
        if src is not None and d.span.line > 0:
            text = src.line_text(d.span.line)
            gutter = str(d.span.line)
            width = 1
            if d.span.end_line == d.span.line and d.span.end_column > d.span.column:
                width = d.span.end_column - d.span.column
            caret_col = min(d.span.column, len(text) + 1)
            width = min(width, len(text) - caret_col + 1)  # the carets end with the line
            if len(text) > MAX_LINE:  # show a window around the caret, not a 10,000-character line
                start = max(0, caret_col - 1 - MAX_LINE // 3)
                shown = text[start : start + MAX_LINE]
                text = ("..." if start else "") + shown + ("..." if start + MAX_LINE < len(text) else "")
                width = min(width, start + len(shown) - caret_col + 1)  # ... and with the window shown
                caret_col = caret_col - start + (3 if start else 0)
            pad = "".join("\t" if ch == "\t" else " " for ch in text[: caret_col - 1])
            out.append(f" {gutter} | {text}")
            out.append(f" {' ' * len(gutter)} | {pad}{'^' * max(1, width)}")
        if d.help:
            out.append(f"  = help: {d.help}")
    if dropped:
        out.append(f"... and {dropped} more diagnostic{'s' if dropped != 1 else ''} not shown")
    return "\n".join(out)


def diagnostics_fields(diagnostics: Sequence[Diagnostic], dropped: int = 0) -> dict[str, object]:
    """The diagnostics of one rule file as fields of a JSON object (`render_json`, and ``--json`` of
    both CLIs): ``{"diagnostics": [each one's to_json()], "dropped": n}``, `dropped` being those the
    cap left out (`sort_and_cap`)."""
    return {"diagnostics": [d.to_json() for d in diagnostics], "dropped": dropped}


def render_json(diagnostics: Sequence[Diagnostic], *, dropped: int = 0) -> str:
    """Render diagnostics as one JSON document: `diagnostics_fields`."""
    return json.dumps(diagnostics_fields(diagnostics, dropped), indent=2, ensure_ascii=False)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity == ERROR for d in diagnostics)


class RuleError(ValueError):
    """Raised by the `load`-style API when a rule file has errors.

    Attributes:
        diagnostics: the diagnostics (sorted).
        sources: the source files, for rendering.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic], sources: Mapping[str, SourceFile]):
        self.diagnostics = list(diagnostics)
        self.sources = dict(sources)
        kept, dropped = sort_and_cap(self.diagnostics)
        super().__init__(render_text(kept, self.sources, dropped=dropped))

    def __reduce__(self) -> tuple[type[RuleError], tuple[list[Diagnostic], dict[str, SourceFile]]]:
        # picklable, so a worker process can send it back whole
        return (RuleError, (self.diagnostics, self.sources))
