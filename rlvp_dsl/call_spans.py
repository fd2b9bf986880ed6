"""Call spans in generated token ids, and their alignment with an episode's calls.

A trainer that did not build the rollout itself (TRL, verl) knows the completion's
token ids and which of them the model generated (the completion mask times the tool
mask), not where each call's tokens are.  The chat template marks every call with
marker tokens (``<tool_call>`` ... ``</tool_call>`` in Qwen/Hermes templates):

* `find_call_spans` finds each marked span among the generated tokens:
  ``[start of the opening marker, end of the closing marker)``; a call cut off before
  its closing marker runs to the end of its generated run;
* `align_call_spans` pairs the spans with the episode's calls, in order.  When they
  disagree -- a span whose call is not in the episode (a trainer dropped a block it
  could not parse), or a call with no span (its tokens were not generated here) -- the
  unmatched span becomes a **malformed call** inserted into the episode where its
  tokens were (scored as failed, never a discharge), and the call without a span keeps
  its credit unattached.  Nothing here raises for a disagreement: training goes on.

Token ids are plain lists of ints (no torch); a trainer converts its tensors with
``.tolist()``.
"""

from __future__ import annotations

from typing import Sequence

import attrs

from .events import CALL, MALFORMED, Episode, Event

#: A half-open ``(start, end)`` range of token positions in a completion.
TokenSpan = tuple[int, int]


def find_call_spans(
    ids: Sequence[int],
    open_ids: Sequence[int],
    close_ids: Sequence[int],
    mask: Sequence[int] | None = None,
    *,
    reasoning: tuple[Sequence[int], Sequence[int]] | None = None,
) -> list[TokenSpan]:
    """The token spans of the marked calls among the generated tokens of one completion.

    Args:
        ids: the completion's token ids, ``[T]``.
        open_ids, close_ids: the token ids of the opening and closing markers (one token
            each in Qwen templates; a longer sequence is matched whole).
        mask: ``[T]``, 1 where the model generated the token (completion mask times tool
            mask); markers inside tool output or padding (mask 0) are not calls.  None:
            every token is generated.
        reasoning: the token ids of the reasoning markers (``<think>``, ``</think>``), or
            None.  A marked block inside the model's thought is not a call: the thought's
            tokens are found per generated run (one model turn) as
            `rlvp_dsl.readers.call_markers.reasoning_spans` finds them in text -- opener
            through closer; an unclosed opener to the end of its run; a closer before any
            opener (the thought opened in the prompt) from the run's start.

    Returns:
        ``[(start, end), ...]`` in order, end exclusive.  Linear in ``T`` (markers are short).

    Raises:
        ValueError: an empty marker, or a mask of another length.
    """
    if not open_ids or not close_ids or (reasoning is not None and not all(reasoning)):
        raise ValueError("the call markers must be non-empty token sequences")
    n = len(ids)
    if mask is not None and len(mask) != n:
        raise ValueError(f"mask has {len(mask)} entries for {n} token ids")
    generated = [True] * n if mask is None else [bool(m) for m in mask]
    ids = list(ids)
    if reasoning is not None:
        for start, end in thought_spans(ids, generated, *reasoning):
            generated[start:end] = [False] * (end - start)  # a thought's markers are no calls
    opener, closer = list(open_ids), list(close_ids)

    def at(t: int, marker: list[int]) -> bool:
        return _at(ids, generated, t, marker)

    spans: list[TokenSpan] = []
    first = opener[0]
    t = 0
    while t < n:
        try:
            t = ids.index(first, t)  # jump to the next candidate opener (C speed)
        except ValueError:
            break
        if not at(t, opener):
            t += 1
            continue
        start, t = t, t + len(opener)
        while t < n and generated[t] and not at(t, opener):
            if at(t, closer):
                t += len(closer)
                break
            t += 1
        spans.append((start, t))
    return spans


def _at(ids: list[int], generated: list[bool], t: int, marker: Sequence[int]) -> bool:
    """`marker` starts at token t, every token of it generated."""
    k = len(marker)
    return t + k <= len(ids) and all(generated[t + j] and ids[t + j] == marker[j] for j in range(k))


def thought_spans(
    ids: Sequence[int], generated: Sequence[bool], open_ids: Sequence[int], close_ids: Sequence[int]
) -> list[TokenSpan]:
    """The token spans of the model's reasoning, ``[(start, end), ...]``, per generated run
    (see `find_call_spans`'s ``reasoning``).  Linear in ``len(ids)``."""
    ids, generated = list(ids), list(generated)
    n = len(ids)
    spans: list[TokenSpan] = []
    if open_ids[0] not in ids and close_ids[0] not in ids:
        return spans
    t = 0
    while t < n:
        if not generated[t]:
            t += 1
            continue
        run_end = t
        while run_end < n and generated[run_end]:
            run_end += 1
        spans.extend(_run_thoughts(ids, generated, t, run_end, list(open_ids), list(close_ids)))
        t = run_end
    return spans


