"""The compiler: a checked `RuleSet` -> a deterministic streaming `Program`.

One event in, credits out.  State is explicit (a list of slots, one per ``seen``
condition and per obligation) and every step is amortised O(1) in the episode's
length: ``seen`` keeps the last matching index (or a dict keyed by the binding
value), an obligation keeps its open instances keyed by binding value plus a
queue for ``within N calls`` deadlines, progress keeps the best value so far and the
credit it has paid (its ``max`` caps the episode's total).

For each event *class* -- (kind, tool, tags) -- the program specialises every
condition once (`predicates.specialise`) and keeps only the rules and ``seen``
updates that can match that class, so an event pays only for the rules that
concern it.

Order within one event (this is the semantics, docs/language.md):

1. rules in source order; for an obligation: (a) instances whose ``within``
   window has passed expire, (b) the event discharges the instance with its
   binding value, (c) a ``before`` deadline expires every other open instance,
   (d) an event that does not satisfy the discharge condition opens a new instance,
   if none with its binding value is open;
2. then every ``seen`` slot is updated with the event (all conditions first
   evaluated on the state before the event, then applied: ``since`` resets first) --
   once the event's message is complete: the events of one message (``Event.message``)
   were issued together, so none of them has seen the others (the updates wait in
   ``Scorer.pending`` until an event of another message arrives).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Callable

from . import ast, explain
from .events import ASSISTANT, CALL, MALFORMED, NO_RESULT, Credit, Episode, Event
from .ir import ObligationRule, ProgressRule, RuleSet, ViolationRule, capped_credit, conditions, rule_bound
from .predicates import FALSE, binding_key, build, result_tokens, specialise


def _seen_nodes(ruleset: RuleSet) -> list[ast.Seen]:
    """Every `seen` node of the rule set, inner ones included, in a fixed order."""
    found: list[ast.Seen] = []
    ids: set[int] = set()
    for rule in ruleset.rules:
        for root in conditions(rule):
            for node in ast.walk(root):
                if isinstance(node, ast.Seen) and id(node) not in ids:
                    ids.add(id(node))
                    found.append(node)
    return found


class _Plan:
    """What to run for one event class: rule steps and `seen` updates."""

    __slots__ = ("steps", "updates")

    def __init__(self, steps, updates):
        self.steps = steps
        self.updates = updates


class Program:
    """A compiled rule set.  Immutable and shareable; `stream()` makes a fresh scorer.

    Attributes:
        ruleset: the checked rules it was compiled from.
        tools: name -> `rlvp_dsl.tools.ToolSpec` (tags, target, params).
    """

    def __init__(self, ruleset: RuleSet):
        self.ruleset = ruleset
        self.tools = ruleset.tools
        self.rules = ruleset.rules
        self.seen = _seen_nodes(ruleset)
        self.slots = {id(node): i for i, node in enumerate(self.seen)}
        self.obligation_slots = {
            i: len(self.seen) + k
            for k, i in enumerate(i for i, r in enumerate(self.rules) if isinstance(r, ObligationRule))
        }
        # two slots per progress rule: the best value so far, then the credit paid so far
        self.progress_slots = {
            i: len(self.seen) + len(self.obligation_slots) + 2 * k
            for k, i in enumerate(i for i, r in enumerate(self.rules) if isinstance(r, ProgressRule))
        }
        self.n_slots = len(self.seen) + len(self.obligation_slots) + 2 * len(self.progress_slots)
        self._plans: dict[tuple, _Plan] = {}
        self.locations = [r.span.location for r in self.rules]

    # ---- public API ---------------------------------------------------
    def stream(self) -> "Scorer":
        """A fresh streaming scorer for one episode."""
        return Scorer(self)

    def score(self, episode: Episode | Iterable[Event]) -> list[Credit]:
        """Batch scoring: every credit of one episode (same result as streaming it).

        Raises:
            TypeError: `episode` is neither an `Episode` nor an iterable of `Event`.
        """
        if isinstance(episode, Episode):
            events = episode.events
        elif isinstance(episode, (str, bytes, Mapping)) or not isinstance(episode, Iterable):
            raise TypeError(
                f"score() takes an Episode or its events (got {type(episode).__name__}); "
                "read files with rlvp_dsl.read_paths, chat messages with episode_from_messages"
            )
        else:
            events = tuple(episode)  # each checked as it is admitted (Scorer._admit)
        return Scorer(self).run(events)

    def to_json(self) -> dict:
        """The canonical program (deterministic: the same rules give byte-identical JSON)."""
        return self.ruleset.to_json()

    def event_bound(self) -> float:
        """The most |credit| any single event can receive: the sum of the rules' bounds."""
        return sum(rule_bound(r) for r in self.rules)

    # ---- planning --------------------------------------------------------
    def plan(self, event: Event) -> _Plan:
        """The plan for the event's class (kind, tool, tags), made once and cached."""
        key = (event.kind, event.tool, event.tags)
        plan = self._plans.get(key)
        if plan is None:
            tool = event.tool if event.kind == CALL else None
            info = self.tools.get(tool) if tool is not None else None
            tags = event.tags | info.tags if info is not None else event.tags
            plan = self._plans[key] = self._make_plan(event.kind, tool, tags)
        return plan

    def _pred(self, expr, kind, tool, tags):
        folded = specialise(expr, kind, tool, tags)
        return None if folded is FALSE else build(folded, self.slots, self.tools)

    def _make_plan(self, kind: str, tool: str | None, tags: frozenset[str]) -> _Plan:
        steps = []
        creditable = kind in (CALL, ASSISTANT)
        for i, rule in enumerate(self.rules):
            if isinstance(rule, ViolationRule):
                pred = self._pred(rule.cond, kind, tool, tags) if creditable else None
                if pred is not None:
                    steps.append(self._violation_step(i, rule, pred))
            elif isinstance(rule, ObligationRule):
                step = self._obligation_step(i, rule, kind, tool, tags, creditable)
                if step is not None:
                    steps.append(step)
            else:
                steps.append(self._progress_step(i, rule))
        updates = []
        for node in self.seen:
            p = self._pred(node.cond, kind, tool, tags)
            q = self._pred(node.since, kind, tool, tags) if node.since is not None else None
            if p is not None or q is not None:
                updates.append((self.slots[id(node)], p, q, node.same, node.returned))
        return _Plan(tuple(steps), tuple(updates))

    def _violation_step(self, i: int, rule: ViolationRule, pred) -> Callable:
        location, name, weight, kind = self.locations[i], rule.name, rule.weight, rule.kind
        reason = explain.violation_reason(rule, self)

        def step(event, states, out, scorer):
            if pred(event, states):
                out.append(Credit(event.index, name, weight, location, reason(event, states), kind))

        return step

    def _obligation_step(self, i, rule: ObligationRule, kind, tool, tags, creditable) -> Callable:
        slot = self.obligation_slots[i]
        location, name = self.locations[i], rule.name
        open_pred = self._pred(rule.open, kind, tool, tags) if creditable else None
        discharge_pred = self._pred(rule.discharge, kind, tool, tags) if creditable else None
        before_pred = self._pred(rule.before, kind, tool, tags) if rule.before is not None else None
        same, tools, within = rule.same, self.tools, rule.within
        is_call = kind == CALL
        if open_pred is None and discharge_pred is None and before_pred is None and not (within and is_call):
            return None

        def step(event, states, out, scorer):
            state = states[slot]  # (open: dict key -> (open index, window end), queue)
            if state is None:
                state = states[slot] = ({}, deque())
            instances, queue = state
            if not instances and open_pred is None:
                return
            if within and is_call:
                while queue and queue[0][2] <= scorer.calls_before:
                    key, opened, end = queue.popleft()
                    if instances.get(key, (None,))[0] == opened:
                        del instances[key]
                        out.append(
                            Credit(
                                opened,
                                name,
                                rule.expire,
                                location,
                                explain.expired_within(within, event.index),
                                "obligation",
                                "expire",
                            )
                        )
            discharging = (
                discharge_pred is not None
                and event.status not in (MALFORMED, NO_RESULT)
                and (instances or open_pred is not None)
                and discharge_pred(event, states)
            )
            if discharging and instances:
                key = binding_key(same, event, tools) if same is not None else ""
                if key is not None and key in instances:
                    opened = instances.pop(key)[0]
                    out.append(
                        Credit(
                            event.index,
                            name,
                            rule.credit,
                            location,
                            explain.discharged(opened),
                            "obligation",
                            "discharge",
                        )
                    )
            if instances and before_pred is not None and before_pred(event, states):
                for opened, _ in sorted(instances.values()):
                    out.append(
                        Credit(
                            opened,
                            name,
                            rule.expire,
                            location,
                            explain.expired_before(event.index),
                            "obligation",
                            "expire",
                        )
                    )
                instances.clear()
                queue.clear()
            if not discharging and open_pred is not None and open_pred(event, states):
                key = binding_key(same, event, tools) if same is not None else ""
                if key is not None and key not in instances:
                    end = scorer.calls_before + (1 if is_call else 0) + within
                    instances[key] = (event.index, end)
                    if within:
                        queue.append((key, event.index, end))

        return step

    def _progress_step(self, i, rule: ProgressRule) -> Callable:
        slot = self.progress_slots[i]
        location, name, signal = self.locations[i], rule.name, rule.signal
        sign = -1.0 if rule.direction == "decreasing" else 1.0

        def step(event, states, out, scorer):
            value = event.signals.get(signal)
            if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                return
            value = float(value)
            if not math.isfinite(value):  # a NaN or infinite reading is skipped, never a baseline
                return
            best = states[slot]
            if event.kind != CALL:  # a value reported with a message only sets the start
                if best is None and rule.start is None:
                    states[slot] = value
                return
            if best is None:
                if rule.start is None:
                    states[slot] = value
                    return
                best = rule.start
            gain = sign * (value - best)
            if gain > 0:
                states[slot] = value
                credit = rule.weight * gain if rule.per_unit else rule.weight
                reason = explain.new_best(signal, value, best)
                if rule.max is not None:  # the episode's cap: pay at most what is left of it
                    paid = states[slot + 1] or 0.0
                    credit, cut = capped_credit(credit, rule.max, paid)
                    if credit == 0.0:
                        return
                    if cut:
                        reason = explain.capped(reason, rule.max)
                    states[slot + 1] = paid + credit
                out.append(Credit(event.index, name, credit, location, reason, "progress"))
            elif states[slot] is None:
                states[slot] = best

        return step


