"""Episodes from chat messages in memory: what TRL, verl and OpenAI-style loops hold.

    from rlvp_dsl import episode_from_messages
    episode = episode_from_messages(messages, error_signal="trl")

`messages` is an OpenAI-style list: ``user`` / ``system`` / ``assistant`` / ``tool``
messages; an assistant message may carry ``tool_calls`` (``{"function": {"name",
"arguments"}}`` or flat ``{"name", "arguments"}``, arguments a dict or JSON text); a
``tool`` message answers the call with its ``tool_call_id``, or else (TRL's messages carry
no ids) the oldest unanswered call of its ``name``, or else the oldest unanswered call.  No file is written.

Calls left as text.  With ``call_markers`` (the chat template's tool-call markers,
``("<tool_call>", "</tool_call>")`` for Qwen/Hermes templates), a marked block inside an
assistant's text is a call the trainer did not execute -- TRL keeps a message whose call
arguments are not valid JSON as plain text, but the model did emit the call's tokens.
Each such block becomes a ``malformed`` call (scored as failed, never a discharge).
`marked_calls` parses plain text the same way, for completions that are text.  A block the
model only wrote inside its reasoning (``<think>...</think>``) is never a call.

Results without ids.  A ``tool`` message without ``tool_call_id`` answers the oldest
unanswered call of its ``name`` (TRL 1.16 appends sync tools' results before async ones'),
else the oldest unanswered call; see docs/readers.md for the ambiguous case.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from rlvp_dsl.events import ASSISTANT, CALL, Episode
from rlvp_dsl.tools import ToolSpec

from .builder import EpisodeBuilder, is_reward
from .error_signals import ErrorSignal, error_signal as resolve_signal
from .call_markers import HERMES_MARKERS, THINK_MARKERS, checked_markers, marked_calls
from .openai_chat import read_messages


def _tool_table(tools: Any) -> Mapping[str, ToolSpec]:
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        return dict(tools)
    if hasattr(tools, "tools"):  # a Manifest or a Program
        return _tool_table(tools.tools)
    listed = list(tools) if hasattr(tools, "__iter__") and not isinstance(tools, (str, bytes)) else None
    if listed is None or not all(isinstance(t, ToolSpec) for t in listed):
        raise TypeError(
            f"tools must be a mapping or list of ToolSpec, a Manifest or a Program (got {type(tools).__name__})"
        )
    return {t.name: t for t in listed}


def _with_tags(episode: Episode, tools: Any) -> Episode:
    table = _tool_table(tools)
    if not table:
        return episode
    events = tuple(
        attrs.evolve(e, tags=e.tags | table[e.tool].tags)
        if e.kind == CALL and e.tool is not None and e.tool in table
        else e
        for e in episode.events
    )
    return attrs.evolve(episode, events=events)


def episode_from_messages(
    messages: list[Mapping[str, Any]],
    *,
    tools: Mapping[str, ToolSpec] | Iterable[ToolSpec] | None = None,
    error_signal: ErrorSignal | str | None = None,
    call_markers: tuple[str, str] | None = None,
    reasoning_markers: tuple[str, str] | None = THINK_MARKERS,
    outcome: float | None = None,
    id: str = "episode",
) -> Episode:
    """An `Episode` from chat messages (see the module docstring).

    Args:
        messages: OpenAI-style message dicts, in order (a prompt's messages and a
            completion's may simply be concatenated).
        tools: tools whose tags the call events carry (a mapping or list of `ToolSpec`,
            a `Manifest`, or a `Program`); the program's own tool table applies anyway.
        error_signal: how a tool message is recognised as an error: an `ErrorSignal` or
            a name of `rlvp_dsl.readers.ERROR_SIGNALS` (``trl``, ``verl``, ``mcp``,
            ``openai``, ``tau2``, ``tau_bench_v1``, ``swe_agent``); default ``openai``.
        call_markers: the tool-call markers of the chat template; blocks left in
            assistant text become malformed calls.
        reasoning_markers: the markers of the model's thought: a block inside a thought
            (``<think>...</think>``, or everything after a ``<think>`` never closed) is thought
            text, not a call (`rlvp_dsl.readers.call_markers.reasoning_spans`); None: no thoughts.
        outcome: the outcome reward, if known.
        id: the episode id.

    Raises:
        ReaderError: a message that is not an object, an unknown role, content of a wrong
            type (naming ``messages[i]`` and the field).
        ValueError: an unknown error-signal name; markers that are not two different non-empty
            strings; an outcome that is not a finite number.
        TypeError: `tools` of a wrong type.
    """
    if call_markers is not None:
        call_markers = checked_markers(call_markers)
    if reasoning_markers is not None:
        reasoning_markers = checked_markers(reasoning_markers, field="'reasoning_markers'")
    if outcome is not None and not is_reward(outcome):
        raise ValueError(f"outcome must be a finite number or None (got {outcome!r})")
    builder = EpisodeBuilder(resolve_signal(error_signal))
    meta = read_messages(
        messages, builder, "<messages>", "", call_markers=call_markers, reasoning_markers=reasoning_markers
    )
    return _with_tags(builder.episode(id, outcome=outcome, source="", meta=meta), tools)


def episode_from_text(
    text: str,
    *,
    call_markers: tuple[str, str] = HERMES_MARKERS,
    reasoning_markers: tuple[str, str] | None = THINK_MARKERS,
    tools: Mapping[str, ToolSpec] | Iterable[ToolSpec] | None = None,
    id: str = "episode",
) -> Episode:
    """An `Episode` from a completion that is plain text: the text outside marked blocks is
    one assistant turn; each block is a call (``no_result``: text carries no tool output),
    or a malformed call when it does not parse.  A block inside the model's reasoning
    (`reasoning_markers`, as in `episode_from_messages`) is thought text, never a call."""
    builder = EpisodeBuilder(resolve_signal(None))
    rest, blocks = marked_calls(text, call_markers, reasoning_markers)
    builder.message(ASSISTANT, rest)
    for block in blocks:
        builder.call(
            block.tool, dict(block.arguments) if block.arguments is not None else block.raw, problem=block.problem
        )
    return _with_tags(builder.episode(id, outcome=None, source="", meta={}), tools)
