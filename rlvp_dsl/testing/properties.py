"""Built-in properties any rule set is checked against (`rlvp-compile --check`).

Each property is searched with Hypothesis over episodes generated from the tools
(`rlvp_dsl.testing.episodes`: the rule file's table, or a manifest), derandomised, no
deadline, a fixed budget of examples; a counterexample is shrunk.  Exactly:

1. **bounded** -- on every event, the sum of |credit| is at most `Program.event_bound()`;
   the episode's |total| is at most ``event_bound x number of calls and assistant turns``
   (only a progress rule's ``max`` caps a rule's episode total, `ir.episode_bound`, which is
   checked too; the observed maxima are reported so they can be compared with the outcome reward).
2. **not_farmable** -- (a) inserting a copy of an event that earned positive credit right
   after it never raises the episode's total; (b) inserting a *no-op read* -- a call of a
   tool tagged ``read`` (not write/destructive), status ok, empty result, its target set to
   a never-used value -- anywhere never raises the episode's *positive* credit.  (b) looks at
   positive credit only: a read may legitimately cancel a penalty ("look before you write"),
   a bounded gain; it must never *earn* anything.
3. **discharge_once** -- every obligation instance (rule, opening event) is paid at most once
   (discharged or expired), and a discharge lands after the event that opened it.
4. **reachable** -- every rule fires on some generated episode (an obligation: both its
   discharge and its expiry).  A rule no event of the tool set can satisfy *fails*, with the
   reason (a tool not in the manifest, a tag no tool carries, two tests that exclude each
   other); a rule that could fire but did not within the budget is a *warning* naming the
   tests that never held (fatal with ``--warnings-as-errors``).
5. **deterministic** -- scoring an episode twice gives the same credits; streaming equals
   batch; and rules are order-sensitive only where declared: a violation with no ``seen``
   (history-free) gives each event the same credit under any permutation of the episode.
   Obligations, progress, and conditions with ``seen`` declare order and are not permuted.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Callable, TypeVar

import attrs
from hypothesis import HealthCheck, Phase, find, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

from .. import ast
from ..analysis import walk
from ..compile import Program
from ..events import ASSISTANT, CALL, Credit, Episode, Event, normalise_value
from ..tools import ToolSpec
from ..ir import CAP_SLACK, ObligationRule, ViolationRule, episode_bound
from .reachability import Reasons
from .strategies import Vocabulary, episodes, noop_read, read_only_tools, reindexed, vocabulary

PROPERTIES = ("bounded", "not_farmable", "discharge_once", "reachable", "deterministic")
DEFAULT_EXAMPLES = 200
MAX_EVENTS = 12
TOLERANCE = 1e-9
#: `reachable` may look at this many times the example budget (it stops once every rule fired).
REACH_FACTOR = 5
#: The reachability search's fixed seed.  ``derandomize`` alone seeds from a digest of the search
#: function's source text, so reformatting the code would change which episodes are drawn.
REACH_SEED = 0

#: What a property searches over: an episode, or an episode and what the property changes in it.
_Case = TypeVar("_Case")

#: A property's report on a failing case (`_failed`).
_Found = TypeVar("_Found")

#: A property that compares two episodes fails with (message, the changed episode or None, its label).
_Failure = tuple[str, Episode | None, str]


@attrs.frozen
class Finding:
    """A shrunk counterexample: the episode, what is wrong, and the changed episode when the
    property compares two (farming, permutation)."""

    message: str
    episode: Episode
    variant: Episode | None = None
    variant_label: str = ""


@attrs.frozen
class PropertyResult:
    """One property's outcome: `status` is ``ok``, ``fail`` or ``warn``."""

    name: str
    status: str
    examples: int
    summary: str = ""
    finding: Finding | None = None
    notes: tuple[str, ...] = ()


class _AllReached(Exception):
    """Raised inside the reachability search once every rule outcome has been seen."""


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


def _search(
    strategy: SearchStrategy[_Case], violated: Callable[[_Case], object | None], examples: int
) -> tuple[_Case, int] | tuple[None, int]:
    """(shrunk case or None, examples tried before the first failure or in all)."""
    count = [0, 0]

    def condition(case: _Case) -> bool:
        count[0] += 1
        bad = violated(case) is not None
        if bad and not count[1]:
            count[1] = count[0]
        return bad

    try:
        case = find(strategy, condition, settings=_settings(examples))
    except NoSuchExample:
        return None, count[0]
    return case, count[1]


def _total(credits: Iterable[Credit]) -> float:
    return sum(c.value for c in credits)


