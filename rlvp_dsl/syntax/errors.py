"""Syntax errors in the language's own words.

A lark `UnexpectedInput` becomes one `Diagnostic`: the unexpected token described as a
user sees it (`keyword 'violation'`, `a name`, `end of file` -- never `__ANON_0`,
`$END` or `LPAR`), what was expected, the unclosed block when the file ends inside
one, a did-you-mean for a misspelled keyword (`violaton` -> `violation`), a hint from a
table of known mistakes (lark's `match_examples`), and the newcomer's mistakes recognised by
the text around the error (`hints`: ``||``, ``/re/g``, ``call "name"``, ...).

lark is imported when an error is rendered (`syntax_diagnostic`), not by this module: the checker
imports `keyword_suggestion` from here, and a run whose rule set comes from the cache
(`rlvp_dsl.check_cache`) imports no lark at all.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostic, quoted, shorten
from ..source import SourceFile
from .grammar import get_parser, keywords
from .hints import BRACKET_SCAN, keyword_before, operator_hint, token_hint

if TYPE_CHECKING:
    from lark import Token
    from lark.exceptions import UnexpectedInput

# ---- describing terminals in the language's words -------------------------

_NAMED_TERMINALS = {
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": 'a string ("...")',
    "SIGNED_NUMBER": "a number",
    "REGEX": "a regular expression (/.../)",
    "COMPARE": "a comparison (==, !=, <, <=, >, >=)",
    "$END": "end of file",
}


def describe_terminal(name: str) -> str:
    """'violation', a name, a number, ... -- never `__ANON_0` or `$END`."""
    if name in _NAMED_TERMINALS:
        return _NAMED_TERMINALS[name]
    for term in get_parser().terminals:
        if term.name == name:
            if term.pattern.type == "str":
                return f"'{term.pattern.value}'"
            break
    return name.lower().replace("_", " ")


_CONDITION_START = frozenset(
    {
        "CALL",
        "USER",
        "ASSISTANT",
        "TAG",
        "OK",
        "ERROR",
        "MALFORMED",
        "NO_RESULT",
        "ERROR_TEXT",
        "RESULT",
        "TEXT",
        "ARG",
        "SIGNAL",
        "SEEN",
        "NOT",
        "LPAR",
    }
)


def _describe_expected(expected: set[str]) -> str:
    kinds: set[str] = set()
    if len(expected & _CONDITION_START) >= len(_CONDITION_START) // 2:
        expected = expected - _CONDITION_START
        kinds.add("a condition")
    words = sorted(kinds | {describe_terminal(t) for t in expected})
    if len(words) > 10:
        words = words[:10] + ["..."]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _describe_token(token: Token) -> str:
    """The token as a user sees it; a long one shortened (`diagnostics.shorten`), never echoed whole."""
    if token.type == "$END":
        return "end of file"
    value = str(token.value)
    if token.type in ("NAME", "QUOTED_NAME"):
        return f"name {quoted(value)}"
    if token.type == "STRING":
        return f"string {shorten(value)}"
    if token.type == "SIGNED_NUMBER":
        return f"number {shorten(value)}"
    if token.type == "REGEX":
        return f"regular expression {shorten(value)}"
    if value in keywords():
        return f"keyword '{value}'"
    return quoted(value)


# Known mistakes, recognised by the parser state they leave (`_example_label`).
_EXAMPLES: dict[str, list[str]] = {
    "a weight is written in parentheses after the rule name: `violation NAME (-0.5) { ... }`": [
        "violation x -1 { on call }",
        "violation x { on call }",
        "obligation x 1 { }",
        "violation x : -1 { on call }",
        "violation x = -1 { on call }",
    ],
    "a weight is a number or a constant's name: `(-0.5)`, `(W)`": [
        "violation x (== -1) { on call }",
        "violation x (< 0) { on call }",
    ],
    "an obligation takes a credit and an expiry penalty: `obligation NAME (+0.5, expire -0.5) { ... }`": [
        "obligation x (1) { }",
        "obligation x (1, -1) { }",
        "obligation x (+1) { }",
        "obligation x (+1, -1) { }",
        "obligation x (+1, 0) { }",
        "obligation x (W, -1) { }",
    ],
    "this rule takes one weight, `(-0.5)`; two numbers, `(+CREDIT, expire PENALTY)`, are an obligation's": [
        "violation x (-1, -1) { on call }",
        "repeat_error x (-1, -1) { }",
        "blind_destructive x (-1, -1) { }",
    ],
    "a rule's body is written in braces: `violation NAME (-0.5) { on CONDITION }`": [
        "violation x (-1) on call",
    ],
    "a violation's body starts with `on CONDITION`": [
        "violation x (-1) { call }",
        "violation x (-1) { }",
    ],
    "an obligation's body is `open on COND`, `discharge on COND [same ARG]`, then optionally `deadline ...`": [
        "obligation x (1, expire -1) { discharge on call }",
        "obligation x (1, expire -1) { open on call }",
        "obligation x (1, expire -1) { open call }",
    ],
    "a deadline is `before CONDITION`, `within N calls` or `at end`": [
        "obligation x (1, expire -1) { open on call discharge on call deadline call }",
        "obligation x (1, expire -1) { open on call discharge on call deadline within 3 }",
    ],
    "`seen` takes a parenthesised condition: `seen (call tag read ok same target)`": [
        "violation x (-1) { on call unless seen call }",
    ],
    'strings use double quotes: "text"': [
        "violation x (-1) { on call error_text contains 'x' }",
    ],
}


#: What stands inside a rule's weight parentheses: ``-0.5``, ``W``, ``+0.5, expire -0.5``.
_WEIGHT = re.compile(r"\s*[+-]?[\w.]+\s*(,\s*(expire\s+)?[+-]?[\w.]+\s*)?")

#: ``call tool NAME``: the tool's name written after the declaration keyword (`syntax_diagnostic`).
_CALL_TOOL = re.compile(r"\bcall\s+tool\s+\Z")


@functools.lru_cache(maxsize=1)
def _example_errors() -> list[tuple[int, frozenset[str], str, str]]:
    """Each `_EXAMPLES` entry's error: (the parser's state when it stopped, the tokens it accepted
    there, the unexpected token's type, the label), examples parsed once per process."""
    from lark.exceptions import UnexpectedInput

    out = []
    for label, examples in _EXAMPLES.items():
        for example in examples:
            try:
                get_parser().parse(example)
            except UnexpectedInput as exc:
                token = getattr(exc, "token", None)
                state = getattr(exc, "state", None)
                if state is not None and token is not None:
                    out.append((state.position, frozenset(getattr(exc, "accepts", None) or ()), token.type, label))
    return out


