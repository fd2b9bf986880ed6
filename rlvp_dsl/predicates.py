"""Conditions -> Python closures, specialised per event class.

`specialise(expr, kind, tool, tags)` folds every test that depends only on the
event's class (``call NAME``, ``tag``, ``user``/``assistant``, the status tests on
messages) to a constant, so that each rule costs nothing on events it can never
match.  `build(expr, slots)` turns what is left into a closure
``f(event, states) -> bool``.  Rule files are data: nothing here evaluates text
as code, and every test runs in time linear in the event's size (regexes use the
linear-time matcher in `rlvp_dsl.regex`).
"""

from __future__ import annotations

import re

from typing import Any, Callable, Mapping, cast

from . import ast
from .events import CALL, ERROR, MALFORMED, NO_RESULT, OK, Event, normalise_value
from .tools import ToolSpec
from .regex import compile_regex

#: The episode's states, one slot each (`compile.Scorer.states`): a `seen` slot holds the index of
#: the last matching event (-1: none) or, with `same`, a dict from bound value to index; a rule's
#: slots hold what that rule keeps (open obligations, progress so far).
States = list[Any]

#: A compiled condition: ``pred(event, states) -> bool``.
Pred = Callable[[Event, States], bool]

TRUE = ast.Const(True)
FALSE = ast.Const(False)
_MISSING = object()

_STATUS_SETS = {
    "ok": frozenset({OK}),
    "error": frozenset({ERROR, MALFORMED}),
    "malformed": frozenset({MALFORMED}),
    "no_result": frozenset({NO_RESULT}),
}


#: Characters that separate the tokens of a result text (`seen (... returned B)`).
_SEPARATORS = re.compile(r"[\s\"'`,;{}\[\]()<>=|]+")


def result_tokens(text: str) -> frozenset[str]:
    """The tokens of a tool result, for ``returned B``: the text split at white space and
    ``" ' ` , ; { } [ ] ( ) < > = |``; each token also without a trailing ``. : ! ?``
    (``"Reservation ABC123."`` holds ``ABC123``).  A value is found only as a whole token,
    never as a substring (``ABC1`` is not in ``ABC123``).  Linear in the text."""
    out: set[str] = set()
    for token in _SEPARATORS.split(text):
        if token:
            out.add(token)
            out.add(token.rstrip(".:!?"))
    out.discard("")
    return frozenset(out)


#: (event, its `Event.argument_key`): the last key `binding_key` computed (one tuple, replaced whole).
_last_call_key: tuple[Event | None, str] = (None, "")


def _remember_call_key(event: Event, key: str) -> None:
    global _last_call_key
    _last_call_key = (event, key)


def binding_key(binding: ast.Binding, event: Event, tools: Mapping[str, ToolSpec]) -> str | None:
    """The value `same BINDING` compares for this event, or None when it has none.  `message`:
    the event's source message (any kind of event; None for an event of no message)."""
    if binding.kind == "message":
        return None if event.message is None else str(event.message)
    if event.kind != CALL:
        return None
    if binding.kind == "call":
        # the scorer asks twice per call event (the conditions on the state before it, then the
        # `seen` update after): the last event's key is kept, by identity (events are immutable)
        last = _last_call_key
        if last[0] is event:
            return last[1]
        key = event.argument_key()
        _remember_call_key(event, key)
        return key
    if binding.kind == "target":
        info = tools.get(event.tool or "")
        name = info.target if info is not None else None
    else:
        assert binding.arg is not None  # an "arg" binding names its argument
        name = binding.arg.text
    if name is None or name not in event.arguments:
        return None
    return normalise_value(event.arguments[name])


def literal_equal(a: object, b: object) -> bool:
    """JSON equality: numbers compare by value, but booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def text_matches(op: str, value: str, flags: str, text: str) -> bool:
    """One text test (`contains`, `startswith`, `matches`, `==`, `!=`) on `text`."""
    if op == "contains":
        return value in text
    if op == "startswith":
        return text.startswith(value)
    if op == "matches":
        return compile_regex(value, flags).search(text)
    if op == "==":
        return text == value
    return text != value


def arg_matches(node: ast.ArgTest, arguments: Mapping[str, Any]) -> bool:
    """One argument test on a call's arguments."""
    value = arguments.get(node.arg.text, _MISSING)
    op = node.op
    if op == "exists":
        return value is not _MISSING
    if value is _MISSING:
        return False
    if op == "==":
        return literal_equal(value, node.value)
    if op == "!=":
        return not literal_equal(value, node.value)
    if op == "in":
        return any(literal_equal(value, v) for v in cast("tuple[object, ...]", node.value))
    if op in ("<", "<=", ">", ">="):
        number = _number(value)
        return number is not None and _COMPARE[op](number, cast(float, node.value))
    if op == "contains":
        if isinstance(value, str):
            return isinstance(node.value, str) and node.value in value
        if isinstance(value, list):
            return any(literal_equal(v, node.value) for v in value)
        return False
    if not isinstance(value, str):
        return False
    text = cast(str, node.value)  # (`ast.ArgTest`: a text test's value is a str)
    if op == "startswith":
        return value.startswith(text)
    return compile_regex(text, node.flags).search(value)


