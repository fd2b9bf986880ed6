"""The fast path of the tau2 reader: one tight loop that turns a simulation of the common shape
straight into events, and gives up -- returns None -- at anything else, for the general path
(`rlvp_dsl.readers.tau2`, through `EpisodeBuilder`) to read the simulation as it always has.

The common shape, which every simulation of the shared tau2 corpus has:

* every message a dict whose ``role`` is ``assistant``, ``user``, ``tool`` or ``system``;
* an assistant or user ``content`` text or null; a ``tool_calls`` null or a list of dicts, each
  with a ``name`` that is non-blank text and ``arguments`` that are an object (or null), none of
  them nested deeper than `MAX_DEPTH` levels, the message not cut off (``raw_data.finish_reason``
  not ``length``);
* a tool message's ``content`` text (not an MCP-looking result: ``{...`` with ``"isError"``) or
  null, answering the oldest call still unanswered -- by its id, or without an id of its own;
* a system message's content text, null, a list or an object (it adds no event).

For such a simulation the events are the ones `EpisodeBuilder` builds (``==``, hash, every field
and its type: tests/readers/test_tau2_fast.py checks it on every shared trajectory and on
generated ones, deviations included): results come back in call order, so no call is ambiguous
and none is an orphan; no call is malformed; and no call's arguments nest too deep, so the depth
guard of `rlvp_dsl.readers.loading` would change none of them (`read_tau2` tells it so).
"""

from __future__ import annotations

from typing import Any, Callable

from rlvp_dsl.events import ASSISTANT, CALL, ERROR, NO_RESULT, OK, USER, Event
from rlvp_dsl.events import _EventUnderConstruction  # `trusted_event`'s twin: written out here

from .builder import ERROR_TEXT_LIMIT, USER_SIDE_TAG
from .error_signals import ErrorSignal
from .json_text import MAX_DEPTH

_CONTENT_TYPES = (str, list, dict, type(None))
_NESTED = (dict, list)
_NO_TAGS: frozenset[str] = frozenset()
_USER_SIDE_TAGS = frozenset({USER_SIDE_TAG})


#: How the fast path tells an error result (`error_test`): ``(flag, flags, is_error)``.
ErrorTest = tuple[Any, tuple[str, ...], Callable[..., bool]]


def error_test(signal: ErrorSignal) -> ErrorTest | None:
    """How the fast path tells an error result as `signal` does, or None: no fast path for a
    subclass of `ErrorSignal` (its own ``is_error`` may do anything).

    ``(flag, flags, is_error)``: `flag` is the one flag field when `signal` is one flag and nothing
    else (tau2's default, ``error: true``: the loop reads the field itself), else None and the
    loop asks ``is_error`` (the builder's own question, of the same text and tool message).  A
    flag field that is not a boolean (``"error": "yes"``) makes the loop give up, for the general
    path to read (and name: `ErrorSignal.odd_flags`)."""
    if type(signal) is not ErrorSignal:
        return None
    flags = signal.flags
    one = len(flags) == 1 and type(flags[0]) is str and not signal.prefixes and not signal.markers
    return (flags[0] if one else None), flags, signal.is_error


def _shallow_enough(arguments: dict[str, Any]) -> bool:
    """Whether `arguments` nests at most ``MAX_DEPTH - 1`` levels below it: the depth guard's own
    test, ``nested_too_deep(arguments, MAX_DEPTH - 1) is None``, level by level (the lists and
    objects of each level, none of the paths the guard words)."""
    level: list[Any] = [arguments]
    depth = 1
    while level:
        if depth > MAX_DEPTH - 1:
            return False
        below = []
        for item in level:
            for value in item.values() if isinstance(item, dict) else item:
                if isinstance(value, _NESTED):
                    below.append(value)
        level = below
        depth += 1
    return True