def _example_label(exc: UnexpectedInput, token: Token) -> str | None:
    """The label of the `_EXAMPLES` entry that stops where `exc` stopped: the same parser state and
    accepted tokens, an example with the same unexpected token type first.

    Only the state on top of the parser's stack is compared, unlike lark's ``match_examples``
    (the whole stack's depth too): the examples are single rules, and the rule that went wrong
    usually follows tool declarations, which leave the stack deeper."""
    state = getattr(exc, "state", None)
    if state is None:
        return None
    accepts = frozenset(getattr(exc, "accepts", None) or ())
    found = [(kind, label) for position, accepted, kind, label in _example_errors()
             if position == state.position and accepted == accepts]  # fmt: skip
    for kind, label in found:
        if kind == token.type:
            return label
    return found[0][1] if found else None


def _unclosed_opener(text: str, upto: int) -> tuple[int, str] | None:
    """Offset and char of the innermost bracket still open at offset `upto` (strings,
    regexes, backtick names and comments skipped)."""
    stack: list[tuple[int, str]] = []
    n = min(upto, len(text))
    pairs = {"}": "{", ")": "(", "]": "["}
    for m in BRACKET_SCAN.finditer(text, 0, n):  # a token running past `upto` ends there: same brackets
        i = m.start()
        ch = m.group()
        if ch in "{([":
            stack.append((i, ch))
        elif ch in pairs and stack and stack[-1][1] == pairs[ch]:
            stack.pop()
    return stack[-1] if stack else None


_TOP_LEVEL = frozenset({"VIOLATION", "OBLIGATION", "TOOL", "CONST"})

_WORD = re.compile(r"\w+")
#: Longer words are never taken for a misspelled keyword (the longest keyword has 17 letters); the
#: bound also keeps a 50 MB word from being walked or compared.
_LONGEST_TYPO = 40


def _keyword_of(terminal: str) -> str | None:
    """The word a keyword terminal stands for (`VIOLATION` -> ``violation``), else None."""
    for term in get_parser().terminals:
        if term.name == terminal:
            value = term.pattern.value
            return value if term.pattern.type == "str" and value.replace("_", "").isalpha() else None
    return None


def _closest_keyword(word: str, candidates: set[str]) -> str | None:
    """The keyword among `candidates` a misspelled `word` most likely meant (difflib, as the
    did-you-mean of names), or None."""
    close = difflib.get_close_matches(word, sorted(candidates - {word}), n=1, cutoff=0.6)
    return close[0] if close else None


