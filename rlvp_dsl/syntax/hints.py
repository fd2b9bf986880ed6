"""Hints for a newcomer's syntax mistakes, recognised by the text around the error.

`errors.syntax_diagnostic` asks these first, on an error only (a correct file never reaches
them).  Each recogniser looks at the unexpected token, what the parser accepted there and the
characters around it, and returns a `Diagnostic` with a targeted help line, or None:

* `operator_hint` -- ``||``, ``&&``, ``!`` where the language writes ``or``, ``and``, ``not``;
* `token_hint` -- a regex flag other than ``ims`` (``/yes/g``), ``since``/``same``/``returned``
  after the ')' of ``seen (...)``, tool names in braces without a comma (``call {a b}``), a quoted
  name (``call "cancel"``), an unquoted key or value in a test call's JSON arguments
  (``{id: "A"}``), a comma before a tool's ``target`` (``tool t : write, target id``);
* `keyword_before` -- the keyword a misspelled word before the error most likely meant, found by
  asking the parser what it accepted where the word starts (``(+0.5, expires -0.5)``: ``expires``
  lexes as ``expire`` + the name ``s``, and only the number after it is unexpected).
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostic, quoted, shorten
from ..source import SourceFile
from .grammar import get_parser, keywords

if TYPE_CHECKING:
    from lark import Token

# What a bracket scan skips (comments; strings, regexes and backtick names up to their closing
# character or the end of the line, a backslash escaping any next character but in backticks) and the
# brackets it counts: one regex scan, so a file of 50 MB is not walked character by character.
BRACKET_SCAN = re.compile(
    r'#[^\n]*|"[^"\\\n]*(?:\\[\s\S]?[^"\\\n]*)*["\n]?|/[^/\\\n]*(?:\\[\s\S]?[^/\\\n]*)*[/\n]?'
    r"|`[^`\n]*[`\n]?|[{}()\[\]]"
)

#: A rule-file regex (the grammar's REGEX), strings and comments beside it so a '/' inside them is skipped.
_REGEX_ON_LINE = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|#[^\n]*|(/(?!/)[^/\\\n]*(?:\\.[^/\\\n]*)*/)([imsx]*)')
_NAME = re.compile(r"[^\W\d]\w*")
_WORD_BEFORE = re.compile(r"(\w+)\s*\Z")
_TAGS_THEN_TARGET = re.compile(r"\s*,\s*target\b")
_SPACES = re.compile(r"\s*")
#: The rest of a clause written after `seen (...)`, on its line: up to a '}', a comment or the line's end.
_CLAUSE_REST = re.compile(r"[ \t]+([^\s{}()#\"/][^{}()#\"/\n]*?)[ \t]*(?=[}#\n]|\Z)")
#: A hint shows the user's own text only when it is this short.
_SHOWN = 60
#: `keyword_before` parses the text before the word again only when it is this short (characters).
_REPARSED = 200_000


def operator_hint(ch: str, after: str) -> str | None:
    """The help for an unexpected character `ch` (followed by `after`) that is another language's
    operator for ``or``, ``and`` or ``not``, else None."""
    if ch == "|":
        op = "||" if after == "|" else "|"
        return f"conditions are joined with the word `or`, not `{op}`: `call a or call b`"
    if ch == "&":
        op = "&&" if after == "&" else "&"
        return f"conditions are joined with the word `and` (or written side by side), not `{op}`: `call a and ok`"
    if ch == "!" and after != "=":
        return "a condition is negated with the word `not`, not `!`: `not ok`, `not (call a or call b)`"
    return None


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _before(text: str, offset: int) -> int:
    """The offset of the last character before `offset` that is not whitespace, or -1."""
    i = offset - 1
    while i >= 0 and text[i].isspace() and offset - i <= _SHOWN:
        i -= 1
    return i if i >= 0 and not text[i].isspace() else -1


def _after(text: str, offset: int) -> str:
    """The first character at or after `offset` that is not whitespace ("" at the end)."""
    m = _SPACES.match(text, offset, min(len(text), offset + _SHOWN))
    end = m.end() if m else offset
    return text[end : end + 1]


def _regex_flags(token: Token, source: SourceFile) -> Diagnostic | None:
    """``/yes/g``: the regex ends where the name starts, so the name is more flags."""
    text, offset = source.text, token.start_pos
    assert offset is not None
    line = _line_start(text, offset)
    if offset - line > 10_000:  # a pathological line: no scan
        return None
    for m in _REGEX_ON_LINE.finditer(text, line, offset):
        if m.group(1) is None or m.end() != offset:
            continue
        value = str(token.value)
        bad = "".join(dict.fromkeys(c for c in value if c not in "ims"))
        flags = "flag" if len(bad) == 1 else "flags"
        regex = m.group(1) if len(m.group(1)) <= _SHOWN else "/.../"
        no_global = " a regex matches anywhere in the text, so there is no `g`;" if "g" in bad else ""
        return Diagnostic(
            "RV101",
            f"unknown regular expression {flags} {', '.join(quoted(c) for c in bad)}",
            source.span(offset, offset + len(value)),
            help=f"the flags are `i` (ignore case: `{regex}i`), `m` (`^` and `$` at each line) and `s` "
            f"(`.` matches a newline);{no_global} see docs/language.md",
        )
    return None


def _clause_after_seen(token: Token, source: SourceFile) -> Diagnostic | None:
    """``seen (C) since D``: the clause belongs inside the parentheses."""
    text, offset = source.text, token.start_pos
    assert offset is not None
    close = _before(text, offset)
    if close < 0 or text[close] != ")":
        return None
    stack: list[int] = []
    opener = -1
    for m in BRACKET_SCAN.finditer(text, 0, close + 1):
        if m.group() == "(":
            stack.append(m.start())
        elif m.group() == ")" and stack:
            opener = stack.pop()
            if m.start() != close:
                opener = -1
    if opener < 0 or not re.search(r"\bseen\s*\Z", text[max(0, opener - _SHOWN) : opener]):
        return None
    inner = text[opener + 1 : close].strip()
    inner = inner if len(inner) <= _SHOWN and "\n" not in inner else "..."
    word = str(token.value)
    rest = _CLAUSE_REST.match(text, offset + len(word), min(len(text), offset + len(word) + _SHOWN))
    clause = f"{word} {rest.group(1)}" if rest else f"{word} ..."
    return Diagnostic(
        "RV101",
        f"unexpected keyword '{word}' after `seen (...)`",
        source.span(offset, offset + len(word)),
        help=f"`{word}` goes inside the parentheses of `seen`, before its ')': `seen ({inner} {clause})`",
    )


def _tool_set_comma(token: Token, source: SourceFile, opener: int) -> str | None:
    """``call {a b}``: the help line, when the unclosed '{' follows `call`."""
    text = source.text
    if not re.search(r"\bcall\s*\Z", text[max(0, opener - _SHOWN) : opener]):
        return None
    end = text.find("}", opener, opener + _SHOWN)
    line_end = text.find("\n", opener)
    names = re.split(r"[\s,]+", text[opener + 1 : end].strip()) if end >= 0 and not 0 <= line_end < end else []
    shown = f"call {{{', '.join(names)}}}" if len(names) > 1 else "call {a, b}"
    return f"tool names in braces are separated by commas: `{shown}`"


def _quoted_name(token: Token, source: SourceFile) -> str:
    """``call "cancel"``: the help line (the name written bare, after the keyword before it)."""
    text, offset = source.text, token.start_pos
    assert offset is not None
    name = shorten(str(token.value)[1:-1])
    if name in keywords():
        return f"names are written without quotes; '{name}' is a reserved word, so write it in backticks: `{name}`"
    if not _NAME.fullmatch(name):
        return f"names are written without quotes; this one is not a plain name, so write it in backticks: `{name}`"
    m = _WORD_BEFORE.search(text, max(0, offset - _SHOWN), offset)
    shown = f"{m.group(1)} {name}" if m and m.group(1) in keywords() else name
    return f"names are written without quotes: `{shown}`"


def _json_hint(token: Token, source: SourceFile, expected: set[str]) -> str | None:
    """A test call's JSON arguments: an unquoted key (``{id: "A"}``) or string value (``{"id": A}``)."""
    text, offset = source.text, token.start_pos
    assert offset is not None
    value = str(token.value)
    if not _NAME.fullmatch(value) or "NAME" in expected:
        return None
    shown = shorten(value)
    if "LBRACE" not in expected and "SIGNED_NUMBER" not in expected and _after(text, offset + len(value)) == ":":
        return f'the arguments are JSON: a key is a string in double quotes, `{{"{shown}": ...}}`'
    if "SIGNED_NUMBER" in expected and value.lower() in ("true", "false", "null", "none"):
        word = "null" if value.lower() == "none" else value.lower()
        return f"JSON writes `true`, `false` and `null` in lower case: `{word}`"
    if "SIGNED_NUMBER" in expected:
        where = "the arguments are JSON: " if "LBRACE" in expected else ""
        return f'{where}a string value is written in double quotes: `"{shown}"`'
    return None