def _positive(credits: Iterable[Credit]) -> float:
    return sum(c.value for c in credits if c.value > 0)


def _insert(episode: Episode, at: int, event: Event) -> Episode:
    events = list(episode.events)
    events.insert(at, event)
    return Episode(episode.id, reindexed(events))


# ---- the properties -------------------------------------------------------------------


class _PropertySearch:
    def __init__(self, program: Program, vocab: Vocabulary, examples: int, max_events: int) -> None:
        self.program, self.vocab, self.examples = program, vocab, examples
        self.strategy: SearchStrategy[Episode] = episodes(vocab, max_events=max_events)
        self.bound = program.event_bound()
        self.stats: dict[str, float] = {"event": 0, "episode": 0}  # observed maxima: |credit| on one event, |total|

    def bounded(self) -> PropertyResult:
        def violated(episode: Episode) -> str | None:
            credits = self.program.score(episode)
            per_event: defaultdict[int, float] = defaultdict(float)
            for c in credits:
                per_event[c.event_index] += abs(c.value)
            creditable = sum(1 for e in episode.events if e.kind in (CALL, ASSISTANT))
            total = abs(_total(credits))
            self.stats["event"] = max(self.stats["event"], max(per_event.values(), default=0.0))
            self.stats["episode"] = max(self.stats["episode"], total)
            for i, v in sorted(per_event.items()):
                if v > self.bound + TOLERANCE:
                    return f"event {i} receives |credit| {v:g}, above the event bound {self.bound:g}"
            if total > self.bound * creditable + TOLERANCE:
                return f"|episode total| {total:g} is above {self.bound:g} x {creditable} creditable events"
            per_rule: defaultdict[str, float] = defaultdict(float)
            for c in credits:
                per_rule[c.rule] += c.value
            for rule in self.program.rules:
                cap = episode_bound(rule)
                if cap is not None and abs(per_rule[rule.name]) > cap * (1 + 2 * CAP_SLACK):
                    return f"rule '{rule.name}' gives the episode {per_rule[rule.name]:g}, above its max {cap:g}"
            return None

        case, n = _search(self.strategy, violated, self.examples)
        if case is not None:
            return PropertyResult("bounded", "fail", n, finding=Finding(_failed(violated(case)), case))
        return PropertyResult(
            "bounded",
            "ok",
            n,
            f"event bound {self.bound:g}; observed max |credit| on one "
            f"event {self.stats['event']:g}, max |episode total| {self.stats['episode']:g}",
        )

    def not_farmable(self) -> PropertyResult:
        reads = read_only_tools(self.vocab, self.program)
        strategy = st.tuples(self.strategy, st.sampled_from(reads) if reads else st.none())

        def farmed(case: tuple[Episode, ToolSpec | None]) -> _Failure | None:
            episode, read = case
            credits = self.program.score(episode)
            total, positive = _total(credits), _positive(credits)
            earners = sorted({c.event_index for c in credits if c.value > 0})
            for i in earners:
                variant = _insert(episode, i + 1, episode.events[i])
                after = _total(self.program.score(variant))
                if after > total + TOLERANCE:
                    return (
                        f"repeating event {i}, which earned positive credit, right after it raises the "
                        f"episode's total from {total:g} to {after:g}",
                        variant,
                        f"with a copy of event {i} inserted at event {i + 1}",
                    )
            if read is None:
                return None
            targets = {t.name: t.target for t in self.vocab.tools}
            used = sorted(
                {
                    normalise_value(e.arguments[target])
                    for e in episode.calls
                    if (target := targets.get(e.tool or "")) is not None and target in e.arguments
                }
            )
            fresh = next(f"fresh{k}" for k in range(len(used) + 1) if f"fresh{k}" not in used)
            for value in [fresh] + used if read.target else [fresh]:
                for at in range(len(episode.events) + 1):
                    variant = _insert(episode, at, noop_read(read, at, value))
                    # a read may complete an obligation a real action opened (verify-after-write): the
                    # discharges landing on the read itself are not counted; anything else it adds is farmed
                    after = sum(
                        c.value
                        for c in self.program.score(variant)
                        if c.value > 0 and not (c.event_index == at and c.trigger == "discharge")
                    )
                    if after > positive + TOLERANCE:
                        return (
                            f"inserting a no-op read `{read.name}` (ok, empty result, target {value!r}) at "
                            f"event {at} raises the positive credit of the other events from {positive:g} "
                            f"to {after:g}",
                            variant,
                            f"with the no-op read inserted at event {at}",
                        )
            return None

        case, n = _search(strategy, farmed, self.examples)
        notes = () if reads else ("no read-only tool: only repetition was checked",)
        if case is not None:
            message, variant, label = _failed(farmed(case))
            return PropertyResult(
                "not_farmable", "fail", n, finding=Finding(message, case[0], variant, label), notes=notes
            )
        return PropertyResult("not_farmable", "ok", n, notes=notes)

    def discharge_once(self) -> PropertyResult:
        def violated(episode: Episode) -> str | None:
            paid: Counter[tuple[str, int]] = Counter()
            for c in self.program.score(episode):
                if c.kind != "obligation":
                    continue
                if c.trigger == "discharge":
                    opened = c.related_event if c.related_event is not None else -1
                    if not 0 <= opened < c.event_index:
                        return f"{c.rule}: the discharge at event {c.event_index} pays an instance opened at {opened}"
                else:
                    opened = c.event_index
                paid[(c.rule, opened)] += 1
                if paid[(c.rule, opened)] > 1:
                    return f"{c.rule}: the instance opened at event {opened} is paid {paid[(c.rule, opened)]} times"
            return None

        case, n = _search(self.strategy, violated, self.examples)
        if case is not None:
            return PropertyResult("discharge_once", "fail", n, finding=Finding(_failed(violated(case)), case))
        return PropertyResult("discharge_once", "ok", n)

    def deterministic(self) -> PropertyResult:
        free = [
            r.name
            for r in self.program.rules
            if isinstance(r, ViolationRule) and not any(isinstance(node, ast.Seen) for node in walk(r.cond))
        ]

        @st.composite
        def cases(draw: st.DrawFn) -> tuple[Episode, list[int]]:
            episode = draw(self.strategy)
            return episode, draw(st.permutations(range(len(episode.events))))

        def violated(case: tuple[Episode, list[int]]) -> _Failure | None:
            episode, order = case
            first, second = self.program.score(episode), self.program.score(episode)
            if first != second:
                return "scoring the same episode twice gives different credits", None, ""
            scorer = self.program.stream()
            streamed = [c for e in episode.events for c in scorer.step(e)] + scorer.finish()
            if streamed != first:
                return "streaming the episode gives other credits than scoring it at once", None, ""
            if not free:
                return None
            permuted = Episode(episode.id, reindexed(episode.events[i] for i in order))
            before = _per_event(first, free, range(len(order)))
            after = _per_event(self.program.score(permuted), free, order)
            if before != after:
                return (
                    "a rule without history (" + ", ".join(free) + ") gives an event another credit when "
                    "the episode's events are reordered",
                    permuted,
                    "with the events reordered",
                )
            return None

        case, n = _search(cases(), violated, self.examples)
        sensitive = [r.name for r in self.program.rules if r.name not in free]
        notes = (
            f"order-insensitive: {', '.join(free) or 'none'}; order-sensitive by declaration "
            f"(seen, obligation, progress): {', '.join(sensitive) or 'none'}",
        )
        if case is not None:
            message, variant, label = _failed(violated(case))
            return PropertyResult(
                "deterministic", "fail", n, finding=Finding(message, case[0], variant, label), notes=notes
            )
        return PropertyResult("deterministic", "ok", n, notes=notes)

    def reachable(self, tools_source: str) -> PropertyResult:
        goals: list[tuple[str, str]] = []
        for r in self.program.rules:
            goals += (
                [(r.name, "discharge"), (r.name, "expire")] if isinstance(r, ObligationRule) else [(r.name, "fire")]
            )
        reached: set[tuple[str, str]] = set()
        sample: list[Episode] = []

        # Coverage accumulates across examples, so this is not a predicate `find` may replay:
        # generate only (no shrinking, no replay of a "failure"), and stop by raising once
        # everything is covered -- which stays true, so a replay raises again.
        @settings(
            max_examples=self.examples * REACH_FACTOR,
            derandomize=True,
            deadline=None,
            database=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        )
        @seed(REACH_SEED)
        @given(self.strategy)
        def search(episode: Episode) -> None:
            if not reached.issuperset(goals):
                sample.append(episode)
                reached.update((c.rule, c.trigger) for c in self.program.score(episode))
            if reached.issuperset(goals):
                raise _AllReached

        try:
            search()
        except _AllReached:
            return PropertyResult("reachable", "ok", len(sample), f"all {len(goals)} rule outcomes reached")
        why = Reasons(self.program, self.vocab, tools_source)
        lines: list[str] = []
        fatal = False
        for name, outcome in goals:
            if (name, outcome) in reached:
                continue
            static, text = why.explain(name, outcome, sample)
            fatal = fatal or static
            what = name if outcome == "fire" else f"{name} ({outcome})"
            lines.append(f"{what} {'can never fire' if static else 'never fired'}: {text}")
        status = "fail" if fatal else "warn"
        return PropertyResult(
            "reachable",
            status,
            len(sample),
            f"{len(lines)} of {len(goals)} rule outcomes never reached",
            notes=tuple(lines),
        )


