"""Stage 3 of the checker: the names inside conditions -- tools (RV201) and tags (RV202) with
did-you-mean, regexes (RV105), argument names against the parameters of the tools a condition
can match (RV205), and bindings no event the binding is asked of carries (RV205/RV206): an
argument no matched tool takes, a target no matched tool declares, and any `same ARG`,
`same target` or `same call` asked of an event that can only be a message turn (the scorer's
`rlvp_dsl.predicates.binding_key` gives a message turn a value for `same message` alone)."""

from __future__ import annotations

from typing import cast

from .. import ast
from ..analysis import EventClass, has_unknown, tools_of, walk
from ..diagnostics import did_you_mean, quoted
from ..events import CALL
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


#: Why a message turn has no value for a binding, by binding kind (`rlvp_dsl.predicates.binding_key`).
_NO_VALUE_ON_MESSAGES = {
    "arg": "a message turn has no arguments",
    "target": "a message turn has no target argument",
    "call": "a message turn is not a call",
}


def check_binding(
    state: CheckState,
    binding: ast.Binding,
    classes: frozenset[EventClass],
    where: str,
    code: str,
    fix: str = "",
    word: str = "same",
) -> bool:
    """False (after an error `code` at the binding) when no event class of `classes` -- the
    events `where` can match -- carries a value for `binding`: an argument none of the matched
    tools takes (when their parameters are known), a target none of them declares, or any
    binding but `message` when `classes` holds message turns only.

    Args:
        where: the condition the classes come from, as the message names it (`` `open` ``).
        fix: the help for the message-only case (what to write instead); `{b}` is replaced by
            the binding as written.
        word: ``same`` or ``returned``, as written before the binding.
    """
    if not classes or state.universe.carriers(binding, classes):  # no event at all: RV210's business
        return True
    if not any(kind == CALL for kind, _, _ in classes):
        kinds = " and ".join(sorted({f"{kind} turns" for kind, _, _ in classes}))
        written = f"{word} {binding.describe()}"
        state.error(
            code,
            f"`{written}` can never hold: {where} matches only {kinds}, and {_NO_VALUE_ON_MESSAGES[binding.kind]}",
            binding.span,
            (fix or "drop `{b}`, or bind on a call that carries it").replace("{b}", written),
        )
        return False
    tools = [state.tools[t] for t in tools_of(classes)]  # none takes the argument / declares a target
    if binding.kind == "target":
        state.error(
            code,
            f"no tool matched by {where} declares a target",
            binding.span,
            "declare one with `tool NAME : TAGS target ARG`, or bind an argument: `same ARG`",
        )
        return False
    assert binding.arg is not None  # an `arg` binding names its argument
    state.error(
        code,
        f"argument {quoted(binding.arg.text)} is not bound by {where}: none of its tools "
        f"({', '.join(sorted(t.name for t in tools))}) takes it",
        binding.span,
        did_you_mean(binding.arg.text, {p for t in tools for p in t.params or ()}),
    )
    return False


def check_history(state: CheckState, expr: ast.Expr) -> None:
    """The bindings of the `seen` tests in `expr`, a condition tested on its own (a rule's `on`
    with its `unless`, an obligation's `open`, ``discharge`` or deadline, ...), on both events
    they compare (RV205): the earlier event *j* (the classes its condition C can match) and the
    event *i* the `seen` is tested at -- the classes `expr` can match there, narrowed by every
    `and` around the `seen`. `on assistant and not seen (call get ok same id)` is an error: an
    assistant turn has no `id`, so `seen` is false on every one of them and `not seen` always holds.

    Cost: two passes over `expr` (`Universe.possible_each`), none without such a `seen`.
    """
    if not any(isinstance(n, ast.Seen) and n.same is not None and n.same.kind != "message" for n in walk(expr)):
        return
    sets = state.universe.possible_each(expr)
    stack: list[tuple[ast.Expr, frozenset[EventClass]]] = [(expr, sets[id(expr)])]
    while stack:
        node, context = stack.pop()
        if isinstance(node, ast.And):  # a `seen` inside matters only where every item can hold
            inner = context & sets[id(node)]
            stack.extend((item, inner) for item in node.items)
        elif isinstance(node, ast.Or):
            stack.extend((item, context) for item in node.items)
        elif isinstance(node, ast.Not):
            stack.append((node.item, context))
        elif isinstance(node, ast.Seen):
            _check_seen(state, node, context, sets[id(node.cond)])
            # C and D are tested at other events (the earlier one, those in between): contexts of their own
            stack.extend((sub, sets[id(sub)]) for sub in (node.cond, node.since) if sub is not None)


def _check_seen(
    state: CheckState, node: ast.Seen, context: frozenset[EventClass], earlier: frozenset[EventClass]
) -> None:
    """RV205 for a binding of `node` that no event of `earlier` (C's classes) or of `context` carries."""
    same = node.same
    if same is None or same.kind == "message" or same.span.line <= 0:  # no binding, or one the checker made
        return
    word = "returned" if node.returned else "same"
    if not node.returned and not check_binding(
        state,
        same,
        earlier,
        "the `seen` condition",
        "RV205",
        "drop `{b}` (`seen (C)` asks for any earlier such event), or make C a call that carries it",
    ):
        return
    check_binding(
        state,
        same,
        context,
        "the condition around this `seen`",
        "RV205",
        "drop `{b}` (`seen (C)` asks for any earlier such event), or test the `seen` on a call "
        "that carries it (`on call TOOL and ...`)",
        word,
    )
