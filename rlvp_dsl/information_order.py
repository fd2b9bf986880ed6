"""Information order: what an event had seen when it was issued (docs/language.md, "Information order").

The events of one source message (`Event.message`: an assistant message's text and its calls)
were issued together, before any of their results came back, so none of them has seen the
others: a ``seen`` condition evaluated on one of them never finds a sibling.  The scorer
(`rlvp_dsl.score.Scorer`) therefore decides each event's ``seen`` updates on the state
before the event, as always, but applies the updates of an event that belongs to a message
only once that message is complete: when an event of another message (or of none) arrives.
`HeldUpdates` keeps the decided updates of the current message until then.

The reference interpreter (`rlvp_dsl.reference`) states the same order directly: ``seen``
skips the events of the current event's message (`Event.same_message`).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from .events import Event

#: What the scorer decided for one event's ``seen`` slots (opaque here).
Decided = TypeVar("Decided")


class HeldUpdates(Generic[Decided]):
    """The ``seen`` updates of the message being scored, held until the message is complete.

    The scorer holds the updates of every event that belongs to a message (``event.message``
    not None; an event of no message is observed at once), and releases them when an event
    arrives whose ``message`` differs from the held one -- another message, or none.  It
    tests that inline (``event.message != held.message``), on the hot path of every event.

    Attributes:
        items: ``[(event, decided)]`` in event order, all of one message.
        message: that message's id (`Event.message`, never None while `items` is not empty).
    """

    __slots__ = ("items", "message")

    def __init__(self) -> None:
        self.items: list[tuple[Event, Decided]] = []
        self.message: int | None = None

    def hold(self, event: Event, decided: Decided) -> None:
        """Keep `event`'s decided updates until its message is complete."""
        self.items.append((event, decided))
        self.message = event.message

    def release(self) -> list[tuple[Event, Decided]]:
        """The held updates, in event order, to apply now; nothing is held afterwards."""
        items, self.items = self.items, []
        return items