def _failed(failure: _Found | None) -> _Found:
    """What a property reported on its shrunk counterexample (which fails it again)."""
    assert failure is not None
    return failure


def _per_event(credits: list[Credit], rules: list[str], order: Sequence[int]) -> dict[tuple[int, str], float]:
    """Credits of `rules` keyed by (original event index, rule); `order[i]` is the original
    index of the event now at position i."""
    out: defaultdict[tuple[int, str], float] = defaultdict(float)
    for c in credits:
        if c.rule in rules:
            out[(order[c.event_index], c.rule)] += c.value
    return {k: round(v, 9) for k, v in out.items() if v}


# ---- running and printing ------------------------------------------------------------


def check_program(
    program: Program,
    *,
    tools: Any = None,
    tools_source: str = "the rule file's tools",
    examples: int = DEFAULT_EXAMPLES,
    max_events: int = MAX_EVENTS,
    properties: tuple[str, ...] = PROPERTIES,
) -> list[PropertyResult]:
    """Run the built-in properties on `program`, generating episodes over `tools` (a Manifest, a
    tool list; default: the program's own table) with the literals of the program's rules.

    Raises:
        ValueError: an unknown property name, or `examples` < 1.
    """
    unknown = [p for p in properties if p not in PROPERTIES]
    if unknown or examples < 1:
        raise ValueError(
            f"properties must be among {', '.join(PROPERTIES)} and examples >= 1 (got {unknown or examples})"
        )
    vocab = vocabulary(program if tools is None else tools, rules=program)
    checker = _PropertySearch(program, vocab, examples, max_events)
    out = []
    for name in properties:
        out.append(checker.reachable(tools_source) if name == "reachable" else getattr(checker, name)())
    return out


