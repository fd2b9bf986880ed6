"""Stages 3 and 4 of the checker for each rule, in source order: its name unique (RV203), its
weights (`rlvp_dsl.check.weights`), the names in its conditions (`rlvp_dsl.check.conditions`)
and its meaning (`rlvp_dsl.check.meaning`; an obligation that can never be discharged: RV206),
then the checked rule (`repeat_error` and `blind_destructive`: `rlvp_dsl.check.lowering`)."""

from __future__ import annotations

from .. import ast
from ..diagnostics import quoted
from ..ir import CheckedRule, ObligationRule, ProgressRule, ViolationRule
from ..source import Span
from .conditions import check_binding, check_expr, check_history
from .lowering import blind_destructive, repeat_error
from .meaning import lands_on_calls, never_fires, never_together
from .state import CheckState
from .weights import weight


#: The help of a `same` binding that `open` / `discharge` can only ask of message turns.
_OPEN_FIX = "drop `{b}` (one instance at a time), or open on a call that carries it"
_DISCHARGE_FIX = (
    "drop `{b}` (the first matching turn after the opener then discharges; one instance at a "
    "time), or discharge on a call that carries it"
)


def check_rules(state: CheckState) -> tuple[list[CheckedRule], dict[str, Span]]:
    """The checked rules in source order (a rule with a duplicate name is left out), and each
    rule name with where it is first defined."""
    rules: list[CheckedRule] = []
    seen_names: dict[str, Span] = {}
    for item in [item for f in state.files for item in f.items if isinstance(item, ast.RULE_TYPES)]:
        name = item.name.text
        if name in seen_names:
            state.error(
                "RV203",
                f"duplicate rule name {quoted(name)} (first defined at {seen_names[name].location})",
                item.name.span,
                "rule names must be unique: explanations and summaries use them",
            )
            continue
        seen_names[name] = item.name.span
        state.errors_before_rule = state.errors
        rules.append(_check_rule(state, item))
    return rules, seen_names


def _check_rule(
    state: CheckState, item: ast.Violation | ast.Obligation | ast.RepeatError | ast.BlindDestructive | ast.Progress
) -> CheckedRule:
    if isinstance(item, ast.Violation):
        return violation(state, item)
    if isinstance(item, ast.Obligation):
        return obligation(state, item)
    if isinstance(item, ast.RepeatError):
        return repeat_error(state, item)
    if isinstance(item, ast.BlindDestructive):
        return blind_destructive(state, item)
    return progress(state, item)


def violation(state: CheckState, r: ast.Violation) -> ViolationRule:
    """``on`` and not ``unless``; its weight negative."""
    w = weight(state, "a violation", "weight", r.weight, "negative")
    check_expr(state, r.on)
    cond = r.on
    if r.unless is not None:
        check_expr(state, r.unless)
        cond = ast.And((r.on, ast.Not(r.unless, r.unless.span)), r.on.span)
    check_history(state, cond)
    lands_on_calls(state, r.name.text, "`on`", r.on, r.on.span)
    never_fires(state, r.name.text, cond, r.name.span)
    return ViolationRule(r.name.text, "violation", w, cond, r.span)


def obligation(state: CheckState, r: ast.Obligation) -> ObligationRule:
    """Its credit non-negative, its expiry non-positive; its discharge reachable (RV206) and
    its binding carried by the tools of `open` (RV205) and of `discharge` (RV206)."""
    credit = weight(state, "an obligation", "credit", r.credit, "non-negative")
    expire = weight(state, "an obligation", "expire", r.expire, "non-positive")
    for expr in (r.open, r.discharge, r.deadline.cond):
        if expr is not None:
            check_expr(state, expr)
            check_history(state, expr)
    lands_on_calls(state, r.name.text, "`open`", r.open, r.open.span)
    lands_on_calls(state, r.name.text, "`discharge`", r.discharge, r.discharge.span)
    open_classes = state.universe.possible(r.open)
    discharge_classes = state.universe.possible(r.discharge)
    never_fires(state, r.name.text, r.open, r.name.span)
    if not discharge_classes:
        state.error(
            "RV206",
            f"obligation {quoted(r.name.text)} can never be discharged: no event satisfies its `discharge` "
            f"condition{never_together(state.universe, r.discharge)}",
            r.discharge.span,
            "check the tool names, tags and statuses it combines with `and`",
        )
    elif r.same is not None:
        if check_binding(state, r.same, open_classes, "`open`", "RV205", _OPEN_FIX):
            check_binding(state, r.same, discharge_classes, "`discharge`", "RV206", _DISCHARGE_FIX)
    d = r.deadline
    return ObligationRule(r.name.text, credit, expire, r.open, r.discharge, r.same, d.kind, d.cond, d.calls, r.span)


def progress(state: CheckState, r: ast.Progress) -> ProgressRule:
    """Its weight positive; a per-unit rule needs a cap (RV209), and a cap is positive."""
    w = weight(state, "progress", "weight", r.weight, "positive")
    if r.per_unit and r.max is None:
        state.error(
            "RV209",
            f"per-unit progress {quoted(r.name.text)} needs a cap",
            r.weight.span,
            "add one, e.g. `(+0.2 per unit, max 1.0)`: credit must stay bounded",
        )
    if r.max is not None and r.max <= 0:
        # the span: the rule's (the syntax tree keeps none for the cap itself)
        state.error(
            "RV209",
            f"'max' must be positive (got {r.max:g})",
            r.span,
            "`max` caps the rule's total credit over the episode: write a positive cap, e.g. `max 1.0`"
            + ("" if r.per_unit else f", or drop `, max {r.max:g}` to pay the weight for every new best"),
        )
    return ProgressRule(r.name.text, w, r.signal.text, r.direction, r.per_unit, r.max, r.start, r.span)
