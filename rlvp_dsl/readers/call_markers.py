"""Tool calls written as marked text: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Chat templates mark each tool call with marker strings (Qwen 2.5 / Hermes:
``<tool_call>`` and ``</tool_call>``).  `marked_calls` splits a text into the text
outside the blocks and the blocks, each parsed as a call or given the reason it is not
one (broken JSON, no name, cut off before the closing marker).

Reasoning is not acting: a block the model only wrote inside its thought
(``<think>...</think>``, `THINK_MARKERS`) is thought text, never a call, whatever form it
has.  Two forms are read: Hermes JSON, and Qwen3's XML
(``<tool_call><function=NAME><parameter=x>value</parameter></function></tool_call>``).  See
`reasoning_spans` for where a thought starts and ends.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

import attrs

from .arguments import ARGUMENT_DECODES, parse_arguments
from .json_text import loads as json_loads

#: The tool-call markers of the Qwen 2.5 / Hermes chat templates (also TRL's and verl's default parser).
HERMES_MARKERS = ("<tool_call>", "</tool_call>")

#: The reasoning markers of Qwen3 / DeepSeek-R1 style templates: the text between them is the model's thought.
THINK_MARKERS = ("<think>", "</think>")


def checked_markers(markers: Any, *, field: str = "'call_markers'") -> tuple[str, str]:
    """`markers` as an ``(opener, closer)`` pair, checked: two different non-empty strings.

    Raises:
        ValueError: not a pair of strings, an empty one (found everywhere: a scan would never
            advance), or the same string twice (no call's end could be told from the next start);
            the message names `field`.
    """
    if (
        not isinstance(markers, (list, tuple))
        or len(markers) != 2
        or not all(isinstance(m, str) and m for m in markers)
    ):
        raise ValueError(
            f"{field} must be two non-empty strings, the chat template's opening and closing "
            f"tool-call markers (got {markers!r}); Qwen/Hermes: {HERMES_MARKERS!r}"
        )
    if markers[0] == markers[1]:
        raise ValueError(
            f"{field} must be two different strings (got {markers[0]!r} twice): with one "
            "marker for both ends no call's end can be told from the next call's start"
        )
    return (markers[0], markers[1])


_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_XML_FUNCTION = re.compile(r"<function=([^\n>]{1,200})>")
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]{1,200})>(.*?)</parameter>", re.S)


def reasoning_spans(text: str, markers: tuple[str, str] | None = THINK_MARKERS) -> list[tuple[int, int]]:
    """The character ranges of `text` that are reasoning, ``[(start, end), ...]`` in order, end exclusive.

    * ``<think> ... </think>``: the opener through the closer;
    * a ``<think>`` never closed (the generation stopped thinking-aloud mid-way or was cut off):
      it runs to the end -- nothing after it is a call;
    * a ``</think>`` before any ``<think>`` (the template opened the thought in the prompt, as
      DeepSeek-R1's and Nemotron's do): the text before it, through it.

    `markers` None: no reasoning.  Linear in the text's length.

    Raises:
        ValueError: `markers` not two different non-empty strings (`checked_markers`).
    """
    if markers is None:
        return []
    opener, closer = checked_markers(markers, field="'reasoning_markers'")
    first_close = text.find(closer)
    if first_close < 0 and opener not in text:
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    first_open = text.find(opener)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        pos = first_close + len(closer)
        spans.append((0, pos))
    while True:
        start = text.find(opener, pos)
        if start < 0:
            return spans
        end = text.find(closer, start + len(opener))
        if end < 0:
            spans.append((start, len(text)))
            return spans
        pos = end + len(closer)
        spans.append((start, pos))


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


def marked_calls(
    text: str, markers: tuple[str, str] = HERMES_MARKERS, reasoning: tuple[str, str] | None = THINK_MARKERS
) -> tuple[str, list[MarkedCall]]:
    """Split `text` into its text outside marked blocks and the blocks, in order.

    A block opened but never closed (generation cut off) runs to the end of the text.
    A block is a valid call when its inner text is a JSON object with a string ``name``
    and an object ``arguments`` (or ``parameters``; arguments decoded as
    `rlvp_dsl.readers.arguments.parse_arguments` does), or a Qwen3-XML ``<function=NAME>``
    element whose ``<parameter=KEY>`` children are its arguments (values as text).  Blocks inside the model's reasoning
    (`reasoning_spans` of `reasoning`; None: none) are not calls: they stay in the outside
    text, as the thought they are.  Linear in the text's length.

    Raises:
        ValueError: markers (call or reasoning) that are not two different non-empty strings
            (`checked_markers`: an empty one would make the scan never advance).
        TypeError: `text` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"the completion text must be a string (got {type(text).__name__})")
    opener, closer = checked_markers(markers)
    if reasoning is not None:
        reasoning = checked_markers(reasoning, field="'reasoning_markers'")
    thoughts = reasoning_spans(text, reasoning) if opener in text else []
    outside: list[str] = []
    blocks: list[MarkedCall] = []
    pos = 0
    while True:
        start = text.find(opener, pos)
        while thoughts and start >= 0 and thoughts[0][0] <= start:
            if start < thoughts[0][1]:  # an opener inside a thought: skip the thought
                start = text.find(opener, thoughts[0][1])
            thoughts.pop(0)
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
    if inner.startswith("<function="):
        return _parse_xml_block(inner, closed)
    named = _NAME.search(inner)
    name = named.group(1) if named else None
    if not closed:
        return MarkedCall(name, inner, None, "tool call cut off before its closing marker")
    try:
        value = json_loads(inner)  # nested too deeply: a JSONDecodeError too, never a RecursionError
    except json.JSONDecodeError as exc:
        return MarkedCall(name, inner, None, f"tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return MarkedCall(name, inner, None, "tool call must be a JSON object with a string 'name'")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, dict):
        return MarkedCall(value["name"], inner, arguments, "")
    # the block's JSON was the first decode: a string value gets one more (`ARGUMENT_DECODES` in all)
    parsed, _, problem = (
        parse_arguments(arguments, decodes=ARGUMENT_DECODES - 1)
        if isinstance(arguments, str)
        else ({}, None, f"arguments must be a JSON object, got JSON {type(arguments).__name__}")
    )
    if problem:
        return MarkedCall(value["name"], inner, None, f"tool call {problem}")
    return MarkedCall(value["name"], inner, parsed, "")


def _parse_xml_block(inner: str, closed: bool) -> MarkedCall:
    """A block in the Qwen3-XML form (Qwen3-Coder, Qwen3.5 templates)::

        <function=NAME>
        <parameter=x>
        value
        </parameter>
        </function>

    Each value is its text, newlines at its edges stripped (the form has no types; a string
    and a number with the same text bind the same target, `rlvp_dsl.events.normalise_value`)."""
    named = _XML_FUNCTION.match(inner)
    name = named.group(1).strip() if named else None
    if not closed:
        return MarkedCall(name, inner, None, "tool call cut off before its closing marker")
    if named is None or not name or not inner.rstrip().endswith("</function>"):
        return MarkedCall(name, inner, None, "tool call must be <function=NAME> ... </function>")
    arguments: dict[str, Any] = {}
    for match in _XML_PARAMETER.finditer(inner, named.end()):
        key = match.group(1).strip()
        if key in arguments:
            return MarkedCall(name, inner, None, f"tool call gives parameter {key!r} twice")
        arguments[key] = match.group(2).strip("\n")
    return MarkedCall(name, inner, arguments, "")
