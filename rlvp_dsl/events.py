"""The trajectory model: episodes made of events, and the credits rules give them.

An *episode* is one rollout of an agent: a sequence of *events*. Tool calls are
events, and so are message turns (user and assistant text), so that policy rules
can refer to what the user said ("confirm before writing").  Readers
(`rlvp_dsl.readers`) turn the formats people already have into `Episode`s; the
compiled rule program (`rlvp_dsl.compile`) scores an `Episode` into `Credit`s
(`rlvp_dsl.score`).

Status of a tool call (`Event.status`):

* ``ok``         -- the tool ran and returned a result;
* ``error``      -- the environment signalled an error (tau2 ``error: true``, an
  ``Error:`` text prefix, ...);
* ``malformed``  -- the call itself is broken (arguments that are not valid JSON,
  a call cut off by the length limit, an unknown tool); scored by the rules as
  failed: it matches ``error`` and never ``ok``, so it never counts as a
  successful action or a discharge;
* ``no_result``  -- the episode ended before the tool answered (step limit); it
  matches neither ``ok`` nor ``error``.

Message events have status ``ok`` and no tool.
"""

from __future__ import annotations

import json
import json.encoder
from typing import Any, Iterable, Mapping

import attrs

from .source import NO_SPAN, Span

CALL = "call"
USER = "user"
ASSISTANT = "assistant"
EVENT_KINDS = (CALL, USER, ASSISTANT)

OK = "ok"
ERROR = "error"
MALFORMED = "malformed"
NO_RESULT = "no_result"
STATUSES = (OK, ERROR, MALFORMED, NO_RESULT)


def normalise_value(value: Any) -> str:
    """Canonical text of an argument value, used to compare bound arguments.

    Strings compare by their text (``"ABC"`` and ``ABC`` are the same target);
    everything else by its canonical JSON (sorted keys, no spaces).
    """
    if isinstance(value, str):
        return value
    return canonical_json(value)


# CPython's C encoder, made once: json.dumps builds an encoder object per call (2.5x the time);
# None on Python builds without the _json accelerator
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def _canonical_json_dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


if _c_make_encoder is not None:
    # markers=None: no cycle check (JSON values have no cycles); a cyclic value recurses out, and
    # json.dumps, run again on it, raises its own "Circular reference detected"
    _encode = _c_make_encoder(
        None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )

    def canonical_json(value: Any) -> str:
        """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, the
        same text (CPython's C encoder, the one json.dumps uses, made once here): a call's
        arguments as `Event.argument_key` compares them.

        Raises:
            TypeError, ValueError: as json.dumps (a value that is not JSON, a cycle).
        """
        try:
            return "".join(_encode(value, 0))
        except RecursionError:
            return _canonical_json_dumps(value)

else:  # pragma: no cover
    canonical_json = _canonical_json_dumps


def _freeze_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


def _tag_set(tags: Iterable[str]) -> frozenset[str]:
    return tags if type(tags) is frozenset else frozenset(tags)


def _event_tuple(events: Iterable[Event]) -> tuple[Event, ...]:
    return tuple(events)


