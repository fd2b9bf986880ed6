"""Stage 4 of the checker: what a rule would mean -- credit that would land on user text
(RV208) and rules that can never fire (RV210, a warning).  Obligations that can never be
discharged (RV206) are found with the obligation itself (`rlvp_dsl.check.rules`)."""

from __future__ import annotations

from .. import ast
from ..diagnostics import quoted
from ..events import OK, USER
from ..source import Span
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
    """RV210 (and True) when no event satisfies `expr`; nothing when the rule already has an error."""
    if state.rule_has_errors():
        return False  # an unknown tool or tag already explains it
    if not state.universe.possible(expr):
        state.warn(
            "RV210",
            f"rule {quoted(name)} can never fire: no event satisfies its condition",
            span,
            "check the tool names, tags and statuses it combines with `and`",
        )
        return True
    return False
