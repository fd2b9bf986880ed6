"""OpenAI chat transcripts: JSON (one episode, a list of episodes, a bare message list) and JSONL.

An episode record is ``{"messages": [...], "reward"?: float, "id"?: str, "meta"?: {...}}``.
Messages follow the chat-completions shape:

* ``system`` / ``developer``: not events; the first one's text is kept as ``meta["policy"]``;
* ``user``: a ``user`` event;
* ``assistant``: an ``assistant`` event for non-empty ``content``, then one call event per
  ``tool_calls[]`` entry (``{id, type, function: {name, arguments: <JSON text>}}``; the flat
  ``{id, name, arguments}`` form is accepted too) or for a legacy ``function_call``.  A message
  with ``finish_reason == "length"`` was cut off, so its last call is malformed;
* ``tool`` / ``function``: the result of the call with that ``tool_call_id``; without one, of
  the oldest unanswered call of its ``name``, else of the oldest unanswered call.  ``content`` is text, content parts, or an MCP ``tools/call`` result
  ``{"content": [...], "isError": bool}`` (as an object or as its JSON text).

The same message reader serves tau-bench v1 (`tau_bench_v1.py`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from rlvp_dsl.events import ASSISTANT, USER, Episode

from .call_markers import THINK_MARKERS, marked_calls
from .arguments import message_text
from .arguments import tool_result as tool_result  # re-exported: its home until the tau2 reader needed it alone
from .builder import EpisodeBuilder, is_reward
from .error_signals import BAD_ERROR_FLAGS, ErrorSignal
from .errors import ReaderError, each_record, expected_field, expected_got, load_json_text, shown_value

ROLES = ("assistant", "user", "tool", "system", "developer", "function")
#: The meta key of an episode with no events: the record it came from (``line 3``, ``[2]``), for `rlvp-score`'s note.
EMPTY_RECORD = "empty_record"
_CONTENT_TYPES = (str, list, dict, type(None))


def _call_parts(entry: Any) -> tuple[Any, Any, Any, str, str]:
    """(name, arguments, id, problem, the name's field) of one ``tool_calls[]`` entry, tolerating broken ones."""
    if not isinstance(entry, dict):
        return (
            None,
            json.dumps(entry, ensure_ascii=False),
            None,
            f"tool call must be a JSON object, got {shown_value(entry)}",
            "name",
        )
    function = entry.get("function")
    if isinstance(function, dict):
        return function.get("name"), function.get("arguments"), entry.get("id"), "", "function.name"
    return entry.get("name"), entry.get("arguments"), entry.get("id"), "", "name"


def read_messages(
    messages: Any,
    builder: EpisodeBuilder,
    file: str,
    record: str,
    field: str = "messages",
    *,
    call_markers: tuple[str, str] | None = None,
    reasoning_markers: tuple[str, str] | None = THINK_MARKERS,
) -> dict[str, Any]:
    """Feed a chat message list into ``builder``.

    Args:
        messages: the list of message objects.
        builder: the episode being built.
        file, record, field: where the list is, for error messages
            (``[3]`` and ``traj`` give ``[3].traj[5]``).
        call_markers: the chat template's tool-call markers (``("<tool_call>", "</tool_call>")``);
            a marked block left in an assistant's text is a call the trainer could not parse
            (TRL keeps a call whose arguments are not valid JSON as plain text): it becomes a
            malformed call (`rlvp_dsl.readers.messages.marked_calls`).
        reasoning_markers: the markers of the model's thought (``<think>``, ``</think>``): a
            marked block inside a thought is thought text, not a call (None: no thoughts).
            A message's ``reasoning_content`` is never read for calls.

    Returns:
        meta gathered on the way (``policy`` from the first system message).

    Raises:
        ReaderError: ``messages`` is not a list, a message is not an object, has an
            unknown role, or content of a wrong type.
    """
    if not isinstance(messages, list):
        raise ReaderError(file, record, field, expected_got("a list of messages", messages))
    meta: dict[str, Any] = {}
    prefix = f"{record}{_sep(record)}{field}"
    for position, message in enumerate(messages):
        builder.begin_message()
        where = f"{prefix}[{position}]"
        if not isinstance(message, dict):
            raise ReaderError(file, where, detail=expected_got("a message object", message))
        role = message.get("role")
        if role not in ROLES:
            raise ReaderError(file, where, "role", expected_field("one of " + "/".join(ROLES[:4]), message, "role"))
        content = message.get("content")
        if not isinstance(content, _CONTENT_TYPES):
            raise ReaderError(file, where, "content", expected_got("text, a list of content parts or null", content))
        signals = message.get("signals")
        if signals is not None and not isinstance(signals, dict):
            raise ReaderError(file, where, "signals", expected_got("an object of numeric signals", signals))
        if role in ("system", "developer"):
            meta.setdefault("policy", message_text(content))
        elif role == "user":
            builder.message(USER, message_text(content), signals)
        elif role == "assistant":
            _assistant(message, content, builder, file, where, call_markers, reasoning_markers)
        else:
            text, records = tool_result(content)
            records = [message, *records]
            builder.result(
                text, call_id=message.get("tool_call_id"), name=message.get("name"), records=records, signals=signals
            )
            odd = builder.error_signal.odd_flags(*records) if builder.error_signal.flags else ()
            if odd:  # `"error": "yes"`: no flag, and said (docs/readers.md, "When a tool result is an error")
                meta.setdefault(BAD_ERROR_FLAGS, []).extend(f"{where}: {problem}" for problem in odd)
    return meta


def _sep(record: str) -> str:
    """Separator between a record and a sub-record: ``traj[3].messages``, ``line 7: messages``."""
    if not record:
        return ""
    return ": " if record.startswith("line ") else "."


def _assistant(
    message: dict[str, Any],
    content: Any,
    builder: EpisodeBuilder,
    file: str,
    where: str,
    call_markers: tuple[str, str] | None = None,
    reasoning_markers: tuple[str, str] | None = THINK_MARKERS,
) -> None:
    text = message_text(content)
    if call_markers is not None and call_markers[0] in text:
        text, blocks = marked_calls(text, call_markers, reasoning_markers)
        builder.message(ASSISTANT, text)
        for block in blocks:
            builder.call(
                block.tool,
                block.raw,
                problem=block.problem or "the trainer did not run this call (it stayed text in the message)",
            )
    else:
        builder.message(ASSISTANT, text)
    cut = (
        "call cut off by the length limit (finish_reason 'length')" if message.get("finish_reason") == "length" else ""
    )
    calls = message.get("tool_calls")
    if calls is None and isinstance(message.get("function_call"), dict):
        calls = [message["function_call"]]
    if calls is None:
        return
    if not isinstance(calls, list):
        raise ReaderError(file, where, "tool_calls", expected_got("a list of tool calls or null", calls))
    field = "function_call" if message.get("tool_calls") is None else "tool_calls"
    for position, entry in enumerate(calls):
        name, arguments, call_id, problem, name_field = _call_parts(entry)
        # The length limit cuts the message's last call; earlier ones were complete.
        last_cut = cut if position == len(calls) - 1 else ""
        builder.call(
            name,
            arguments,
            call_id=call_id,
            problem="; ".join(p for p in (last_cut, problem) if p),
            where=f"{where}.{field}" + ("" if field == "function_call" else f"[{position}]"),
            name_field=name_field,
        )


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value[:3])


