"""The tau2 reader's fast path (`rlvp_dsl.readers.tau2_fast`) against its general path: every
episode of every shared trajectory and shipped example, and of generated tau2 simulations -- the
common shape and every deviation from it --, read with the fast path equals what the general path
(`EpisodeBuilder`, then the depth guard) gives: ``==``, hash, ``repr`` (every field, every value's
type), each field's type, the meta in order; a file or record that cannot be read fails with the
same error.  And the fast path is taken: on the whole tau2 corpus, and on every generated
simulation of the common shape."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest import mock

import attrs
import pytest
from hypothesis import given, strategies as st

from rlvp_dsl.events import Episode, Event, trusted_event
from rlvp_dsl.readers import ERROR_SIGNALS, ErrorSignal, ReaderError, read_episodes, read_report
from rlvp_dsl.readers import tau2, tau2_fast
from rlvp_dsl.readers.json_text import MAX_DEPTH
from rlvp_dsl.readers.depth import depth_guarded as _shallow
from rlvp_dsl.readers.loading import _read_loaded
from rlvp_dsl.readers.tau2_fast import error_test

REPO = Path(__file__).resolve().parents[2]
FILE = Path("f.json")
EXAMPLES = REPO / "examples"
EVENT_FIELDS = [a.name for a in attrs.fields(Event)]
EPISODE_FIELDS = [a.name for a in attrs.fields(Episode)]


@contextmanager
def general_path() -> Iterator[None]:
    """Every simulation read by the general path (the fast path always gives up)."""
    with mock.patch.object(tau2, "fast_events", lambda *args: None):
        yield


@contextmanager
def counting() -> Iterator[list[int]]:
    """The fast path as it is, counting the simulations it read (``[read, gave up]``)."""
    counts = [0, 0]
    real = tau2_fast.fast_events

    def fast_events(*args: Any) -> Any:
        events = real(*args)
        counts[events is None] += 1
        return events

    with mock.patch.object(tau2, "fast_events", fast_events):
        yield counts


def assert_identical(fast: list[Episode], general: list[Episode]) -> None:
    assert len(fast) == len(general)
    for mine, theirs in zip(fast, general):
        assert mine == theirs and hash(mine) == hash(theirs) and repr(mine) == repr(theirs), mine.id
        for name in EPISODE_FIELDS:
            a, b = getattr(mine, name), getattr(theirs, name)
            assert a == b and type(a) is type(b), (mine.id, name)
        assert list(mine.meta.items()) == list(theirs.meta.items()), mine.id
        assert [type(v) for v in mine.meta.values()] == [type(v) for v in theirs.meta.values()], mine.id
        assert type(mine.events) is tuple
        for a_event, b_event in zip(mine.events, theirs.events, strict=True):
            assert type(a_event) is Event and a_event == b_event and hash(a_event) == hash(b_event)
            assert repr(a_event) == repr(b_event), (mine.id, a_event.index)
            for name in EVENT_FIELDS:
                a, b = getattr(a_event, name), getattr(b_event, name)
                assert a == b and type(a) is type(b), (mine.id, a_event.index, name)
            assert a_event.to_json() == b_event.to_json() and a_event.argument_key() == b_event.argument_key()
        # each event owns its dicts (`trusted_event`'s contract, as the builder's events do)
        held = [id(d) for e in mine.events for d in (e.arguments, e.signals)]
        assert len(held) == len(set(held)), mine.id


def outcome(read: Callable[[], list[Episode]]) -> tuple[str, Any]:
    """``("ok", episodes)`` or ``("error", the ReaderError's type and message)``."""
    try:
        return "ok", read()
    except ReaderError as exc:
        return "error", (type(exc), str(exc), exc.record, exc.field)


def assert_same_outcome(fast: tuple[str, Any], general: tuple[str, Any]) -> None:
    assert fast[0] == general[0], (fast, general)
    if fast[0] == "ok":
        assert_identical(fast[1], general[1])
    else:
        assert fast[1] == general[1]


# ---- every shared trajectory and shipped example ----------------------------------------------


def test_every_shared_trajectory_and_example(shared_data: Path) -> None:
    """Every file under ../shared/data and examples/, read as `read_paths` reads it: the fast
    path takes every tau2 simulation of the corpus, and gives what the general path gives."""
    with counting() as counts:
        fast = read_report([shared_data, EXAMPLES], keep_going=True)
    with general_path():
        general = read_report([shared_data, EXAMPLES], keep_going=True)
    assert counts[0] >= 316 + 6 and counts[1] == 0, counts  # the tau2 corpus and the tau2 examples
    assert_identical(list(fast.episodes), list(general.episodes))
    assert fast.files == general.files and fast.skipped == general.skipped
    assert [str(e) for e in fast.errors] == [str(e) for e in general.errors]


def test_every_example_file_alone() -> None:
    """Each tau2 file of examples/, by `read_episodes` (its own depth guard), with a format given
    and detected, and with other error signals (the fast path asks the signal itself)."""
    files = [p for p in sorted(EXAMPLES.rglob("*.json")) if "simulations" in json.loads(p.read_text())]
    assert len(files) >= 3
    for path in files:
        for kwargs in ({}, {"format": "tau2"}, {"error_signal": "openai"}, {"error_signal": "trl"}):
            with counting() as counts:
                fast = read_episodes(path, **kwargs)
            with general_path():
                general = read_episodes(path, **kwargs)
            assert counts[0] >= 1 and counts[1] == 0, (path, kwargs, counts)
            assert_identical(fast, general)


# ---- generated simulations: the common shape and every deviation ------------------------------

TOOLS = ["get_user_details", "book_reservation", "cancel_reservation", "toggle_airplane_mode"]
TEXT = st.sampled_from(
    ["", " ", "\n\t", "hello", "FAILED", "Error: no such user", " Error: x", "ok é", "{}", '{"a": 1}']
)
SCALAR = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(allow_nan=False) | st.text(max_size=3)
JSON_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
ARGUMENTS = st.none() | st.dictionaries(
    st.sampled_from(["reservation_id", "user_id", "when", "x"]), JSON_VALUE, max_size=3
)


def deep(levels: int) -> Any:
    value: Any = 1
    for k in range(levels):
        value = [value] if k % 2 else {"d": value}
    return value


@st.composite
def common_shape(draw: st.DrawFn) -> list[Any]:
    """Messages of the common shape: turns, calls answered in order by id (the last ones perhaps
    left unanswered), system messages."""
    messages: list[Any] = []
    counter = 0
    for _ in range(draw(st.integers(0, 6))):
        what = draw(st.sampled_from(["turn", "turn", "calls", "calls", "system"]))
        if what == "system":
            messages.append({"role": "system", "content": draw(TEXT | st.none())})
            continue
        role = draw(st.sampled_from(["assistant", "user"]))
        content = draw(TEXT | st.none()) if what == "calls" else draw(TEXT)
        if what == "turn":
            messages.append({"role": role, "content": content, **draw(st.sampled_from([{}, {"tool_calls": None}]))})
            continue
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            call = {"id": f"call_{counter}", "name": draw(st.sampled_from(TOOLS)), "arguments": draw(ARGUMENTS)}
            counter += 1
            requestor = draw(st.sampled_from([None, "assistant", "user", "absent"]))
            if requestor != "absent":
                call["requestor"] = requestor
            calls.append(call)
        message: dict[str, Any] = {"role": role, "content": content, "tool_calls": calls}
        if draw(st.booleans()):
            message["raw_data"] = {"finish_reason": draw(st.sampled_from(["stop", "tool_calls"]))}
        messages.append(message)
        for call in calls:
            result: dict[str, Any] = {"role": "tool", "id": call["id"], "content": draw(TEXT | st.none())}
            if draw(st.booleans()):
                result["error"] = draw(st.booleans())
            if draw(st.booleans()):
                result["requestor"] = role
            messages.append(result)
    for _ in range(draw(st.integers(0, 3))):  # the last calls left unanswered (the step limit)
        if messages and messages[-1]["role"] == "tool":
            messages.pop()
    return messages


def _where(draw: st.DrawFn, messages: list[Any], test: Callable[[Any], bool]) -> Any:
    """One message that passes `test`, or None."""
    found = [m for m in messages if test(m)]
    return draw(st.sampled_from(found)) if found else None


def _calls(draw: st.DrawFn, messages: list[Any]) -> Any:
    """One call (an object) of a message, or None."""
    calls = [
        call
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("tool_calls"), list)
        for call in m["tool_calls"]
        if isinstance(call, dict)
    ]
    return draw(st.sampled_from(calls)) if calls else None


