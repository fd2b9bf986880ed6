"""The formatter: `.rlvp` text -> the same rules in the printer's canonical layout, comments kept.

`format_source(text)` parses the text, prints every item with `printer.print_item` (conditions
with ``juxtapose=True``: ``call x ok result matches /y/ and seen (...)``) and puts each comment
back where it stood (docs/language.md, "Formatting"):

1. **Own-line comments between items** stay directly before the item that follows them, in order
   (the file's header is the comments before the first item); comments after the last item stay at
   the end.  Between items, and between such comments, there is one blank line where the printer
   puts one (before and after each rule or `test` block) or where the source had one or more; none
   otherwise.
2. **A trailing comment** (`... # note` after code on the same line) stays at the end of the
   printed line that holds the last token before it; when two or more trailing comments land on
   one printed line (a clause the printer joins into one line), they all go on their own lines
   directly above it, in source order.
3. **Tables of declarations**: in a run of ``tool`` declarations on consecutive lines (no blank or
   comment line between), the ``:`` and the ``target`` line up in columns; in a run of ``const``s,
   the ``=``.
4. **Long lines**: a printed line over `MAX_WIDTH` characters that holds a condition is broken
   before each top-level ``or`` (without one, each top-level ``and``), the continuation lines indented two
   levels deeper (`wrap_line`).
5. **An own-line comment inside an item** (a rule's block, a `test` block, a declaration written
   over several lines) goes on its own line directly above the printed line that holds the first
   token after it, indented as that line (before a closing brace: as the block's contents).  Blank
   lines inside an item are dropped.

Tokens are paired between the source and the printed item by a longest-matching-subsequence diff
of their texts (`difflib`), so a token the printer rewrites (``0.50`` -> ``+0.5``) borrows the
position of its nearest paired neighbour.  Comment texts are kept as written, minus trailing
whitespace; line ends are ``\\n``.
"""

from __future__ import annotations

import bisect
import copy
import difflib
import functools
from collections.abc import Sequence
from typing import cast

from lark import Token
from lark.exceptions import UnexpectedInput
from lark.lexer import BasicLexer, LexerThread

from .. import ast
from ..diagnostics import RuleError, has_errors
from ..source import SourceFile
from .errors import syntax_diagnostic
from .grammar import get_parser
from .printer import INDENT, print_item, print_name, print_number
from .transform import to_ast

_Pos = tuple[int, int]  # (line, column), both 1-based

#: The longest printed line left whole (characters, indentation included); a longer one holding a
#: condition is broken before its top-level ``or``s (without one, its ``and``s).
MAX_WIDTH = 100
_OPEN, _CLOSE = "([{", ")]}"


def format_source(text: str, *, path: str = "<string>") -> str:
    """`text` (a whole rule file) in canonical layout with its comments kept (module docstring).

    Args:
        text: the rule file's text (any line ends).
        path: the name its diagnostics carry (``rules/x.rlvp``).

    Returns:
        The formatted text: ``\\n`` line ends, one final newline ("" for a file with no items and no
        comments).  Formatting it again returns it unchanged.

    Raises:
        RuleError: the text does not parse (its ``diagnostics``: syntax errors with file:line:col,
            or a value the parser refuses); nothing is formatted.
    """
    source = SourceFile(path, text)
    items = _parse(source)
    tokens = tokenize(text, keep_ignored=True)
    code = [t for t in tokens if t.type not in ("WS", "COMMENT")]
    comments = [t for t in tokens if t.type == "COMMENT"]
    return _Layout(items, code, comments).text()


@functools.lru_cache(maxsize=2)
def _lexer(keep_ignored: bool) -> BasicLexer:
    """The grammar's tokens read by one context-free lexer, built once (`Lark.lex` builds one per call)."""
    conf = copy.copy(get_parser().lexer_conf)
    if keep_ignored:
        conf.ignore = ()
    return BasicLexer(conf)


def tokenize(text: str, *, keep_ignored: bool = False) -> list[Token]:
    """The tokens of rule text, as `Lark.lex` gives them (with `keep_ignored`, the spaces and comments too).

    Raises:
        lark.exceptions.UnexpectedCharacters: a character no token starts with (text that parses never has one).
    """
    return list(LexerThread.from_text(_lexer(keep_ignored), text).lex(None))  # type: ignore[no-untyped-call]


def _parse(source: SourceFile) -> tuple[ast.Item, ...]:
    """The items of `source`, or RuleError with its errors (as the parse stage, `rlvp_dsl.parser`)."""
    try:
        tree = get_parser().parse(source.text)
    except UnexpectedInput as exc:
        raise RuleError(syntax_diagnostic(exc, source), {source.path: source}) from None
    items, diagnostics = to_ast(tree, source)
    if has_errors(diagnostics):
        raise RuleError(diagnostics, {source.path: source})
    return tuple(items)


