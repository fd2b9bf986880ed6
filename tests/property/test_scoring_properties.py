"""Properties of the compiled program on generated rule files and episodes."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import attrs
from hypothesis import given, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import strategies as S  # noqa: E402
from conftest import expensive  # noqa: E402

from rlvp_dsl import check_text, loads  # noqa: E402
from rlvp_dsl import reference  # noqa: E402
from rlvp_dsl.events import Episode  # noqa: E402


def key(credit):
    return (
        credit.event_index,
        credit.rule,
        credit.value,
        credit.trigger,
        credit.reason,
        credit.related_event,
        credit.deadline,
        credit.location,
        attrs.astuple(credit.span),
    )


def multiset(credits):
    return sorted(key(c) for c in credits)


@given(S.programs_and_episodes())
@expensive
def test_compiled_equals_reference(case):
    """The compiled program gives the same multiset of credits as the reference interpreter."""
    text, episode = case
    result = check_text(text)
    assert result.ok, text
    expected = reference.score_reference(result.ruleset, episode)
    actual = loads(text).score(episode)
    assert multiset(actual) == multiset(expected)


@given(S.programs_and_episodes())
@expensive
def test_streaming_equals_batch(case):
    """Feeding events one by one, then finish(), gives exactly what score() gives."""
    text, episode = case
    program = loads(text)
    scorer = program.stream()
    streamed = []
    for event in episode.events:
        streamed.extend(scorer.step(event))
    streamed.extend(scorer.finish())
    assert streamed == program.score(episode)


@given(st.data())
@expensive
def test_interleaved_scorers_are_independent(data):
    """Two scorers of one program, stepped alternately, each give its own episode's batch result."""
    table = data.draw(S.tool_tables())
    program = loads(data.draw(S.rule_files(table)))
    a, b = data.draw(S.episodes(table)), data.draw(S.episodes(table))
    sa, sb = program.stream(), program.stream()
    out_a, out_b = [], []
    for i in range(max(len(a.events), len(b.events))):
        if i < len(a.events):
            out_a.extend(sa.step(a.events[i]))
        if i < len(b.events):
            out_b.extend(sb.step(b.events[i]))
    out_a.extend(sa.finish())
    out_b.extend(sb.finish())
    assert multiset(out_a) == multiset(program.score(a))
    assert multiset(out_b) == multiset(program.score(b))


@given(S.programs_and_episodes())
@expensive
def test_obligation_instance_paid_at_most_once(case):
    """Each (rule, opening event) gets at most one discharge-or-expire credit, opened before it lands."""
    text, episode = case
    paid = Counter()
    for credit in loads(text).score(episode):
        if credit.kind != "obligation":
            continue
        if credit.trigger == "discharge":
            opened = credit.related_event
            assert opened is not None and opened < credit.event_index
        else:
            assert credit.trigger == "expire"
            opened = credit.event_index
        paid[(credit.rule, opened)] += 1
    assert all(n == 1 for n in paid.values()), paid


@given(st.data())
def test_repeating_a_discharging_call_never_raises_the_total(data):
    """A copy of a discharging call inserted right after it never raises the episode's total."""
    table = data.draw(S.tool_tables())
    program = loads(data.draw(S.monotone_rule_files(table)))
    episode = data.draw(S.episodes(table))
    credits = program.score(episode)
    total = sum(c.value for c in credits)
    discharging = sorted(
        {c.event_index for c in credits if c.trigger == "discharge" and episode.events[c.event_index].kind == "call"}
    )
    for d in discharging:
        events = list(episode.events)
        events.insert(d + 1, events[d])
        longer = Episode(episode.id, S.reindexed(events))
        assert sum(c.value for c in program.score(longer)) <= total + 1e-9


@given(S.programs_and_episodes(max_events=20))
@expensive
def test_credit_of_one_event_is_bounded(case):
    """The absolute credits landing on one event sum to at most program.event_bound()."""
    text, episode = case
    program = loads(text)
    per_event = Counter()
    for credit in program.score(episode):
        per_event[credit.event_index] += abs(credit.value)
    bound = program.event_bound()
    assert all(v <= bound + 1e-9 for v in per_event.values()), (per_event, bound)


@given(S.programs_and_episodes(max_events=20))
@expensive
def test_progress_total_over_an_episode_is_at_most_its_max(case):
    """A progress rule's credits over the whole episode sum to at most its `max` (ir.episode_bound),
    within the cap's slack (ir.CAP_SLACK)."""
    from rlvp_dsl.ir import CAP_SLACK, episode_bound

    text, episode = case
    program = loads(text)
    totals = Counter()
    for credit in program.score(episode):
        totals[credit.rule] += credit.value
    for rule in program.rules:
        bound = episode_bound(rule)
        if bound is not None:
            assert totals[rule.name] <= bound * (1 + 2 * CAP_SLACK), (rule, totals[rule.name])


@given(S.programs_and_episodes())
@expensive
def test_credit_lands_on_calls_and_assistant_turns(case):
    """No credit ever lands on a user turn, and every credit names a real event."""
    text, episode = case
    for credit in loads(text).score(episode):
        assert 0 <= credit.event_index < len(episode.events)
        assert episode.events[credit.event_index].kind in ("call", "assistant")


def test_repeating_a_discharge_with_overlapping_open_earns_nothing():
    """An obligation whose discharge also matches its open: a discharging event never opens, so copies earn nothing."""
    program = loads("tool t : verify\nobligation o (+1, expire -1) { open on call t discharge on call t ok }\n")
    from rlvp_dsl.events import Event

    calls = [Event(i, "call", tool="t") for i in range(3)]
    before = sum(c.value for c in program.score(Episode("e", calls)))  # every t satisfies discharge: none opens
    longer = Episode("e", S.reindexed([calls[0], calls[1], calls[1], calls[2]]))
    after = sum(c.value for c in program.score(longer))
    assert after <= before
