"""The checked rule set: what the checker hands to the compiler.

Constants are resolved to numbers, tool declarations merged into one table,
`repeat_error` and `blind_destructive` lowered to violations over `seen`
conditions (their exact meaning, docs/language.md), and every rule keeps its
source location for explanations.  `RuleSet.to_json()` is the canonical,
deterministic form used to compare two programs (a derived rule file and its
printed-then-parsed text compile to the same JSON).
"""

from __future__ import annotations

from typing import Any, Mapping, Union

import attrs

from . import ast
from .source import NO_SPAN, Span
from .tools import ToolSpec


@attrs.frozen
class ViolationRule:
    """Fires `weight` (< 0) on every event satisfying `cond`.  `kind` is ``violation``,
    ``repeat_error`` or ``blind_destructive`` (the last two are lowered to this form)."""

    name: str
    kind: str
    weight: float
    cond: ast.Expr
    span: Span = attrs.field(default=NO_SPAN, eq=False)
    #: For ``repeat_error``: the ``seen`` node of `cond` that finds the earlier failed call
    #: (explanations cite it); None for the other kinds.
    failed_call: ast.Seen | None = attrs.field(default=None, eq=False)


@attrs.frozen
class ObligationRule:
    """Opened by `open`, discharged (credit `credit` >= 0) by a later event satisfying
    `discharge` with the same binding value, expired (penalty `expire` <= 0) at the deadline."""

    name: str
    credit: float
    expire: float
    open: ast.Expr
    discharge: ast.Expr
    same: ast.Binding | None
    deadline: str  # "before" | "within" | "end"
    before: ast.Expr | None = None
    within: int = 0
    span: Span = attrs.field(default=NO_SPAN, eq=False)
    kind = "obligation"


@attrs.frozen
class ProgressRule:
    """Credit when env signal `signal` reaches a new best value (``decreasing`` or
    ``increasing``): `weight` per new best, or `weight` per unit of improvement; `max` caps
    the rule's total over one episode (each credit is at most what is left of it)."""

    name: str
    weight: float
    signal: str
    direction: str
    per_unit: bool = False
    max: float | None = None
    start: float | None = None
    span: Span = attrs.field(default=NO_SPAN, eq=False)
    kind = "progress"


CheckedRule = Union[ViolationRule, ObligationRule, ProgressRule]


def conditions(rule: CheckedRule) -> tuple[ast.Expr, ...]:
    """The conditions of a rule, in a fixed order: a violation's `cond`; an obligation's
    `open`, `discharge` and, with a ``before`` deadline, `before`; none for a progress rule.

    The one list of them: the compiler finds its ``seen`` nodes there, the strategies mine
    their literals, the usage lints their argument names (an obligation's `same` is a
    binding, not a condition: those who need it add it)."""
    if isinstance(rule, ViolationRule):
        return (rule.cond,)
    if isinstance(rule, ObligationRule):
        return (rule.open, rule.discharge) if rule.before is None else (rule.open, rule.discharge, rule.before)
    return ()


@attrs.frozen
class RuleTest:
    """A ``test`` block and the file it came from (episode paths are relative to it)."""

    file: str
    block: ast.InlineTest


@attrs.frozen
class RuleSet:
    """Everything the compiler needs: the tool table and the rules, in source order.

    `tests` (the files' ``test`` blocks) are not part of the program and not in `to_json`.
    """

    tools: Mapping[str, ToolSpec]
    rules: tuple[CheckedRule, ...]
    tests: tuple[RuleTest, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "rlvp-program/1",
            "tools": [self.tools[name].to_json() for name in sorted(self.tools)],
            "rules": [rule_to_json(r) for r in self.rules],
        }


# ---- canonical JSON of conditions -----------------------------------------


def binding_to_json(b: ast.Binding | None) -> Any:
    if b is None:
        return None
    return ["arg", b.arg.text] if b.kind == "arg" and b.arg else [b.kind]


def expr_to_json(expr: ast.Expr | None) -> Any:
    """An s-expression (nested lists) for a condition; iterative so deep `and` chains are fine."""
    if expr is None:
        return None
    return ast.fold(expr, _node_json)