def _results(draw: st.DrawFn, messages: list[Any]) -> Any:
    return _where(draw, messages, lambda m: isinstance(m, dict) and m.get("role") == "tool")


def deviate(draw: st.DrawFn, messages: list[Any]) -> None:
    """One deviation from the common shape, applied in place (some leave it common after all)."""
    how = draw(st.integers(0, 17))
    odd = draw(st.sampled_from([None, 5, "", " ", [], {}, "x", True, ["a"], {"k": 1}]))
    if how == 0 and len(messages) > 1:  # results out of order, a result twice (an orphan), a message dropped
        i, j = draw(st.integers(0, len(messages) - 1)), draw(st.integers(0, len(messages) - 1))
        messages[i], messages[j] = messages[j], messages[i]
    elif how == 1 and messages:
        messages.insert(draw(st.integers(0, len(messages))), copy.deepcopy(draw(st.sampled_from(messages))))
    elif how == 2 and messages:
        del messages[draw(st.integers(0, len(messages) - 1))]
    elif how == 3 and (result := _results(draw, messages)) is not None:  # a result's id
        if draw(st.booleans()):
            result.pop("id", None)
        else:
            result["id"] = draw(st.sampled_from(["call_0", "call_1", "nope", "", 5, None]))
    elif how == 4 and (result := _results(draw, messages)) is not None:  # a result's content, its flag
        result["content"] = draw(
            st.sampled_from(
                [
                    odd,
                    '{"content": [{"type": "text", "text": "boom"}], "isError": true}',
                    ' {"isError": false, "content": [{"type": "text", "text": "fine"}]}',
                    '{"isError": true}',
                    '{"isError": broken',
                    [{"type": "text", "text": "part"}],
                    {"content": [{"type": "text", "text": "mcp"}], "isError": True},
                ]
            )
        )
    elif how == 5 and (result := _results(draw, messages)) is not None:
        result["error"] = draw(st.sampled_from(["true", 1, None, True, False]))
        result["isError"] = draw(st.booleans())
    elif how == 6 and (call := _calls(draw, messages)) is not None:  # a call's name
        call["name"] = draw(st.sampled_from([None, "", " ", "\t", 5, ["x"], "ok_name"]))
    elif how == 7 and (call := _calls(draw, messages)) is not None:  # a call's arguments
        call["arguments"] = draw(
            st.sampled_from(
                ['{"reservation_id": "ABC"}', "not json", "", '"{\\"a\\": 1}"', "[1]", 5, [1], deep(MAX_DEPTH + 3)]
                + [{"n": deep(MAX_DEPTH - 3)}, {"n": deep(MAX_DEPTH - 2)}, {"n": deep(MAX_DEPTH - 1)}, {"l": [[1]]}]
            )
        )
    elif how == 8 and (call := _calls(draw, messages)) is not None:  # a call's id, its requestor
        call["id"] = draw(st.sampled_from([None, "", 5, "call_0", "dup"]))
        call["requestor"] = draw(st.sampled_from(["bot", "", 0, "user", "assistant"]))
    elif how == 9 and (call := _calls(draw, messages)) is not None:  # a call that is not an object
        message = _where(
            draw,
            messages,
            lambda m: isinstance(m, dict) and isinstance(m.get("tool_calls"), list) and call in m["tool_calls"],
        )
        message["tool_calls"][message["tool_calls"].index(call)] = odd
    elif how == 10 and (message := _where(draw, messages, lambda m: isinstance(m, dict))) is not None:
        message["tool_calls"] = draw(st.sampled_from(["x", 5, {}, [], None]))
    elif (
        how == 11
        and (message := _where(draw, messages, lambda m: isinstance(m, dict) and "tool_calls" in m)) is not None
    ):
        message["raw_data"] = draw(
            st.sampled_from([{"finish_reason": "length"}, {"finish_reason": None}, "length", None])
        )
    elif how == 12 and messages:  # a message that is not an object
        messages[draw(st.integers(0, len(messages) - 1))] = draw(st.sampled_from([5, None, "text", [], ["a"]]))
    elif how == 13 and (message := _where(draw, messages, lambda m: isinstance(m, dict))) is not None:
        if draw(st.booleans()):
            message.pop("role", None)
        else:
            message["role"] = draw(st.sampled_from(["robot", "", None, 5, "system", "tool", "user"]))
    elif how == 14 and (message := _where(draw, messages, lambda m: isinstance(m, dict))) is not None:
        message["content"] = draw(st.sampled_from([5, 1.5, True, [{"type": "text", "text": "p"}], {"a": 1}, ["s", 3]]))
    elif how == 15:
        messages.insert(
            draw(st.integers(0, len(messages))),
            {"role": "system", "content": draw(st.sampled_from([5, [], {}, None, "sys"]))},
        )
    elif how == 16:  # a result before any call (an orphan)
        messages.insert(0, {"role": "tool", "id": "call_0", "content": "early"})
    elif how == 17 and (message := _where(draw, messages, lambda m: isinstance(m, dict))) is not None:
        message["extra"] = {"isError": True}  # a field the reader ignores


