"""The lark tree -> the syntax tree (`rlvp_dsl.ast`), iteratively (deep or long inputs never recurse).

`to_ast(tree, source)` returns the items and the diagnostics found while building them
(nesting deeper than `MAX_DEPTH`, bad escapes, bad numbers).  The `test` blocks are built
by the mixin in `rlvp_dsl.syntax.inline_tests`.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Callable, TypeVar

from lark import Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import VisitError
from lark.tree import Meta

from .. import ast
from ..diagnostics import Diagnostic
from ..source import SourceFile, Span
from .grammar import keywords
from .inline_tests import Children, InlineTestTransformer

#: Deepest nesting of parentheses / `not` / `seen` accepted (deeper: RV106).
MAX_DEPTH = 100

#: A literal as written: a string, a number, true / false or null.
Scalar = str | float | bool | None

#: A text test as the atoms receive it: (op, value, flags).
TextOp = tuple[str, str, str]

#: An argument test as `arg_atom` receives it: (op, value, flags); the value a `Scalar`, a
#: tuple of them for ``in``, None for ``exists``.
ArgOp = tuple[str, object, str]

#: A condition node `_nest` records the depth of, returned as given.
_Nested = TypeVar("_Nested", bound=ast.Expr)

#: A transformer callback that takes the rule's `Meta` (as `v_args(meta=True)` makes it).
_MetaMethod = Callable[["_ToAst", Meta, Children], ast.Expr]


def _strip_backticks(text: str) -> str:
    return text[1:-1] if text.startswith("`") and text.endswith("`") else text


def _unescape(body: str) -> str:
    if "\\" not in body:  # no escape: the body itself (a 50 MB string is not walked character by character)
        return body
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/"}
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "u" and len(body) >= i + 6:
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            raise ValueError(f"unknown escape '\\{nxt}' in a string")
    return "".join(out)


def _status(status: str) -> _MetaMethod:
    """The `_ToAst` method of a status atom (``ok``, ``error``, ...)."""

    @v_args(meta=True)
    def method(self: _ToAst, meta: Meta, children: Children) -> ast.StatusAtom:
        return ast.StatusAtom(status, self._span(meta))

    return method


def _text_atom(field: str) -> _MetaMethod:
    """The `_ToAst` method of a text-field atom (``error_text``, ``result``, ``text``)."""

    @v_args(meta=True)
    def method(self: _ToAst, meta: Meta, children: Children) -> ast.TextTest:
        op, value, flags = children[0]
        return ast.TextTest(field, op, value, flags, self._span(meta))

    return method


class _ToAst(InlineTestTransformer, Transformer_NonRecursive[Token, tuple[ast.Item, ...]]):
    """lark tree -> `rlvp_dsl.ast` nodes (iterative, so deep or long inputs never recurse)."""

    def __init__(self, source: SourceFile) -> None:
        super().__init__()
        self.source = source
        self.diagnostics: list[Diagnostic] = []
        self.depth: dict[int, int] = {}

    # -- helpers
    def _span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.source.path, 0, 0)
        return Span(self.source.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok_span(self, tok: Token) -> Span:
        # the lexer sets every position; lark types them Optional for tokens made by hand
        assert tok.line is not None and tok.column is not None
        assert tok.end_line is not None and tok.end_column is not None
        return Span(self.source.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _nest(self, node: _Nested, *children: ast.Expr | None) -> _Nested:
        d = 1 + max((self.depth.get(id(c), 0) for c in children if c is not None), default=0)
        self.depth[id(node)] = d
        if d == MAX_DEPTH + 1:
            self.diagnostics.append(
                Diagnostic(
                    "RV106",
                    f"conditions nested more than {MAX_DEPTH} deep",
                    node.span,
                    help="split the condition into several rules or use `and`/`or` chains, which may be any length",
                )
            )
        return node

    # -- names, literals
    @v_args(meta=True)
    def name(self, meta: Meta, children: list[Token]) -> ast.Name:
        tok = children[0]
        text = unicodedata.normalize("NFC", _strip_backticks(str(tok)))
        if tok.type == "NAME" and text in keywords():
            self.diagnostics.append(
                Diagnostic(
                    "RV102",
                    f"'{text}' is a reserved word and cannot be used as a name",
                    self._tok_span(tok),
                    help=f"write it in backticks to use it as a name: `{text}`",
                )
            )
        elif tok.type == "NAME":
            self._glued(tok)
        return ast.Name(text, self._tok_span(tok))

    def _glued(self, tok: Token) -> None:
        """A name the lexer cut from the end of a longer word (`callx` lexes as `call` + `x` where
        no name may stand): an error at the whole word, not a silent `call x`."""
        source = self.source.text
        start = tok.start_pos
        if not start or not (source[start - 1].isalnum() or source[start - 1] == "_"):
            return
        begin = start
        while begin > 0 and (source[begin - 1].isalnum() or source[begin - 1] == "_"):
            begin -= 1
        word, head = source[begin : tok.end_pos], source[begin:start]
        span = self.source.span(begin, tok.end_pos)
        self.diagnostics.append(
            Diagnostic(
                "RV101",
                f"'{word}' reads as '{head}' followed by the name '{tok}'",
                span,
                help=f"put a space after '{head}' if you meant `{head} {tok}`; a name cannot start there",
            )
        )

    def number(self, children: list[Token]) -> float:
        tok = children[0]
        value = float(tok)
        if math.isfinite(value):
            return value
        shown = str(tok) if len(str(tok)) <= 40 else str(tok)[:37] + "..."
        self.diagnostics.append(
            Diagnostic(
                "RV104",
                f"number {shown} is out of range (it overflows to infinity)",
                self._tok_span(tok),
                help="write a number whose magnitude is below 1e308",
            )
        )
        return 0.0

    def _string(self, tok: Token) -> str:
        try:
            return _unescape(str(tok)[1:-1])
        except ValueError as exc:
            self.diagnostics.append(
                Diagnostic(
                    "RV104", str(exc), self._tok_span(tok), help='escapes are \\n \\t \\r \\" \\\\ \\/ and \\uXXXX'
                )
            )
            return str(tok)[1:-1]

    def _regex(self, tok: Token) -> tuple[str, str]:
        text = str(tok)
        end = text.rfind("/")
        return text[1:end].replace("\\/", "/"), text[end + 1 :]

    def literal(self, children: Children) -> Scalar:
        tok = children[0]
        if isinstance(tok, float):
            return tok
        if tok.type == "STRING":
            return self._string(tok)
        return {"TRUE": True, "FALSE": False, "NULL": None}[tok.type]

    # -- declarations
    @v_args(meta=True)
    def include(self, meta: Meta, children: list[Token]) -> ast.Include:
        return ast.Include(self._string(children[0]), self._span(meta))

    @v_args(meta=True)
    def tools_from(self, meta: Meta, children: list[Token]) -> ast.ToolsFrom:
        return ast.ToolsFrom(self._string(children[0]), self._span(meta))

    def tag_list(self, children: list[ast.Name]) -> tuple[ast.Name, ...]:
        return tuple(children)

    def target_clause(self, children: list[ast.Name]) -> ast.Name:
        return children[0]

    @v_args(meta=True)
    def tool_decl(self, meta: Meta, children: Children) -> ast.ToolDecl:
        name, tags, target = children
        return ast.ToolDecl(name, tags or (), target, None, self._span(meta))

    @v_args(meta=True)
    def const_decl(self, meta: Meta, children: Children) -> ast.ConstDecl:
        return ast.ConstDecl(children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def weight(self, meta: Meta, children: Children) -> ast.Weight:
        value = children[0]
        if isinstance(value, ast.Name):
            return ast.Weight(None, value, self._span(meta))
        return ast.Weight(value, None, self._span(meta))

    # -- rules
    def on_clause(self, children: list[ast.Expr]) -> ast.Expr:
        return children[0]

    unless_clause = open_clause = on_clause

    def discharge_clause(self, children: Children) -> tuple[ast.Expr, ast.Binding | None]:
        return children[0], children[1]

    def same_clause(self, children: list[ast.Binding]) -> ast.Binding:
        return children[0]

    def returned_clause(self, children: list[ast.Binding]) -> tuple[str, ast.Binding]:
        return ("returned", children[0])

    @v_args(meta=True)
    def binding(self, meta: Meta, children: list[ast.Name]) -> ast.Binding:
        return ast.Binding("arg", children[0], self._span(meta))

    @v_args(meta=True)
    def target_binding(self, meta: Meta, children: Children) -> ast.Binding:
        return ast.Binding("target", None, self._span(meta))

    @v_args(meta=True)
    def call_binding(self, meta: Meta, children: Children) -> ast.Binding:
        return ast.Binding("call", None, self._span(meta))

    @v_args(meta=True)
    def message_binding(self, meta: Meta, children: Children) -> ast.Binding:
        return ast.Binding("message", None, self._span(meta))

    def deadline_clause(self, children: list[ast.Deadline]) -> ast.Deadline:
        return children[0]

    @v_args(meta=True)
    def deadline_before(self, meta: Meta, children: list[ast.Expr]) -> ast.Deadline:
        return ast.Deadline("before", children[0], 0, self._span(meta))

    @v_args(meta=True)
    def deadline_within(self, meta: Meta, children: Children) -> ast.Deadline:
        value = children[0]
        if value != int(value) or value < 1:
            self.diagnostics.append(
                Diagnostic(
                    "RV209",
                    f"'within' takes a whole number of calls of at least 1 (got {value:g})",
                    self._span(meta),
                    help="write e.g. `within 3 calls`",
                )
            )
        return ast.Deadline("within", None, max(1, int(value)), self._span(meta))

    @v_args(meta=True)
    def deadline_end(self, meta: Meta, children: Children) -> ast.Deadline:
        return ast.Deadline("end", None, 0, self._span(meta))

    def repeat_body(self, children: Children) -> tuple[ast.Expr | None, ast.Expr | None]:
        return children[0], children[1]  # (on, reset)

    def reset_clause(self, children: list[ast.Expr]) -> ast.Expr:
        return children[0]

    def blind_body(self, children: Children) -> tuple[ast.Expr | None, ast.Expr]:
        return children[0], children[1]

    def per_unit(self, children: Children) -> bool:
        return True

    def max_clause(self, children: list[float]) -> float:
        return children[0]

    def start_clause(self, children: list[float]) -> float:
        return children[0]

    def decreasing(self, children: Children) -> str:
        return "decreasing"

    def increasing(self, children: Children) -> str:
        return "increasing"

    @v_args(meta=True)
    def violation(self, meta: Meta, children: Children) -> ast.Violation:
        name, weight, on, unless = children
        return ast.Violation(name, weight, on, unless, self._span(meta))

    @v_args(meta=True)
    def obligation(self, meta: Meta, children: Children) -> ast.Obligation:
        name, credit, expire, open_, (discharge, same), deadline = children
        return ast.Obligation(
            name, credit, expire, open_, discharge, same, deadline or ast.Deadline("end"), self._span(meta)
        )

    @v_args(meta=True)
    def repeat_error(self, meta: Meta, children: Children) -> ast.RepeatError:
        name, weight, body = children
        on, reset = body if body else (None, None)
        span = self._span(meta)
        return ast.RepeatError(name or ast.Name("repeat_error", span), weight, reset, span, on=on)

    @v_args(meta=True)
    def blind_destructive(self, meta: Meta, children: Children) -> ast.BlindDestructive:
        name, weight, body = children
        on, inspected = body if body else (None, None)
        span = self._span(meta)
        return ast.BlindDestructive(name or ast.Name("blind_destructive", span), weight, on, inspected, span)

    @v_args(meta=True)
    def progress(self, meta: Meta, children: Children) -> ast.Progress:
        name, weight, per_unit, cap, signal, direction, start = children
        return ast.Progress(name, weight, signal, direction, bool(per_unit), cap, start, self._span(meta))

    # -- conditions
    @v_args(meta=True)
    def or_expr(self, meta: Meta, children: list[ast.Expr]) -> ast.Expr:
        return self._nest(ast.Or(tuple(children), self._span(meta)), *children)

    @v_args(meta=True)
    def and_expr(self, meta: Meta, children: list[ast.Expr]) -> ast.Expr:
        return self._nest(ast.And(tuple(children), self._span(meta)), *children)

    @v_args(meta=True)
    def not_(self, meta: Meta, children: list[ast.Expr]) -> ast.Expr:
        return self._nest(ast.Not(children[0], self._span(meta)), children[0])

    @v_args(meta=True)
    def call_atom(self, meta: Meta, children: Children) -> ast.CallAtom:
        return ast.CallAtom(children[0] or (), self._span(meta))

    def tool_set(self, children: list[ast.Name]) -> tuple[ast.Name, ...]:
        return tuple(children)

    def says(self, children: list[TextOp]) -> TextOp:
        return children[0]

    def pattern(self, children: list[Token]) -> TextOp:
        tok = children[0]
        if tok.type == "STRING":
            return ("contains", self._string(tok), "")
        body, flags = self._regex(tok)
        return ("matches", body, flags)

    def _message(self, kind: str, meta: Meta, children: Children) -> ast.Expr:
        span = self._span(meta)
        atom = ast.KindAtom(kind, span)
        if children[0] is None:
            return atom
        op, value, flags = children[0]
        return ast.And((atom, ast.TextTest("text", op, value, flags, span)), span)

    @v_args(meta=True)
    def user_atom(self, meta: Meta, children: Children) -> ast.Expr:
        return self._message("user", meta, children)

    @v_args(meta=True)
    def assistant_atom(self, meta: Meta, children: Children) -> ast.Expr:
        return self._message("assistant", meta, children)

    @v_args(meta=True)
    def tag_atom(self, meta: Meta, children: list[ast.Name]) -> ast.TagAtom:
        return ast.TagAtom(children[0], self._span(meta))

    ok_atom = _status("ok")
    error_atom = _status("error")
    malformed_atom = _status("malformed")
    no_result_atom = _status("no_result")

    # text tests return (op, value, flags); the atom wraps them with the field
    def contains(self, children: list[Token]) -> TextOp:
        return ("contains", self._string(children[0]), "")

    def startswith(self, children: list[Token]) -> TextOp:
        return ("startswith", self._string(children[0]), "")

    def matches(self, children: list[Token]) -> TextOp:
        body, flags = self._regex(children[0])
        return ("matches", body, flags)

    @v_args(meta=True)
    def text_compare(self, meta: Meta, children: Children) -> TextOp:
        op = str(children[0])
        if op not in ("==", "!="):
            self.diagnostics.append(
                Diagnostic(
                    "RV209",
                    f"text can only be compared with == or != (got {op})",
                    self._span(meta),
                    help="use `contains`, `startswith` or `matches`",
                )
            )
        return (op, self._string(children[1]), "")

    error_text_atom = _text_atom("error_text")
    result_atom = _text_atom("result")
    text_atom = _text_atom("text")

    def exists(self, children: Children) -> ArgOp:
        return ("exists", None, "")

    def compare(self, children: Children) -> ArgOp:
        return (str(children[0]), children[1], "")

    def one_of(self, children: list[Scalar]) -> ArgOp:
        return ("in", tuple(children), "")

    @v_args(meta=True)
    def arg_atom(self, meta: Meta, children: Children) -> ast.ArgTest:
        name, (op, value, flags) = children
        span = self._span(meta)
        if op in ("<", "<=", ">", ">=") and (isinstance(value, bool) or not isinstance(value, float)):
            self.diagnostics.append(
                Diagnostic(
                    "RV209", f"'{op}' compares numbers (got {value!r})", span, help="use == or != to compare text"
                )
            )
        return ast.ArgTest(name, op, value, flags, span)

    @v_args(meta=True)
    def signal_atom(self, meta: Meta, children: Children) -> ast.SignalTest:
        return ast.SignalTest(children[0], str(children[1]), children[2], self._span(meta))

    def since_clause(self, children: list[ast.Expr]) -> ast.Expr:
        return children[0]

    @v_args(meta=True)
    def seen_atom(self, meta: Meta, children: Children) -> ast.Expr:
        cond, same, since = children
        returned = isinstance(same, tuple)
        binding = same[1] if returned else same
        return self._nest(ast.Seen(cond, binding, since, self._span(meta), returned=returned), cond, since)

    @v_args(meta=True)
    def start(self, meta: Meta, children: list[ast.Item]) -> tuple[ast.Item, ...]:
        return tuple(children)


def to_ast(tree: Tree[Token], source: SourceFile) -> tuple[tuple[ast.Item, ...], list[Diagnostic]]:
    """Build the items of one file from its lark tree; diagnostics for what the grammar
    accepts but the language does not (too deep, bad escapes)."""
    transformer = _ToAst(source)
    try:
        items = transformer.transform(tree)
    except VisitError as exc:  # a bug in the transformer, not the user's fault: re-raise the cause
        raise exc.orig_exc from exc
    return items, transformer.diagnostics