def _start(node: ast.Item) -> _Pos:
    return node.span.line, node.span.column


def _end(node: ast.Item) -> _Pos:
    return node.span.end_line, node.span.end_column


def _pos(token: Token) -> _Pos:
    return token.line or 0, token.column or 0


class _Layout:
    """One file's items, code tokens and comments, laid out by `text`."""

    def __init__(self, items: Sequence[ast.Item], code: list[Token], comments: list[Token]) -> None:
        self.items = items
        self.code = code
        self.code_pos = [_pos(t) for t in code]
        self.starts = [_start(item) for item in items]
        self.inside: list[list[Token]] = [[] for _ in items]  # comments within item i's span
        self.trailing_after: list[list[Token]] = [[] for _ in items]  # `}  # note`: after item i, same line
        self.before: list[list[Token]] = [[] for _ in items]  # own-line comments before item i
        self.after_last: list[Token] = []
        for comment in comments:
            self._assign(comment)
        self.aligned = self._align()

    def _assign(self, comment: Token) -> None:
        at = _pos(comment)
        i = bisect.bisect_right(self.starts, at) - 1  # the last item starting before the comment
        if i >= 0 and at < _end(self.items[i]):
            self.inside[i].append(comment)
        elif i >= 0 and comment.line == self.items[i].span.end_line:
            self.trailing_after[i].append(comment)
        elif i + 1 < len(self.items):
            self.before[i + 1].append(comment)
        else:
            self.after_last.append(comment)

    def _align(self) -> dict[int, str]:
        """Item index -> its declaration with columns aligned: in a run of ``tool`` declarations on
        consecutive lines (no blank or comment line between), the ``:`` of those with tags or a
        target, and the ``target`` of those with one, line up; in such a run of ``const``s, the ``=``."""
        aligned: dict[int, str] = {}
        for run in self._runs(ast.ToolDecl):
            decls = [cast(ast.ToolDecl, self.items[i]) for i in run]
            heads = ["tool " + print_name(d.name) for d in decls]
            tags = [" : " + ", ".join(print_name(t) for t in d.tags) if d.tags else "" for d in decls]
            targets = ["" if d.target is None else " target " + print_name(d.target) for d in decls]
            width = max((len(h) for h, t, g in zip(heads, tags, targets) if t or g), default=0)
            firsts = [h.ljust(width) + t if t or g else h for h, t, g in zip(heads, tags, targets)]
            width = max((len(f) for f, g in zip(firsts, targets) if g), default=0)
            for i, first, target in zip(run, firsts, targets):
                aligned[i] = first.ljust(width) + target if target else first
        for run in self._runs(ast.ConstDecl):
            consts = [cast(ast.ConstDecl, self.items[i]) for i in run]
            heads = ["const " + print_name(c.name) for c in consts]
            width = max(len(h) for h in heads)
            for i, head, const in zip(run, heads, consts):
                aligned[i] = f"{head.ljust(width)} = {print_number(const.value)}"
        return aligned

    def _runs(self, kind: type) -> list[list[int]]:
        """The runs (two items or more) of `kind` items on consecutive lines, no comment line between
        them once formatted."""
        runs: list[list[int]] = []
        for i, item in enumerate(self.items):
            if not isinstance(item, kind):
                continue
            if runs and runs[-1][-1] == i - 1 and not self._comment_above(i):
                if item.span.line - self.items[i - 1].span.end_line <= 1:  # no blank line between
                    runs[-1].append(i)
                    continue
            runs.append([i])
        return [run for run in runs if len(run) > 1]

    def _comment_above(self, i: int) -> bool:
        """Whether a comment goes on its own line above one-line item i: one before it, one inside
        it on its own line, or two trailing ones (rules 1, 2 and 5 of the module docstring)."""
        own = sum(not self._code_before_on_line(c) for c in self.inside[i])
        trailing = len(self.inside[i]) - own + len(self.trailing_after[i])
        return bool(self.before[i]) or own > 0 or trailing > 1

    def text(self) -> str:
        lines: list[str] = []
        previous_rule = False
        previous_end = 0  # the source line the previous element ended on (0: the file's start)
        for i, item in enumerate(self.items):
            is_rule = isinstance(item, (*ast.RULE_TYPES, ast.InlineTest))
            blank = bool(lines) and (is_rule or previous_rule)
            for comment in self.before[i]:
                if lines and (blank or (comment.line or 0) - previous_end > 1):
                    lines.append("")
                blank = False
                lines.append(_comment_text(comment))
                previous_end = comment.line or 0
            if lines and (blank or item.span.line - previous_end > 1):
                lines.append("")
            lines.extend(self._item_lines(i))
            previous_rule = is_rule
            previous_end = item.span.end_line
        for comment in self.after_last:
            if lines and (comment.line or 0) - previous_end > 1:
                lines.append("")
            lines.append(_comment_text(comment))
            previous_end = comment.line or 0
        return "\n".join(lines) + "\n" if lines else ""

    def _item_lines(self, i: int) -> list[str]:
        """Item i printed, its inner comments placed (rules 2 and 3) and any comment after it on
        its last line put at the end of its last printed line."""
        whole = self.aligned.get(i) or print_item(self.items[i], juxtapose=True)
        printed = [part for line in whole.split("\n") for part in wrap_line(line)]
        above: dict[int, list[str]] = {}  # printed line index -> own-line comments above it
        trailing: dict[int, list[str]] = {}
        if self.inside[i]:
            self._place_inside(i, printed, above, trailing)
        for comment in self.trailing_after[i]:
            trailing.setdefault(len(printed) - 1, []).append(_comment_text(comment))
        out: list[str] = []
        for k, line in enumerate(printed):
            ends = trailing.get(k, [])
            moved = above.get(k, []) + (ends if len(ends) > 1 else [])
            indent = _comment_indent(printed, k)
            out.extend(indent + text for text in moved)
            out.append(line + "  " + ends[0] if len(ends) == 1 else line)
        return out

    def _place_inside(
        self, i: int, printed: list[str], above: dict[int, list[str]], trailing: dict[int, list[str]]
    ) -> None:
        """Put item i's inner comments on printed lines: pair the item's source tokens with the
        printed item's tokens, then anchor each comment at its neighbouring token."""
        item = self.items[i]
        lo = bisect.bisect_left(self.code_pos, _start(item))
        hi = bisect.bisect_right(self.code_pos, _end(item))
        source_tokens = self.code[lo:hi]
        printed_tokens = tokenize("\n".join(printed))
        matcher = difflib.SequenceMatcher(
            None, [t.value for t in source_tokens], [t.value for t in printed_tokens], autojunk=False
        )
        line_of: dict[int, int] = {}  # source token index (in the item) -> printed line index
        for a, b, size in matcher.get_matching_blocks():
            for k in range(size):
                line_of[a + k] = (printed_tokens[b + k].line or 1) - 1
        for comment in self.inside[i]:
            at = _pos(comment)
            following = bisect.bisect_left(self.code_pos, at, lo, hi) - lo  # first token after it
            if self._code_before_on_line(comment):  # a trailing comment
                line = _nearest(line_of, following - 1, -1, 0)
                trailing.setdefault(line, []).append(_comment_text(comment))
            else:
                line = _nearest(line_of, following, +1, len(printed) - 1)
                above.setdefault(line, []).append(_comment_text(comment))

    def _code_before_on_line(self, comment: Token) -> bool:
        at = _pos(comment)
        k = bisect.bisect_left(self.code_pos, at) - 1
        return k >= 0 and self.code[k].end_line == comment.line


