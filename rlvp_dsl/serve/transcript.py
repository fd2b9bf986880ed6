"""A chat-templated text read back into an episode: what OpenRLHF sends as a ``query``.

OpenRLHF decodes the prompt and the response tokens with their special tokens kept
(``skip_special_tokens=False``), so the text carries the chat template's turn markers:

* ``chatml`` (Qwen 2.5 / Qwen3, Hermes, SmolLM2): ``<|im_start|>ROLE\\n ... <|im_end|>``; a tool
  result is a ``tool`` turn, or (Qwen's templates) a ``user`` turn made of
  ``<tool_response> ... </tool_response>`` blocks, one per result;
* ``llama3``: ``<|start_header_id|>ROLE<|end_header_id|>\\n\\n ... <|eot_id|>`` (or ``<|eom_id|>``);
  a result is an ``ipython`` or ``tool`` turn;
* ``none``: no turn markers: the whole text is one assistant completion.

``auto`` (the default) picks by the markers present.  In assistant turns, tool calls are the
blocks between the call markers (Hermes ``<tool_call> ... </tool_call>``, JSON or Qwen3-XML:
`rlvp_dsl.readers.call_markers.marked_calls`); a block that does not parse is a malformed call; a
block inside the model's reasoning (``<think> ... </think>``) is thought, not a call.  Results
answer the oldest unanswered call, in order (templates carry no call ids).  System turns are not
events (the first one is kept as ``meta["policy"]``, as the chat reader does).

The prompt.  When the text starts with the prompt (OpenRLHF's ``prompts[i]``), the events of the
turns that end inside it are the prompt's: `Transcript.first_event` is the completion's first
event, and the credit of earlier events is not the completion's (`rlvp_dsl.attach.completion_credits`).
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from rlvp_dsl.events import ASSISTANT, USER, Episode
from rlvp_dsl.readers import HERMES_MARKERS, THINK_MARKERS, EpisodeBuilder, error_signal as resolve_signal, marked_calls
from rlvp_dsl.readers.openai_chat import tool_result

#: The template names a request may give (``?template=``).
TEMPLATE_NAMES = ("auto", "chatml", "llama3", "none")

#: Special tokens that end a decoded sequence (end of text, padding) and are no part of any turn.
_TRAILERS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<|eot_id|>", "<|im_end|>", "<|eom_id|>", "<pad>")

_TOOL_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|\Z)", re.S)


@attrs.frozen
class Template:
    """A chat template's turn markers: `opener` matches a turn's header (group ``role``), `closers`
    end a turn."""

    name: str
    opener: re.Pattern[str]
    closers: tuple[str, ...]


TEMPLATES = {
    "chatml": Template("chatml", re.compile(r"<\|im_start\|>(?P<role>[A-Za-z_]+)[ \t]*\n?"), ("<|im_end|>",)),
    "llama3": Template(
        "llama3",
        re.compile(r"<\|start_header_id\|>(?P<role>[A-Za-z_]+)<\|end_header_id\|>\n{0,2}"),
        ("<|eot_id|>", "<|eom_id|>"),
    ),
}


@attrs.frozen
class Turn:
    """One turn: its `role`, its text, and where the text ends in the whole (a character offset)."""

    role: str
    text: str
    end: int


@attrs.frozen
class Transcript:
    """A templated text read back: the `episode`, the `first_event` of the completion (0 without a
    prompt), the `template` used, and whether the prompt given was the text's start (`prompt_matched`)."""

    episode: Episode
    first_event: int
    template: str
    prompt_matched: bool


def detect_template(text: str) -> str:
    """``chatml``, ``llama3`` or ``none``: the template whose turn markers `text` holds."""
    if "<|im_start|>" in text:
        return "chatml"
    if "<|start_header_id|>" in text:
        return "llama3"
    return "none"


