"""Stage 4 of the checker: what a rule would mean -- credit that would land on user text
(RV208) and rules that can never fire (RV210, a warning).  Obligations that can never be
discharged (RV206) are found with the obligation itself (`rlvp_dsl.check.rules`)."""

from __future__ import annotations

from .. import ast
from ..analysis import Universe
from ..diagnostics import quoted
from ..events import OK, USER
from ..source import Span
from ..syntax.printer import print_expr
from .state import CheckState


def lands_on_calls(state: CheckState, name: str, what: str, expr: ast.Expr, span: Span) -> None:
    """RV208 when `expr` (a rule's `what`: ``on``, ``open``, ``discharge``) can match a user message."""
    if (USER, None, OK) in state.universe.possible(expr):  # the one class of user messages
        state.error(
            "RV208",
            f"rule {quoted(name)} could give credit to a user message ({what} matches user turns)",
            span,
            "credit lands only on tool calls and assistant turns: add `call` or `assistant`",
        )


def never_fires(state: CheckState, name: str, expr: ast.Expr, span: Span) -> bool:
    """RV210 (and True) when no event satisfies `expr`, naming the two tests that never hold on
    one event (`never_together`); nothing when the rule already has an error."""
    if state.rule_has_errors():
        return False  # an unknown tool or tag already explains it
    if not state.universe.possible(expr):
        state.warn(
            "RV210",
            f"rule {quoted(name)} can never fire: no event satisfies its condition{never_together(state.universe, expr)}",
            span,
            "check the tool names, tags and statuses it combines with `and`",
        )
        return True
    return False


def never_together(universe: Universe, expr: ast.Expr) -> str:
    """Why no event satisfies `expr` (`universe.possible(expr)` is empty), as a clause to append
    to a message: ``: `call a` and `text contains "x"` never hold on one event`` -- the first
    test of an ``and`` that leaves no event, and an earlier test it alone excludes (``: `A` and
    the tests before it never hold on one event`` when no single one does); a false test alone;
    for an ``or``, each branch.  "" when there is nothing shorter to say.

    Cost: linear in the condition's size (one running intersection, then one pass back)."""
    node = expr
    while isinstance(node, ast.And):
        sets = [universe.possible(k) for k in node.items]
        empty = next((k for k, s in zip(node.items, sets) if not s), None)
        if empty is not None:
            node = empty  # one test alone holds on no event: say why that one
            continue
        running = universe.all
        for i, s in enumerate(sets):
            running = running & s
            if not running:
                partner = next((node.items[j] for j in range(i) if not sets[j] & s), None)
                other = f"`{_show(partner)}`" if partner is not None else "the tests before it"
                return f": {other} and `{_show(node.items[i])}` never hold on one event"
        return ""
    if isinstance(node, ast.Or):
        reasons = [never_together(universe, k).removeprefix(": ") for k in node.items]
        return ": " + "; ".join(r for r in reasons if r) if any(reasons) else ""
    return f": `{_show(node)}` holds on no event" if node is not expr else ""


def _show(expr: ast.Expr) -> str:
    try:
        return print_expr(expr)
    except (ValueError, TypeError):  # an internal node the printer does not write
        return type(expr).__name__
