"""The syntax tree of a rule file, named after the grammar's rules.

Nodes are frozen attrs classes.  Every node keeps its `span` for diagnostics and
explanations; spans are excluded from equality, so a tree built in code (by
`rlvp_dsl.manifests.derive`) equals the tree parsed from its printed text.

Conditions (`Expr`) are evaluated on one event of an episode, with the episode's
history available to `Seen`.  Their exact semantics are in docs/language.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar, Union

import attrs

from .source import NO_SPAN, Span


def _span() -> Span:
    return attrs.field(default=NO_SPAN, eq=False, repr=False)


@attrs.frozen
class Name:
    """A name as written (NFC-normalised), with its span."""

    text: str
    span: Span = _span()


# ---- conditions ----------------------------------------------------------


@attrs.frozen
class CallAtom:
    """``call`` / ``call NAME`` / ``call {A, B}``: the event is a tool call (of one of `tools`)."""

    tools: tuple[Name, ...] = ()
    span: Span = _span()


@attrs.frozen
class KindAtom:
    """``user`` / ``assistant``: the event is a message turn of that role."""

    kind: str
    span: Span = _span()


@attrs.frozen
class TagAtom:
    """``tag NAME``: the called tool carries the tag."""

    tag: Name
    span: Span = _span()


@attrs.frozen
class StatusAtom:
    """``ok`` / ``error`` / ``malformed`` / ``no_result``."""

    status: str
    span: Span = _span()


@attrs.frozen
class TextTest:
    """A test on a text field: ``error_text``, ``result`` or ``text`` (message text).

    `op` is ``contains``, ``startswith``, ``matches`` (bounded-time regex), ``==`` or ``!=``;
    `flags` are the regex flags (``i``, ``m``, ``s``).
    """

    field: str
    op: str
    value: str
    flags: str = ""
    span: Span = _span()


@attrs.frozen
class ArgTest:
    """``arg NAME <test>``: a test on one argument of the call.

    `op` is ``exists``, ``contains``, ``startswith``, ``matches``, ``==``, ``!=``,
    ``<``, ``<=``, ``>``, ``>=`` or ``in``; `value` a literal (a tuple for ``in``).
    """

    arg: Name
    op: str
    value: object = None
    flags: str = ""
    span: Span = _span()


@attrs.frozen
class SignalTest:
    """``signal NAME <op> NUMBER``: a numeric environment signal reported with the call."""

    signal: Name
    op: str
    value: float
    span: Span = _span()


@attrs.frozen
class Binding:
    """What ``same ...`` compares: an argument by name, each tool's ``target``, the whole ``call``,
    or the source ``message`` (`Event.message`) the event belongs to."""

    kind: str  # "arg" | "target" | "call" | "message"
    arg: Name | None = None
    span: Span = _span()

    def describe(self) -> str:
        return self.arg.text if self.kind == "arg" and self.arg else self.kind


@attrs.frozen
class Seen:
    """``seen (COND [same B | returned B] [since COND2])``: an earlier event satisfied COND
    (with the same binding value as this event -- or, with `returned`, whose result holds
    this event's value of B as a token), after the last event satisfying COND2."""

    cond: "Expr"
    same: Binding | None = None
    since: "Expr | None" = None
    span: Span = _span()
    returned: bool = False  # `returned B`: B's value is looked up in the earlier event's result


@attrs.frozen
class HasBinding:
    """Internal (from ``blind_destructive``): the event carries a value for the binding."""

    binding: Binding
    span: Span = _span()


@attrs.frozen
class And:
    items: tuple["Expr", ...]
    span: Span = _span()


@attrs.frozen
class Or:
    items: tuple["Expr", ...]
    span: Span = _span()


@attrs.frozen
class Not:
    item: "Expr"
    span: Span = _span()


@attrs.frozen
class Const:
    """Internal: a constant truth value (used by defaults and by specialisation)."""

    value: bool
    span: Span = _span()


Expr = Union[
    CallAtom, KindAtom, TagAtom, StatusAtom, TextTest, ArgTest, SignalTest, Seen, HasBinding, And, Or, Not, Const
]


def children(node: Expr, *, into_seen: bool = True) -> list[Expr]:
    """The sub-conditions of a condition node (a `Seen`'s conditions only with `into_seen`)."""
    if isinstance(node, (And, Or)):
        return list(node.items)
    if isinstance(node, Not):
        return [node.item]
    if into_seen and isinstance(node, Seen):
        return [node.cond] + ([node.since] if node.since is not None else [])
    return []


_Folded = TypeVar("_Folded")


def fold(expr: Expr, combine: Callable[[Expr, list[_Folded]], _Folded], *, into_seen: bool = True) -> _Folded:
    """Post-order fold: ``combine(node, [folded children])`` bottom-up, iteratively, so that
    chains thousands of conditions long never hit Python's recursion limit."""
    memo: dict[int, _Folded] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        kids = children(node, into_seen=into_seen)
        if not done and kids:
            stack.append((node, True))
            stack.extend((k, False) for k in kids)
            continue
        memo[id(node)] = combine(node, [memo[id(k)] for k in kids])
    return memo[id(expr)]


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of a condition, pre-order, iteratively."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


# ---- declarations ---------------------------------------------------------


@attrs.frozen
class Include:
    path: str
    span: Span = _span()


@attrs.frozen
class ToolsFrom:
    """``tools from "manifest.json"``: declare every tool of a manifest."""

    path: str
    span: Span = _span()


@attrs.frozen
class ToolDecl:
    """``tool NAME : TAG, TAG target ARG``."""

    name: Name
    tags: tuple[Name, ...] = ()
    target: Name | None = None
    params: tuple[str, ...] | None = None  # known parameter names (from a manifest), None = unknown
    span: Span = _span()


@attrs.frozen
class ConstDecl:
    name: Name
    value: float
    span: Span = _span()


@attrs.frozen
class Weight:
    """A weight as written: a number, or the name of a constant."""

    value: float | None = None
    const: Name | None = None
    span: Span = _span()


# ---- rules ----------------------------------------------------------------


@attrs.frozen
class Violation:
    name: Name
    weight: Weight
    on: Expr
    unless: Expr | None = None
    span: Span = _span()
    kind = "violation"


@attrs.frozen
class Deadline:
    """``before COND`` | ``within N calls`` | ``at end``."""

    kind: str  # "before" | "within" | "end"
    cond: Expr | None = None
    calls: int = 0
    span: Span = _span()


@attrs.frozen
class Obligation:
    name: Name
    credit: Weight
    expire: Weight
    open: Expr
    discharge: Expr
    same: Binding | None = None
    deadline: Deadline = Deadline("end")
    span: Span = _span()
    kind = "obligation"


@attrs.frozen
class RepeatError:
    name: Name
    weight: Weight
    reset: Expr | None = None
    span: Span = _span()
    on: Expr | None = None  # the calls it may land on (default: every call)
    kind = "repeat_error"


@attrs.frozen
class BlindDestructive:
    name: Name
    weight: Weight
    on: Expr | None = None
    inspected_by: Expr | None = None
    span: Span = _span()
    kind = "blind_destructive"


@attrs.frozen
class Progress:
    name: Name
    weight: Weight
    signal: Name
    direction: str  # "decreasing" | "increasing"
    per_unit: bool = False
    max: float | None = None
    start: float | None = None
    span: Span = _span()
    kind = "progress"


# ---- tests inside rule files ------------------------------------------------


@attrs.frozen
class EpisodeEvent:
    """One event of an inline test episode (``user "..."``, ``call NAME {...} error "..."``)."""

    kind: str  # "call" | "user" | "assistant"
    tool: Name | None = None
    arguments: tuple[tuple[str, object], ...] = ()  # JSON object as (key, value) pairs, in order
    status: str = "ok"
    error_text: str = ""
    result: str = ""
    text: str = ""
    signals: tuple[tuple[str, float], ...] = ()
    span: Span = _span()
    message: int | None = None  # the `message { ... }` group it was written in (0, 1, ...); None: its own


@attrs.frozen
class Expect:
    """``expect RULE|total [at call N | at event N] == VALUE``."""

    rule: Name | None  # None: the total of all rules
    value: float
    at: str | None = None  # None | "call" | "event"
    index: int = 0
    span: Span = _span()


@attrs.frozen
class InlineTest:
    """``test "NAME" { episode ... expect ... }``: an episode and the credits it must get."""

    name: str
    expects: tuple[Expect, ...]
    events: tuple[EpisodeEvent, ...] | None = None  # inline episode
    episode_file: str | None = None  # or a file any reader accepts
    span: Span = _span()


Rule = Union[Violation, Obligation, RepeatError, BlindDestructive, Progress]
Item = Union[
    Include, ToolsFrom, ToolDecl, ConstDecl, Violation, Obligation, RepeatError, BlindDestructive, Progress, InlineTest
]
RULE_TYPES = (Violation, Obligation, RepeatError, BlindDestructive, Progress)


@attrs.frozen
class RuleFile:
    """One parsed file: its items in source order."""

    path: str
    items: tuple[Item, ...]