def _target_after_comma(token: Token, source: SourceFile) -> Diagnostic | None:
    """``tool t : write, target id``: the comma made `target` a tag, so its argument is unexpected."""
    text, offset = source.text, token.start_pos
    assert offset is not None
    m = _WORD_BEFORE.search(text, max(0, offset - _SHOWN), offset)
    if not m or m.group(1) != "target":
        return None
    comma = _before(text, m.start(1))
    if comma < 0 or text[comma] != ",":
        return None
    line = _line_start(text, comma)
    end = offset + len(str(token.value))
    shown = "tool NAME : TAG, TAG target ARG"
    if "\n" not in text[line:end] and end - line <= 2 * _SHOWN:
        shown = _TAGS_THEN_TARGET.sub(" target", text[line:end].strip(), count=1)
    return Diagnostic(
        "RV101",
        "a ',' before 'target' makes it a tag name",
        source.span(comma, comma + 1),
        help=f"tags are separated by commas, and `target ARG` follows the last tag without one: `{shown}`",
    )


def token_hint(
    token: Token, expected: set[str], source: SourceFile, opener: tuple[int, str] | None
) -> Diagnostic | None:
    """A diagnostic for an unexpected `token` (`expected`: the terminals the parser accepted there;
    `opener`: the innermost bracket still open) that is a known newcomer's mistake, else None."""
    if token.start_pos is None:
        return None
    kind = token.type
    offset = token.start_pos
    value = str(token.value)
    span = source.span(offset, offset + len(value))
    if kind == "NAME" and (found := _regex_flags(token, source)):
        return found
    if kind in ("SINCE", "SAME", "RETURNED") and (found := _clause_after_seen(token, source)):
        return found
    if "TARGET" in expected and (found := _target_after_comma(token, source)):
        return found
    if kind in ("NAME", "QUOTED_NAME") and "COMMA" in expected and opener and opener[1] == "{":
        if hint := _tool_set_comma(token, source, opener[0]):
            return Diagnostic("RV101", f"unexpected name {quoted(value)}; expected ',' or '}}'", span, help=hint)
    if kind == "STRING" and "STRING" not in expected and ("NAME" in expected or "QUOTED_NAME" in expected):
        message = f"unexpected string {shorten(value)}; expected a name"
        return Diagnostic("RV101", message, span, help=_quoted_name(token, source))
    if "STRING" in expected and (hint := _json_hint(token, source, expected)):
        wanted = "a value (a string, a number, true, false or null)" if "SIGNED_NUMBER" in expected else "a string"
        return Diagnostic("RV101", f"unexpected name {quoted(value)}; expected {wanted}", span, help=hint)
    return None


