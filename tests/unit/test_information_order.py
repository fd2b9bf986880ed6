"""The information order (rlvp_dsl/information_order.py): a message's `seen` updates wait until it is complete."""

from __future__ import annotations

from rlvp_dsl import loads
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.information_order import HeldUpdates, waits_for_its_message


def _call(i, tool, message=None):
    return Event(i, "call", tool=tool, message=message)


def test_only_an_event_of_a_message_waits():
    """An event of a message waits for its siblings; an event of no message is observed at once."""
    assert waits_for_its_message(_call(0, "get", message=3))
    assert not waits_for_its_message(_call(0, "get"))


def test_held_updates_are_released_by_an_event_of_another_message():
    """A sibling keeps the message open; another message, or none, completes it and releases in order."""
    held: HeldUpdates[str] = HeldUpdates()
    held.hold(_call(0, "get", message=1), "a")
    held.hold(_call(1, "put", message=1), "b")
    assert not held.completed_by(_call(2, "get", message=1))
    assert held.completed_by(_call(2, "get", message=2))
    assert held.completed_by(_call(2, "get"))
    assert [d for _, d in held.release()] == ["a", "b"]
    assert held.items == []


def test_a_read_in_the_writes_message_does_not_inspect_it():
    """[get(A), put(A)] in one message is a blind put; get(A) in the message before is not."""
    program = loads("tool get : read target id\ntool put : write target id\nblind_destructive b (-1)\n")
    get, put = ({"id": "A"},) * 2
    together = (
        Event(0, "call", tool="get", arguments=get, message=0),
        Event(1, "call", tool="put", arguments=put, message=0),
    )
    apart = (
        Event(0, "call", tool="get", arguments=get, message=0),
        Event(1, "call", tool="put", arguments=put, message=1),
    )
    assert [(c.event_index, c.rule) for c in program.score(Episode("e", together))] == [(1, "b")]
    assert program.score(Episode("e", apart)) == []