@attrs.frozen(eq=True, weakref_slot=False)  # no weakref slot: `trusted_event` swaps a twin's class in
class Event:
    """One event of an episode: a tool call or a message turn.

    Attributes:
        index: position of the event in its episode (0-based, over all events).
        kind: ``"call"``, ``"user"`` or ``"assistant"``.
        tool: tool name for a call, ``None`` for a message.
        arguments: the call's arguments as parsed JSON (empty for messages and for
            malformed calls whose arguments could not be parsed).
        raw_arguments: the arguments' text as the model produced it, when known
            (kept for malformed calls).
        status: one of ``ok``, ``error``, ``malformed``, ``no_result``.
        error_text: the error message for ``error`` / ``malformed`` calls.
        result: the tool's output text (``""`` when none).
        text: message text for ``user`` / ``assistant`` events.
        tags: tool tags known to the source (the rule file's tool table adds its own).
        signals: numeric environment signals after the call (e.g. ``goals_remaining``).
        call_id: the source's tool-call id, when any.
        requestor: who issued the call (``assistant``, or ``user`` for tau2's
            user-side phone tools).
        message: the source message the event belongs to (events of one assistant
            message -- its text and its calls -- share it: they were issued together,
            before any of their results came back); None: a message of its own.  It
            defines what a call had *seen* (docs/language.md, "Information order").
        ambiguous: the result was paired with this call by tool name, but it could be a
            same-name sibling's: results without ids came back out of call order, and the
            siblings' results differ (docs/readers.md, "Pairing results with calls").  When
            their statuses differ the call's status is ``no_result`` (rules on errors skip
            it rather than guess).
    """

    index: int
    kind: str = attrs.field(validator=attrs.validators.in_(EVENT_KINDS))
    tool: str | None = None
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_freeze_mapping, hash=False)
    raw_arguments: str | None = None
    status: str = attrs.field(default=OK, validator=attrs.validators.in_(STATUSES))
    error_text: str = ""
    result: str = ""
    text: str = ""
    tags: frozenset[str] = attrs.field(factory=frozenset, converter=_tag_set)
    signals: Mapping[str, float] = attrs.field(factory=dict, converter=_freeze_mapping, hash=False)
    call_id: str | None = None
    requestor: str = "assistant"
    message: int | None = None
    ambiguous: bool = False

    @property
    def is_call(self) -> bool:
        return self.kind == CALL

    @property
    def failed(self) -> bool:
        """True for ``error`` and ``malformed`` calls (both are failed actions)."""
        return self.status in (ERROR, MALFORMED)

    def argument_key(self) -> str:
        """Tool name plus normalised arguments: what makes two calls "identical"."""
        if self.status == MALFORMED and not self.arguments:
            args = self.raw_arguments or ""
        else:
            args = canonical_json(self.arguments)
        return f"{self.tool}\x00{args}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "kind": self.kind}
        if self.kind == CALL:
            out.update(tool=self.tool, arguments=dict(self.arguments), status=self.status)
            if self.raw_arguments is not None:
                out["raw_arguments"] = self.raw_arguments
            if self.error_text:
                out["error_text"] = self.error_text
            if self.result:
                out["result"] = self.result
            if self.tags:
                out["tags"] = sorted(self.tags)
            if self.signals:
                out["signals"] = dict(self.signals)
            if self.requestor != "assistant":
                out["requestor"] = self.requestor
            if self.ambiguous:
                out["ambiguous"] = True
        else:
            out["text"] = self.text
        if self.message is not None:
            out["message"] = self.message
        return out

    def same_message(self, other: "Event") -> bool:
        """True when both events belong to one source message (issued together)."""
        return self.message is not None and self.message == other.message


class _EventUnderConstruction:
    """An `Event` being built by `trusted_event` (and by the tau2 reader's fast path, which writes
    it out, under the same contract): the same slots, in the same order, written by plain
    attribute stores (the specialising interpreter's fastest write; a frozen class refuses them),
    then the instance's class becomes `Event` -- which CPython allows between classes of one
    layout (no ``__weakref__`` slot: hence `Event`'s ``weakref_slot=False``)."""

    __slots__ = Event.__slots__  # type: ignore[attr-defined]


def trusted_event(
    index: int,
    kind: str,
    tool: str | None,
    arguments: dict[str, Any],
    raw_arguments: str | None,
    status: str,
    error_text: str,
    result: str,
    text: str,
    tags: frozenset[str],
    signals: dict[str, Any],
    call_id: str | None,
    requestor: str,
    message: int | None,
    ambiguous: bool,
    *,
    _new: Any = object.__new__,
    _building: Any = _EventUnderConstruction,
    _event: Any = Event,
) -> Event:
    """An `Event` built without `Event`'s validators and converters: the trusted path of code
    that already guarantees what they check -- the readers' `EpisodeBuilder`, nothing a user
    hands in.  About 0.3 µs an event against 2.4 µs through the constructor (a 15-field frozen
    attrs class: the constructor's two ``in_`` validators and three converters are most of it).

    Every field is given, in `Event`'s order.  The caller guarantees, for the result to be the
    event ``Event(...)`` would build from the same values (equal, same hash, every field equal;
    tests/readers/test_trusted_events.py checks it on every shared trajectory):

    * `kind` is one of `EVENT_KINDS` and `status` one of `STATUSES` (the validators);
    * `arguments` and `signals` are plain dicts the event may own -- fresh copies, or parsed
      values handed over, that no one else holds or will change (the constructor copies them;
      this path does not);
    * `tags` is a ``frozenset`` (the constructor converts any iterable).

    Raises nothing and checks nothing: a caller that breaks the contract builds a broken
    event.  Anything else builds events with ``Event(...)``.
    """
    self = _new(_building)
    self.index = index
    self.kind = kind
    self.tool = tool
    self.arguments = arguments
    self.raw_arguments = raw_arguments
    self.status = status
    self.error_text = error_text
    self.result = result
    self.text = text
    self.tags = tags
    self.signals = signals
    self.call_id = call_id
    self.requestor = requestor
    self.message = message
    self.ambiguous = ambiguous
    self.__class__ = _event
    return self  # type: ignore[no-any-return]