def _node_json(node: ast.Expr, kids: list[Any]) -> Any:
    if isinstance(node, ast.And):
        return ["and", *kids]
    if isinstance(node, ast.Or):
        return ["or", *kids]
    if isinstance(node, ast.Not):
        return ["not", kids[0]]
    if isinstance(node, ast.Seen):
        out = ["seen", kids[0], binding_to_json(node.same), kids[1] if node.since is not None else None]
        return out + ["returned"] if node.returned else out
    if isinstance(node, ast.CallAtom):
        return ["call", sorted(t.text for t in node.tools)]
    if isinstance(node, ast.KindAtom):
        return [node.kind]
    if isinstance(node, ast.TagAtom):
        return ["tag", node.tag.text]
    if isinstance(node, ast.StatusAtom):
        return [node.status]
    if isinstance(node, ast.TextTest):
        return ["text_test", node.field, node.op, node.value, node.flags]
    if isinstance(node, ast.ArgTest):
        value = list(node.value) if isinstance(node.value, tuple) else node.value
        return ["arg", node.arg.text, node.op, value, node.flags]
    if isinstance(node, ast.SignalTest):
        return ["signal", node.signal.text, node.op, node.value]
    if isinstance(node, ast.HasBinding):
        return ["has", binding_to_json(node.binding)]
    if isinstance(node, ast.Const):
        return [node.value]
    raise TypeError(f"not a condition node: {node!r}")


def rule_to_json(rule: CheckedRule) -> dict[str, Any]:
    if isinstance(rule, ViolationRule):
        return {"kind": rule.kind, "name": rule.name, "weight": rule.weight, "cond": expr_to_json(rule.cond)}
    if isinstance(rule, ObligationRule):
        return {
            "kind": "obligation",
            "name": rule.name,
            "credit": rule.credit,
            "expire": rule.expire,
            "open": expr_to_json(rule.open),
            "discharge": expr_to_json(rule.discharge),
            "same": binding_to_json(rule.same),
            "deadline": rule.deadline,
            "before": expr_to_json(rule.before),
            "within": rule.within,
        }
    return {
        "kind": "progress",
        "name": rule.name,
        "weight": rule.weight,
        "signal": rule.signal,
        "direction": rule.direction,
        "per_unit": rule.per_unit,
        "max": rule.max,
        "start": rule.start,
    }


def rule_bound(rule: CheckedRule) -> float:
    """The most |credit| one event can receive from this rule (for the boundedness property).

    A violation fires at most once per event; an event discharges at most one instance of an
    obligation and opens at most one (whose expiry penalty lands on it); progress pays one
    credit per event, at most its weight (per unit: unbounded but for the cap) and at most its
    ``max``, which is also the rule's bound over a whole episode (`episode_bound`).
    """
    if isinstance(rule, ViolationRule):
        return abs(rule.weight)
    if isinstance(rule, ObligationRule):
        return abs(rule.credit) + abs(rule.expire)
    if rule.per_unit:
        return abs(rule.max) if rule.max is not None else float("inf")
    return min(abs(rule.weight), abs(rule.max)) if rule.max is not None else abs(rule.weight)


#: Slack of a progress rule's episode cap, relative to ``max``.  The credit paid so far is a float sum
#: of at most one credit per event, each at most ``max``, so it is off by less than (number of events)
#: x 2**-52 x ``max``: 1e-9 x ``max`` covers episodes of millions of events.  Within it, the rounding of
#: ``max - paid`` neither pays a crumb (5e-17) nor cuts a credit that fits ("capped" where nothing was).
CAP_SLACK = 1e-9


def capped_credit(credit: float, cap: float, paid: float) -> tuple[float, bool]:
    """A progress credit under the episode cap: (what to pay, whether the cap cut it).

    `paid` is what the rule has paid this episode so far; 0.0 to pay means nothing is left."""
    left, slack = cap - paid, CAP_SLACK * cap
    if left <= slack:
        return 0.0, True
    if credit > left + slack:
        return left, True
    return credit, False


def episode_bound(rule: CheckedRule) -> float | None:
    """The most |credit| the rule can give one whole episode, when the language bounds it: a progress
    rule's ``max``; None for the others (their total grows with the number of events)."""
    if isinstance(rule, ProgressRule) and rule.max is not None:
        return abs(rule.max)
    return None
