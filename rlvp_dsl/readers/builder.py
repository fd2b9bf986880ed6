"""The episode builder: one source record's messages, calls and results -> an `Episode`.

Every reader turns one source record (a tau2 simulation, a chat transcript, a SWE-agent
run) into an :class:`~rlvp_dsl.events.Episode` through :class:`EpisodeBuilder`, which
numbers events, pairs tool results with their calls (docs/readers.md, "Pairing results
with calls"), asks the reader's `ErrorSignal` whether a result is an error, and marks
calls that never got a result as ``no_result``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping

from rlvp_dsl.events import (
    ASSISTANT,
    CALL,
    ERROR,
    MALFORMED,
    NO_RESULT,
    OK,
    USER,
    Episode,
    Event,
    trusted_episode,
    trusted_event,
)

from .arguments import parse_arguments
from .error_signals import ErrorSignal
from .errors import expected_got

#: Longest error text kept on an event, in characters (the full output stays in ``result``).
ERROR_TEXT_LIMIT = 2000

#: The tag of calls made by the user side of a dual-control episode (tau2 telecom).
USER_SIDE_TAG = "user_side"
_USER_SIDE_TAGS = frozenset({USER_SIDE_TAG})
_NO_TAGS: frozenset[str] = frozenset()
_NONE: frozenset[int] = frozenset()


def is_reward(value: Any) -> bool:
    """Whether `value` can be an episode's outcome: ``None`` (unknown) or a finite number
    (not a bool, not text, not NaN or infinity -- JSON readers accept ``NaN``)."""
    if value is None:
        return True
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float (JSON allows 400 digits)
        return False


class _Slot:
    """A call being built; mutable until the builder freezes it.  A plain class (one is made per
    call of every episode read: 0.5 µs against an attrs class's 1.5), compared by identity."""

    __slots__ = (
        "tool",
        "arguments",
        "raw_arguments",
        "call_id",
        "requestor",
        "problem",
        "message",
        "position",
        "answered",
        "status",
        "result",
        "error_text",
        "signals",
        "run",
        "answered_at",
        "by_name",
    )

    def __init__(
        self,
        tool: str | None,
        arguments: dict[str, Any],
        raw_arguments: str | None,
        call_id: str | None,
        requestor: str,
        problem: str,
        message: int | None,
        position: int,
    ) -> None:
        self.tool = tool
        self.arguments = arguments
        self.raw_arguments = raw_arguments
        self.call_id = call_id
        self.requestor = requestor
        self.problem = problem
        self.message = message
        self.position = position  # its place among the builder's items (call order)
        self.answered = False
        self.status = OK
        self.result = ""
        self.error_text = ""
        self.signals: dict[str, Any] = {}
        self.run = 0  # the run of consecutive results that answered it (0: none)
        self.answered_at = 0  # how many results came before its own
        self.by_name = False  # answered by tool name and per-name order (the result had no id)


#: The error text of a call whose status is unknown (`EpisodeBuilder`, ambiguous results).
AMBIGUOUS_TEXT = (
    "its result could be another {tool!r} call's: results without ids came back out of call "
    "order, and these calls' results differ in status"
)


class EpisodeBuilder:
    """Collects events of one episode in order and freezes them into an :class:`Episode`.

    A result is matched to its call by call id; a result without one (TRL's tool messages
    carry only ``name``) to the oldest unanswered call of that tool name, else to the oldest
    unanswered call (position).  Calls never answered end as ``no_result``; malformed calls
    keep status ``malformed`` even when a result comes back.

    Ambiguity: when a run of results (the tool messages between two assistant turns) came
    back out of call order -- TRL 1.16 appends sync tools' results before async ones' -- two
    calls of one tool answered in that run by name could have had their results swapped.
    Where their results differ, those calls are ``ambiguous`` (`Event.ambiguous`, counted in
    ``meta["ambiguous_results"]``); where their statuses differ, each one's status is
    unknown and becomes ``no_result`` (its result text dropped, `AMBIGUOUS_TEXT`), so rules on
    errors skip it rather than guess.
    """

    def __init__(self, error_signal: ErrorSignal):
        self.error_signal = error_signal
        self._items: list[Event | _Slot] = []  # message events, made as they come, and calls being built
        self._message: int | None = None  # the source message being read (None: none declared)
        self._pending: list[_Slot] = []
        self.orphan_results = 0
        self._run = 0  # the current run of consecutive results (0: none yet)
        self._in_run = False
        self._answers = 0  # results attached so far
        self._run_last = -1  # the latest call (its position) the current run has answered so far
        self._disordered = False  # a run answered a call before an earlier one (see `_ambiguous`)
        self._ambiguous_count = 0  # events marked ambiguous (set by `events`)
        #: the problems of calls whose name is not text (``"name": 5``), kept in meta["bad_tool_names"]
        self.bad_names: list[str] = []

    def begin_message(self) -> None:
        """Start a new source message: the events added until the next call share its id
        (an assistant message's text and its calls were issued together)."""
        self._message = 0 if self._message is None else self._message + 1

    def message(self, kind: str, text: str, signals: Mapping[str, Any] | None = None) -> None:
        """Add a user or assistant turn; blank text without signals adds nothing.

        `signals` are environment readings reported with the message (the task's starting
        ``stages_remaining`` on the user turn)."""
        if kind not in (USER, ASSISTANT):
            raise ValueError(f"message kind must be user or assistant, got {kind!r}")
        if (text and not text.isspace()) or signals:  # isspace: what strip() removes, without a copy
            self._in_run = False
            items = self._items
            own = dict(signals) if signals else {}
            items.append(trusted_event(len(items), kind, None, {}, None, OK, "", "", text, _NO_TAGS, own,
                                       None, "assistant", self._message, False))  # fmt: skip

    def turn(self, kind: str, text: str) -> None:
        """`begin_message` then `message` (`kind` ``user`` or ``assistant``, `text` a str, no
        signals): a message that is one turn of text, the commonest record of every format
        (readers call it once per such message)."""
        message = self._message = 0 if self._message is None else self._message + 1
        if kind not in (USER, ASSISTANT):
            raise ValueError(f"message kind must be user or assistant, got {kind!r}")
        if text and not text.isspace():
            self._in_run = False
            items = self._items
            items.append(trusted_event(len(items), kind, None, {}, None, OK, "", "", text, _NO_TAGS, {},
                                       None, "assistant", message, False))  # fmt: skip

    def call(
        self,
        tool: Any,
        raw_arguments: Any,
        *,
        call_id: Any = None,
        requestor: str = "assistant",
        problem: str = "",
        extra_arguments: Mapping[str, Any] | None = None,
        where: str = "",
        name_field: str = "name",
    ) -> None:
        """Add a tool call.

        Args:
            tool: the tool name; a missing or non-string name makes the call malformed.
            raw_arguments: dict, JSON text or ``None`` (see :func:`parse_arguments`).
            call_id: the source's call id, used to match the result.
            requestor: ``assistant`` or ``user``.
            problem: a reason the call is malformed even if it parses (``finish_reason == "length"``).
            extra_arguments: arguments the reader adds (``path`` of the open file), merged under parsed ones.
            where, name_field: the record of the call and the field of its name
                (``messages[2].tool_calls[0]``, ``function.name``): a name that is not text
                (``"name": 5``) makes the call malformed with a problem naming both.
        """
        arguments, raw_text, parse_problem = parse_arguments(raw_arguments)
        problems = []
        if problem:
            problems.append(problem)
        if parse_problem:
            problems.append(parse_problem)
        if not isinstance(tool, str) or not tool.strip():
            if tool in (None, ""):
                problems.insert(0, "call has no tool name")
            else:
                problems.insert(
                    0,
                    f"{where + ': ' if where else ''}field {name_field!r}: " + expected_got("a tool name (text)", tool),
                )
                self.bad_names.append(problems[0])
            tool = None
        if isinstance(raw_arguments, dict) and problems:
            raw_text = json.dumps(raw_arguments, ensure_ascii=False, sort_keys=True)
        if problems:
            arguments = {}
        elif extra_arguments:
            arguments = {**extra_arguments, **arguments}
        slot = _Slot(  # in `_Slot`'s order: tool, arguments, raw text, id, requestor, problem, message, position
            tool,
            arguments,
            raw_text,
            call_id if isinstance(call_id, str) and call_id else None,
            requestor,
            "; ".join(problems) if problems else "",
            self._message,
            len(self._items),
        )
        self._in_run = False
        self._items.append(slot)
        self._pending.append(slot)

    def result(
        self,
        text: str,
        *,
        call_id: Any = None,
        name: Any = None,
        records: Iterable[Any] = (),
        signals: Mapping[str, Any] | None = None,
    ) -> bool:
        """Attach a tool result to its call.

        Args:
            text: the result text.
            call_id: the id of the call it answers; ``None``: matched by `name`, else by order.
            name: the tool name the result reports (a TRL / OpenAI tool message's ``name``);
                used only without `call_id`: the oldest unanswered call of that tool.
            records: raw records whose flag fields signal an error (the tool message, an MCP result).
            signals: environment readings reported with the result (``stages_remaining``).

        Returns:
            False when the result is an orphan (counted in ``orphan_results``): no
            unanswered call was left, or its id matches no unanswered call and every
            unanswered call has an id of its own (it is never handed to another call).
        """
        by_name = False
        slot: _Slot | None
        if isinstance(call_id, str) and call_id:
            # by id; else the oldest call that has no id -- never a call with another id
            if self._pending and self._pending[0].call_id == call_id:  # results in call order: no scan
                slot = self._pending[0]
            else:
                slot = next((s for s in self._pending if s.call_id == call_id), None) or next(
                    (s for s in self._pending if s.call_id is None), None
                )
        else:
            slot = None
            if isinstance(name, str) and name:
                if self._pending and self._pending[0].tool == name:  # results in call order: no scan
                    slot = self._pending[0]
                else:
                    slot = next((s for s in self._pending if s.tool == name), None)
                by_name = slot is not None
            if slot is None:
                slot = self._pending[0] if self._pending else None
        if slot is None:
            self.orphan_results += 1
            return False
        if not self._in_run:
            self._run += 1
            self._in_run = True
            self._run_last = -1
        if slot.position < self._run_last:
            self._disordered = True
        else:
            self._run_last = slot.position
        self._pending.remove(slot)
        slot.answered = True
        slot.run, slot.by_name, slot.answered_at = self._run, by_name, self._answers
        self._answers += 1
        slot.result = text
        slot.signals = dict(signals or {})
        if self.error_signal.is_error(text, *records):
            slot.status = ERROR
            slot.error_text = text.strip()[:ERROR_TEXT_LIMIT]
        return True

    def _ambiguous(self) -> tuple[set[int], set[int]]:
        """``(ambiguous, unknown status)``: ids of the slots whose result could be a same-name
        sibling's (see the class docstring), and of those whose status is therefore unknown."""
        ambiguous: set[int] = set()
        unknown: set[int] = set()
        runs: dict[int, list[_Slot]] = {}  # run -> the calls it answered, in call order
        for item in self._items:
            if isinstance(item, _Slot) and item.answered:
                runs.setdefault(item.run, []).append(item)
        groups: dict[tuple[int, str | None], list[_Slot]] = {}
        for run, slots in runs.items():
            if all(a.answered_at < b.answered_at for a, b in zip(slots, slots[1:])):
                continue  # results in call order: position agrees with the names
            for item in slots:
                if item.by_name and not item.problem:
                    groups.setdefault((run, item.tool), []).append(item)
        for group in groups.values():
            if len({(s.status, s.result, tuple(sorted(s.signals.items()))) for s in group}) > 1:
                ambiguous.update(id(s) for s in group)
                if len({s.status for s in group}) > 1:
                    unknown.update(id(s) for s in group)
        return ambiguous, unknown

    def has_pending(self) -> bool:
        return bool(self._pending)

    def events(self) -> list[Event]:
        """The events in order, indexed from 0.

        Built through `trusted_event`: the builder owns every dict it hands over (arguments,
        signals: copies it made) and only ever sets a kind and a status of the events module's
        constants, which is that path's contract."""
        # only a run that answered calls out of call order can make a result ambiguous
        ambiguous, unknown = self._ambiguous() if self._disordered else (_NONE, _NONE)
        self._ambiguous_count = len(ambiguous)
        out: list[Event] = []
        append = out.append
        for index, item in enumerate(self._items):
            if isinstance(item, Event):  # a message turn: made as it came (`message`, `turn`)
                append(item)
                continue
            status, error_text, result = item.status, item.error_text, item.result
            if item.problem:
                status, error_text = MALFORMED, item.problem
            elif not item.answered:
                status = NO_RESULT
            elif unknown and id(item) in unknown:
                status, error_text, result = NO_RESULT, AMBIGUOUS_TEXT.format(tool=item.tool), ""
            requestor = item.requestor
            append(
                trusted_event(
                    index,
                    CALL,
                    item.tool,
                    item.arguments,
                    item.raw_arguments,
                    status,
                    error_text,
                    result,
                    "",
                    # calls the user (simulator) makes -- tau2 telecom's phone tools -- carry the
                    # tag `user_side`, so rules can leave them out: `call not tag user_side`
                    _USER_SIDE_TAGS if requestor == "user" else _NO_TAGS,
                    item.signals,
                    item.call_id,
                    requestor,
                    item.message,
                    bool(ambiguous) and id(item) in ambiguous,
                )
            )
        return out

    def episode(self, id: str, *, outcome: Any, source: str, meta: Mapping[str, Any]) -> Episode:
        """Freeze into an :class:`Episode`; a non-numeric outcome becomes ``None``."""
        if isinstance(outcome, bool) or not isinstance(outcome, (int, float)):
            outcome = None
        full_meta = dict(meta)
        if self.orphan_results:
            full_meta["orphan_results"] = self.orphan_results
        events = self.events()
        ambiguous = self._ambiguous_count  # the events marked ambiguous
        if ambiguous:
            full_meta["ambiguous_results"] = ambiguous
        if self.bad_names:
            full_meta["bad_tool_names"] = list(self.bad_names)
        return trusted_episode(id, tuple(events), None if outcome is None else float(outcome), source, full_meta)