@attrs.frozen(eq=True)
class Episode:
    """One rollout: its events in order, where it came from, and its outcome.

    Attributes:
        id: a name unique within its source (``file.json#simulations[3]``).
        events: the events, with ``events[i].index == i``.
        outcome: the outcome reward (tau2 ``reward_info.reward``), ``None`` when unknown.
        source: the file the episode was read from.
        meta: anything else worth keeping (task id, model, termination reason).
    """

    id: str
    events: tuple[Event, ...] = attrs.field(converter=_event_tuple)
    outcome: float | None = None
    source: str = ""
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=_freeze_mapping, hash=False, eq=False)

    @events.validator
    def _check_indices(self, _attribute: attrs.Attribute[tuple[Event, ...]], events: tuple[Event, ...]) -> None:
        for position, event in enumerate(events):
            if event.index != position:
                raise ValueError(f"episode {self.id!r}: event at position {position} has index {event.index}")

    @property
    def calls(self) -> tuple[Event, ...]:
        return tuple(e for e in self.events if e.kind == CALL)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "source": self.source,
            "events": [e.to_json() for e in self.events],
        }


_EPISODE_SLOT = {a.name: Episode.__dict__[a.name].__set__ for a in attrs.fields(Episode)}
_set_id, _set_events, _set_outcome, _set_source, _set_meta = _EPISODE_SLOT.values()


def trusted_episode(
    id: str,
    events: tuple[Event, ...],
    outcome: float | None,
    source: str,
    meta: dict[str, Any],
) -> Episode:
    """An `Episode` built without its converters and index check: the trusted path of the
    readers' `EpisodeBuilder`, as `trusted_event` is for events.  The caller guarantees
    `events` is a tuple with ``events[i].index == i`` and `meta` a fresh dict the episode may
    own; the result equals ``Episode(...)``'s from the same values.  Checks nothing."""
    self = object.__new__(Episode)
    _set_id(self, id)
    _set_events(self, events)
    _set_outcome(self, outcome)
    _set_source(self, source)
    _set_meta(self, meta)
    return self


@attrs.frozen
class Credit:
    """A credit (positive) or penalty (negative) one rule gives one event.

    Attributes:
        event_index: index of the event the credit lands on (a call or an
            assistant turn, never user text or tool output).
        rule: the rule's name.
        value: the signed credit, in reward units.
        location: the rule's ``file:line:col``.
        reason: why, in words ("discharges the obligation opened at event 2").
        kind: the rule kind (``violation``, ``obligation``, ``repeat_error``,
            ``blind_destructive``, ``progress``).
        trigger: what produced the credit: ``fire`` (a violation or progress rule fired
            on the event), ``discharge`` or ``expire`` (an obligation).
        related_event: an obligation credit's other event: for a discharge, the event that
            opened the instance; for an expiry (which lands on the opening event), the event
            where the deadline was noticed -- the ``before`` event, the call past the
            ``within`` window, or the episode's last event when it ended first.  None for
            ``fire`` credits.
        deadline: for an expiry, the deadline that passed: ``before``, ``within`` or ``end``
            (the episode ended with the instance open); None for other credits.
        span: the rule's source region (file, line, column, as `Span`); `location` is its
            ``file:line:col`` text.  `NO_SPAN` for a generated rule.
    """

    event_index: int
    rule: str
    value: float
    location: str
    reason: str
    kind: str
    trigger: str = "fire"
    related_event: int | None = None
    deadline: str | None = None
    span: Span = NO_SPAN

    def to_json(self) -> dict[str, Any]:
        """Every field; `span` as `Span.to_json` (file, line, column, end_line, end_column)."""
        out = attrs.asdict(self, recurse=False)
        out["span"] = self.span.to_json()
        return out
