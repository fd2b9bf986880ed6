"""SWE-agent ``.traj`` files: one episode per file.

Shape (data README section 4)::

    {trajectory: [{action, observation, thought, response, state}],
     history: [{role, content, thought?, action?, message_type, tool_calls?, tool_call_ids?}],
     info: {exit_status, submission, ...}}

* When ``trajectory`` is non-empty its steps are read: ``thought`` (non-empty) becomes an
  ``assistant`` event, ``action`` a call, ``observation`` its result (missing or ``null``:
  ``no_result``).  Otherwise ``history`` is read: assistant messages give their thought and
  their OpenAI-style ``tool_calls`` (function-calling demos) or their ``action``; ``tool``
  messages (``tool_call_ids``) and ``user`` observations answer the pending calls.
* The problem statement (the leading ``user`` message of ``history``) becomes a ``user`` event.
* A command-line action becomes tool = its first word, arguments
  ``{"command": <full action>, "args": <rest of the first line>}`` plus ``path`` -- see
  :func:`command_call`.  Function calls keep their JSON arguments (``str_replace_editor``
  carries ``path`` and ``command``); ``create``'s ``filename`` and the open file of window
  commands are added as ``path``.
* No structured error signal exists: the default :class:`ErrorSignal` looks for markers in
  the observation (``Traceback (most recent call last)``, ``command not found``, ...).
* ``outcome`` is ``None`` (demonstrations are not graded); meta keeps ``exit_status`` and
  ``submission``.
"""

from __future__ import annotations

import shlex
from typing import Any

from rlvp_dsl.events import ASSISTANT, USER, Episode

from .arguments import message_text, parse_arguments, tool_result
from .builder import EpisodeBuilder
from .error_signals import ErrorSignal
from .errors import ReaderError, expected_got

#: Commands that act on the file currently open in SWE-agent's editor window.
WINDOW_COMMANDS = frozenset(
    {"edit", "goto", "scroll_up", "scroll_down", "insert", "append", "set_cursors", "search_file"}
)
#: Commands that open a file (it becomes the current file).
OPENING_COMMANDS = frozenset({"open", "create"})
#: Commands whose first non-option argument is a file.
FIRST_ARG_FILE_COMMANDS = frozenset({"open", "create", "cat", "python", "python3"})
#: Commands whose last argument is a file (binaries in the CTF demos).
LAST_ARG_FILE_COMMANDS = frozenset({"decompile", "disassemble"})