def event_text(field: str, event: Event) -> str:
    if field == "text":
        return event.text
    if field == "error_text":
        return event.error_text
    return event.result


# ---- specialisation ---------------------------------------------------------


def specialise(expr: ast.Expr, kind: str, tool: str | None, tags: frozenset[str]) -> ast.Expr:
    """Fold class-dependent tests to constants for events of (kind, tool, tags)."""
    return ast.fold(expr, lambda node, kids: _fold(node, kids, kind, tool, tags), into_seen=False)


def _fold(node: ast.Expr, kids: list[ast.Expr], kind: str, tool: str | None, tags: frozenset[str]) -> ast.Expr:
    is_call = kind == CALL
    if isinstance(node, ast.And):
        rest = [k for k in kids if k is not TRUE]
        if any(k is FALSE for k in rest):
            return FALSE
        return TRUE if not rest else rest[0] if len(rest) == 1 else ast.And(tuple(rest))
    if isinstance(node, ast.Or):
        rest = [k for k in kids if k is not FALSE]
        if any(k is TRUE for k in rest):
            return TRUE
        return FALSE if not rest else rest[0] if len(rest) == 1 else ast.Or(tuple(rest))
    if isinstance(node, ast.Not):
        inner = kids[0]
        return FALSE if inner is TRUE else TRUE if inner is FALSE else ast.Not(inner)
    if isinstance(node, ast.Const):
        return TRUE if node.value else FALSE
    if isinstance(node, ast.CallAtom):
        if not is_call:
            return FALSE
        return TRUE if not node.tools or any(t.text == tool for t in node.tools) else FALSE
    if isinstance(node, ast.KindAtom):
        return TRUE if node.kind == kind else FALSE
    if isinstance(node, ast.TagAtom):
        return TRUE if is_call and node.tag.text in tags else FALSE
    if isinstance(node, (ast.StatusAtom, ast.ArgTest, ast.SignalTest)):
        return node if is_call else FALSE
    if isinstance(node, ast.TextTest):
        if node.field == "text":
            return FALSE if is_call else node
        return node if is_call else FALSE
    if isinstance(node, ast.HasBinding):
        return node if is_call else FALSE
    return node  # Seen: depends on history, kept


# ---- closures -----------------------------------------------------------------


def build(expr: ast.Expr, slots: Mapping[int, int], tools: Mapping[str, ToolSpec]) -> Pred:
    """A closure for a specialised condition.  `slots` maps id(Seen node) -> state index."""
    return ast.fold(expr, lambda node, kids: _closure(node, kids, slots, tools), into_seen=False)


def _closure(node: ast.Expr, kids: list[Pred], slots: Mapping[int, int], tools: Mapping[str, ToolSpec]) -> Pred:
    if isinstance(node, ast.And):
        if len(kids) == 2:
            a, b = kids
            return lambda e, s: a(e, s) and b(e, s)
        items = tuple(kids)
        return lambda e, s: all(f(e, s) for f in items)
    if isinstance(node, ast.Or):
        if len(kids) == 2:
            a, b = kids
            return lambda e, s: a(e, s) or b(e, s)
        items = tuple(kids)
        return lambda e, s: any(f(e, s) for f in items)
    if isinstance(node, ast.Not):
        inner = kids[0]
        return lambda e, s: not inner(e, s)
    if isinstance(node, ast.Const):
        constant = node.value
        return lambda e, s: constant
    if isinstance(node, ast.StatusAtom):
        allowed = _STATUS_SETS[node.status]
        return lambda e, s: e.status in allowed
    if isinstance(node, ast.TextTest):
        field, op, value, flags = node.field, node.op, node.value, node.flags
        if op == "matches":
            search = compile_regex(value, flags).search
            return lambda e, s: search(event_text(field, e))
        return lambda e, s: text_matches(op, value, flags, event_text(field, e))
    if isinstance(node, ast.ArgTest):
        return lambda e, s: arg_matches(node, e.arguments)
    if isinstance(node, ast.SignalTest):
        name, compare, threshold = node.signal.text, _COMPARE[node.op], node.value

        def signal_test(e: Event, s: States) -> bool:
            v = _number(e.signals.get(name))
            return v is not None and compare(v, threshold)

        return signal_test
    if isinstance(node, ast.HasBinding):
        binding = node.binding
        return lambda e, s: binding_key(binding, e, tools) is not None
    if isinstance(node, ast.Seen):
        slot = slots[id(node)]
        if node.same is None:
            return lambda e, s: s[slot] >= 0
        binding = node.same

        def seen_bound(e: Event, s: States) -> bool:
            seen = s[slot]
            if not seen:  # nothing recorded yet: no key to compute (most calls of most episodes)
                return False
            key = binding_key(binding, e, tools)
            return key is not None and key in seen

        return seen_bound
    raise TypeError(f"not a condition node: {node!r}")
