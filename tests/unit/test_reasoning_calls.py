"""A tool call the model only wrote inside its reasoning (<think>...</think>) is thought, not a call:
in every chat reader and in span finding (Hermes JSON and Qwen3-XML forms)."""

from __future__ import annotations

import pytest

from rlvp_dsl import episode_from_messages
from rlvp_dsl.readers import HERMES_MARKERS, episode_from_text, marked_calls, reasoning_spans
from rlvp_dsl.call_spans import find_call_spans

HERMES = '<tool_call>{"name": "delete_file", "arguments": {"path": "a"}}</tool_call>'
XML = "<tool_call>\n<function=delete_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
REAL = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'


@pytest.mark.parametrize("thought", [HERMES, XML], ids=["hermes", "qwen3_xml"])
def test_a_call_inside_a_thought_is_not_a_call(thought):
    text = f"<think>I could call {thought} but I won't.</think>Reading first. {REAL}"
    episode = episode_from_text(text)
    assert [(c.tool, c.status) for c in episode.calls] == [("read_file", "no_result")]
    assert "I could call" in episode.events[0].text  # the thought stays text
    assert [b.tool for b in marked_calls(text)[1]] == ["read_file"]
    assert len(marked_calls(text, reasoning=None)[1]) == 2  # without reasoning markers: the old reading


@pytest.mark.parametrize("thought", [HERMES, XML], ids=["hermes", "qwen3_xml"])
def test_after_an_unclosed_thought_nothing_is_a_call(thought):
    assert episode_from_text(f"{REAL}<think>maybe {thought} then {REAL}").calls[0].tool == "read_file"
    assert len(episode_from_text(f"{REAL}<think>maybe {thought} then {REAL}").calls) == 1


def test_a_closer_before_any_opener_ends_a_thought_the_prompt_opened():
    """DeepSeek-R1 style: the template wrote <think> in the prompt; the completion starts inside it."""
    text = f"let me {HERMES} ... </think>{REAL}"
    assert [c.tool for c in episode_from_text(text).calls] == ["read_file"]
    assert reasoning_spans(text) == [(0, text.index("</think>") + len("</think>"))]
    assert reasoning_spans("no thoughts here") == [] and reasoning_spans("a<think>b", None) == []


def test_messages_never_read_calls_from_a_thought():
    """TRL keeps an unparsed turn as content: a call in its <think> is not a malformed call; a message's
    reasoning_content is never read for calls."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": f"<think>{HERMES}</think>ok, done"},
        {"role": "assistant", "content": "done", "reasoning_content": f"maybe {HERMES}"},
    ]
    episode = episode_from_messages(messages, call_markers=HERMES_MARKERS)
    assert episode.calls == ()
    broken = [{"role": "assistant", "content": '<think>hm</think><tool_call>{"name": "x", broken</tool_call>'}]
    assert [c.status for c in episode_from_messages(broken, call_markers=HERMES_MARKERS).calls] == ["malformed"]


# token ids: 1 <tool_call>, 2 </tool_call>, 3 <think>, 4 </think>, 0 any other token
MARKERS = ([1], [2])
THINK = ([3], [4])


def test_find_call_spans_skips_thoughts_per_generated_run():
    #       0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
    ids = [3, 1, 0, 2, 4, 1, 0, 2, 9, 9, 1, 0, 2, 3, 1, 2]
    mask = [1] * 8 + [0, 0] + [1] * 6  # tool output at 8-9: two generated runs
    assert find_call_spans(ids, *MARKERS, mask) == [(1, 4), (5, 8), (10, 13), (14, 16)]  # no reasoning: old result
    assert find_call_spans(ids, *MARKERS, mask, reasoning=THINK) == [(5, 8), (10, 13)]  # unclosed <think> at 13
    # a closer before any opener (the prompt opened the thought): the run's start up to it is thought
    ids2 = [1, 0, 2, 4, 1, 0, 2]
    assert find_call_spans(ids2, *MARKERS, reasoning=THINK) == [(4, 7)]
    # a later turn's thought does not reach back into an earlier run, nor forward into the next one
    ids3 = [1, 2, 3, 9, 1, 2]
    assert find_call_spans(ids3, *MARKERS, [1, 1, 1, 0, 1, 1], reasoning=THINK) == [(0, 2), (4, 6)]
    with pytest.raises(ValueError, match="non-empty"):
        find_call_spans(ids, *MARKERS, reasoning=([], [4]))


def test_the_qwen3_xml_form_is_a_call_outside_a_thought():
    """Qwen3-Coder / Qwen3.5 write calls as XML; outside a thought such a block is a call with its
    parameters as text arguments, not a malformed call."""
    episode = episode_from_text(f"Deleting. {XML}")
    assert [(c.tool, c.status, dict(c.arguments)) for c in episode.calls] == [
        ("delete_file", "no_result", {"path": "a"})
    ]
    cut = marked_calls("<tool_call>\n<function=delete_file>\n<parameter=path>\na")[1][0]
    assert (cut.tool, cut.problem) == ("delete_file", "tool call cut off before its closing marker")
    unclosed = marked_calls("<tool_call><function=delete_file><parameter=path>a</parameter></tool_call>")[1][0]
    assert unclosed.problem == "tool call must be <function=NAME> ... </function>"
    twice = "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>"
    assert marked_calls(twice)[1][0].problem == "tool call gives parameter 'a' twice"