def _tokens(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # unbalanced quotes: a multi-line argument starts here
        return line.split()


def command_call(action: str, open_file: str | None) -> tuple[str | None, dict[str, Any], str | None]:
    """Tool name, arguments and the new open file for one command-line action.

    Args:
        action: the full action text (may span lines, e.g. ``edit 1:3\\n...\\nend_of_edit``).
        open_file: the file opened by the last ``open``/``create``, if any.

    Returns:
        ``(tool, arguments, open_file_after)``; ``tool`` is ``None`` for an empty action.
        ``arguments`` has ``command`` and ``args`` and, when the command names a file or acts
        on the open file, ``path``.
    """
    first_line = action.strip().split("\n", 1)[0]
    head, _, rest = first_line.partition(" ")
    if not head:
        return None, {}, open_file
    arguments: dict[str, Any] = {"command": action, "args": rest.strip()}
    words = _tokens(rest)
    path = None
    if head in FIRST_ARG_FILE_COMMANDS:
        if words and not words[0].startswith("-"):
            path = words[0]
    elif head in LAST_ARG_FILE_COMMANDS:
        if words and not words[-1].startswith("-"):
            path = words[-1]
    elif head == "str_replace_editor":
        if len(words) >= 2:
            path = words[1]
    elif head == "search_file" and len(words) >= 2:
        path = words[1]
    elif head in WINDOW_COMMANDS:
        path = open_file
    if path:
        arguments["path"] = path
    if head in OPENING_COMMANDS and path:
        open_file = path
    return head, arguments, open_file


def _function_call(name: Any, raw: Any, open_file: str | None) -> tuple[dict[str, Any], str | None]:
    """Extra arguments (``path``) for a function call, and the open file after it."""
    arguments, _, problem = parse_arguments(raw)
    if problem or not isinstance(name, str):
        return {}, open_file
    path = arguments.get("path") or arguments.get("filename") or arguments.get("file_name")
    if name in OPENING_COMMANDS and isinstance(path, str):
        return {"path": path}, path
    if name in WINDOW_COMMANDS and open_file and "path" not in arguments:
        return {"path": open_file}, open_file
    return {}, open_file


def read_swe_agent(
    data: Any, file: str, name: str, signal: ErrorSignal, *, record_errors: list[ReaderError] | None = None
) -> list[Episode]:
    """The episode of a parsed ``.traj`` file (a one-element list).  A ``.traj`` holds one record, so
    `record_errors` (the readers' common keyword) is unused: a bad file is the bad record.

    Raises:
        ReaderError: the file is not an object, has neither ``history`` nor ``trajectory``, or a
            step/message has a wrong type.
    """
    if not isinstance(data, dict):
        raise ReaderError(file, detail=expected_got("a SWE-agent trajectory object", data))
    if "history" not in data and "trajectory" not in data:  # else an empty episode, silently
        raise ReaderError(
            file,
            detail="a SWE-agent trajectory has a 'history' or a 'trajectory' list; this "
            f"object has neither (keys: {', '.join(map(repr, list(data)[:8])) or 'none'})",
        )
    history = data.get("history") or []
    if not isinstance(history, list):
        raise ReaderError(file, "", "history", expected_got("a list of messages", history))
    steps = data.get("trajectory") or []
    if not isinstance(steps, list):
        raise ReaderError(file, "", "trajectory", expected_got("a list of steps", steps))
    builder = EpisodeBuilder(signal)
    meta: dict[str, Any] = {"format": "swe_agent"}
    problem = _problem_statement(history, file)
    if steps:
        builder.message(USER, problem)
        _read_steps(steps, file, builder)
    else:
        _read_history(history, file, builder, meta)
    info = data.get("info")
    if not isinstance(info, dict):
        info = {}
    meta.update(exit_status=info.get("exit_status"), submission=info.get("submission"))
    return [builder.episode(name, outcome=None, source=file, meta=meta)]


def _problem_statement(history: list[Any], file: str) -> str:
    for position, message in enumerate(history):
        if not isinstance(message, dict):
            raise ReaderError(file, f"history[{position}]", detail=expected_got("a message object", message))
        if message.get("role") == "user":
            return message_text(message.get("content"))
        if message.get("role") not in ("system", None):
            break
    return ""


def _text_field(record: dict[str, Any], key: str, file: str, where: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise ReaderError(file, where, key, expected_got("text or null", value))
    return value


def _command(builder: EpisodeBuilder, tool: str | None, arguments: dict[str, Any]) -> None:
    if tool is None:
        builder.call(None, None, problem="empty action")
    else:
        builder.call(tool, arguments)


def _read_steps(steps: list[Any], file: str, builder: EpisodeBuilder) -> None:
    open_file = None
    for position, step in enumerate(steps):
        where = f"trajectory[{position}]"
        if not isinstance(step, dict):
            raise ReaderError(file, where, detail=expected_got("a step object", step))
        thought = _text_field(step, "thought", file, where)
        action = _text_field(step, "action", file, where) or ""
        observation = _text_field(step, "observation", file, where)
        state = step.get("state")
        if not isinstance(state, dict):
            state = {}
        builder.begin_message()
        builder.message(ASSISTANT, thought or "")
        tool, arguments, open_file = command_call(action, open_file)
        _command(builder, tool, arguments)
        if observation is not None:
            builder.result(observation)
        if open_file is None and isinstance(state.get("open_file"), str) and state["open_file"] not in ("", "n/a"):
            open_file = state["open_file"]


def _read_history(history: list[Any], file: str, builder: EpisodeBuilder, meta: dict[str, Any]) -> None:
    open_file = None
    for position, message in enumerate(history):
        where = f"history[{position}]"
        if not isinstance(message, dict):
            raise ReaderError(file, where, detail=expected_got("a message object", message))
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ReaderError(file, where, "role", expected_got("one of assistant/user/tool/system", role))
        content = message.get("content")
        builder.begin_message()
        if role == "system":
            meta.setdefault("policy", message_text(content))
        elif role == "assistant":
            thought = _text_field(message, "thought", file, where)
            builder.message(ASSISTANT, thought if thought is not None else message_text(content))
            calls = message.get("tool_calls")
            if isinstance(calls, list) and calls:
                for number, entry in enumerate(calls):
                    function = entry.get("function") if isinstance(entry, dict) else None
                    if not isinstance(function, dict):
                        builder.call(None, None, problem="tool call has no 'function' object")
                        continue
                    extra, open_file = _function_call(function.get("name"), function.get("arguments"), open_file)
                    builder.call(
                        function.get("name"),
                        function.get("arguments"),
                        call_id=entry.get("id"),
                        extra_arguments=extra,
                        where=f"{where}.tool_calls[{number}]",
                        name_field="function.name",
                    )
            elif isinstance(message.get("action"), str):
                tool, arguments, open_file = command_call(message["action"], open_file)
                _command(builder, tool, arguments)
        elif role == "tool" or builder.has_pending():
            ids = message.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and ids else message.get("tool_call_id")
            text, records = tool_result(content)
            builder.result(text, call_id=call_id, records=[message, *records])
        else:
            builder.message(USER, message_text(content))