class Scorer:
    """Streaming scorer of one episode: `step(event)` per event, then `finish()`.

    Events must arrive in order with ``event.index`` 0, 1, 2, ...; credits returned by
    `step` may land on an earlier event (an obligation's expiry penalty lands on the
    call that opened it).

    Raises:
        ValueError: an event out of order, or a step after `finish`.
    """

    def __init__(self, program: Program):
        self.program = program
        self.states: list = [None] * program.n_slots
        for node in program.seen:
            self.states[program.slots[id(node)]] = {} if node.same is not None else -1
        self.calls_before = 0
        self.next_index = 0
        self.finished = False
        # `seen` updates of the current message, applied once the message is complete
        self.pending: list[tuple[Event, list]] = []
        self.pending_message: int | None = None

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
        for event in events:
            self._admit(event)
            self._step(event, out)
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
        if self.pending and not (event.message is not None and event.message == self.pending_message):
            self._apply_pending()  # the previous message is complete: what it did is now observed
        plan = self.program.plan(event)
        states = self.states
        for step in plan.steps:
            step(event, states, out, self)
        if plan.updates:
            decided = [
                (slot, p is not None and p(event, states), q is not None and q(event, states), same, returned)
                for slot, p, q, same, returned in plan.updates
            ]
            if event.message is None:
                self._apply(event, decided)
            else:  # events of one message are issued together: none has seen the others
                self.pending.append((event, decided))
                self.pending_message = event.message
        if event.kind == CALL:
            self.calls_before += 1

    def _apply_pending(self) -> None:
        for event, decided in self.pending:
            self._apply(event, decided)
        self.pending.clear()

    def _apply(self, event: Event, decided: list) -> None:
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
                    )
                )
            state[0].clear()
        return out


def compile_ruleset(ruleset: RuleSet) -> Program:
    """Compile a checked rule set (see `rlvp_dsl.check`)."""
    return Program(ruleset)
