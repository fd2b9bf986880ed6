"""The lark tree -> the syntax tree (`rlvp_dsl.ast`), iteratively (deep or long inputs never recurse).

`to_ast(tree, source)` returns the items and the diagnostics found while building them
(nesting deeper than `MAX_DEPTH`, bad escapes, bad numbers).  The `test` blocks are built
by the mixin in `rlvp_dsl.syntax.inline_tests`.
"""

from __future__ import annotations

import math
import unicodedata

from lark import Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import VisitError

from .. import ast
from ..diagnostics import Diagnostic
from ..source import SourceFile, Span
from .grammar import keywords
from .inline_tests import InlineTestTransformer

#: Deepest nesting of parentheses / `not` / `seen` accepted (deeper: RV106).
MAX_DEPTH = 100


def _strip_backticks(text: str) -> str:
    return text[1:-1] if text.startswith("`") and text.endswith("`") else text


def _unescape(body: str) -> str:
    if "\\" not in body:  # no escape: the body itself (a 50 MB string is not walked character by character)
        return body
    out = []
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


class _ToAst(InlineTestTransformer, Transformer_NonRecursive):
    """lark tree -> `rlvp_dsl.ast` nodes (iterative, so deep or long inputs never recurse)."""

    def __init__(self, source: SourceFile):
        super().__init__()
        self.source = source
        self.diagnostics: list[Diagnostic] = []
        self.depth: dict[int, int] = {}

    # -- helpers
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.source.path, 0, 0)
        return Span(self.source.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok_span(self, tok: Token) -> Span:
        return Span(self.source.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _nest(self, node, *children):
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

    def _flat(self, node):
        return node

    # -- names, literals
    @v_args(meta=True)
    def name(self, meta, children):
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

    def number(self, children):
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

    def literal(self, children):
        tok = children[0]
        if isinstance(tok, float):
            return tok
        if tok.type == "STRING":
            return self._string(tok)
        return {"TRUE": True, "FALSE": False, "NULL": None}[tok.type]

    # -- declarations
    @v_args(meta=True)
    def include(self, meta, children):
        return ast.Include(self._string(children[0]), self._span(meta))

    @v_args(meta=True)
    def tools_from(self, meta, children):
        return ast.ToolsFrom(self._string(children[0]), self._span(meta))

    def tag_list(self, children):
        return tuple(children)

    def target_clause(self, children):
        return children[0]

    @v_args(meta=True)
    def tool_decl(self, meta, children):
        name, tags, target = children
        return ast.ToolDecl(name, tags or (), target, None, self._span(meta))

    @v_args(meta=True)
    def const_decl(self, meta, children):
        return ast.ConstDecl(children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def weight(self, meta, children):
        value = children[0]
        if isinstance(value, ast.Name):
            return ast.Weight(None, value, self._span(meta))
        return ast.Weight(value, None, self._span(meta))

    # -- rules
    def on_clause(self, children):
        return children[0]

    unless_clause = open_clause = on_clause

    def discharge_clause(self, children):
        return children[0], children[1]

    def same_clause(self, children):
        return children[0]

    def returned_clause(self, children):
        return ("returned", children[0])

    @v_args(meta=True)
    def binding(self, meta, children):
        return ast.Binding("arg", children[0], self._span(meta))

    @v_args(meta=True)
    def target_binding(self, meta, children):
        return ast.Binding("target", None, self._span(meta))

    @v_args(meta=True)
    def call_binding(self, meta, children):
        return ast.Binding("call", None, self._span(meta))

    def deadline_clause(self, children):
        return children[0]

    @v_args(meta=True)
    def deadline_before(self, meta, children):
        return ast.Deadline("before", children[0], 0, self._span(meta))

    @v_args(meta=True)
    def deadline_within(self, meta, children):
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
    def deadline_end(self, meta, children):
        return ast.Deadline("end", None, 0, self._span(meta))

    def repeat_body(self, children):
        return children[0], children[1]  # (on, reset)

    def reset_clause(self, children):
        return children[0]

    def blind_body(self, children):
        return children[0], children[1]

    def per_unit(self, children):
        return True

    def max_clause(self, children):
        return children[0]

    def start_clause(self, children):
        return children[0]

    def decreasing(self, children):
        return "decreasing"

    def increasing(self, children):
        return "increasing"

    @v_args(meta=True)
    def violation(self, meta, children):
        name, weight, on, unless = children
        return ast.Violation(name, weight, on, unless, self._span(meta))

    @v_args(meta=True)
    def obligation(self, meta, children):
        name, credit, expire, open_, (discharge, same), deadline = children
        return ast.Obligation(
            name, credit, expire, open_, discharge, same, deadline or ast.Deadline("end"), self._span(meta)
        )

    @v_args(meta=True)
    def repeat_error(self, meta, children):
        name, weight, body = children
        on, reset = body if body else (None, None)
        span = self._span(meta)
        return ast.RepeatError(name or ast.Name("repeat_error", span), weight, reset, span, on=on)

    @v_args(meta=True)
    def blind_destructive(self, meta, children):
        name, weight, body = children
        on, inspected = body if body else (None, None)
        span = self._span(meta)
        return ast.BlindDestructive(name or ast.Name("blind_destructive", span), weight, on, inspected, span)

    @v_args(meta=True)
    def progress(self, meta, children):
        name, weight, per_unit, cap, signal, direction, start = children
        return ast.Progress(name, weight, signal, direction, bool(per_unit), cap, start, self._span(meta))

    # -- conditions
    @v_args(meta=True)
    def or_expr(self, meta, children):
        return self._nest(ast.Or(tuple(children), self._span(meta)), *children)

    @v_args(meta=True)
    def and_expr(self, meta, children):
        return self._nest(ast.And(tuple(children), self._span(meta)), *children)

    @v_args(meta=True)
    def not_(self, meta, children):
        return self._nest(ast.Not(children[0], self._span(meta)), children[0])

    @v_args(meta=True)
    def call_atom(self, meta, children):
        return ast.CallAtom(children[0] or (), self._span(meta))

    def tool_set(self, children):
        return tuple(children)

    def says(self, children):
        return children[0]

    def pattern(self, children):
        tok = children[0]
        if tok.type == "STRING":
            return ("contains", self._string(tok), "")
        body, flags = self._regex(tok)
        return ("matches", body, flags)

    def _message(self, kind, meta, children):
        span = self._span(meta)
        atom = ast.KindAtom(kind, span)
        if children[0] is None:
            return atom
        op, value, flags = children[0]
        return ast.And((atom, ast.TextTest("text", op, value, flags, span)), span)

    @v_args(meta=True)
    def user_atom(self, meta, children):
        return self._message("user", meta, children)

    @v_args(meta=True)
    def assistant_atom(self, meta, children):
        return self._message("assistant", meta, children)

    @v_args(meta=True)
    def tag_atom(self, meta, children):
        return ast.TagAtom(children[0], self._span(meta))

    def _status(status):
        @v_args(meta=True)
        def method(self, meta, children):
            return ast.StatusAtom(status, self._span(meta))

        return method

    ok_atom = _status("ok")
    error_atom = _status("error")
    malformed_atom = _status("malformed")
    no_result_atom = _status("no_result")

    # text tests return (op, value, flags); the atom wraps them with the field
    def contains(self, children):
        return ("contains", self._string(children[0]), "")

    def startswith(self, children):
        return ("startswith", self._string(children[0]), "")

    def matches(self, children):
        body, flags = self._regex(children[0])
        return ("matches", body, flags)

    @v_args(meta=True)
    def text_compare(self, meta, children):
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

    def _text_atom(field):
        @v_args(meta=True)
        def method(self, meta, children):
            op, value, flags = children[0]
            return ast.TextTest(field, op, value, flags, self._span(meta))

        return method

    error_text_atom = _text_atom("error_text")
    result_atom = _text_atom("result")
    text_atom = _text_atom("text")

    def exists(self, children):
        return ("exists", None, "")

    def compare(self, children):
        return (str(children[0]), children[1], "")

    def one_of(self, children):
        return ("in", tuple(children), "")

    @v_args(meta=True)
    def arg_atom(self, meta, children):
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
    def signal_atom(self, meta, children):
        return ast.SignalTest(children[0], str(children[1]), children[2], self._span(meta))

    def since_clause(self, children):
        return children[0]

    @v_args(meta=True)
    def seen_atom(self, meta, children):
        cond, same, since = children
        returned = isinstance(same, tuple)
        binding = same[1] if returned else same
        return self._nest(ast.Seen(cond, binding, since, self._span(meta), returned=returned), cond, since)

    @v_args(meta=True)
    def start(self, meta, children):
        return tuple(children)


def to_ast(tree: Tree, source: SourceFile) -> tuple[tuple[ast.Item, ...], list[Diagnostic]]:
    """Build the items of one file from its lark tree; diagnostics for what the grammar
    accepts but the language does not (too deep, bad escapes)."""
    transformer = _ToAst(source)
    try:
        items = transformer.transform(tree)
    except VisitError as exc:  # a bug in the transformer, not the user's fault: re-raise the cause
        raise exc.orig_exc from exc
    return items, transformer.diagnostics