@st.composite
def simulation_file(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A tau2 Results object of one to three simulations, and whether every one is of the common
    shape (no deviation applied)."""
    simulations = []
    common = True
    for i in range(draw(st.integers(1, 3))):
        messages = draw(common_shape())
        for _ in range(draw(st.sampled_from([0, 1, 2, 3, 4]))):
            deviate(draw, messages)
            common = False
        sim: dict[str, Any] = {"id": f"s{i}", "task_id": str(i), "trial": 0, "messages": messages}
        rewards = [{"reward": 1.0}, {"reward": 0}, {}, None, {"reward": True}, {"reward": "1"}]
        which = draw(st.integers(0, len(rewards) - 1))
        sim["reward_info"] = rewards[which]
        if draw(st.integers(0, 9)) == 0:
            sim = draw(st.sampled_from([{"messages": "x"}, {"id": "no messages"}, 5]))  # type: ignore[dict-item]
            common = False
        elif which >= 4:  # not a reward: the simulation is an error
            common = False
        simulations.append(sim)
    data = {"info": {"environment_info": {"domain_name": "airline", "policy": "be nice"}}, "simulations": simulations}
    return data, common


@attrs.frozen
class Shouting(ErrorSignal):
    """A signal of its own (a subclass): all-capital text is an error too."""

    def is_error(self, text: str, *records: Any) -> bool:
        return text.isupper() or super().is_error(text, *records)


SIGNALS = [
    ERROR_SIGNALS["tau2"],
    Shouting(flags=("error",)),
    ErrorSignal(flags=(1,)),  # type: ignore[arg-type]  # not a name: no field can be it
    ErrorSignal(flags=("failed",)),
    ErrorSignal(flags=("error",), markers=("Traceback",)),
    ERROR_SIGNALS["openai"],
    ERROR_SIGNALS["trl"],
    ErrorSignal(),
]


def read_fast(data: dict[str, Any], signal: ErrorSignal, keep_going: bool) -> tuple[str, Any]:
    """As `read_report` reads a tau2 file (`_read_loaded`): the data handed over, then the depth guard."""
    errors: list[ReaderError] | None = [] if keep_going else None
    checked: set[int] = set()

    def read() -> list[Episode]:
        episodes = _read_loaded(FILE, "f.json", "", data, "tau2", signal, record_errors=errors, shallow=checked)
        return _shallow(episodes, "f.json", checked) + [str(e) for e in errors or ()]  # type: ignore[operator]

    return outcome(read)


def read_general(data: dict[str, Any], signal: ErrorSignal, keep_going: bool) -> tuple[str, Any]:
    errors: list[ReaderError] | None = [] if keep_going else None

    def read() -> list[Episode]:
        episodes = _read_loaded(FILE, "f.json", "", data, "tau2", signal, record_errors=errors)
        return _shallow(episodes, "f.json") + [str(e) for e in errors or ()]  # type: ignore[operator]

    with general_path():
        return outcome(read)


def direct_fast(data: dict[str, Any], signal: ErrorSignal) -> tuple[str, Any]:
    """`read_tau2` itself (no watch, no depth guard): the data handed over."""
    return outcome(lambda: tau2.read_tau2(data, "f.json", "f.json", signal, shallow=set(), owned=True))


def direct_general(data: dict[str, Any], signal: ErrorSignal) -> tuple[str, Any]:
    with general_path():
        return outcome(lambda: tau2.read_tau2(data, "f.json", "f.json", signal))


def _split(result: tuple[str, Any]) -> tuple[str, Any]:
    """Episodes and the recorded errors' messages, apart."""
    if result[0] != "ok":
        return result
    episodes = [e for e in result[1] if isinstance(e, Episode)]
    return "ok", (episodes, [e for e in result[1] if isinstance(e, str)])


@given(simulation_file(), st.sampled_from(SIGNALS), st.booleans())
def test_generated_simulations(case: tuple[dict[str, Any], bool], signal: ErrorSignal, keep_going: bool) -> None:
    data, common = case
    original = copy.deepcopy(data)
    with counting() as counts:
        fast = _split(read_fast(copy.deepcopy(data), signal, keep_going))
    general = _split(read_general(copy.deepcopy(data), signal, keep_going))
    assert fast[0] == general[0], (fast, general)
    if fast[0] == "ok":
        assert_identical(fast[1][0], general[1][0])
        assert fast[1][1] == general[1][1]
    else:
        assert fast[1] == general[1]
    if common:  # every simulation of the common shape: the fast path read them all (none for a subclass)
        n = len(data["simulations"])
        assert counts == ([n, 0] if error_test(signal) is not None else [0, n]), counts
    # read_tau2 itself, both ways
    assert_same_outcome(direct_fast(copy.deepcopy(data), signal), direct_general(copy.deepcopy(data), signal))
    # without a handed-over `data` (read_tau2 called directly), the caller's data is left as it was
    direct = outcome(lambda: tau2.read_tau2(data, "f.json", "f.json", signal, record_errors=[]))
    assert data == original
    if direct[0] == "ok" and direct[1]:
        first = direct[1][0]
        calls = [e for e in first.events if e.arguments]
        for event in calls:  # its own copies: changing the data changes no event
            assert all(event.arguments is not m for m in _all_dicts(data))


def _all_dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _all_dicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _all_dicts(v)


def base_messages() -> list[Any]:
    """A simulation of the common shape with a bit of everything: a system message, blank text,
    calls with and without text (one the user's), an error result, an unanswered call."""
    return [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "cancel ABC"},
        {"role": "assistant", "content": "  \n", "tool_calls": None},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {"id": "c1", "name": "get_reservation_details", "arguments": {"reservation_id": "ABC"}},
                {
                    "id": "c2",
                    "name": "toggle_airplane_mode",
                    "arguments": {"on": [1, {"x": None}]},
                    "requestor": "user",
                },
            ],
            "raw_data": {"finish_reason": "tool_calls"},
        },
        {"role": "tool", "id": "c1", "content": "NOT FOUND", "requestor": "assistant", "error": False},
        {"role": "tool", "id": "c2", "content": "  Error: phone off ", "requestor": "user", "error": True},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c3", "name": "cancel_reservation", "arguments": None}],
        },
    ]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[list[Any]], None]:
    def change(messages: list[Any]) -> None:
        target: Any = messages
        for step in path[:-1]:
            target = target[step]
        if value is _DROP:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


