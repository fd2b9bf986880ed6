"""Stage 3 of the checker: the names inside conditions -- tools (RV201) and tags (RV202) with
did-you-mean, regexes (RV105), argument names against the parameters of the tools a condition
can match (RV205), and bindings a tool carries no value for (RV205/RV206)."""

from __future__ import annotations

from typing import cast

from .. import ast
from ..analysis import EventClass, has_unknown, tools_of, walk
from ..diagnostics import did_you_mean, quoted
from ..regex import RegexSyntaxError, compile_regex
from ..syntax.errors import keyword_suggestion
from .state import CheckState
from .tags import STANDARD_TAGS, misdeclared


def check_expr(state: CheckState, expr: ast.Expr) -> None:
    """Every name, regex and binding of one condition (records the tags it tests in `used_tags`)."""
    declared_tags, known_tags = state.declared_tags, state.known_tags
    for node in walk(expr):
        if isinstance(node, ast.CallAtom):
            for name in node.tools:
                if name.text not in state.tools:
                    if state.unread_manifest is not None:
                        state.follow_on_error()
                        continue
                    hint = (
                        did_you_mean(name.text, state.tools)
                        or keyword_suggestion(name.text, "a tool name")
                        or ('declare it with `tool NAME : TAGS` or `tools from "manifest.json"`')
                    )
                    state.error("RV201", f"unknown tool {quoted(name.text)}", name.span, hint)
        elif isinstance(node, ast.TagAtom):
            state.used_tags.add(node.tag.text)
            if node.tag.text not in known_tags:
                if state.unread_manifest is not None:
                    state.follow_on_error()
                    continue
                hint = (
                    misdeclared(state, node.tag.text)
                    or did_you_mean(
                        node.tag.text, set(known_tags) | STANDARD_TAGS
                    )  # the standard tags too: `writ` -> `write`
                    or (f"no declared tool carries it; declared tags: {', '.join(sorted(declared_tags)) or 'none'}")
                )
                state.error("RV202", f"unknown tag {quoted(node.tag.text)}", node.tag.span, hint)
        elif isinstance(node, (ast.TextTest, ast.ArgTest)) and node.op == "matches":
            _check_regex(state, node)
        elif isinstance(node, ast.And):
            _check_args_in(state, node)
        elif isinstance(node, ast.Seen) and node.returned and node.same is not None and node.same.kind == "message":
            state.error(
                "RV205",
                "`returned message` cannot hold: a source message is not a value a tool returns",
                node.same.span,
                "`same message` finds an earlier event of this event's own message; `returned ARG` "
                "finds an earlier result that holds this event's argument",
            )
        elif isinstance(node, ast.Seen) and node.same is not None and not node.returned:
            check_binding(state, node.same, state.universe.possible(node.cond), "the `seen` condition", "RV205")
    if isinstance(expr, ast.ArgTest):
        _check_args_in(state, ast.And((expr,), expr.span))


def _check_regex(state: CheckState, node: ast.TextTest | ast.ArgTest) -> None:
    try:
        compile_regex(cast(str, node.value), node.flags)  # `matches` takes a pattern (grammar: REGEX)
    except RegexSyntaxError as exc:
        state.error("RV105", f"invalid regular expression: {exc.message}", node.span, exc.hint or "")


def _check_args_in(state: CheckState, node: ast.And) -> None:
    others = [i for i in node.items if not isinstance(i, ast.ArgTest)]
    context = state.universe.possible(ast.And(tuple(others))) if others else state.universe.calls
    if has_unknown(context):
        return
    tools = [state.tools[t] for t in tools_of(context)]
    if not tools or any(t.params is None for t in tools):
        return
    for item in node.items:
        if isinstance(item, ast.ArgTest) and not any(item.arg.text in (t.params or ()) for t in tools):
            names = ", ".join(sorted(t.name for t in tools))
            state.error(
                "RV205",
                f"argument {quoted(item.arg.text)} is not a parameter of any tool this condition can match ({names})",
                item.arg.span,
                did_you_mean(item.arg.text, {p for t in tools for p in t.params or ()}),
            )


def check_binding(
    state: CheckState, binding: ast.Binding, classes: frozenset[EventClass], where: str, code: str
) -> bool:
    """False (after an error `code`) when no tool that `where` can match carries a value for `binding`."""
    if binding.kind in ("call", "message") or has_unknown(classes):  # every call has both
        return True
    tools = [state.tools[t] for t in tools_of(classes)]
    if binding.kind == "target":
        if tools and not any(t.target for t in tools):
            state.error(
                code,
                f"no tool matched by {where} declares a target",
                binding.span,
                "declare one with `tool NAME : TAGS target ARG`, or bind an argument: `same ARG`",
            )
            return False
        return True
    assert binding.arg is not None  # an `arg` binding names its argument
    arg = binding.arg.text
    if tools and all(t.params is not None for t in tools) and not any(arg in (t.params or ()) for t in tools):
        state.error(
            code,
            f"argument {quoted(arg)} is not bound by {where}: none of its tools "
            f"({', '.join(sorted(t.name for t in tools))}) takes it",
            binding.span,
            did_you_mean(arg, {p for t in tools for p in t.params or ()}),
        )
        return False
    return True