def _accepts(prefix: str) -> set[str] | None:
    """The terminals the parser accepts after `prefix` (lark's interactive parser), or None when the
    prefix itself does not parse."""
    from lark.exceptions import LarkError

    try:
        interactive = get_parser().parse_interactive(prefix)
        interactive.exhaust_lexer()
        return set(interactive.accepts())  # type: ignore[no-untyped-call]
    except LarkError:
        return None


def keyword_before(text: str, start: int, word: str, token_type: str) -> tuple[str | None, bool]:
    """The keyword a misspelled `word` (at offset `start`, followed by a token of type `token_type`
    that the parser could not take) most likely meant: one the parser accepts where `word` starts,
    close to it (difflib), after which that token is accepted; and whether the lexer split `word`
    into that keyword and a name (no name is accepted there: ``expires`` -> ``expire`` + ``s``).
    (None, False) when there is none.

    The prefix is parsed again (twice), so only a word close to some keyword, in the first
    `_REPARSED` characters, is looked at: an error in a 50 MB file is not reparsed."""
    if start > _REPARSED or not difflib.get_close_matches(word, sorted(keywords()), n=1, cutoff=0.6):
        return None, False
    before = _accepts(text[:start])
    if not before:
        return None, False
    candidates = {term.pattern.value for term in get_parser().terminals if term.name in before}
    close = difflib.get_close_matches(word, sorted((candidates & keywords()) - {word}), n=1, cutoff=0.6)
    if not close:
        return None, False
    after = _accepts(f"{text[:start]}{close[0]} ")
    if not after or token_type not in after:
        return None, False
    split = word.startswith(close[0]) and "NAME" not in before
    return close[0], split