def wrap_line(line: str, width: int = MAX_WIDTH) -> list[str]:
    """`line` (one printed line, no newline) as it is laid out: whole when it has at most `width`
    characters, else broken before each ``or`` outside parentheses, brackets and braces (without
    one, before each such ``and``), the pieces after the first indented two levels deeper than the line."""
    if len(line) <= width:
        return [line]
    depth = 0
    breaks: dict[str, list[int]] = {"and": [], "or": []}
    for token in tokenize(line):
        value = str(token.value)
        if value in _OPEN:
            depth += 1
        elif value in _CLOSE:
            depth -= 1
        elif depth == 0 and value in breaks and token.type not in ("STRING", "REGEX", "QUOTED_NAME"):
            breaks[value].append(token.start_pos or 0)
    cuts = breaks["or"] or breaks["and"]  # `or` binds loosest: when there is one, it is the top
    if not cuts:
        return [line]
    indent = line[: len(line) - len(line.lstrip())] + INDENT * 2
    bounds = [0, *cuts, len(line)]
    pieces = [line[a:b].rstrip() for a, b in zip(bounds, bounds[1:])]
    return [pieces[0]] + [indent + piece for piece in pieces[1:]]


def _nearest(line_of: dict[int, int], index: int, step: int, default: int) -> int:
    """The printed line of the paired source token nearest `index`, walking by `step`."""
    last = max(line_of, default=-1)
    while 0 <= index <= last:
        if index in line_of:
            return line_of[index]
        index += step
    return default


def _comment_indent(printed: list[str], k: int) -> str:
    """The indentation of a comment above printed line k: that line's, or, above a closing brace,
    the block's contents' (one level deeper than a line that opens a block)."""
    line = printed[k]
    if not line.lstrip().startswith("}") or k == 0:
        return line[: len(line) - len(line.lstrip())]
    prev = printed[k - 1]
    indent = prev[: len(prev) - len(prev.lstrip())]
    return indent + INDENT if prev.rstrip().endswith("{") else indent


def _comment_text(comment: Token) -> str:
    return str(comment.value).rstrip()
