"""Stage 2 of the checker, and the weight-sign check: ``const`` names collected (a name defined
twice: RV203), every weight resolved to a number (an unknown constant: RV207), and every
weight's sign checked against its rule kind (RV204): a violation's weight is negative, an
obligation's credit non-negative and its expiry non-positive, a progress weight positive."""

from __future__ import annotations

from .. import ast
from ..diagnostics import did_you_mean, quoted
from ..source import Span
from .state import CheckState

#: The help of RV204, by rule kind.
_SIGN_HELP = {
    "violation": "violations are penalties; to give credit use an obligation or a progress rule",
    "obligation": "an obligation pays `+credit` on discharge and `expire` (a penalty) when its deadline passes",
    "progress": "progress pays credit for a new best value; penalise with a violation instead",
}


def collect_consts(state: CheckState) -> None:
    """Fill `state.consts` from the files' ``const`` declarations (the first of a name wins)."""
    for _, item in state.items(ast.ConstDecl):
        name = item.name.text
        if name in state.consts:
            state.error(
                "RV203",
                f"constant {quoted(name)} is defined twice (first at {state.consts[name][1].location})",
                item.name.span,
                "rename one of them",
            )
            continue
        state.consts[name] = (item.value, item.name.span)


def resolve(state: CheckState, w: ast.Weight) -> float | None:
    """The weight's number: as written, or its constant's value; None for an unknown constant (RV207)."""
    if w.const is None:
        return w.value
    if w.const.text in state.consts:
        return state.consts[w.const.text][0]
    state.error(
        "RV207",
        f"unknown constant {quoted(w.const.text)}",
        w.const.span,
        did_you_mean(w.const.text, state.consts) or "define it with `const NAME = -0.5`",
    )
    return None


def signed(state: CheckState, rule_kind: str, field: str, value: float | None, want: str, span: Span) -> float:
    """`value` (0.0 when unresolved), after checking its sign (RV204).

    Args:
        rule_kind: as the message names it (``a violation``, ``an obligation``, ``repeat_error``).
        field: the weight's field (``weight``, ``credit``, ``expire``).
        want: ``negative``, ``positive``, ``non-negative`` or ``non-positive``.
    """
    if value is None:
        return 0.0
    bad = (
        (want == "negative" and value >= 0)
        or (want == "positive" and value <= 0)
        or (want == "non-negative" and value < 0)
        or (want == "non-positive" and value > 0)
    )
    if bad:
        state.error(
            "RV204",
            f"'{field}' must be {want} for {rule_kind} (got {value:g})",
            span,
            _SIGN_HELP.get(rule_kind.removeprefix("an ").removeprefix("a "), _SIGN_HELP["violation"]),
        )
    return value


def weight(state: CheckState, rule_kind: str, field: str, w: ast.Weight, want: str) -> float:
    """A rule's weight resolved (`resolve`) and its sign checked (`signed`)."""
    return signed(state, rule_kind, field, resolve(state, w), want, w.span)