def keyword_suggestion(word: str, read_as: str = "a name") -> str:
    """``did you mean the keyword 'error'?`` for a name that looks like a misspelled keyword
    (`call erorr` reads `erorr` as a tool name: `read_as` says what it was read as), or ""."""
    close = _closest_keyword(word, set(keywords()))
    return f"did you mean the keyword '{close}'? ('{word}' reads as {read_as} here)" if close else ""


def _misspelled_keyword(token: Token, expected: set[str], source: SourceFile) -> Diagnostic | None:
    """A syntax error caused by a misspelled keyword, with its did-you-mean: the unexpected name
    itself (`violaton x`, `unless sen (...)`), a word the lexer split after a keyword prefix
    (`onn` read as `on` + `n`), or the name just before the unexpected token that was read as
    a name but meant a keyword expected there (`call x dischrage on ...`)."""
    text = source.text
    wanted = {w for w in map(_keyword_of, expected) if w}
    value = str(token.value)
    glued = (
        token.start_pos is not None
        and value in keywords()
        and _WORD.fullmatch(text[token.start_pos + len(value) : token.start_pos + len(value) + 1] or " ")
    )
    if (token.type == "NAME" or glued) and token.start_pos is not None:
        start, end = token.start_pos, token.start_pos + len(value)
        split = glued or (start > 0 and _WORD.fullmatch(text[start - 1]))
        if split:  # `onn`: the keyword `on`, then the name `n`; `incldue`: the keyword `in`, then `cldue`
            while start > 0 and token.start_pos - start <= _LONGEST_TYPO and _WORD.fullmatch(text[start - 1]):
                start -= 1
            while end < len(text) and end - start <= _LONGEST_TYPO and _WORD.fullmatch(text[end]):
                end += 1
        word = text[start:end]
        close = None
        if len(word) <= _LONGEST_TYPO:
            close = _closest_keyword(word, wanted | (set(keywords()) if split else set()))
        if close:
            hint = _generic_hint(expected) if _TOP_LEVEL <= expected else f"expected {_describe_expected(expected)}"
            return Diagnostic(
                "RV101", f"unexpected name {quoted(word)}; did you mean '{close}'?", source.span(start, end), help=hint
            )
    if token.start_pos is None:
        return None
    end = token.start_pos
    while end > 0 and text[end - 1].isspace() and token.start_pos - end <= _LONGEST_TYPO:
        end -= 1
    start = end
    while start > 0 and end - start <= _LONGEST_TYPO and _WORD.fullmatch(text[start - 1]):
        start -= 1
    previous = text[start:end]
    if not previous or end - start > _LONGEST_TYPO or previous in keywords():
        return None
    close = _closest_keyword(previous, wanted)
    read_as = "a name"
    if close is None:  # `(+0.5, expires -0.5)`: a keyword meant where the word starts, not after it
        close, lexed_apart = keyword_before(text, start, previous, token.type)
        if close and lexed_apart:
            read_as = f"'{close}' followed by the name '{previous[len(close) :]}'"
    if close is None:
        return None
    return Diagnostic(
        "RV101",
        f"unexpected name {quoted(previous)}; did you mean '{close}'?",
        source.span(start, end),
        help=f"'{previous}' was read as {read_as}, so {_describe_token(token)} could not follow; "
        f"'{close}' is expected here",
    )


def _generic_hint(expected: set[str]) -> str:
    """A help line for an unexpected token when no known mistake matched."""
    if len(expected & _CONDITION_START) >= len(_CONDITION_START) // 2:
        return (
            "a condition starts with e.g. `call NAME`, `tag NAME`, `ok`, `error`, `arg NAME ...`, "
            "`user says /.../`, `seen (...)`, `not` or `(`"
        )
    if _TOP_LEVEL <= expected:
        return (
            "a file holds declarations (`tool`, `tools from`, `const`, `include`) and rules "
            "(`violation`, `obligation`, `repeat_error`, `blind_destructive`, `progress`)"
        )
    return "see docs/language.md for the syntax"


