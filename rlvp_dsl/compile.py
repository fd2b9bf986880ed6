"""The compiler: a checked `RuleSet` -> a deterministic streaming `Program`.

For each event *class* -- (kind, tool, tags) -- the program specialises every
condition once (`predicates.specialise`) and keeps only the rules and ``seen``
updates that can match that class, so an event pays only for the rules that
concern it: a `rlvp_dsl.score.Plan` of rule steps and ``seen`` updates, made on the
class's first event and cached.

State is explicit and lives in the scorer (`rlvp_dsl.score.Scorer`, one per episode):
the program assigns the slots -- one per ``seen`` condition, one per obligation, two per
progress rule -- and its steps read and write them, each amortised O(1) in the episode's
length.  The order of the steps within one event is the semantics (docs/language.md;
`rlvp_dsl.score`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

from . import ast, explain
from .events import ASSISTANT, CALL, MALFORMED, NO_RESULT, Credit, Episode, Event
from .ir import ObligationRule, ProgressRule, RuleSet, ViolationRule, capped_credit, conditions, rule_bound
from .predicates import FALSE, Pred, binding_key, build, specialise
from .score import Plan, Scorer, SeenUpdate, Step, score_episode


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


class Program:
    """A compiled rule set.  Immutable and shareable; `stream()` makes a fresh scorer.

    Attributes:
        ruleset: the checked rules it was compiled from.
        tools: name -> `rlvp_dsl.tools.ToolSpec` (tags, target, params).
    """

    def __init__(self, ruleset: RuleSet) -> None:
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
        self._plans: dict[tuple[str, str | None, frozenset[str]], Plan] = {}
        self.locations = [r.span.location for r in self.rules]

    # ---- public API ---------------------------------------------------
    def stream(self) -> Scorer:
        """A fresh streaming scorer for one episode (`rlvp_dsl.score.Scorer`)."""
        return Scorer(self)

    def score(self, episode: Episode | Iterable[Event]) -> list[Credit]:
        """Batch scoring: every credit of one episode (same result as streaming it;
        `rlvp_dsl.score.score_episode`).

        Raises:
            TypeError: `episode` is neither an `Episode` nor an iterable of `Event`.
        """
        return score_episode(self, episode)

    def to_json(self) -> dict[str, Any]:
        """The canonical program (deterministic: the same rules give byte-identical JSON)."""
        return self.ruleset.to_json()

    def event_bound(self) -> float:
        """The most |credit| any single event can receive: the sum of the rules' bounds."""
        return sum(rule_bound(r) for r in self.rules)

    # ---- planning --------------------------------------------------------
    def plan(self, event: Event) -> Plan:
        """The plan for the event's class (kind, tool, tags), made once and cached."""
        key = (event.kind, event.tool, event.tags)
        plan = self._plans.get(key)
        if plan is None:
            tool = event.tool if event.kind == CALL else None
            info = self.tools.get(tool) if tool is not None else None
            tags = event.tags | info.tags if info is not None else event.tags
            plan = self._plans[key] = self._make_plan(event.kind, tool, tags)
        return plan

    def _pred(self, expr: ast.Expr, kind: str, tool: str | None, tags: frozenset[str]) -> Pred | None:
        """`expr` as a closure for the event class, or None where it can never hold for it."""
        folded = specialise(expr, kind, tool, tags)
        return None if folded is FALSE else build(folded, self.slots, self.tools)

    def _make_plan(self, kind: str, tool: str | None, tags: frozenset[str]) -> Plan:
        steps: list[Step] = []
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
        updates: list[SeenUpdate] = []
        in_message: set[int] = set()
        for node in self.seen:
            p = self._pred(node.cond, kind, tool, tags)
            q = self._pred(node.since, kind, tool, tags) if node.since is not None else None
            if p is not None or q is not None:
                updates.append((self.slots[id(node)], p, q, node.same, node.returned))
                if node.same is not None and node.same.kind == "message":
                    in_message.add(self.slots[id(node)])
        return Plan(tuple(steps), tuple(updates), frozenset(in_message))

    def _violation_step(self, i: int, rule: ViolationRule, pred: Pred) -> Step:
        location, name, weight, kind, span = self.locations[i], rule.name, rule.weight, rule.kind, rule.span
        reason = explain.violation_reason(rule, self.slots, self.tools)

        def step(event: Event, states: list[Any], out: list[Credit], scorer: Scorer) -> None:
            if pred(event, states):
                out.append(Credit(event.index, name, weight, location, reason(event, states), kind, span=span))

        return step

    def _obligation_step(
        self, i: int, rule: ObligationRule, kind: str, tool: str | None, tags: frozenset[str], creditable: bool
    ) -> Step | None:
        slot = self.obligation_slots[i]
        location, name, span = self.locations[i], rule.name, rule.span
        open_pred = self._pred(rule.open, kind, tool, tags) if creditable else None
        discharge_pred = self._pred(rule.discharge, kind, tool, tags) if creditable else None
        before_pred = self._pred(rule.before, kind, tool, tags) if rule.before is not None else None
        same, tools, within = rule.same, self.tools, rule.within
        is_call = kind == CALL
        if open_pred is None and discharge_pred is None and before_pred is None and not (within and is_call):
            return None

        def step(event: Event, states: list[Any], out: list[Credit], scorer: Scorer) -> None:
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
                                related_event=event.index,
                                deadline="within",
                                span=span,
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
                            related_event=opened,
                            span=span,
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
                            related_event=event.index,
                            deadline="before",
                            span=span,
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

    def _progress_step(self, i: int, rule: ProgressRule) -> Step:
        slot = self.progress_slots[i]
        location, name, signal, span = self.locations[i], rule.name, rule.signal, rule.span
        sign = -1.0 if rule.direction == "decreasing" else 1.0

        def step(event: Event, states: list[Any], out: list[Credit], scorer: Scorer) -> None:
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
                out.append(Credit(event.index, name, credit, location, reason, "progress", span=span))
            elif states[slot] is None:
                states[slot] = best

        return step


def compile_ruleset(ruleset: RuleSet) -> Program:
    """Compile a checked rule set (see `rlvp_dsl.check`)."""
    return Program(ruleset)