def _run_thoughts(
    ids: list[int], generated: list[bool], start: int, end: int, opener: list[int], closer: list[int]
) -> list[TokenSpan]:
    """The thoughts of one generated run ``ids[start:end]``."""
    spans: list[TokenSpan] = []
    t, inside, began = start, False, start
    seen_marker = False  # a closer before any marker closes a thought the prompt opened
    while t < end:
        if not inside and _at(ids, generated, t, opener):
            inside, began, seen_marker = True, t, True
            t += len(opener)
        elif (inside or not seen_marker) and _at(ids, generated, t, closer):
            t += len(closer)
            spans.append((began, t))
            inside, seen_marker = False, True
        else:
            t += 1
    if inside:
        spans.append((began, end))
    return spans


@attrs.frozen
class CallAlignment:
    """An episode whose calls are paired one to one with token spans.

    Attributes:
        episode: the episode, with a malformed call inserted for each unmatched span.
        spans: one span per call of `episode`, in order; ``(0, 0)`` for a call with no
            tokens here (its credit stays unattached).
        inserted: how many unmatched spans became malformed calls.
        without_span: how many calls of the input episode had no span.
    """

    episode: Episode
    spans: tuple[TokenSpan, ...]
    inserted: int = 0
    without_span: int = 0


def _compatible(name: str | None, call: Event) -> bool:
    """A span naming `name` (None: it names no tool) can be `call`'s tokens."""
    if name is None:
        return call.status == MALFORMED
    return name == call.tool


def align_call_spans(
    episode: Episode, spans: Sequence[TokenSpan], span_tools: Sequence[str | None] | None = None, *, first_call: int = 0
) -> CallAlignment:
    """Pair `spans` with the calls of `episode` from call number `first_call` on.

    Args:
        episode: the scored episode (calls before `first_call`, such as calls in a
            prompt's history, get no span).
        spans: the completion's call spans, in order (`find_call_spans`).
        span_tools: the tool each span names (decoded and read by the caller, e.g.
            with `rlvp_dsl.readers.messages.marked_calls`), None where it names none.
            Without it spans pair with calls in order.
        first_call: how many leading calls are not in the completion.

    Returns:
        `CallAlignment`.  As many spans as calls (from `first_call` on): the k-th span is
        the k-th call's, whatever the names say (a lossy decode cannot break it).
        Otherwise, with `span_tools`, a span goes to the next call it is compatible with
        (same tool; a span naming no tool goes to a malformed call); calls skipped on
        the way keep no span; a span that fits no later call is inserted as a malformed
        call just before the next call (or at the end).  Without `span_tools`, spans
        pair in order and the spans left over are inserted at the end.

    Raises:
        ValueError: `span_tools` of another length than `spans`.
    """
    calls = [e for e in episode.events if e.kind == CALL]
    names = list(span_tools) if span_tools is not None else [None] * len(spans)
    if len(names) != len(spans):
        raise ValueError(f"span_tools has {len(names)} entries for {len(spans)} spans")
    if len(spans) == len(calls) - first_call:
        span_tools = None  # counts agree: pair in order
    paired: dict[int, TokenSpan] = {}  # call position -> span
    extra: list[tuple[int, TokenSpan, str | None]] = []  # (insert before call position, span, tool)
    j = first_call
    for span, name in zip(spans, names):
        if span_tools is None:
            match = j if j < len(calls) else None
        else:
            match = next((k for k in range(j, len(calls)) if _compatible(name, calls[k])), None)
        if match is None:
            extra.append((j, span, name))
            continue
        paired[match] = span
        j = match + 1
    without = sum(1 for k in range(first_call, len(calls)) if k not in paired)
    if not extra:
        return CallAlignment(episode, tuple(paired.get(k, (0, 0)) for k in range(len(calls))), 0, without)
    # rebuild the events with the malformed calls inserted before the call they precede
    before: dict[int, list[tuple[TokenSpan, str | None]]] = {}
    for position, span, name in extra:
        before.setdefault(position, []).append((span, name))
    call_index = {id(c): k for k, c in enumerate(calls)}
    events: list[Event] = []
    out_spans: list[TokenSpan] = []

    def insert(position: int) -> None:
        for span, name in before.pop(position, []):
            events.append(
                Event(
                    index=len(events),
                    kind=CALL,
                    tool=name,
                    status=MALFORMED,
                    error_text="a tool call whose tokens the trainer did not read as a call",
                )
            )
            out_spans.append(span)

    for event in episode.events:
        if event.kind == CALL:
            k = call_index[id(event)]
            insert(k)
            out_spans.append(paired.get(k, (0, 0)))
        events.append(attrs.evolve(event, index=len(events)))
    for position in sorted(before):
        insert(position)
    aligned = attrs.evolve(episode, events=tuple(events))
    return CallAlignment(aligned, tuple(out_spans), len(extra), without)