def episode_json(episode: Episode) -> str:
    """The episode as JSON (`Episode.to_json()`), one event per line."""
    data = episode.to_json()
    events = data.pop("events")
    head = json.dumps(data, ensure_ascii=False)[:-1]
    lines = [json.dumps(e, ensure_ascii=False) for e in events]
    return head + ', "events": [\n' + ",\n".join("  " + line for line in lines) + "\n]}"


def explain_credits(program: Program, episode: Episode) -> list[str]:
    """One line per credit of the episode: event, rule, value, the rule's file:line:col, why."""
    credits = sorted(program.score(episode), key=lambda c: (c.event_index, c.rule))
    if not credits:
        return ["(no credit)"]
    lines = []
    for c in credits:
        e = episode.events[c.event_index]
        what = (
            (f"call `{e.tool}`" if e.tool is not None else "call without a tool name")
            if e.kind == CALL
            else f"{e.kind} turn"
        )
        lines.append(f"event {c.event_index} ({what}): {c.rule} {c.value:+g} at {c.location}: {c.reason}")
    lines.append(f"total {_total(credits):+g}")
    return lines


def render(results: list[PropertyResult], program: Program, header: str) -> str:
    """The report `rlvp-compile --check` prints for one rule file."""
    out = [header]
    for r in results:
        label = {"ok": "ok  ", "fail": "FAIL", "warn": "warn"}[r.status]
        summary = f"  {r.summary}" if r.summary else ""
        if r.finding is not None:
            summary = f"  counterexample after {r.examples} examples, shrunk: {r.finding.message}"
        out.append(f"  {label} {r.name:<15} {r.examples} examples{summary}")
        out += [f"       {note}" for note in r.notes]
        if r.finding is not None:
            out += _finding_lines(program, r.finding)
    return "\n".join(out)


def _finding_lines(program: Program, finding: Finding) -> list[str]:
    pad = "       "
    lines = [pad + "episode:"] + [pad + "  " + line for line in episode_json(finding.episode).splitlines()]
    lines += [pad + "credits:"] + [pad + "  " + line for line in explain_credits(program, finding.episode)]
    if finding.variant is not None:
        lines += [pad + finding.variant_label + ":"]
        lines += [pad + "  " + line for line in episode_json(finding.variant).splitlines()]
        lines += [pad + "credits:"] + [pad + "  " + line for line in explain_credits(program, finding.variant)]
    return lines