def syntax_diagnostic(exc: UnexpectedInput, source: SourceFile) -> list[Diagnostic]:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF

    text = source.text
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream
        assert pos is not None  # the lexer says where it stopped
        ch = text[pos] if pos < len(text) else ""
        span = source.span(pos, pos + 1)
        shown = ch if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}" if ch else "end of file"
        if shown != ch:
            return [
                Diagnostic(
                    "RV101",
                    f"unexpected invisible character {shown}",
                    span,
                    help="delete it (it may come from copying text from a web page)",
                )
            ]
        hint = "strings use double quotes" if ch == "'" else "remove it, or put it inside a string or a comment (#)"
        after = text[pos + 1 : pos + 2]
        if operator := operator_hint(ch, after):
            hint = operator
        elif ch in "\u201c\u201d\u201e\u2018\u2019\u00ab\u00bb":
            hint = 'a typographic quote: strings use plain double quotes "..." (an editor or a web page may have curled them)'
        elif ch in "+-" and (after.isalpha() or after == "_"):
            hint = (
                f"a sign goes on a number, not on a constant's name: define the constant with its sign "
                f"(`const W = {ch}0.5`) and write `(W)`"
            )
        elif ch == "/" and text.startswith(("//", "/*"), pos):
            hint = f"comments start with `#`, not `{text[pos : pos + 2]}`"
        elif ch == "/":
            hint = "a regular expression is written /.../ on one line"
        elif ch == '"':
            line_end = text.find("\n", pos)
            rest = text[pos + 1 : line_end if line_end >= 0 else len(text)]
            curly = next((c for c in rest if c in "\u201c\u201d\u201e"), None)
            hint = (
                f"a string must be closed on the same line, with a plain double quote: the {curly} at "
                f"{':'.join(map(str, source.position(pos + 1 + rest.index(curly))))} is a typographic quote"
                if curly
                else "a string must be closed on the same line"
            )
        return [Diagnostic("RV101", f"unexpected character '{ch}'", span, help=hint)]

    token: Token | None = getattr(exc, "token", None)
    expected = set(getattr(exc, "accepts", None) or getattr(exc, "expected", None) or ())
    at_end = isinstance(exc, UnexpectedEOF) or (token is not None and token.type == "$END")
    offset = len(text) if at_end or token is None or token.start_pos is None else token.start_pos

    opener = _unclosed_opener(text, offset)
    if at_end:
        if opener is not None:
            pos, ch = opener
            closer = {"{": "}", "(": ")", "[": "]"}[ch]
            return [
                Diagnostic(
                    "RV103",
                    f"this '{ch}' is never closed",
                    source.span(pos, pos + 1),
                    help=f"add '{closer}' to close it; the file ends before it is closed",
                )
            ]
        return [
            Diagnostic(
                "RV101",
                f"unexpected end of file; expected {_describe_expected(expected)}",
                source.end_span,
                help="the last rule is incomplete",
            )
        ]

    assert token is not None  # only an unexpected end of file comes without a token
    span = source.span(offset, offset + len(str(token.value)))
    if token.value in keywords() and ("NAME" in expected or "QUOTED_NAME" in expected):
        return [
            Diagnostic(
                "RV102",
                f"'{token.value}' is a reserved word and cannot be used as a name",
                span,
                help=f"write it in backticks to use it as a name: `{token.value}`",
            )
        ]
    known = token_hint(token, expected, source, opener)
    if known is not None:
        return [known]
    misspelled = _misspelled_keyword(token, expected, source)
    if misspelled is not None:
        return [misspelled]
    message = f"unexpected {_describe_token(token)}; expected {_describe_expected(expected)}"
    try:
        label = _example_label(exc, token)
    except Exception:  # the example table must never turn a syntax error into a crash
        label = None
    hint = label or _generic_hint(expected)
    if _CALL_TOOL.search(text, 0, offset):
        label = hint = (
            f"`call NAME` names the tool itself: `call {shorten(str(token.value))}` (no `tool` before the name)"
        )
    if token.type == "SIGNED_NUMBER" and ("NAME" in expected or "QUOTED_NAME" in expected):
        hint = (
            f"a name starts with a letter or '_'; to use {quoted(shorten(str(token.value)))} as a name, "
            f"write it in backticks: `{shorten(str(token.value))}`"
        )
    elif opener is not None and opener[1] == "{" and "RBRACE" in expected and label is None:
        line, col = source.position(opener[0])
        hint = f"the block opened at {line}:{col} is not closed before this"
    elif opener is not None and opener[1] == "(" and "RPAR" in expected and label is None:
        line, col = source.position(opener[0])
        if _WEIGHT.fullmatch(text, opener[0] + 1, offset):  # a rule's weight, not a condition
            hint = f"the '(' at {line}:{col} is not closed before this; add ')' after the weight"
        else:
            hint = f"the '(' at {line}:{col} is not closed before this; add ')' (or continue with `and`/`or`)"
    return [Diagnostic("RV101", message, span, help=hint)]