def _strip_trailers(text: str) -> str:
    text = text.rstrip()
    changed = True
    while changed:
        changed = False
        for trailer in _TRAILERS:
            if text.endswith(trailer):
                text = text[: -len(trailer)].rstrip()
                changed = True
    return text


def split_turns(text: str, template: Template) -> list[Turn]:
    """The turns of `text`, in order; text before the first header (a BOS token) is no turn, and a
    last turn never closed (the generation stopped) runs to the end."""
    turns = []
    headers = list(template.opener.finditer(text))
    for k, header in enumerate(headers):
        start = header.end()
        stop = headers[k + 1].start() if k + 1 < len(headers) else len(text)
        body = text[start:stop]
        ends = [body.find(closer) for closer in template.closers]
        cut = min((e for e in ends if e >= 0), default=-1)
        if cut >= 0:
            body = body[:cut]
        turns.append(Turn(header.group("role").lower(), _strip_trailers(body), start + len(body)))
    return turns


def _add_turn(builder: EpisodeBuilder, turn: Turn, meta: dict[str, Any]) -> None:
    builder.begin_message()
    if turn.role in ("system", "developer"):
        meta.setdefault("policy", turn.text)
    elif turn.role == "assistant":
        _assistant(builder, turn.text)
    elif turn.role in ("tool", "ipython", "function"):
        _result(builder, turn.text)
    else:  # user, and any other role a template may use for the person
        responses = list(_TOOL_RESPONSE.finditer(turn.text))
        rest = _TOOL_RESPONSE.sub("", turn.text).strip() if responses else turn.text
        for match in responses:
            _result(builder, match.group(1).strip())
        builder.message(USER, rest)


def _assistant(builder: EpisodeBuilder, text: str) -> None:
    rest, blocks = marked_calls(text, HERMES_MARKERS, THINK_MARKERS)
    builder.message(ASSISTANT, rest)
    for block in blocks:
        builder.call(
            block.tool, dict(block.arguments) if block.arguments is not None else block.raw, problem=block.problem
        )


def _result(builder: EpisodeBuilder, text: str) -> None:
    result_text, records = tool_result(text)
    builder.result(result_text, records=records)


def read_transcript(
    text: str,
    *,
    prompt: str | None = None,
    template: str = "auto",
    error_signal: str | None = None,
    id: str = "query",
) -> Transcript:
    """Read a templated text (the module docstring says how).

    Args:
        text: the decoded prompt and completion.
        prompt: the prompt's text; when `text` starts with it, the events it holds are the prompt's.
        template: one of `TEMPLATE_NAMES`.
        error_signal: how a result is an error: a name of `rlvp_dsl.readers.ERROR_SIGNALS`
            (default ``openai``: an ``Error`` prefix, an ``error``/``isError`` flag).
        id: the episode id.

    Raises:
        ValueError: an unknown template or error-signal name.
    """
    if template not in TEMPLATE_NAMES:
        raise ValueError(f"template must be one of {', '.join(TEMPLATE_NAMES)} (got {template!r})")
    builder = EpisodeBuilder(resolve_signal(error_signal))
    used = detect_template(text) if template == "auto" else template
    matched = prompt is not None and text.startswith(prompt)
    prompt_end = len(prompt) if prompt is not None and matched else 0
    meta: dict[str, Any] = {}
    first_event = 0
    if used == "none":
        if prompt_end and prompt is not None and prompt.strip():
            builder.begin_message()
            builder.message(USER, prompt)
            first_event = len(builder.events())
        builder.begin_message()
        _assistant(builder, _strip_trailers(text[prompt_end:]))
    else:
        counted = False
        for turn in split_turns(text, TEMPLATES[used]):
            if prompt_end and not counted and turn.end > prompt_end:
                first_event, counted = len(builder.events()), True
            _add_turn(builder, turn, meta)
        if prompt_end and not counted:
            first_event = len(builder.events())
    episode = builder.episode(id, outcome=None, source="", meta=meta)
    return Transcript(episode, first_event, used, matched)
