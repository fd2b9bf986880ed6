"""The readers' trusted construction path (`rlvp_dsl.events.trusted_event`, `trusted_episode`,
and the tau2 fast path that writes `trusted_event` out): every event and episode the readers build
equals -- ``==``, hash, every field and its type -- the
one the public constructors build from the same values, on every shared trajectory and the shipped
examples; the dicts a trusted event holds are its own; the public constructors still validate."""

from __future__ import annotations

import inspect
from pathlib import Path

import json

import attrs
import pytest
from hypothesis import given, strategies as st

from rlvp_dsl.events import Episode, Event, canonical_json, normalise_value, trusted_episode, trusted_event
from rlvp_dsl.readers import episode_from_messages, read_report

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "episodes"

EVENT_FIELDS = [a.name for a in attrs.fields(Event)]
EPISODE_FIELDS = [a.name for a in attrs.fields(Episode)]


def _public(episode: Episode) -> Episode:
    """The same episode rebuilt through the public constructors (validators and converters run)."""
    events = [Event(**{name: getattr(e, name) for name in EVENT_FIELDS}) for e in episode.events]
    return Episode(episode.id, events, outcome=episode.outcome, source=episode.source, meta=dict(episode.meta))


def _assert_same(trusted: Episode, public: Episode) -> None:
    assert trusted == public and hash(trusted) == hash(public)
    assert type(trusted.events) is tuple
    for name in EPISODE_FIELDS:
        mine, theirs = getattr(trusted, name), getattr(public, name)
        assert mine == theirs and type(mine) is type(theirs), (trusted.id, name)
    for mine, theirs in zip(trusted.events, public.events, strict=True):
        assert type(mine) is Event
        assert mine == theirs and hash(mine) == hash(theirs), (trusted.id, mine.index)
        for name in EVENT_FIELDS:
            a, b = getattr(mine, name), getattr(theirs, name)
            assert a == b and type(a) is type(b), (trusted.id, mine.index, name)
        assert mine.argument_key() == theirs.argument_key() and mine.to_json() == theirs.to_json()


def _own_dicts(episode: Episode) -> None:
    """No two events of an episode share an ``arguments`` or ``signals`` dict (each owns its own)."""
    held = [id(d) for e in episode.events for d in (e.arguments, e.signals)]
    assert len(held) == len(set(held)), episode.id


def test_trusted_event_takes_every_field_in_order() -> None:
    """`trusted_event`'s positional parameters are `Event`'s fields, in order: a field added to
    `Event` and not to the trusted path fails here, not silently."""
    params = [p.name for p in inspect.signature(trusted_event).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert params == EVENT_FIELDS
    params = list(inspect.signature(trusted_episode).parameters)
    assert params == EPISODE_FIELDS


def test_trusted_event_equals_the_constructor() -> None:
    values = (4, "call", "book", {"a": [1, 2]}, None, "error", "Error: no", "Error: no", "", frozenset({"write"}),
              {"left": 2.0}, "c1", "user", 3, True)  # fmt: skip
    trusted, public = trusted_event(*values), Event(*values)
    assert trusted == public and hash(trusted) == hash(public)
    assert attrs.astuple(trusted, recurse=False) == attrs.astuple(public, recurse=False) == values


def test_public_constructor_still_validates() -> None:
    with pytest.raises(ValueError, match="'kind' must be in"):
        Event(0, "tool")
    with pytest.raises(ValueError, match="'status' must be in"):
        Event(0, "call", tool="x", status="fine")
    with pytest.raises(ValueError, match="event at position 0 has index 1"):
        Episode("e", [Event(1, "user", text="hi")])


def test_every_shared_trajectory(shared_data: Path) -> None:
    """Every episode of ../shared/data (tau2, tau-bench v1, SWE-agent: 464 episodes) and of the
    shipped examples, as the readers built it, against the public constructors."""
    episodes = list(read_report([shared_data, EXAMPLES]).episodes)
    assert len(episodes) >= 464
    assert sum(len(e.events) for e in episodes) >= 9000
    for episode in episodes:
        _assert_same(episode, _public(episode))
        _own_dicts(episode)


def test_messages_in_memory_are_copied() -> None:
    """`episode_from_messages` builds through the trusted path too: the caller's dicts stay the
    caller's (changing them afterwards changes no event)."""
    arguments = {"reservation_id": "ABC123", "when": {"day": 1}}
    messages = [
        {"role": "user", "content": "cancel ABC123"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "cancel", "arguments": arguments}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: not allowed"},
    ]
    episode = episode_from_messages(messages)
    _assert_same(episode, _public(episode))
    _own_dicts(episode)
    arguments["reservation_id"] = "CHANGED"
    assert episode.events[1].arguments["reservation_id"] == "ABC123"
    assert episode.events[1].status == "error"


#: JSON values as a parser gives them: every scalar (floats with exponents, NaN, non-ASCII text
#: and control characters), nested lists and objects.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_canonical_json_is_json_dumps(value: object) -> None:
    """`canonical_json` (one C encoder made once, what `Event.argument_key` and the scorer's
    bindings use) writes the text ``json.dumps`` with those options writes."""
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not isinstance(value, str):
        assert normalise_value(value) == canonical_json(value)


def test_canonical_json_errors_as_json_dumps() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular reference detected"):
        canonical_json(cyclic)
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_json({"a": object()})