_DROP = object()
RESULT, CALLS = 4, 3  # the first result, the message with two calls

DEVIATIONS: dict[str, Callable[[list[Any]], None]] = {
    "none": lambda m: None,
    "results out of order": lambda m: m.__setitem__(slice(4, 6), [m[5], m[4]]),
    "a result twice": lambda m: m.insert(5, copy.deepcopy(m[4])),
    "a result before any call": lambda m: m.insert(1, {"role": "tool", "id": "c1", "content": "early"}),
    "the last result dropped": lambda m: m.pop(5),
    "a result with text after the last call": lambda m: m.append({"role": "tool", "id": "c3", "content": "done"}),
    **{f"result id {v!r}": _set((RESULT, "id"), v) for v in ("c2", "nope", "", 5, None)},
    "result id missing": _set((RESULT, "id"), _DROP),
    **{
        f"result content {v!r}": _set((RESULT, "content"), v)
        for v in (
            None,
            5,
            [{"type": "text", "text": "part"}],
            {"content": [{"type": "text", "text": "mcp"}], "isError": True},
            '{"content": [{"type": "text", "text": "boom"}], "isError": true}',
            ' {"isError": false, "content": [{"type": "text", "text": "fine"}]}',
            '{"isError": true}',
            '{"isError": broken',
            "Error: plain text",
            "Traceback (most recent call last): x",
        )
    },
    **{f"result error {v!r}": _set((RESULT, "error"), v) for v in ("true", 1, None, True)},
    "result isError true": _set((RESULT, "isError"), True),
    # an odd flag the fast path reads before it gives up (an MCP result later): the signal is told once
    "an odd flag, then an MCP result": lambda m: (
        _set((RESULT, "error"), "yes")(m),
        _set((RESULT + 1, "content"), '{"content": [{"type": "text", "text": "x"}], "isError": true}')(m),
    ),
    **{f"call name {v!r}": _set((CALLS, "tool_calls", 0, "name"), v) for v in (None, "", " ", "\t", 5, ["x"])},
    "call name missing": _set((CALLS, "tool_calls", 0, "name"), _DROP),
    **{
        f"call arguments {v!r}"[:60]: _set((CALLS, "tool_calls", 0, "arguments"), v)
        for v in (
            '{"reservation_id": "ABC"}',
            "not json",
            "",
            '"{\\"a\\": 1}"',
            "[1]",
            5,
            [1],
            deep(MAX_DEPTH + 3),
            {"n": deep(MAX_DEPTH - 3)},
            {"n": deep(MAX_DEPTH - 2)},
            {"n": deep(MAX_DEPTH - 1)},
            {"l": [[1]], "m": {"k": {"j": 1}}},
        )
    },
    **{f"call id {v!r}": _set((CALLS, "tool_calls", 0, "id"), v) for v in (None, "", 5, "c2")},
    **{f"unanswered call id {v!r}": _set((6, "tool_calls", 0, "id"), v) for v in (None, "", 5, "c1", _DROP)},
    "no ids at all": lambda m: [d.pop("id") for d in (m[3]["tool_calls"][0], m[3]["tool_calls"][1], m[4], m[5])],
    "call id missing": _set((CALLS, "tool_calls", 0, "id"), _DROP),
    **{f"requestor {v!r}": _set((CALLS, "tool_calls", 0, "requestor"), v) for v in ("bot", "", 0, "user", None)},
    **{f"a call that is {v!r}": _set((CALLS, "tool_calls", 1), v) for v in (5, None, "call", ["x"])},
    **{f"tool_calls {v!r}": _set((CALLS, "tool_calls"), v) for v in ("x", 5, {}, [])},
    **{f"raw_data {v!r}": _set((CALLS, "raw_data"), v) for v in ({"finish_reason": "length"}, "length", None, [])},
    "a cut-off message without calls": _set((1, "raw_data"), {"finish_reason": "length"}),
    **{f"message {v!r}": _set((2,), v) for v in (5, None, "text", [], ["a"])},
    **{f"role {v!r}": _set((1, "role"), v) for v in ("robot", "", None, 5, "system", "tool", "assistant")},
    "role missing": _set((1, "role"), _DROP),
    **{
        f"content {v!r}": _set((CALLS, "content"), v) for v in (5, 1.5, True, [{"type": "text", "text": "p"}], {"a": 1})
    },
    **{f"system content {v!r}": _set((0, "content"), v) for v in (5, [], {}, None, ["s", 3])},
    "a field the reader ignores": _set((1, "isError"), True),
}


