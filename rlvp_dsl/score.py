"""Episode scoring: a compiled `Program`'s plans run over one episode, event by event.

`Scorer` is one episode's explicit state: a list of slots, one per ``seen`` condition
(the last matching index, or a dict keyed by the binding value), per obligation (its
open instances keyed by binding value, plus a queue for ``within N calls`` deadlines) and
two per progress rule (the best value so far, the credit paid so far).  Each event costs
amortised O(1) in the episode's length: it runs only the plan of its event class
(`rlvp_dsl.compile.Program.plan`).  Compiling is apart (`rlvp_dsl.compile`), as OPA keeps
compile and evaluation apart: a program is immutable and shared, a scorer is per episode.

Order within one event (this is the semantics, docs/language.md):

1. rules in source order; for an obligation: (a) instances whose ``within``
   window has passed expire, (b) the event discharges the instance with its
   binding value, (c) a ``before`` deadline expires every other open instance,
   (d) an event that does not satisfy the discharge condition opens a new instance,
   if none with its binding value is open;
2. then every ``seen`` slot is updated with the event (all conditions first
   evaluated on the state before the event, then applied: ``since`` resets first) --
   once the event's message is complete (`rlvp_dsl.information_order`: the events of
   one message were issued together, so none of them has seen the others).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Protocol

from . import ast, explain
from .events import CALL, Credit, Episode, Event
from .information_order import HeldUpdates
from .ir import CheckedRule, ObligationRule
from .predicates import Pred, binding_key, result_tokens
from .tools import ToolSpec

#: One rule's step for an event class: ``step(event, states, out, scorer)`` appends the
#: credits the event decides to `out` and updates the rule's slots in `states`.
Step = Callable[[Event, list[Any], list[Credit], "Scorer"], None]
#: One ``seen`` slot's update for an event class: (slot, match, since, same, returned);
#: `match` / `since` are None where they can never hold for the class.
SeenUpdate = tuple[int, Pred | None, Pred | None, ast.Binding | None, bool]
#: A `SeenUpdate` decided for one event: (slot, matched, since matched, same, returned).
DecidedUpdate = tuple[int, bool, bool, ast.Binding | None, bool]


class Plan:
    """What to run for one event class (kind, tool, tags): rule steps, then `seen` updates.
    `in_message`: the slots of ``seen (... same message)``, which look inside the event's own
    message and so are updated in event order, never held (docs/language.md)."""

    __slots__ = ("steps", "updates", "in_message")

    def __init__(
        self, steps: tuple[Step, ...], updates: tuple[SeenUpdate, ...], in_message: frozenset[int] = frozenset()
    ) -> None:
        self.steps = steps
        self.updates = updates
        self.in_message = in_message


class CompiledRules(Protocol):
    """What a scorer needs of its program (`rlvp_dsl.compile.Program`)."""

    @property
    def rules(self) -> Sequence[CheckedRule]: ...
    @property
    def tools(self) -> Mapping[str, ToolSpec]: ...
    @property
    def seen(self) -> Sequence[ast.Seen]: ...
    @property
    def slots(self) -> Mapping[int, int]: ...
    @property
    def obligation_slots(self) -> Mapping[int, int]: ...
    @property
    def n_slots(self) -> int: ...
    @property
    def locations(self) -> Sequence[str]: ...
    def plan(self, event: Event) -> Plan: ...


def score_episode(program: CompiledRules, episode: Episode | Iterable[Event]) -> list[Credit]:
    """Batch scoring: every credit of one episode (same result as streaming it); `Program.score`.

    Raises:
        TypeError: `episode` is neither an `Episode` nor an iterable of `Event`.
        ValueError: events out of order (as `Scorer.step`).
    """
    if isinstance(episode, Episode):
        events: Iterable[Event] = episode.events
    elif isinstance(episode, (str, bytes, Mapping)) or not isinstance(episode, Iterable):
        raise TypeError(
            f"score() takes an Episode or its events (got {type(episode).__name__}); "
            "read files with rlvp_dsl.read_paths, chat messages with episode_from_messages"
        )
    else:
        events = tuple(episode)  # each checked as it is admitted (Scorer._admit)
    return Scorer(program).run(events)


class Scorer:
    """Streaming scorer of one episode: `step(event)` per event, then `finish()`.

    Events must arrive in order with ``event.index`` 0, 1, 2, ...; credits returned by
    `step` may land on an earlier event (an obligation's expiry penalty lands on the
    call that opened it).

    Raises:
        ValueError: an event out of order, or a step after `finish`.
    """

    def __init__(self, program: CompiledRules) -> None:
        self.program = program
        self.states: list[Any] = [None] * program.n_slots
        for node in program.seen:
            self.states[program.slots[id(node)]] = {} if node.same is not None else -1
        self.calls_before = 0
        self.next_index = 0
        self.finished = False
        # `seen` updates of the current message, applied once the message is complete
        self.held: HeldUpdates[list[DecidedUpdate]] = HeldUpdates()

    def step(self, event: Event) -> list[Credit]:
        """Score one event; returns the credits decided by it.

        Raises:
            TypeError: `event` is not an `Event`.
            ValueError: an event out of order, or a step after `finish`.
        """
        out: list[Credit] = []
        self._admit(event)
        self._step(event, out)
        return out

    def run(self, events: Iterable[Event]) -> list[Credit]:
        """Score every remaining event of the episode, in order, then `finish`: all the
        credits, as `step` and `finish` would return them (batch scoring).

        Raises:
            ValueError: as `step`.
        """
        out: list[Credit] = []
        # `_admit` then `_step` per event, written out: this loop is the scorer's hot path (an
        # event's whole cost is a few attribute reads and its plan's steps); keep it in step with them
        plan_of, states, held, apply = self.program.plan, self.states, self.held, self._apply
        finished = self.finished
        for event in events:
            if finished or type(event) is not Event or event.index != self.next_index:
                self._admit(event)  # raises, or admits an instance of a subclass of Event
            else:
                self.next_index += 1
            message = event.message
            if held.items and message != held.message:
                for done, decided in held.release():
                    apply(done, decided)
            plan = plan_of(event)
            for step in plan.steps:
                step(event, states, out, self)
            if plan.updates:
                now: list[DecidedUpdate] = [
                    (slot, p is not None and p(event, states), q is not None and q(event, states), same, returned)
                    for slot, p, q, same, returned in plan.updates
                ]
                if message is None:
                    apply(event, now)
                elif plan.in_message:  # as in `_step`
                    inside = plan.in_message
                    apply(event, [u for u in now if u[0] in inside])
                    held.hold(event, [u for u in now if u[0] not in inside])
                else:
                    held.hold(event, now)
            if event.kind == CALL:
                self.calls_before += 1
        out.extend(self.finish())
        return out

    def _admit(self, event: Event) -> None:
        if not isinstance(event, Event):
            raise TypeError(
                f"an event must be an rlvp_dsl.Event (got {type(event).__name__}); episodes come from "
                "rlvp_dsl.read_paths or episode_from_messages"
            )
        if self.finished:
            raise ValueError("this scorer has finished its episode; call program.stream() for a new one")
        if event.index != self.next_index:
            raise ValueError(f"events must arrive in order: expected index {self.next_index}, got {event.index}")
        self.next_index += 1

    def _step(self, event: Event, out: list[Credit]) -> None:
        held = self.held
        # held updates are all of one message (never None): an event of another message, or of
        # none, shows it complete, and what it did is now observed (rlvp_dsl.information_order)
        if held.items and event.message != held.message:
            for done, decided in held.release():
                self._apply(done, decided)
        plan = self.program.plan(event)
        states = self.states
        for step in plan.steps:
            step(event, states, out, self)
        if plan.updates:
            now: list[DecidedUpdate] = [
                (slot, p is not None and p(event, states), q is not None and q(event, states), same, returned)
                for slot, p, q, same, returned in plan.updates
            ]
            if event.message is None:
                self._apply(event, now)
            elif plan.in_message:  # `same message` slots see the message's earlier events at once
                inside = plan.in_message
                self._apply(event, [u for u in now if u[0] in inside])
                held.hold(event, [u for u in now if u[0] not in inside])
            else:  # issued with its message's other events: none has seen them
                held.hold(event, now)
        if event.kind == CALL:
            self.calls_before += 1

    def _apply(self, event: Event, decided: list[DecidedUpdate]) -> None:
        """Record `event` in the ``seen`` slots (``since`` resets first, then the match)."""
        states, tools = self.states, self.program.tools
        for slot, p, q, same, returned in decided:
            if same is None:
                if q:
                    states[slot] = -1
                if p:
                    states[slot] = event.index
            else:
                if q:
                    states[slot].clear()
                if p and returned:  # every token of the result is a value this event returned
                    for token in result_tokens(event.result):
                        states[slot][token] = event.index
                elif p:
                    key = binding_key(same, event, tools)
                    if key is not None:
                        states[slot][key] = event.index

    def finish(self) -> list[Credit]:
        """End of episode: every obligation instance still open expires."""
        self.finished = True
        out: list[Credit] = []
        program = self.program
        for i, slot in program.obligation_slots.items():
            state = self.states[slot]
            if not state or not state[0]:
                continue
            rule = program.rules[i]
            assert isinstance(rule, ObligationRule)
            for opened, _ in sorted(state[0].values()):
                out.append(
                    Credit(
                        opened,
                        rule.name,
                        rule.expire,
                        program.locations[i],
                        explain.expired_end(),
                        "obligation",
                        "expire",
                        related_event=self.next_index - 1,  # the deadline noticed: the episode's last event
                        deadline="end",
                        span=rule.span,
                    )
                )
            state[0].clear()
        return out
