"""The depth guard of the readers: a call whose arguments nest deeper than `MAX_DEPTH` becomes a
malformed call (the scorer and the reports recurse once per level), its episode otherwise kept --
the bad value stays on its call (docs/readers.md, "Limits")."""

from __future__ import annotations

import attrs

from rlvp_dsl.events import CALL, MALFORMED, Episode, Event

from .json_text import MAX_DEPTH, nested_too_deep


def depth_guarded(episodes: list[Episode], file: str, checked: set[int] | None = None) -> list[Episode]:
    """`episodes`, where a call whose arguments nest deeper than `MAX_DEPTH` (the scorer and the
    reports recurse once per level) becomes a malformed call, as arguments that are not a JSON
    object are: the bad value stays on its call, the rest of the file is read.  An episode whose
    ``id()`` is in `checked` is one its reader found no deeper (the tau2 fast path): kept as is."""
    if checked and len(checked) == len(episodes):
        return episodes  # the reader checked every one
    out = []
    for episode in episodes:
        if checked and id(episode) in checked:
            out.append(episode)
            continue
        events: list[Event] | None = None  # a copy, made at the first call to change
        for k, event in enumerate(episode.events):
            args = event.arguments
            if not args or event.kind != CALL:
                continue
            for value in args.values():
                if isinstance(value, (dict, list)):
                    break
            else:
                continue  # flat arguments (most calls): nothing can nest too deep
            where = nested_too_deep(args, MAX_DEPTH - 1)  # the arguments sit one level inside their call
            if where is not None:
                if events is None:
                    events = list(episode.events)
                events[k] = attrs.evolve(
                    event,
                    status=MALFORMED,
                    arguments={},
                    error_text=(f"arguments must be a JSON object at most {MAX_DEPTH} levels deep (deeper at {where})"),
                )
        out.append(episode if events is None else attrs.evolve(episode, events=events))
    return out
