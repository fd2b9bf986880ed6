"""Stage 5 of the checker: ``repeat_error`` and ``blind_destructive`` lowered to violations over
``seen`` conditions (their exact meaning: docs/language.md, "repeat_error" and
"blind_destructive"), with their defaults, after the checks of their own parts."""

from __future__ import annotations

from .. import ast
from ..analysis import tools_of
from ..diagnostics import quoted
from ..ir import ViolationRule
from .conditions import check_expr, check_history
from .meaning import lands_on_calls
from .state import CheckState
from .weights import weight

# Defaults of the structural rules (docs/language.md, "repeat_error" and "blind_destructive").
_WRITE_LIKE = ast.Or((ast.TagAtom(ast.Name("write")), ast.TagAtom(ast.Name("destructive"))))
DEFAULT_RESET = ast.And((ast.CallAtom(), ast.StatusAtom("ok"), _WRITE_LIKE))
#: `call (tag destructive or tag write and not tag additive)`: an additive write (MCP destructiveHint false) destroys nothing.
DEFAULT_DESTRUCTIVE = ast.And(
    (
        ast.CallAtom(),
        ast.Or(
            (
                ast.TagAtom(ast.Name("destructive")),
                ast.And((ast.TagAtom(ast.Name("write")), ast.Not(ast.TagAtom(ast.Name("additive"))))),
            )
        ),
    )
)
DEFAULT_INSPECTED = ast.And((ast.CallAtom(), ast.TagAtom(ast.Name("read")), ast.StatusAtom("ok")))


def repeat_error(state: CheckState, r: ast.RepeatError) -> ViolationRule:
    """``on`` (default: any call) while ``seen`` a failed call with the same tool and arguments,
    with no ``reset`` event (default `DEFAULT_RESET`) since."""
    w = weight(state, "repeat_error", "weight", r.weight, "negative")
    reset: ast.Expr = DEFAULT_RESET
    if r.reset is not None:
        check_expr(state, r.reset)
        check_history(state, r.reset)
        reset = r.reset
    on: ast.Expr = ast.CallAtom()
    if r.on is not None:
        check_expr(state, r.on)
        check_history(state, r.on)
        lands_on_calls(state, r.name.text, "`on`", r.on, r.on.span)
        on = r.on
    failed = ast.And((ast.CallAtom(), ast.StatusAtom("error")))
    earlier = ast.Seen(failed, ast.Binding("call"), reset)
    cond = ast.And((on, earlier))
    return ViolationRule(r.name.text, "repeat_error", w, cond, r.span, failed_call=earlier)


def blind_destructive(state: CheckState, r: ast.BlindDestructive) -> ViolationRule:
    """``on`` (default `DEFAULT_DESTRUCTIVE`) a call with a target that no earlier successful
    inspection (default `DEFAULT_INSPECTED`) named or returned; RV210 when no declared tool it
    matches can fire it."""
    w = weight(state, "blind_destructive", "weight", r.weight, "negative")
    on: ast.Expr = DEFAULT_DESTRUCTIVE
    inspected: ast.Expr = DEFAULT_INSPECTED
    if r.on is not None:
        check_expr(state, r.on)
        check_history(state, r.on)
        lands_on_calls(state, r.name.text, "`on`", r.on, r.on.span)
        on = r.on
    if r.inspected_by is not None:
        check_expr(state, r.inspected_by)
        check_history(state, r.inspected_by)
        inspected = r.inspected_by
    target = ast.Binding("target")
    matched = tools_of(state.universe.possible(on))
    destructive = [t for t in matched if state.tools[t].target]
    if state.tools and not matched and not state.rule_has_errors():
        carries = (
            "the tag 'destructive', or 'write' without 'additive'"
            if r.on is None
            else "a tool its `on` condition matches"
        )
        state.warn(
            "RV210",
            f"rule {quoted(r.name.text)} can never fire: no declared tool carries {carries}",
            r.name.span,
            "tag the state-changing tools: `tool NAME : write target ARG` (check the tags for typos)"
            if r.on is None
            else "check the tool names and tags of its `on` condition",
        )
    elif state.tools and not destructive:
        state.warn(
            "RV210",
            f"rule {quoted(r.name.text)} can never fire: no write/destructive tool it matches declares a target",
            r.name.span,
            "declare targets: `tool NAME : write target ARG`",
        )
    looked_at = ast.Or((ast.Seen(inspected, target), ast.Seen(inspected, target, returned=True)))
    cond = ast.And((on, ast.HasBinding(target), ast.Not(looked_at)))
    return ViolationRule(r.name.text, "blind_destructive", w, cond, r.span)