def fast_events(messages: list[Any], test: ErrorTest | None, owned: bool = False) -> list[Event] | None:
    """The events of a simulation's `messages` (a list), or None when a message is not of the
    common shape (the module docstring): then nothing is built and the caller reads the
    simulation through the general path.  `test` comes from `error_test` (None: always None); `owned`: the
    caller hands the messages over (parsed for this read, held by no one else), so each call
    keeps its ``arguments`` object rather than a copy.

    Each event's ``message`` is its message's position (every message, system ones too, counts
    as one, as `EpisodeBuilder.begin_message` numbers them)."""
    if test is None:
        return None
    flag, flags, is_error = test
    new: Any = object.__new__
    building: Any = _EventUnderConstruction
    event_class: Any = Event
    events: list[Any] = []
    append = events.append
    # the calls still unanswered, oldest first (pending[first:]): events under construction, their
    # status, error text and result set when the answer comes (`trusted_event`, written out)
    pending: list[Any] = []
    first = 0
    position = -1
    for message in messages:
        position += 1
        if type(message) is not dict:
            return None
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            if type(content) is str:
                if content.lstrip().startswith("{") and '"isError"' in content:
                    return None  # may be an MCP result: its text and flags are read there
            elif content is None:
                content = ""
            else:
                return None
            if first == len(pending):
                return None  # an orphan result
            call = pending[first]
            answer = message.get("id")
            if answer is not None and not (answer == call.call_id and type(answer) is str):
                return None  # answers another call than the oldest (or carries an empty id)
            first += 1
            if flag is not None:
                value = message.get(flag)
                if value is True:
                    failed = True
                elif value is None or value is False:
                    failed = False
                else:
                    return None  # a flag that is not a boolean: the general path tells the signal
            else:
                for name in flags:
                    value = message.get(name)
                    if value is not None and value is not True and value is not False:
                        return None
                failed = is_error(content, message)
            if failed:
                call.status = ERROR
                call.error_text = content.strip()[:ERROR_TEXT_LIMIT]
            else:
                call.status = OK
                call.error_text = ""
            call.result = content
            continue
        if role == "assistant" or role == "user":
            if type(content) is not str:
                if content is not None:
                    return None
                content = ""
            if content and not content.isspace():
                event = new(building)
                event.index = len(events)
                event.kind = ASSISTANT if role == "assistant" else USER
                event.tool = None
                event.arguments = {}
                event.raw_arguments = None
                event.status = OK
                event.error_text = ""
                event.result = ""
                event.text = content
                event.tags = _NO_TAGS
                event.signals = {}
                event.call_id = None
                event.requestor = "assistant"
                event.message = position
                event.ambiguous = False
                event.__class__ = event_class
                append(event)
            calls = message.get("tool_calls")
            if calls is None:
                continue
            if type(calls) is not list:
                return None
            if not calls:
                continue
            raw_data = message.get("raw_data")
            if isinstance(raw_data, dict) and raw_data.get("finish_reason") == "length":
                return None  # the last call is cut off
            for entry in calls:
                if type(entry) is not dict:
                    return None
                tool = entry.get("name")
                if type(tool) is not str or not tool or tool.isspace():
                    return None
                arguments = entry.get("arguments")
                if type(arguments) is dict:
                    if not owned:
                        arguments = dict(arguments)
                    for value in arguments.values():
                        if isinstance(value, _NESTED):
                            if not _shallow_enough(arguments):
                                return None  # the depth guard makes it malformed
                            break
                elif arguments is None:
                    arguments = {}
                else:
                    return None
                requestor = entry.get("requestor") or role
                if requestor != "assistant" and requestor != "user":
                    requestor = role
                call_id = entry.get("id")
                call = new(building)
                call.index = len(events)
                call.kind = CALL
                call.tool = tool
                call.arguments = arguments
                call.raw_arguments = None
                call.status = NO_RESULT  # until its result comes
                call.error_text = ""
                call.result = ""
                call.text = ""
                call.tags = _USER_SIDE_TAGS if requestor == "user" else _NO_TAGS
                call.signals = {}
                call.call_id = call_id if isinstance(call_id, str) and call_id else None
                call.requestor = requestor
                call.message = position
                call.ambiguous = False
                pending.append(call)
                append(call)
            continue
        if role != "system" or not isinstance(content, _CONTENT_TYPES):
            return None
    for call in pending:
        call.__class__ = event_class
    return events
