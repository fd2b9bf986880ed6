"""The reference interpreter: the semantics of docs/language.md, written plainly.

Used only by the tests (compiled == reference) and the speed benchmark.  It keeps
no state between events: every ``seen`` scans the history, every obligation is
simulated with a plain list of instances, so each event costs O(history) -- slow
on purpose, and short enough to check by reading.
"""

from __future__ import annotations

import math
from typing import Any

from . import ast, explain
from .events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, OK, Credit, Episode, Event
from .ir import ObligationRule, ProgressRule, RuleSet, ViolationRule, capped_credit
from .predicates import arg_matches, binding_key, result_tokens, text_matches

_STATUS = {"ok": {OK}, "error": {ERROR, MALFORMED}, "malformed": {MALFORMED}, "no_result": {NO_RESULT}}
_CMP = {
    "<": float.__lt__,
    "<=": float.__le__,
    ">": float.__gt__,
    ">=": float.__ge__,
    "==": float.__eq__,
    "!=": float.__ne__,
}


class _Episode:
    def __init__(self, ruleset: RuleSet, events: tuple[Event, ...]):
        self.tools = ruleset.tools
        self.events = events

    def tags(self, e: Event) -> frozenset[str]:
        info = self.tools.get(e.tool or "")
        return e.tags | (info.tags if info else frozenset())

    def key(self, binding: ast.Binding, e: Event) -> str | None:
        return binding_key(binding, e, self.tools)

    def holds(self, expr: ast.Expr, i: int) -> bool:
        e = self.events[i]
        call = e.kind == CALL
        if isinstance(expr, ast.And):
            return all(self.holds(x, i) for x in expr.items)
        if isinstance(expr, ast.Or):
            return any(self.holds(x, i) for x in expr.items)
        if isinstance(expr, ast.Not):
            return not self.holds(expr.item, i)
        if isinstance(expr, ast.Const):
            return expr.value
        if isinstance(expr, ast.CallAtom):
            return call and (not expr.tools or e.tool in {t.text for t in expr.tools})
        if isinstance(expr, ast.KindAtom):
            return e.kind == expr.kind
        if isinstance(expr, ast.TagAtom):
            return call and expr.tag.text in self.tags(e)
        if isinstance(expr, ast.StatusAtom):
            return call and e.status in _STATUS[expr.status]
        if isinstance(expr, ast.TextTest):
            if (expr.field == "text") == call:
                return False
            text = {"text": e.text, "error_text": e.error_text, "result": e.result}[expr.field]
            return text_matches(expr.op, expr.value, expr.flags, text)
        if isinstance(expr, ast.ArgTest):
            return call and arg_matches(expr, e.arguments)
        if isinstance(expr, ast.SignalTest):
            v = e.signals.get(expr.signal.text)
            if not (call and isinstance(v, (int, float)) and not isinstance(v, bool)):
                return False
            return _CMP[expr.op](float(v), float(expr.value))
        if isinstance(expr, ast.HasBinding):
            return call and self.key(expr.binding, e) is not None
        if isinstance(expr, ast.Seen):
            return self.seen_at(expr, i) is not None
        raise TypeError(f"not a condition: {expr!r}")

    def seen_at(self, seen: ast.Seen, i: int) -> int | None:
        """The latest event j the agent had observed at i (j < i, not in i's message) with
        cond(j) and the same binding value, with no observed `since` event after j.  With
        `same message`, the latest earlier event j of i's own message, in event order."""
        want = self.key(seen.same, self.events[i]) if seen.same is not None else None
        if seen.same is not None and want is None:
            return None
        inside = seen.same is not None and seen.same.kind == "message"
        for j in range(i - 1, -1, -1):
            if not inside and self.events[j].same_message(self.events[i]):
                continue  # issued together with i: not yet observed
            if self.holds(seen.cond, j) and (
                seen.same is None
                or (
                    want in result_tokens(self.events[j].result)
                    if seen.returned
                    else self.key(seen.same, self.events[j]) == want
                )
            ):
                return j
            if seen.since is not None and self.holds(seen.since, j):
                return None
        return None


def score_reference(ruleset: RuleSet, episode: Episode) -> list[Credit]:
    """Every credit of one episode under `ruleset` (the same credits `Program.score` gives)."""
    ep = _Episode(ruleset, episode.events)
    events = episode.events
    out: list[Credit] = []
    open_: dict[int, list[list[Any]]] = {k: [] for k, r in enumerate(ruleset.rules) if isinstance(r, ObligationRule)}
    for i, e in enumerate(events):
        calls_before = sum(1 for x in events[:i] if x.kind == CALL)
        creditable = e.kind in (CALL, ASSISTANT)
        for k, rule in enumerate(ruleset.rules):
            where = rule.span.location
            if isinstance(rule, ViolationRule):
                if creditable and ep.holds(rule.cond, i):
                    reason = _violation_reason(ep, rule, i)
                    out.append(Credit(i, rule.name, rule.weight, where, reason, rule.kind, span=rule.span))
            elif isinstance(rule, ObligationRule):
                _obligation(ep, rule, k, i, calls_before, creditable, open_[k], out)
            else:
                _progress(rule, ep, i, out)
    for k, instances in open_.items():
        owed = ruleset.rules[k]
        assert isinstance(owed, ObligationRule)
        for opened in sorted(inst[1] for inst in instances):
            out.append(
                Credit(
                    opened,
                    owed.name,
                    owed.expire,
                    owed.span.location,
                    explain.expired_end(),
                    "obligation",
                    "expire",
                    related_event=len(events) - 1,
                    deadline="end",
                    span=owed.span,
                )
            )
    return out


