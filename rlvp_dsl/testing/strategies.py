"""Hypothesis strategies for rule authors: generated episodes over a tool catalogue.

Use them in your own pytest files to state what your rules must (never) do, and let
Hypothesis search for an episode that breaks it.  A failure is shrunk to a small,
readable episode (few events, values ``"A"``/``"B"``, status ``ok``)::

    # tests/test_my_rules.py
    from hypothesis import given
    from rlvp_dsl import load_program
    from rlvp_dsl.testing import episodes

    program = load_program("rules/tau2_airline.rlvp")

    @given(episodes(program, max_events=10))
    def test_no_episode_earns_more_than_half_a_point(episode):
        assert sum(c.value for c in program.score(episode) if c.value > 0) <= 0.5

`tools` may be a `Program` (its tool table; the literals its rules test are mined so
generated events can match them), a `Manifest` (`rlvp_dsl.manifests.load_manifest`),
a mapping name -> `ToolSpec`, or a list of `rlvp_dsl.tools.ToolSpec`-like objects (``name``,
``tags``, ``target``, ``params``) or plain tool names.  Pass ``rules=program`` to mine a
program's literals while taking the tools from a manifest.

What is generated (`Vocabulary` holds the pools; every pool is small so that targets
repeat and collide):

* calls of the catalogue's tools, carrying the tools' tags; the target argument is
  usually present, other parameters sometimes; values from a small shared pool
  (``"A"``, ``"B"``, ``"C"``, plus every literal the rules compare that argument with,
  plus a shortest string matching each regex they test it with);
* every status: ``ok`` (with a result from a pool), ``error`` (with an error text),
  ``malformed`` (no arguments, truncated raw JSON), ``no_result``;
* exact repeats of an earlier call (same tool and arguments) with a fresh status;
* user and assistant turns: confirmations (``"yes"``, ``"I confirm."``), refusals,
  summaries, and every text the rules look for;
* numeric env signals (``goals_remaining`` and any signal the rules name), small integers;
* when the rules bind ``same message``: source messages (`Event.message`, `in_messages`), an
  assistant turn or call sometimes joining the message before it; otherwise every event is a
  message of its own, as before.

Hypothesis is imported by this module only; the core library never needs it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

import attrs

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
    raise ImportError("rlvp_dsl.testing needs the hypothesis package: pip install hypothesis") from exc

from .. import ast
from ..events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, OK, STATUSES, USER, Episode, Event
from ..ir import CheckedRule, ProgressRule, RuleSet, conditions
from ..tools import ToolSpec
from .regex_sampling import regex_samples

if TYPE_CHECKING:
    from ..compile import Program

__all__ = [
    "Vocabulary",
    "vocabulary",
    "calls",
    "events",
    "episodes",
    "regex_samples",
    "reindexed",
    "noop_read",
    "read_only_tools",
]

#: The default pool of argument values (shared by all arguments, so targets collide).
VALUES = ("A", "B", "C")
USER_TEXTS = ("yes", "no", "Yes, please go ahead.", "I confirm.", "wait, not yet", "")
ASSISTANT_TEXTS = ("I will change A. Do you confirm?", "Done.", "Let me check.", "")
RESULTS = ("", "ok", "found A")
ERROR_TEXTS = ("Error: not found", "Error: invalid argument")
SIGNAL_VALUES = (0, 1, 2, 3, 4)
#: Statuses in shrinking order: a counterexample shrinks towards ``ok``.
_STATUS_WEIGHTS = (OK, OK, OK, ERROR, MALFORMED, NO_RESULT)


@attrs.frozen
class Vocabulary:
    """The pools episodes are drawn from (see the module docstring)."""

    tools: tuple[ToolSpec, ...]
    values: Mapping[str, tuple[Any, ...]] = attrs.field(factory=dict)
    default_values: tuple[Any, ...] = VALUES
    extra_args: tuple[str, ...] = ()
    user_texts: tuple[str, ...] = USER_TEXTS
    assistant_texts: tuple[str, ...] = ASSISTANT_TEXTS
    results: tuple[str, ...] = RESULTS
    error_texts: tuple[str, ...] = ERROR_TEXTS
    signals: tuple[str, ...] = ()
    signal_values: tuple[float, ...] = SIGNAL_VALUES
    messages: bool = False  # the rules bind `same message`: episodes group events into source messages

    def values_for(self, arg: str) -> tuple[Any, ...]:
        return self.values.get(arg, self.default_values)

    def arg_names(self, tool: ToolSpec) -> tuple[str, ...]:
        """The tool's arguments, target first (parameters, else the rules' argument names)."""
        names = tool.params or self.extra_args
        rest = tuple(n for n in names if n != tool.target)
        return ((tool.target,) if tool.target else ()) + rest


# ---- building the vocabulary ------------------------------------------------------


def _shape(obj: Any) -> ToolSpec:
    if isinstance(obj, str):
        return ToolSpec(obj)
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"a tool must be a name or have a 'name' attribute (got {type(obj).__name__})")
    params = getattr(obj, "params", None)  # None: not known (a `tool` line); (): takes none (a manifest says so)
    tags = frozenset(getattr(obj, "tags", None) or ())
    return ToolSpec(name, tags, getattr(obj, "target", None), None if params is None else tuple(params))


def _tool_shapes(tools: Any) -> tuple[ToolSpec, ...]:
    from ..compile import Program
    from ..manifests import Manifest

    if isinstance(tools, Program):
        tools = tools.tools
    if isinstance(tools, RuleSet):
        tools = tools.tools
    if isinstance(tools, Manifest):
        tools = tools.tools
    if isinstance(tools, Mapping):
        tools = list(tools.values())
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise TypeError(
            "tools must be a Program, a Manifest, a mapping of ToolSpec or a list of tools "
            f"(got {type(tools).__name__})"
        )
    shapes = tuple(sorted((_shape(t) for t in tools), key=lambda s: s.name))
    if not shapes:
        raise ValueError("tools: at least one tool is needed to generate calls")
    return shapes


def _rules_of(rules: Any) -> tuple[CheckedRule, ...]:
    from ..compile import Program

    if rules is None:
        return ()
    if isinstance(rules, (Program, RuleSet)):
        return tuple(rules.rules)
    return tuple(rules)


def _add(pool: dict[str, list[Any]], key: str, *values: Any) -> None:
    bucket = pool.setdefault(key, [])
    for v in values:
        if v not in bucket:
            bucket.append(v)


def vocabulary(tools: Any, *, rules: Any = None, values: tuple[Any, ...] = VALUES) -> Vocabulary:
    """The pools for `tools`, enriched with every literal the rules test (see the module docstring).

    `rules` defaults to `tools` when that is a `Program`.

    Raises:
        TypeError: `tools` is none of the accepted forms.
        ValueError: `tools` is empty.
    """
    from ..analysis import walk
    from ..compile import Program

    shapes = _tool_shapes(tools)
    if rules is None and isinstance(tools, Program):
        rules = tools
    args: dict[str, list[Any]] = {}
    texts: dict[str, list[Any]] = {}
    signals: list[str] = []
    signal_values: list[float] = list(SIGNAL_VALUES)
    arg_names: list[str] = []
    said: set[int] = set()
    binds_message = False
    for rule in _rules_of(rules):
        same = getattr(rule, "same", None)  # an obligation's binding
        binds_message |= same is not None and same.kind == "message"
        if isinstance(rule, ProgressRule):
            _add({"s": signals}, "s", rule.signal)
            if rule.start is not None:
                signal_values.extend(v for v in (rule.start - 1, rule.start) if v not in signal_values)
        for root in conditions(rule):
            for node in walk(root):
                binds_message |= isinstance(node, ast.Seen) and node.same is not None and node.same.kind == "message"
                if id(node) not in said:
                    _mine(node, args, texts, signals, signal_values, arg_names)
                if (
                    isinstance(node, ast.And)
                    and len(node.items) == 2
                    and isinstance(node.items[0], ast.KindAtom)
                    and isinstance(node.items[1], ast.TextTest)
                ):  # `user says ...`: that role's texts
                    test = node.items[1]
                    said.add(id(test))
                    found = regex_samples(test.value, test.flags) if test.op == "matches" else [test.value]
                    _add(texts, node.items[0].kind, *[t for t in found if t])
    pools = {name: tuple(list(values) + [v for v in found if v not in values]) for name, found in args.items()}
    return Vocabulary(
        tools=shapes,
        values=pools,
        default_values=tuple(values),
        extra_args=tuple(arg_names),
        user_texts=USER_TEXTS + _new(texts, USER, USER_TEXTS),
        assistant_texts=ASSISTANT_TEXTS + _new(texts, ASSISTANT, ASSISTANT_TEXTS),
        results=RESULTS + tuple(t for t in texts.get("result", ()) if t not in RESULTS),
        error_texts=ERROR_TEXTS + tuple(t for t in texts.get("error_text", ()) if t not in ERROR_TEXTS),
        signals=tuple(signals),
        signal_values=tuple(signal_values),
        messages=binds_message,
    )


def _new(texts: dict[str, list[Any]], kind: str, defaults: tuple[str, ...]) -> tuple[str, ...]:
    """Texts the rules test `kind` messages with: from `KIND says ...` first, then plain `text` tests."""
    found = [t for t in texts.get(kind, ()) if t not in defaults]
    return tuple(found + [t for t in texts.get("text", ()) if t not in defaults and t not in found])


def _mine(
    node: ast.Expr,
    args: dict[str, list[Any]],
    texts: dict[str, list[Any]],
    signals: list[str],
    signal_values: list[float],
    arg_names: list[str],
) -> None:
    if isinstance(node, ast.ArgTest):
        name = node.arg.text
        if name not in arg_names:
            arg_names.append(name)
        if node.op == "in":
            _add(args, name, *cast(tuple[Any, ...], node.value))
        elif node.op == "matches":
            _add(args, name, *regex_samples(cast(str, node.value), node.flags))
        elif node.op in ("<", "<=", ">", ">="):
            bound = cast(float, node.value)
            _add(args, name, bound - 1, bound, bound + 1)
        elif node.op != "exists":
            _add(args, name, node.value)
    elif isinstance(node, ast.TextTest):
        found = regex_samples(node.value, node.flags) if node.op == "matches" else [node.value]
        _add(texts, node.field, *[t for t in found if t])
    elif isinstance(node, ast.SignalTest):
        if node.signal.text not in signals:
            signals.append(node.signal.text)
        signal_values.extend(v for v in (node.value - 1, node.value, node.value + 1) if v not in signal_values)
    elif isinstance(node, ast.Seen) and node.same is not None and node.same.arg is not None and node.same.kind == "arg":
        if node.same.arg.text not in arg_names:
            arg_names.append(node.same.arg.text)


# ---- strategies ----------------------------------------------------------------------


def _pick(pool: tuple[Any, ...], defaults: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """Draw from `pool`, half the time from what it adds to `defaults` (the rules' literals),
    so that rare literals are drawn often; shrinks towards the first default."""
    mined = pool[len(defaults) :] if pool[: len(defaults)] == defaults else ()
    if not mined or not defaults:
        return st.sampled_from(pool)
    return st.one_of(st.sampled_from(defaults), st.sampled_from(mined))


def _vocab(tools: Any, rules: Any) -> Vocabulary:
    return tools if isinstance(tools, Vocabulary) else vocabulary(tools, rules=rules)


def _call_strategy(vocab: Vocabulary, statuses: tuple[str, ...], index: int) -> st.SearchStrategy[Event]:
    status_pool = tuple(s for s in _STATUS_WEIGHTS if s in statuses) or tuple(statuses)

    @st.composite
    def call(draw: st.DrawFn) -> Event:
        tool = draw(st.sampled_from(vocab.tools))
        status = draw(st.sampled_from(status_pool))
        arguments: dict[str, Any] = {}
        for name in vocab.arg_names(tool):
            # the target is usually there (shrinks to present), other arguments seldom (shrink to absent)
            present = draw(st.integers(0, 3)) < 3 if name == tool.target else draw(st.integers(0, 3)) >= 2
            if present:
                arguments[name] = draw(_pick(vocab.values_for(name), vocab.default_values))
        raw = None
        error_text = result = ""
        if status == MALFORMED:
            text = json.dumps(arguments, ensure_ascii=False)
            raw = text[: max(1, len(text) - 2)]
            arguments = {}
        if status in (ERROR, MALFORMED):
            error_text = draw(_pick(vocab.error_texts, ERROR_TEXTS))
        elif status == OK:
            result = draw(_pick(vocab.results, RESULTS))
        signals: dict[str, float] = {}
        for name in vocab.signals:
            if draw(st.integers(0, 2)) == 2:
                signals[name] = draw(st.sampled_from(vocab.signal_values))
        return Event(
            index,
            CALL,
            tool=tool.name,
            arguments=arguments,
            raw_arguments=raw,
            status=status,
            error_text=error_text,
            result=result,
            tags=tool.tags,
            signals=signals,
        )

    return call()


def _message_strategy(vocab: Vocabulary, kind: str, index: int) -> st.SearchStrategy[Event]:
    texts = _pick(vocab.user_texts, USER_TEXTS) if kind == USER else _pick(vocab.assistant_texts, ASSISTANT_TEXTS)
    return texts.map(lambda text: Event(index, kind, text=text))


def calls(
    tools: Any, *, index: int = 0, rules: Any = None, statuses: Iterable[str] = STATUSES
) -> st.SearchStrategy[Event]:
    """A strategy for one tool call (an `Event` with kind ``call``) at position `index`.

    Raises:
        ValueError: a status outside ok/error/malformed/no_result, or no tools.
    """
    return _call_strategy(_vocab(tools, rules), _statuses(statuses), index)


def events(
    tools: Any, *, index: int = 0, rules: Any = None, statuses: Iterable[str] = STATUSES, messages: bool = True
) -> st.SearchStrategy[Event]:
    """A strategy for one event: a call (as `calls`), or a user / assistant turn when `messages`."""
    vocab = _vocab(tools, rules)
    options = [_call_strategy(vocab, _statuses(statuses), index)]
    if messages:
        options += [_message_strategy(vocab, USER, index), _message_strategy(vocab, ASSISTANT, index)]
    return st.one_of(options)


def _statuses(statuses: Iterable[str]) -> tuple[str, ...]:
    given = tuple(statuses)
    bad = [s for s in given if s not in STATUSES]
    if bad or not given:
        raise ValueError(f"statuses must be among {', '.join(STATUSES)} (got {list(given)})")
    return given


@attrs.frozen
class _Related:
    """A draft event tied to the k-th earlier call (mod their number): with `exact`, that call
    again (same tool and arguments) with `status`; otherwise `call` aimed at the same target
    value.  Without an earlier call it is just `call`."""

    k: int
    exact: bool
    status: str
    call: Event


def episodes(
    tools: Any,
    *,
    rules: Any = None,
    min_events: int = 0,
    max_events: int = 12,
    statuses: Iterable[str] = STATUSES,
    messages: bool = True,
    repeats: bool = True,
    episode_id: str = "generated",
) -> st.SearchStrategy[Episode]:
    """A strategy for whole episodes of `min_events`..`max_events` events over `tools`.

    Events are drafted independently (so shrinking deletes them one by one), then numbered.
    With `repeats`, some drafts are tied to an earlier call: an exact repeat (same tool and
    arguments, a fresh status ``ok`` or ``error`` -- what ``repeat_error`` and "spamming a
    discharge" are about), or a call of any tool aimed at the same target value (read after
    write, write after read).

    Raises:
        ValueError: bad sizes or statuses, or no tools.
    """
    if not 0 <= min_events <= max_events:
        raise ValueError(f"need 0 <= min_events <= max_events (got {min_events}, {max_events})")
    vocab = _vocab(tools, rules)
    allowed = _statuses(statuses)
    call = _call_strategy(vocab, allowed, 0)
    drafts: list[st.SearchStrategy[Event | _Related]] = [call]
    if repeats:
        again = tuple(s for s in (OK, ERROR) if s in allowed) or allowed
        drafts.append(st.builds(_Related, st.integers(0, max_events), st.booleans(), st.sampled_from(again), call))
    if messages:
        drafts += [_message_strategy(vocab, USER, 0), _message_strategy(vocab, ASSISTANT, 0)]
    targets = {t.name: t.target for t in vocab.tools}
    items = st.lists(st.one_of(drafts), min_size=min_events, max_size=max_events)
    if vocab.messages:  # rules about how the agent packs its messages: draw which events share one
        joins = st.lists(st.booleans(), min_size=max_events, max_size=max_events)
        return st.tuples(items, joins).map(lambda t: Episode(episode_id, in_messages(_resolve(t[0], targets), t[1])))
    return items.map(lambda items: Episode(episode_id, _resolve(items, targets)))


def in_messages(events: Iterable[Event], joins: Iterable[bool]) -> tuple[Event, ...]:
    """The events with source messages (`Event.message`): a user turn is a message of its own; an
    assistant turn or a call joins the message before it when that is not a user's and its `joins`
    flag is true (issued together), else starts the next one."""
    out: list[Event] = []
    message, open_assistant = -1, False
    for event, join in zip(events, joins):
        if event.kind == USER or not open_assistant or not join:
            message += 1
        open_assistant = event.kind != USER
        out.append(attrs.evolve(event, message=message))
    return tuple(out)


def _resolve(items: list[Event | _Related], targets: Mapping[str, str | None]) -> tuple[Event, ...]:
    out: list[Event] = []
    earlier: list[Event] = []
    for i, item in enumerate(items):
        if not isinstance(item, _Related):
            event = item
        else:
            event = item.call
            base = earlier[item.k % len(earlier)] if earlier else None
            if base is not None and item.exact:
                event = attrs.evolve(
                    base,
                    status=item.status,
                    raw_arguments=None if base.arguments else base.raw_arguments,
                    error_text="Error: again" if item.status == ERROR else "",
                    result="ok" if item.status == OK else "",
                )
            elif base is not None and event.status != MALFORMED:
                source, aim = targets.get(base.tool or ""), targets.get(event.tool or "")
                if source is not None and source in base.arguments and aim:
                    event = attrs.evolve(event, arguments={**event.arguments, aim: base.arguments[source]})
        event = attrs.evolve(event, index=i)
        if event.kind == CALL:
            earlier.append(event)
        out.append(event)
    return tuple(out)


def reindexed(events: Iterable[Event]) -> tuple[Event, ...]:
    """The events renumbered 0, 1, 2, ... (after inserting, deleting or permuting events)."""
    return tuple(attrs.evolve(e, index=i) for i, e in enumerate(events))


def noop_read(tool: ToolSpec, index: int, value: str) -> Event:
    """A read-only call that learns nothing: status ok, empty result, its target (if any) set to
    `value`, no other argument."""
    arguments = {tool.target: value} if tool.target else {}
    return Event(index, CALL, tool=tool.name, arguments=arguments, status=OK, tags=tool.tags)


def read_only_tools(vocab: Vocabulary, program: Program | None = None) -> tuple[ToolSpec, ...]:
    """Tools tagged ``read`` (by the catalogue or by `program`'s table) and not write/destructive."""
    out = []
    for tool in vocab.tools:
        tags = set(tool.tags)
        if program is not None and tool.name in program.tools:
            tags |= program.tools[tool.name].tags
        if "read" in tags and not tags & {"write", "destructive"}:
            out.append(tool)
    return tuple(out)
