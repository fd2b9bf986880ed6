"""The part of the lark tree -> AST transformer that builds `test` blocks.

A mixin of `rlvp_dsl.syntax.transform._ToAst`: inline test episodes (events with JSON
arguments) and expectations.  It uses the host transformer's `_string`, `_span`
and `diagnostics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from lark import Token, v_args
from lark.tree import Meta

from .. import ast
from ..diagnostics import Diagnostic
from ..source import Span

#: The children of a grammar rule, each already transformed by its own rule's method: what
#: each position holds (a `Token`, an `ast.Name`, a float, None for an absent `[...]`) is fixed
#: by grammars/rlvp.lark, which the type checker cannot see; the methods' returns are typed.
Children = list[Any]

#: A test event's outcome as written: (status, error text).
Status = tuple[str, str]


class _MessageGroup(list[ast.EpisodeEvent]):
    """The events of one `message { ... }` group of an inline episode, before numbering."""


class _JsonObject(list[tuple[str, object]]):
    """A JSON object literal while it is being built: its (key, value) pairs."""


def _json(value: object) -> object:
    """A JSON literal of a test episode as Python data (integral numbers as int, like json.loads)."""
    if isinstance(value, _JsonObject):
        return {k: v for k, v in value}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class InlineTestTransformer:
    """Transformer methods for `test_block` and everything inside it."""

    if TYPE_CHECKING:  # provided by the host transformer (`_ToAst`)
        diagnostics: list[Diagnostic]

        def _string(self, tok: Token) -> str: ...

        def _span(self, meta: Meta) -> Span: ...

    # -- tests inside rule files
    @v_args(meta=True)
    def test_block(self, meta: Meta, children: Children) -> ast.InlineTest:
        name, (events, path), *expects = children
        return ast.InlineTest(self._string(name), tuple(expects), events, path, self._span(meta))

    def episode_file(self, children: list[Token]) -> tuple[None, str]:
        return None, self._string(children[0])

    def episode_inline(
        self, children: list[ast.EpisodeEvent | _MessageGroup]
    ) -> tuple[tuple[ast.EpisodeEvent, ...], None]:
        """The events in order; those of the k-th `message { ... }` group carry ``message=k``."""
        events: list[ast.EpisodeEvent] = []
        groups = 0
        for child in children:
            if isinstance(child, _MessageGroup):
                events.extend(attrs.evolve(e, message=groups) for e in child)
                groups += 1
            else:
                events.append(child)
        return tuple(events), None

    def episode_message(self, children: list[ast.EpisodeEvent]) -> _MessageGroup:
        return _MessageGroup(children)

    @v_args(meta=True)
    def user_event(self, meta: Meta, children: list[Token]) -> ast.EpisodeEvent:
        return ast.EpisodeEvent("user", text=self._string(children[0]), span=self._span(meta))

    @v_args(meta=True)
    def assistant_event(self, meta: Meta, children: list[Token]) -> ast.EpisodeEvent:
        return ast.EpisodeEvent("assistant", text=self._string(children[0]), span=self._span(meta))

    @v_args(meta=True)
    def call_event(self, meta: Meta, children: Children) -> ast.EpisodeEvent:
        name, arguments, status, result, *signals = children
        status, error_text = status or ("ok", "")
        return ast.EpisodeEvent(
            "call",
            name,
            tuple(arguments) if arguments else (),
            status,
            error_text,
            result or "",
            "",
            tuple(signals),
            self._span(meta),
        )

    def status_ok(self, children: Children) -> Status:
        return "ok", ""

    def status_error(self, children: list[Token | None]) -> Status:
        return "error", self._string(children[0]) if children[0] is not None else ""

    def status_malformed(self, children: list[Token | None]) -> Status:
        return "malformed", self._string(children[0]) if children[0] is not None else ""

    def status_no_result(self, children: Children) -> Status:
        return "no_result", ""

    def result_clause(self, children: list[Token]) -> str:
        return self._string(children[0])

    def signal_value(self, children: Children) -> tuple[str, float]:
        return children[0].text, children[1]

    @v_args(meta=True)
    def expect_clause(self, meta: Meta, children: Children) -> ast.Expect:
        target, at, op, value = children
        kind, index = at if at is not None else (None, 0)
        span = self._span(meta)
        if str(op) != "==":
            self.diagnostics.append(
                Diagnostic(
                    "RV209",
                    f"an expectation compares with == (got {op})",
                    span,
                    help="write e.g. `expect total == -0.5`",
                )
            )
        return ast.Expect(target, value, kind, index, span)

    def expect_target(self, children: list[ast.Name]) -> ast.Name:
        return children[0]

    def expect_total(self, children: Children) -> None:
        return None

    @v_args(meta=True)
    def expect_repeat_error(self, meta: Meta, children: Children) -> ast.Name:
        """`expect repeat_error ...`: the default name of an unnamed `repeat_error` rule."""
        return ast.Name("repeat_error", self._span(meta))

    @v_args(meta=True)
    def expect_blind_destructive(self, meta: Meta, children: Children) -> ast.Name:
        return ast.Name("blind_destructive", self._span(meta))

    @v_args(meta=True)
    def at_call(self, meta: Meta, children: list[float]) -> tuple[str, int]:
        return "call", self._index(children[0], meta)

    @v_args(meta=True)
    def at_event(self, meta: Meta, children: list[float]) -> tuple[str, int]:
        return "event", self._index(children[0], meta)

    def _index(self, value: float, meta: Meta) -> int:
        if value != int(value) or value < 0:
            self.diagnostics.append(
                Diagnostic(
                    "RV209",
                    f"an index is a whole number from 0 (got {value:g})",
                    self._span(meta),
                    help="calls and events are counted from 0",
                )
            )
        return max(0, int(value))

    def json_object(self, children: list[tuple[str, object]]) -> _JsonObject:
        return _JsonObject(children)

    def json_pair(self, children: Children) -> tuple[str, object]:
        return self._string(children[0]), _json(children[1])

    def json_array(self, children: list[object]) -> list[object]:
        return [_json(c) for c in children]