@pytest.mark.parametrize(
    "signal",
    SIGNALS,
    ids=[
        "tau2",
        "a subclass",
        "a flag that is not text",
        "one other flag",
        "a flag and a marker",
        "openai",
        "trl",
        "nothing",
    ],
)
def test_each_deviation(signal: ErrorSignal) -> None:
    """Each deviation from the common shape, alone, on one simulation: the same episode (or the
    same error) both ways; the fast path reads the undeviated one, and gives up on the others
    that it does not read exactly as they are."""
    taken = 0
    fast_signal = error_test(signal) is not None
    for name, change in DEVIATIONS.items():
        messages = base_messages()
        change(messages)
        sims = [{"id": "s", "messages": messages, "reward_info": {"reward": 1}}]
        for keep_going in (False, True):
            with counting() as counts:
                fast = _split(read_fast({"simulations": copy.deepcopy(sims)}, signal, keep_going))
            general = _split(read_general({"simulations": copy.deepcopy(sims)}, signal, keep_going))
            assert fast[0] == general[0], (name, fast, general)
            if fast[0] == "ok":
                assert_identical(fast[1][0], general[1][0])
                assert fast[1][1] == general[1][1], name
            else:
                assert fast[1] == general[1], name
        data = {"simulations": sims}
        assert_same_outcome(direct_fast(copy.deepcopy(data), signal), direct_general(copy.deepcopy(data), signal))
        taken += counts[0]
        if name == "none":
            assert counts == ([1, 0] if fast_signal else [0, 1])
    if fast_signal:
        assert 1 < taken < len(DEVIATIONS) / 2, taken  # some deviations keep the common shape; most do not
    else:
        assert taken == 0