def _episode(record_value: Any, file: str, name: str, record: str, episode_id: str, signal: ErrorSignal) -> Episode:
    """The episode of one record (`record`: ``line 3``, ``[2]`` or ``""`` for the whole file); one
    with no events (``[]``, ``{"messages": []}``) keeps its record in ``meta["empty_record"]``."""
    episode = _read_episode(record_value, file, name, record, episode_id, signal)
    if not episode.events:
        episode = attrs.evolve(episode, meta={**episode.meta, EMPTY_RECORD: record or name})
    return episode


def _read_episode(
    record_value: Any, file: str, name: str, record: str, episode_id: str, signal: ErrorSignal
) -> Episode:
    builder = EpisodeBuilder(signal)
    if isinstance(record_value, list):
        meta = read_messages(record_value, builder, file, record)
        return builder.episode(episode_id, outcome=None, source=file, meta=meta)
    if not isinstance(record_value, dict):
        raise ReaderError(file, record, detail=expected_got('an episode object {"messages": [...]}', record_value))
    if "messages" not in record_value:
        raise ReaderError(file, record, "messages", "missing (expected a list of chat messages)")
    meta = read_messages(record_value["messages"], builder, file, record)
    reward = record_value.get("reward", record_value.get("outcome"))
    if not is_reward(reward):
        raise ReaderError(file, record, "reward", expected_got("a finite number or null", reward))
    extra = record_value.get("meta") or record_value.get("metadata")
    if isinstance(extra, dict):
        meta.update(extra)
    given = record_value.get("id")
    return builder.episode(str(given) if given is not None else episode_id, outcome=reward, source=file, meta=meta)