def _violation_reason(ep: _Episode, rule: ViolationRule, i: int) -> str:
    e = ep.events[i]
    if rule.failed_call is not None:
        j = ep.seen_at(rule.failed_call, i)
        return explain.repeat_reason(e, -1 if j is None else j)
    if rule.kind == "blind_destructive":
        info = ep.tools.get(e.tool or "")
        return explain.blind_reason(e, info.target if info else None, ep.key(ast.Binding("target"), e))
    return explain.violation_text(e)


def _obligation(
    ep: _Episode,
    rule: ObligationRule,
    k: int,
    i: int,
    calls_before: int,
    creditable: bool,
    instances: list[list[Any]],
    out: list[Credit],
) -> None:
    """instances: [key, opened_index, window_end] in opening order."""
    e = ep.events[i]
    where = rule.span.location
    if rule.deadline == "within" and e.kind == CALL:
        for inst in [x for x in instances if x[2] <= calls_before]:
            instances.remove(inst)
            out.append(
                Credit(
                    inst[1],
                    rule.name,
                    rule.expire,
                    where,
                    explain.expired_within(rule.within, i),
                    "obligation",
                    "expire",
                    related_event=i,
                    deadline="within",
                    span=rule.span,
                )
            )
    discharging = creditable and e.status not in (MALFORMED, NO_RESULT) and ep.holds(rule.discharge, i)
    if instances and discharging:
        key = ep.key(rule.same, e) if rule.same is not None else ""
        for inst in instances:
            if key is not None and inst[0] == key:
                instances.remove(inst)
                reason = explain.discharged(inst[1])
                out.append(
                    Credit(
                        i,
                        rule.name,
                        rule.credit,
                        where,
                        reason,
                        "obligation",
                        "discharge",
                        related_event=inst[1],
                        span=rule.span,
                    )
                )
                break
    if instances and rule.before is not None and ep.holds(rule.before, i):
        for inst in sorted(instances, key=lambda x: x[1]):
            out.append(
                Credit(
                    inst[1],
                    rule.name,
                    rule.expire,
                    where,
                    explain.expired_before(i),
                    "obligation",
                    "expire",
                    related_event=i,
                    deadline="before",
                    span=rule.span,
                )
            )
        instances.clear()
    if not discharging and creditable and ep.holds(rule.open, i):
        key = ep.key(rule.same, e) if rule.same is not None else ""
        if key is not None and all(inst[0] != key for inst in instances):
            end = calls_before + (1 if e.kind == CALL else 0) + rule.within
            instances.append([key, i, end])


def _signal_value(e: Event, signal: str) -> float | None:
    value = e.signals.get(signal)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None  # NaN and infinities are no reading


def _progress(rule: ProgressRule, ep: _Episode, i: int, out: list[Credit]) -> None:
    """docs/language.md, "progress": the initial best is ``from START``, else the first value
    observed on any event; the best before a call is the better of the initial best and every
    earlier call's value; a call whose value is strictly better earns the credit, but never more
    than what the rule's earlier credits of the episode left of its ``max``."""
    e = ep.events[i]
    value = _signal_value(e, rule.signal)
    if e.kind != CALL or value is None:
        return
    better = min if rule.direction == "decreasing" else max
    earlier = [(x.kind, v) for x in ep.events[:i] if (v := _signal_value(x, rule.signal)) is not None]
    if rule.start is not None:
        initial = rule.start
    elif earlier:
        initial = earlier[0][1]
    else:
        return  # the first value observed sets the best
    best = better([initial] + [v for kind, v in earlier if kind == CALL])
    if better(value, best) == value and value != best:
        gain = abs(value - best)
        credit = rule.weight * gain if rule.per_unit else rule.weight
        reason = explain.new_best(rule.signal, value, best)
        if rule.max is not None:
            paid = sum(c.value for c in out if c.rule == rule.name)  # rule names are unique
            credit, cut = capped_credit(credit, rule.max, paid)
            if credit == 0.0:
                return
            if cut:
                reason = explain.capped(reason, rule.max)
        out.append(Credit(i, rule.name, credit, rule.span.location, reason, "progress", span=rule.span))
