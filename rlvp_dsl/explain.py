"""The words of explanations: why each credit was given.

Shared by the compiled program and the reference interpreter so that both say
exactly the same thing; every credit also carries the rule's ``file:line:col``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import ast
from .events import CALL, Event
from .ir import ViolationRule
from .predicates import binding_key
from .tools import ToolSpec


def describe(event: Event) -> str:
    """``call `cancel_reservation` at event 3`` / ``assistant turn at event 5``; a call whose name
    is missing or not text (a malformed call) is ``call without a tool name at event 3``, never a
    call to a tool `None` (docs/readers.md, "Malformed calls")."""
    if event.kind == CALL:
        if event.tool is None:
            return f"call without a tool name at event {event.index}"
        return f"call `{event.tool}` at event {event.index}"
    return f"{event.kind} turn at event {event.index}"


def repeat_reason(event: Event, earlier: int) -> str:
    return f"{describe(event)} repeats the failed call at event {earlier} with no state-changing call since"


def blind_reason(event: Event, target: str | None, value: str | None) -> str:
    return f"{describe(event)} changes {target}={value!r}, which no earlier successful inspection read"


def violation_text(event: Event) -> str:
    return f"{describe(event)} matches the violation"


def discharged(opened: int) -> str:
    return f"discharges the obligation opened at event {opened}"


def expired_before(at: int) -> str:
    return f"the obligation opened here was still open at its deadline (event {at})"


def expired_within(calls: int, at: int) -> str:
    return f"the obligation opened here was not discharged within {calls} calls (noticed at event {at})"


def expired_end() -> str:
    return "the obligation opened here was never discharged (episode ended)"


def new_best(signal: str, value: float, best: float) -> str:
    return f"{signal} reached a new best {value:g} (previous best {best:g})"


def capped(reason: str, cap: float) -> str:
    """A progress credit cut to what is left of the rule's episode cap."""
    return f"{reason}; capped: the rule pays at most {cap:g} per episode"


def violation_reason(
    rule: ViolationRule, slots: Mapping[int, int], tools: Mapping[str, ToolSpec]
) -> Callable[[Event, list[Any]], str]:
    """A function (event, states) -> reason for a violation-like rule of a compiled program
    (`slots`: id of a ``seen`` node -> its state slot; `tools`: the program's tool table)."""
    seen = rule.failed_call
    if seen is not None:
        slot, same = slots[id(seen)], seen.same
        assert same is not None  # repeat_error's seen binds the call

        def repeat(event: Event, states: list[Any]) -> str:
            return repeat_reason(event, states[slot].get(binding_key(same, event, tools), -1))

        return repeat
    if rule.kind == "blind_destructive":

        def blind(event: Event, states: list[Any]) -> str:
            info = tools.get(event.tool or "")
            target = info.target if info else None
            return blind_reason(event, target, binding_key(ast.Binding("target"), event, tools))

        return blind
    return lambda event, states: violation_text(event)
