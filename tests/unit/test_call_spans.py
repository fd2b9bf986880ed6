"""Call spans found in generated token ids, and aligned with an episode's calls."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from rlvp_dsl.events import CALL, MALFORMED, OK, Episode, Event
from rlvp_dsl.call_spans import align_call_spans, find_call_spans

OPEN, CLOSE = [7], [8]


def test_spans_cover_markers_and_skip_tool_output():
    """A span runs from the opening marker through the closing one; markers under mask 0 are not calls."""
    ids = [1, 7, 2, 3, 8, 5, 7, 4, 8, 6, 7, 9]
    mask = [1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1]
    assert find_call_spans(ids, OPEN, CLOSE, mask) == [(1, 5), (10, 12)]  # the last one is cut off
    assert find_call_spans(ids, OPEN, CLOSE) == [(1, 5), (6, 9), (10, 12)]


def test_multi_token_markers():
    """Markers of several tokens match whole."""
    assert find_call_spans([5, 1, 2, 9, 3, 4, 5], [1, 2], [3, 4]) == [(1, 6)]
    with pytest.raises(ValueError, match="non-empty"):
        find_call_spans([1], [], [2])
    with pytest.raises(ValueError, match="mask has 1 entries for 2"):
        find_call_spans([1, 2], [1], [2], [1])


def _episode(*calls):
    events = []
    for tool, status in calls:
        events.append(Event(index=len(events), kind="assistant", text="t"))
        events.append(Event(index=len(events), kind=CALL, tool=tool, status=status))
    return Episode("e", tuple(events))


def test_equal_counts_pair_in_order():
    """As many spans as calls: the k-th span is the k-th call's."""
    got = align_call_spans(_episode(("a", OK), ("b", OK)), [(0, 3), (5, 9)])
    assert got.spans == ((0, 3), (5, 9)) and got.inserted == got.without_span == 0


def test_an_unmatched_span_becomes_a_malformed_call():
    """A span naming a tool the episode does not call here is inserted as a malformed call where its tokens were."""
    got = align_call_spans(_episode(("a", OK), ("b", OK)), [(0, 3), (4, 6), (7, 9)], ["a", None, "b"])
    assert [(e.index, e.tool, e.status) for e in got.episode.calls] == [
        (1, "a", OK),
        (3, None, MALFORMED),
        (4, "b", OK),
    ]
    assert got.spans == ((0, 3), (4, 6), (7, 9)) and got.inserted == 1
    assert [e.index for e in got.episode.events] == list(range(len(got.episode.events)))


def test_a_call_without_span_and_prompt_calls():
    """Calls skipped by the pairing, and calls before first_call, get the empty span."""
    got = align_call_spans(_episode(("h", OK), ("a", OK), ("b", OK)), [(2, 4)], ["b"], first_call=1)
    assert got.spans == ((0, 0), (0, 0), (2, 4)) and got.without_span == 1 and got.inserted == 0


@given(st.lists(st.sampled_from(["a", "b", None]), max_size=6), st.lists(st.sampled_from(["a", "b"]), max_size=6))
def test_alignment_never_raises_and_covers_every_span(span_tools, call_tools):
    """For any disagreement: one span per call, every input span used once, indices in order."""
    episode = _episode(*[(t, OK) for t in call_tools])
    spans = [(3 * k, 3 * k + 2) for k in range(len(span_tools))]
    got = align_call_spans(episode, spans, span_tools)
    assert len(got.spans) == len(got.episode.calls)
    assert sorted(s for s in got.spans if s != (0, 0)) == spans
    assert [e.index for e in got.episode.events] == list(range(len(got.episode.events)))
    assert all(e.status == MALFORMED for e in got.episode.calls if e.tool is None)
