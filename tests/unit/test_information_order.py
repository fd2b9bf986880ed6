"""The information order (rlvp_dsl/information_order.py): a message's `seen` updates wait until it is complete."""

from __future__ import annotations

from rlvp_dsl import loads
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.information_order import HeldUpdates


def _call(i, tool, message=None):
    return Event(i, "call", tool=tool, message=message)


def test_held_updates_are_released_in_order():
    """Held updates keep their message's id and come back in event order, leaving nothing held."""
    held: HeldUpdates[str] = HeldUpdates()
    held.hold(_call(0, "get", message=1), "a")
    held.hold(_call(1, "put", message=1), "b")
    assert held.message == 1
    assert [d for _, d in held.release()] == ["a", "b"]
    assert held.items == []


def test_a_message_of_its_own_is_observed_by_the_next_event():
    """An event of no message is seen by the next event; a sibling in the same message is not."""
    program = loads("tool get : read target id\ntool put : write target id\nrepeat_error r (-1)\n")
    failed = {"tool": "get", "arguments": {"id": "A"}, "status": "error"}
    alone = (Event(0, "call", **failed), Event(1, "call", **failed))
    together = (Event(0, "call", message=0, **failed), Event(1, "call", message=0, **failed))
    assert [c.event_index for c in program.score(Episode("e", alone))] == [1]
    assert program.score(Episode("e", together)) == []


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