def test_deep_arguments_in_a_file(tmp_path: Path) -> None:
    """A call whose arguments nest deeper than the limit: the fast path gives the simulation up,
    and the depth guard makes that call malformed, as before; its neighbour is read fast."""
    calls = [{"id": "c0", "name": "book", "arguments": {"n": deep(MAX_DEPTH + 5)}}]
    sims = [
        {
            "id": "deep",
            "messages": [{"role": "assistant", "content": None, "tool_calls": calls}],
            "reward_info": {"reward": 0},
        },
        {"id": "flat", "messages": [{"role": "user", "content": "hi"}], "reward_info": {"reward": 1}},
    ]
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"simulations": sims}))
    with counting() as counts:
        fast = read_report([path]).episodes
    with general_path():
        general = read_report([path]).episodes
    assert counts == [1, 1]
    assert_identical(list(fast), list(general))
    event = fast[0].events[0]
    assert event.status == "malformed" and event.arguments == {}
    assert event.error_text.startswith(f"arguments must be a JSON object at most {MAX_DEPTH} levels deep (deeper at n")


def test_arguments_at_the_depth_limit_are_read_fast() -> None:
    """Arguments nested exactly as deep as the depth guard allows stay on the fast path; one level
    deeper, the simulation goes to the general path (whose guard makes the call malformed)."""
    for levels, fast in ((MAX_DEPTH - 2, True), (MAX_DEPTH - 1, False)):
        calls = [{"id": "c0", "name": "book", "arguments": {"n": deep(levels)}}]
        sims = [{"messages": [{"role": "assistant", "content": None, "tool_calls": calls}]}]
        with counting() as counts:
            episodes = read_fast({"simulations": sims}, ERROR_SIGNALS["tau2"], False)[1]
        assert counts == ([1, 0] if fast else [0, 1]), levels
        assert (episodes[0].events[0].status == "malformed") is not fast


def test_trusted_event_is_a_frozen_event() -> None:
    """`trusted_event` builds an `Event` (a twin class's instance, its class swapped): frozen,
    pickled and copied as one, evolved through the validating constructor."""
    import pickle

    values = (2, "call", "book", {"a": 1}, None, "ok", "", "done", "", frozenset({"write"}), {}, "c1", "user", 1, False)
    event = trusted_event(*values)
    assert type(event) is Event and event == Event(*values) and hash(event) == hash(Event(*values))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.index = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(event)) == event and copy.deepcopy(event) == event
    assert attrs.evolve(event, index=5).index == 5
    with pytest.raises(ValueError, match="'status' must be in"):
        attrs.evolve(event, status="fine")
