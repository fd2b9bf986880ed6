"""Tool calls written as marked text: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Chat templates mark each tool call with marker strings (Qwen 2.5 / Hermes:
``<tool_call>`` and ``</tool_call>``).  `marked_calls` splits a text into the text
outside the blocks and the blocks, each parsed as a call or given the reason it is not
one (broken JSON, no name, cut off before the closing marker).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

import attrs

#: The tool-call markers of the Qwen 2.5 / Hermes chat templates (also TRL's and verl's default parser).
HERMES_MARKERS = ("<tool_call>", "</tool_call>")

_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')


@attrs.frozen
class MarkedCall:
    """One ``<tool_call>...</tool_call>`` block of text.

    Attributes:
        tool: the tool name, when the block names one (even in broken JSON), else None.
        raw: the block's inner text.
        arguments: the parsed arguments when the block is a valid call, else None.
        problem: why the block is not a valid call (``""`` when it is).
    """

    tool: str | None
    raw: str
    arguments: Mapping[str, Any] | None
    problem: str


def marked_calls(text: str, markers: tuple[str, str] = HERMES_MARKERS) -> tuple[str, list[MarkedCall]]:
    """Split `text` into its text outside marked blocks and the blocks, in order.

    A block opened but never closed (generation cut off) runs to the end of the text.
    A block is a valid call when its inner text is a JSON object with a string ``name``
    and an object ``arguments`` (or ``parameters``); linear in the text's length.

    Raises:
        ValueError: an empty marker.
    """
    opener, closer = markers
    if not opener or not closer:  # an empty marker is found everywhere: the scan would never advance
        raise ValueError(f"the call markers must be non-empty strings (got {markers!r})")
    outside: list[str] = []
    blocks: list[MarkedCall] = []
    pos = 0
    while True:
        start = text.find(opener, pos)
        if start < 0:
            outside.append(text[pos:])
            break
        outside.append(text[pos:start])
        inner_start = start + len(opener)
        end = text.find(closer, inner_start)
        inner = text[inner_start:] if end < 0 else text[inner_start:end]
        blocks.append(_parse_block(inner.strip(), closed=end >= 0))
        if end < 0:
            break
        pos = end + len(closer)
    return "".join(outside).strip(), blocks


def _parse_block(inner: str, closed: bool) -> MarkedCall:
    named = _NAME.search(inner)
    name = named.group(1) if named else None
    if not closed:
        return MarkedCall(name, inner, None, "tool call cut off before its closing marker")
    try:
        value = json.loads(inner)
    except json.JSONDecodeError as exc:
        return MarkedCall(name, inner, None, f"tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return MarkedCall(name, inner, None, "tool call must be a JSON object with a string 'name'")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return MarkedCall(value["name"], inner, None, "tool call arguments are not valid JSON")
    if not isinstance(arguments, dict):
        return MarkedCall(value["name"], inner, None, "tool call 'arguments' must be a JSON object")
    return MarkedCall(value["name"], inner, arguments, "")
