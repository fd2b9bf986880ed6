"""Episodes from chat messages in memory (TRL, verl, OpenAI), the trainers' error formats,
and calls left as marked text."""

from __future__ import annotations

import pytest

from rlvp_dsl import episode_from_messages, loads
from rlvp_dsl.events import CALL, ERROR, MALFORMED, NO_RESULT, OK
from rlvp_dsl.readers import ERROR_SIGNALS, HERMES_MARKERS, ReaderError, episode_from_text, error_signal, marked_calls
from rlvp_dsl.tools import ToolSpec

TRL_COMPLETION = [  # as TRL 1.x writes a tool-mode completion
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "cancel", "arguments": {"reservation_id": "ABC"}}}],
    },
    {"role": "tool", "name": "cancel", "content": "{'error': 'Tool cancel not found.'}"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "cancel", "arguments": {"reservation_id": "ABC"}}}],
    },
    {"role": "tool", "name": "cancel", "content": "{'error': 'Tool cancel not found.'}"},
    {"role": "assistant", "content": "Sorry."},
]
RULES = """
tool cancel : write, destructive target reservation_id
violation errored_call (-0.1) { on call error }
repeat_error (-0.3)
"""


def _kinds(episode):
    return [(e.kind, e.tool, e.status) for e in episode.events]


def test_trl_errors_are_errors_and_fire_the_rules():
    """TRL's `{'error': ...}` text is an error under the `trl` signal, so errored_call and repeat_error fire."""
    episode = episode_from_messages(TRL_COMPLETION, error_signal="trl")
    assert _kinds(episode) == [(CALL, "cancel", ERROR), (CALL, "cancel", ERROR), ("assistant", None, OK)]
    credits = sorted((c.event_index, c.rule, c.value) for c in loads(RULES).score(episode))
    assert credits == [(0, "errored_call", -0.1), (1, "errored_call", -0.1), (1, "repeat_error", -0.3)]


def test_the_openai_default_reads_trl_errors_as_success():
    """Without the trl signal the same text is a success (the bug the named signal fixes)."""
    assert [e.status for e in episode_from_messages(TRL_COMPLETION).calls] == [OK, OK]


@pytest.mark.parametrize(
    "text",
    [
        "Unknown function 'cancel'. Available tools: ['get']",
        "Invalid JSON in arguments for 'cancel': Expecting value",
        "Error executing tool 'cancel': boom",
    ],
)
def test_verl_tool_agent_errors(text):
    """verl's tool agent error texts are errors under the `verl` signal."""
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cancel", "arguments": '{"reservation_id": "A"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]
    assert episode_from_messages(messages, error_signal="verl").calls[0].status == ERROR


def test_mcp_is_error_flags():
    """MCP results with isError or is_error true are errors under the `mcp` signal."""
    for flag in ("isError", "is_error"):
        messages = [
            {"role": "assistant", "content": "", "tool_calls": [{"name": "get", "arguments": {}}]},
            {"role": "tool", "content": {"content": [{"type": "text", "text": "no"}], flag: True}},
        ]
        assert episode_from_messages(messages, error_signal="mcp").calls[0].status == ERROR


def test_json_string_arguments_ids_and_tags():
    """Arguments as JSON text parse; results pair by tool_call_id; tools add their tags."""
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "function": {"name": "get", "arguments": '{"id": 1}'}},
                {"id": "b", "function": {"name": "put", "arguments": '{"id": 2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "stored"},
        {"role": "tool", "tool_call_id": "a", "content": "found"},
    ]
    episode = episode_from_messages(messages, tools=[ToolSpec("put", {"write"}, "id", ("id",))])
    get, put = episode.calls
    assert (get.arguments, get.result, get.tags) == ({"id": 1}, "found", frozenset())
    assert (put.arguments, put.result, put.tags) == ({"id": 2}, "stored", frozenset({"write"}))


def test_a_call_left_as_text_is_malformed():
    """TRL keeps a call with invalid JSON as text: with the markers it is a malformed call, never a discharge."""
    messages = [
        {"role": "assistant", "content": 'Let me <tool_call>\n{"name": "get", "arguments": {"id": X}}\n</tool_call>'}
    ]
    plain = episode_from_messages(messages)
    assert [e.kind for e in plain.events] == ["assistant"]
    marked = episode_from_messages(messages, call_markers=HERMES_MARKERS)
    assert _kinds(marked) == [("assistant", None, OK), (CALL, "get", MALFORMED)]
    assert marked.events[0].text == "Let me"
    assert "not valid JSON" in marked.calls[0].error_text


def test_marked_calls_in_plain_text():
    """Text completions: valid blocks are calls without results, broken or cut-off ones malformed."""
    rest, blocks = marked_calls(
        'a <tool_call>{"name": "get", "arguments": {"id": 1}}</tool_call> b '
        '<tool_call>{"name": "put", "arguments": "{\\"id\\": 2}"}</tool_call>'
        '<tool_call>{"name": "x"'
    )
    assert rest == "a  b"
    assert [(b.tool, b.arguments, bool(b.problem)) for b in blocks] == [
        ("get", {"id": 1}, False),
        ("put", {"id": 2}, False),
        ("x", None, True),
    ]
    episode = episode_from_text('<tool_call>{"name": "get", "arguments": {"id": 1}}</tool_call>')
    assert _kinds(episode) == [(CALL, "get", NO_RESULT)]


def test_bad_messages_name_the_record_and_field():
    """A malformed message raises ReaderError naming messages[i] and the field; a bad signal name is a ValueError."""
    with pytest.raises(ReaderError, match=r"messages\[1\].*'role'"):
        episode_from_messages([{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}])
    with pytest.raises(ValueError, match="unknown error signal 'trll'.*mcp"):
        error_signal("trll")
    assert error_signal(None) is ERROR_SIGNALS["openai"]


def test_a_result_whose_id_matches_no_call_is_an_orphan():
    """A result naming an unknown id is counted, never handed to another pending call."""
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "get", "arguments": {}}}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "Error: boom"},
        {"role": "tool", "tool_call_id": "a", "content": "found"},
    ]
    episode = episode_from_messages(messages)
    assert [(c.status, c.result) for c in episode.calls] == [(OK, "found")]
    assert episode.meta["orphan_results"] == 1


def test_is_error_is_an_error_by_default():
    """MCP's is_error / isError on a tool message is an error in the default chat signal, whatever the text."""
    for flag in ("isError", "is_error"):
        messages = [
            {"role": "assistant", "content": "", "tool_calls": [{"name": "get", "arguments": {}}]},
            {"role": "tool", "content": "all good", flag: True},
        ]
        assert episode_from_messages(messages).calls[0].status == ERROR


def test_signals_travel_on_messages():
    """A tool message's `signals` reach its call; a user message's set the starting value; a bad one is named."""
    messages = [
        {"role": "user", "content": "go", "signals": {"stages_remaining": 2}},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "fetch", "arguments": {}}]},
        {"role": "tool", "content": "ok", "signals": {"stages_remaining": 1}},
    ]
    episode = episode_from_messages(messages)
    assert episode.events[0].signals == {"stages_remaining": 2}
    assert episode.calls[0].signals == {"stages_remaining": 1}
    credits = loads("progress p (+1) { signal stages_remaining decreasing }").score(episode)
    assert [(c.event_index, c.value) for c in credits] == [(1, 1.0)]
    with pytest.raises(ReaderError, match=r"messages\[2\].*'signals'"):
        episode_from_messages(messages[:2] + [{"role": "tool", "content": "ok", "signals": [1]}])
