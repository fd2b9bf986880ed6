"""Arguments that are a JSON string of a JSON object (a known tool-parser / chat-template bug upstream)
read as that object in every reader; anything else that is not an object stays malformed."""

from __future__ import annotations

import json

import pytest

from rlvp_dsl import episode_from_messages, loads
from rlvp_dsl.readers import episode_from_text, marked_calls, read_episodes
from rlvp_dsl.readers import parse_arguments

OBJECT = {"reservation_id": "ABC", "seats": [1, 2]}
ONCE = json.dumps(OBJECT)
TWICE = json.dumps(ONCE)  # '"{\"reservation_id\": ...}"'
THRICE = json.dumps(TWICE)
RULES = """
tool get_reservation    : read target reservation_id
tool cancel_reservation : write target reservation_id
violation errored_call (-0.1) { on call error }
obligation act (+0.5, expire -0.5) {
  open on call get_reservation ok
  discharge on call cancel_reservation ok
}
"""


@pytest.mark.parametrize("raw", [OBJECT, ONCE, TWICE])
def test_an_object_encoded_once_or_twice_is_the_object(raw):
    arguments, _, problem = parse_arguments(raw)
    assert (arguments, problem) == (OBJECT, "")


@pytest.mark.parametrize(
    "raw, got",
    [
        (THRICE, "str"),
        (json.dumps("plain text"), "str"),
        (json.dumps("[1, 2]"), "list"),
        (json.dumps("7"), "int"),
        ("[1]", "list"),
        (json.dumps(""), "str"),
    ],
)
def test_what_is_not_an_object_after_two_decodes_stays_malformed(raw, got):
    assert parse_arguments(raw) == ({}, raw, f"arguments must be a JSON object, got JSON {got}")


def test_decoding_is_idempotent():
    """Parsing the parsed object (or its JSON text) again gives the same object."""
    for raw in (ONCE, TWICE):
        first = parse_arguments(raw)[0]
        assert parse_arguments(first)[0] == first
        assert parse_arguments(json.dumps(first))[0] == first


def _messages(arguments):
    return [
        {"role": "user", "content": "please cancel ABC"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "0", "type": "function", "function": {"name": "get_reservation", "arguments": ONCE}}],
        },
        {"role": "tool", "tool_call_id": "0", "content": "ABC: 1 passenger"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "cancel_reservation", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "cancelled"},
    ]


def test_a_successful_call_with_double_encoded_arguments_is_ok_and_discharges(tmp_path):
    """Before: `malformed` (-0.1) and no discharge; now the call is ok with its arguments, in the
    messages reader, the file reader and the marked-text reader alike."""
    program = loads(RULES)
    episode = episode_from_messages(_messages(TWICE))
    call = episode.calls[1]
    assert (call.status, dict(call.arguments)) == ("ok", OBJECT)
    assert sorted((c.rule, c.value, c.trigger) for c in program.score(episode)) == [("act", 0.5, "discharge")]

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"messages": _messages(TWICE)}), encoding="utf-8")
    assert [(c.status, dict(c.arguments)) for c in read_episodes(path)[0].calls] == [("ok", OBJECT)] * 2

    block = '<tool_call>{"name": "cancel_reservation", "arguments": ' + TWICE + "}</tool_call>"  # a string of it
    assert [(b.arguments, b.problem) for b in marked_calls(block)[1]] == [(OBJECT, "")]
    assert dict(episode_from_text(block).calls[0].arguments) == OBJECT


def test_three_times_encoded_is_still_malformed():
    episode = episode_from_messages(_messages(THRICE))
    assert episode.calls[1].status == "malformed"
    assert episode.calls[1].error_text == "arguments must be a JSON object, got JSON str"
    block = '<tool_call>{"name": "cancel_reservation", "arguments": ' + THRICE + "}</tool_call>"  # string of string
    assert marked_calls(block)[1][0].problem == "tool call arguments must be a JSON object, got JSON str"
