"""Decoding what a record says: a call's arguments (`parse_arguments`, the one place every
reader decodes them), a message's content as text (`message_text`) and a tool message's content
as text and the records that may flag an error (`tool_result`)."""

from __future__ import annotations

import json
from typing import Any

from .json_text import loads

#: How many times a call's arguments text is decoded, at most, to reach a JSON object: twice
#: reads arguments that are a JSON string of a JSON object (``"{\\"id\\": 1}"``), which some
#: tool-call parsers and chat templates produce, as that object.
ARGUMENT_DECODES = 2


def parse_arguments(raw: Any, decodes: int = ARGUMENT_DECODES) -> tuple[dict[str, Any], str | None, str]:
    """Parse a call's arguments: the one place every reader decodes them.

    Args:
        raw: a JSON object already parsed (dict), JSON text, ``None`` or ``""``.  Text is
            decoded at most `ARGUMENT_DECODES` times until it is an object: arguments
            encoded twice (a JSON string whose text is the JSON object) read as that object.
            Idempotent: the object it returns parses to itself.
        decodes: how many decodes text gets at most (1 for a value already decoded once: the
            ``arguments`` string inside a marked ``<tool_call>`` block).

    Returns:
        ``(arguments, raw_text, problem)``: ``problem`` is ``""`` when the arguments
        are a JSON object, else why not (then ``arguments`` is ``{}``; a value that is still
        not an object after the decodes -- a number, a list, text three times encoded -- is
        such a problem).
    """
    if raw is None:
        return {}, None, ""
    if isinstance(raw, dict):
        return dict(raw), None, ""
    if not isinstance(raw, str):
        return {}, json.dumps(raw, ensure_ascii=False), f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, raw, ""
    try:
        value = loads(raw)
    except json.JSONDecodeError as exc:
        return {}, raw, f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
    for _ in range(decodes - 1):  # a JSON string: decode its text too
        if not isinstance(value, str):
            break
        try:
            inner = loads(value)
        except json.JSONDecodeError:
            break  # plain text in a JSON string: not an object
        value = inner
    if not isinstance(value, dict):
        return {}, raw, f"arguments must be a JSON object, got JSON {type(value).__name__}"
    return value, raw, ""


def message_text(content: Any) -> str:
    """The text of a message ``content``: a string, ``None``, or a list of content parts.

    Content parts are OpenAI/MCP style ``{"type": "text", "text": ...}``; other parts
    (images, resources) contribute their JSON.  Anything else is rendered as JSON.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, str):
                pieces.append(part)
            else:
                pieces.append(json.dumps(part, ensure_ascii=False, sort_keys=True))
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def tool_result(content: Any) -> tuple[str, list[Any]]:
    """The text of a tool message's content and the records that may carry an error flag.

    An MCP ``tools/call`` result (an object, or JSON text of one, with a ``content``
    list) contributes its text parts and itself as a flag record.
    """
    mcp = None
    if isinstance(content, dict) and isinstance(content.get("content"), list):
        mcp = content
    elif isinstance(content, str) and content.lstrip().startswith("{") and '"isError"' in content:
        try:
            value = loads(content)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("content"), list):
            mcp = value
    if mcp is not None:
        return message_text(mcp["content"]), [mcp]
    return message_text(content), []