def read_openai_json(
    data: Any, file: str, name: str, signal: ErrorSignal, *, record_errors: list[ReaderError] | None = None
) -> list[Episode]:
    """Episodes of a parsed OpenAI chat JSON file (one episode, a list of them, or a bare message list);
    with a `record_errors` list, a bad episode of a list is appended to it and the others are still
    read (`each_record`).

    Raises:
        ReaderError: a record is malformed (in a list, without `record_errors`).
    """
    if isinstance(data, dict):
        return [_episode(data, file, name, "", name, signal)]
    if _is_message_list(data):
        return [_episode(data, file, name, "", name, signal)]
    if not isinstance(data, list):
        raise ReaderError(file, detail=expected_got("an episode object or a list", data))
    return each_record(
        data, lambda i, item: _episode(item, file, name, f"[{i}]", f"{name}#[{i}]", signal), record_errors
    )


def read_openai_jsonl(
    text: str,
    file: str,
    name: str,
    signal: ErrorSignal,
    *,
    record_errors: list[ReaderError] | None = None,
    undecodable: bool = False,
) -> list[Episode]:
    """Episodes of an OpenAI chat JSONL file: one episode object (or message list) per non-blank line.

    Ids default to ``<name>:<line>``.  With a `record_errors` list, a bad line is appended to it
    and the other lines are still read (a writer killed mid-line loses one episode, not all:
    `each_record`).  With `undecodable`, `text` was decoded with ``surrogateescape`` (the file is
    not all UTF-8): a line holding such a byte is a bad line, ``file:2:43: not UTF-8 text (byte
    0xe9)``, as an invalid JSON line is.

    Raises:
        ReaderError: (without `record_errors`) a line is not UTF-8, not valid JSON or not a valid
            episode (names the line number).
    """
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]

    def line_episode(_: int, numbered: tuple[int, str]) -> Episode:
        lineno, line = numbered
        if undecodable and _ESCAPED.search(line):
            raise _not_utf8_line(line, file, lineno)
        value = load_json_text(line, file, line_offset=lineno - 1)
        return _episode(value, file, name, f"line {lineno}", f"{name}:{lineno}", signal)

    return each_record(lines, line_episode, record_errors)


#: A byte that is not UTF-8, as ``surrogateescape`` keeps it in text (U+DC80..U+DCFF).
_ESCAPED = re.compile("[\udc80-\udcff]")


def _not_utf8_line(line: str, file: str, lineno: int) -> ReaderError:
    """The error of a JSONL line with bytes that are not UTF-8: ``file:LINE:COL: not UTF-8 text
    (byte 0xe9)``, the column in code points (as `rlvp_dsl.source.undecodable` counts it)."""
    raw = line.encode("utf-8", errors="surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", errors="replace")) + 1
        shown = " ".join(f"0x{b:02x}" for b in raw[exc.start : max(exc.end, exc.start + 1)][:4])
        return ReaderError(f"{file}:{lineno}:{column}", detail=f"not UTF-8 text (byte {shown})")
    return ReaderError(f"{file}:{lineno}", detail="not UTF-8 text")  # (escapes always fail to decode)
