"""Episodes (and call spans) from what verl holds: a tool agent's turns, or decoded text.

Two sources, one reading of a call -- the one verl's ``hermes`` tool parser applies
(`verl_call`): a ``<tool_call>...</tool_call>`` block whose inner text is a JSON object
with a string ``name`` and an ``arguments`` entry is a call verl runs; any other block
(broken JSON, no ``arguments``, cut off before its closing marker) is one verl drops
without a tool message -- here a **malformed** call (scored as failed, never a
discharge).

* `episode_from_turns` -- the ``rlvp_tool_agent`` loop records each generation (`Turn`:
  its token ids, where they sit in the response, whether verl parsed it, how many of its
  calls ran, their tool messages).  Calls are read from the tokens themselves
  (`rlvp_dsl.call_spans.find_call_spans` on each turn's ids), so every call has its exact span
  by construction, in token order; the tool messages give the results.  A call verl
  parsed but did not run (beyond ``multi_turn.max_parallel_calls``, or in a last turn the
  loop ended before parsing -- length or turn limit) is ``no_result``.
* `episode_from_response_text` -- the ``rlvp`` reward manager sees only the decoded
  response.  Assistant turns are the text between ``<tool_response>`` blocks (the
  Hermes/Qwen template's rendering of tool messages); each turn's calls take the
  following tool responses in order.

Both put the prompt's messages (``raw_prompt``: system, user, earlier turns) first, so
rules see the history (a read in the prompt counts as seen); calls in the prompt have no
span, and `first_event` marks where the response begins: credit on the prompt's events
is not the response's and is dropped when scoring (`scoring.score`), as the TRL
integration does.  Tool texts read as errors by the ``verl`` error signal
(``Unknown function '...'``, ``Invalid JSON in arguments for '...'``, ``Error ...``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import attrs

from rlvp_dsl.events import ASSISTANT, CALL, Episode
from rlvp_dsl.readers import HERMES_MARKERS, marked_calls
from rlvp_dsl.readers import EpisodeBuilder
from rlvp_dsl.readers.error_signals import error_signal as resolve_signal
from rlvp_dsl.readers.openai_chat import read_messages, tool_result
from rlvp_dsl.call_spans import TokenSpan, find_call_spans

RESPONSE_MARKERS = ("<tool_response>", "</tool_response>")
_ROLES = ("system", "user", "assistant", "tool")
NOT_RUN = "verl's hermes parser does not read this block as a call (it was not run)"
CUT_OFF = "tool call cut off before its closing marker"


def verl_call(inner: str) -> tuple[str, Any] | None:
    """``(name, arguments)`` when verl's hermes parser reads the block's inner text as a
    call (a JSON object with a string ``name`` and an ``arguments`` entry), else None."""
    try:
        value = json.loads(inner)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or "arguments" not in value:
        return None
    return value["name"], value["arguments"]


def _name_in(inner: str, markers: tuple[str, str]) -> str | None:
    """The tool a broken block names, if any (for the malformed call's tool)."""
    _, blocks = marked_calls(markers[0] + inner + markers[1], markers, reasoning=None)
    return blocks[0].tool if blocks else None


@attrs.frozen
class Turn:
    """One generation of the tool agent loop.

    Attributes:
        start: offset of its first token in the response (``response_ids``).
        ids: its token ids, as the server returned them.
        parsed: verl looked for calls in it (False when the loop stopped first: the
            response length, ``max_assistant_turns`` or ``max_user_turns``).
        executed: how many of its calls verl ran (``max_parallel_calls`` caps them).
        results: the tool messages answering the calls it ran, in call order.
    """

    start: int
    ids: tuple[int, ...]
    parsed: bool
    executed: int = 0
    results: tuple[Mapping[str, Any], ...] = ()


@attrs.frozen
class TurnsEpisode:
    """An episode read from turns, with one token span per call.

    Attributes:
        episode: the episode (prompt messages first).
        spans: one ``(start, end)`` per call of `episode` into the response (end exclusive,
            clipped to the response length); ``(0, 0)`` for a call with no tokens there.
        malformed: how many blocks verl did not read as calls.
        not_run: how many calls verl read but did not run.
        first_event: index of the first event of the response (the prompt's events come
            before it).
    """

    episode: Episode
    spans: tuple[TokenSpan, ...]
    malformed: int = 0
    not_run: int = 0
    first_event: int = 0


@attrs.frozen
class ResponseEpisode:
    """An episode read from a decoded response.

    Attributes:
        episode: the episode (prompt messages first).
        first_event: index of the first event of the response.
    """

    episode: Episode
    first_event: int = 0


def _prompt(builder: EpisodeBuilder, prompt_messages: Sequence[Mapping[str, Any]] | None) -> tuple[int, int]:
    """Feed the prompt's messages; ``(events, calls)`` they hold."""
    if prompt_messages:
        read_messages([dict(m) for m in prompt_messages], builder, "<raw_prompt>", "")
    events = builder.events()
    return len(events), sum(1 for e in events if e.kind == CALL)


def _strip_markers(text: str, markers: tuple[str, str]) -> tuple[str, bool]:
    """The inner text of a decoded span and whether it was closed."""
    opener, closer = markers
    inner = text[len(opener) :] if text.startswith(opener) else text
    closed = inner.rstrip().endswith(closer)
    if closed:
        inner = inner.rstrip()[: -len(closer)]
    return inner.strip(), closed


def episode_from_turns(
    prompt_messages: Sequence[Mapping[str, Any]] | None,
    turns: Sequence[Turn],
    decode: Callable[[Sequence[int], bool], str],
    marker_ids: tuple[Sequence[int], Sequence[int]],
    *,
    n_tokens: int,
    call_markers: tuple[str, str] = HERMES_MARKERS,
    error_signal: str = "verl",
    id: str = "episode",
) -> TurnsEpisode:
    """The episode a tool agent loop ran, with each call's token span.

    Args:
        prompt_messages: the dataset row's ``raw_prompt``.
        turns: the generations, in order (`Turn`).
        decode: ``decode(ids, skip_special_tokens) -> text`` (the tokenizer's).
        marker_ids: the token ids of the opening and closing call markers.
        n_tokens: the response length after verl's truncation (spans are clipped to it).
        call_markers: the marker strings (for reading a decoded span).
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS`.
        id: the episode id.

    Returns:
        `TurnsEpisode`.  Never raises for what the model wrote.
    """
    builder = EpisodeBuilder(resolve_signal(error_signal))
    n_prompt_events, n_prompt_calls = _prompt(builder, prompt_messages)
    spans: list[TokenSpan] = [(0, 0)] * n_prompt_calls
    malformed = not_run = 0
    for number, turn in enumerate(turns):
        builder.begin_message()  # a generation's text and calls were issued together
        ids = list(turn.ids)
        local = find_call_spans(ids, marker_ids[0], marker_ids[1])
        text, cursor = [], 0
        for s, e in local:
            text.append(decode(ids[cursor:s], True))
            cursor = e
        text.append(decode(ids[cursor:], True))
        builder.message(ASSISTANT, "".join(text).strip())
        answered: list[str] = []
        accepted = 0
        for k, (s, e) in enumerate(local):
            inner, closed = _strip_markers(decode(ids[s:e], False), call_markers)
            call = verl_call(inner) if closed else None
            if call is None:
                builder.call(_name_in(inner, call_markers), inner, problem=NOT_RUN if closed else CUT_OFF)
                malformed += 1
            else:
                call_id = f"rlvp-{number}-{k}"
                builder.call(call[0], call[1], call_id=call_id)
                if turn.parsed and accepted < turn.executed:
                    answered.append(call_id)
                else:
                    not_run += 1
                accepted += 1
            start, end = min(turn.start + s, n_tokens), min(turn.start + e, n_tokens)
            spans.append((start, end) if start < end else (0, 0))
        for call_id, message in zip(answered, turn.results):
            text_, records = tool_result(message.get("content"))
            builder.result(text_, call_id=call_id, records=[message, *records])
    episode = builder.episode(id, outcome=None, source="", meta={})
    return TurnsEpisode(episode, tuple(spans), malformed, not_run, n_prompt_events)


def _strip_role_lines(text: str) -> str:
    """Drop the role names a template leaves at the edges of a turn (``assistant``, ``user``)."""
    lines = text.strip().split("\n")
    while lines and lines[0].strip() in _ROLES:
        lines.pop(0)
    while lines and lines[-1].strip() in _ROLES:
        lines.pop()
    return "\n".join(lines).strip()


def episode_from_response_text(
    text: str,
    *,
    prompt_messages: Sequence[Mapping[str, Any]] | None = None,
    call_markers: tuple[str, str] = HERMES_MARKERS,
    response_markers: tuple[str, str] = RESPONSE_MARKERS,
    error_signal: str = "verl",
    id: str = "episode",
) -> ResponseEpisode:
    """The episode in a decoded response (single-turn text, or a tool agent's turns rendered
    by a Hermes/Qwen template), after the prompt's messages.  Never raises for what the
    model wrote."""
    builder = EpisodeBuilder(resolve_signal(error_signal))
    n_prompt_events, _ = _prompt(builder, prompt_messages)
    opener, closer = response_markers
    pending: list[str] = []  # ids of the current turn's calls still waiting for a result
    pos, number = 0, 0
    while pos <= len(text):
        start = text.find(opener, pos)
        chunk = text[pos:] if start < 0 else text[pos:start]
        # verl's hermes parser runs a block written inside <think> too: read it as verl did
        rest, blocks = marked_calls(chunk, call_markers, reasoning=None)
        said = _strip_role_lines(rest)
        if blocks or said:  # else template glue between tool responses: the same turn goes on
            builder.begin_message()
            builder.message(ASSISTANT, said)
            pending = []
            for k, block in enumerate(blocks):
                call = verl_call(block.raw) if not block.problem.startswith("tool call cut off") else None
                if call is None:
                    builder.call(
                        block.tool,
                        block.raw,
                        problem=CUT_OFF if block.problem.startswith("tool call cut off") else NOT_RUN,
                    )
                    continue
                call_id = f"rlvp-{number}-{k}"
                builder.call(call[0], call[1], call_id=call_id)
                pending.append(call_id)
            number += 1
        if start < 0:
            break
        end = text.find(closer, start + len(opener))
        body = text[start + len(opener) :] if end < 0 else text[start + len(opener) : end]
        if pending:  # a result with no call waiting is dropped (it would answer a wrong call)
            builder.result(body.strip("\n"), call_id=pending.pop(0), records=[])
        if end < 0:
            break
        pos = end + len(closer)
    return ResponseEpisode(builder.episode(id, outcome=None, source="", meta={}), n_prompt_events)
