"""`rlvp_dsl.serve.transcript`: a chat-templated text read back into the episode it records."""

from __future__ import annotations

import pytest

from .server import REPO  # noqa: F401  (the serve extra is installed: the module imports it)

from rlvp_dsl.serve.transcript import detect_template, read_transcript, split_turns, TEMPLATES

PROMPT = (
    "<|im_start|>system\nYou are a shop assistant.<|im_end|>\n"
    "<|im_start|>user\nRefund order 7.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
COMPLETION = (
    "<think>Check first. <tool_call>\n"
    '{"name": "refund", "arguments": {"order_id": "7"}}\n</tool_call></think>\n'
    '<tool_call>\n{"name": "lookup", "arguments": {"order_id": "7"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "lookup", "arguments": "{\\"order_id\\": \\"8\\"}"}\n</tool_call><|im_end|>\n'
    '<|im_start|>user\n<tool_response>\n{"order_id": "7", "paid": 20}\n</tool_response>\n'
    "<tool_response>\nError: no order 8\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    '<tool_call>\n{"name": "refund", "arguments": {"order_id": "7"\n</tool_call>'
    "Refunded.<|im_end|><|endoftext|>"
)


def _events(transcript):
    return [
        (e.kind, e.tool, dict(e.arguments), e.status, e.text if e.kind != "call" else e.result)
        for e in transcript.episode.events
    ]


def test_chatml_with_a_prompt():
    """Qwen's template: calls in <tool_call> blocks (not the one inside the thought), results in
    <tool_response> blocks of a user turn, in call order; the prompt's user turn is event 0."""
    read = read_transcript(PROMPT + COMPLETION, prompt=PROMPT)
    assert read.template == "chatml" and read.prompt_matched and read.first_event == 1
    assert read.episode.meta["policy"] == "You are a shop assistant."
    events = _events(read)
    assert events[0] == ("user", None, {}, "ok", "Refund order 7.")
    assert events[1][0] == "assistant" and "<think>Check first." in events[1][4]  # the thought is text
    assert events[2] == ("call", "lookup", {"order_id": "7"}, "ok", '{"order_id": "7", "paid": 20}')
    assert events[3] == ("call", "lookup", {"order_id": "8"}, "error", "Error: no order 8")
    assert events[4] == ("assistant", None, {}, "ok", "Refunded.")  # a turn's text, then its calls
    assert events[5][:4] == ("call", "refund", {}, "malformed")
    assert "not valid JSON" in read.episode.events[5].error_text
    assert len(events) == 6


def test_without_the_prompt_everything_is_the_completion():
    read = read_transcript(PROMPT + COMPLETION)
    assert read.first_event == 0 and not read.prompt_matched
    other = read_transcript(PROMPT + COMPLETION, prompt="<|im_start|>system\nSomething else")
    assert other.first_event == 0 and not other.prompt_matched
    assert _events(other) == _events(read)


def test_a_prompt_with_calls_of_its_own():
    """Turns that end inside the prompt are the prompt's, its calls included."""
    prompt = PROMPT + '<tool_call>\n{"name": "lookup", "arguments": {"order_id": "7"}}\n</tool_call><|im_end|>\n'
    prompt += "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    read = read_transcript(prompt + "Done.<|im_end|>", prompt=prompt)
    assert [e.kind for e in read.episode.events] == ["user", "call", "assistant"]
    assert read.first_event == 2
    assert read.episode.events[1].result == "ok"


def test_llama3_and_its_ipython_results():
    text = (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nLook up 7<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '<tool_call>{"name": "lookup", "arguments": {"order_id": "7"}}</tool_call><|eom_id|>'
        "<|start_header_id|>ipython<|end_header_id|>\n\nError: none<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nSorry.<|eot_id|>"
    )
    read = read_transcript(text)
    assert read.template == "llama3"
    assert _events(read) == [
        ("user", None, {}, "ok", "Look up 7"),
        ("call", "lookup", {"order_id": "7"}, "error", "Error: none"),
        ("assistant", None, {}, "ok", "Sorry."),
    ]


def test_plain_text_is_one_completion():
    text = (
        'Checking. <tool_call>{"name": "lookup", "arguments": {"order_id": 7}}</tool_call>'
        "<tool_call><function=refund>\n<parameter=order_id>\n7\n</parameter>\n</function></tool_call>"
        '<tool_call>{"name": "refund"'
    )
    read = read_transcript(text, prompt="Refund 7. ", template="none")
    assert read.template == "none" and read.first_event == 0  # the prompt is not the text's start
    events = _events(read)
    assert events[0] == ("assistant", None, {}, "ok", "Checking.")
    assert events[1] == ("call", "lookup", {"order_id": 7}, "no_result", "")
    assert events[2] == ("call", "refund", {"order_id": "7"}, "no_result", "")  # Qwen3's XML form
    assert events[3][:4] == ("call", "refund", {}, "malformed")
    assert "cut off before its closing marker" in read.episode.events[3].error_text
    with_prompt = read_transcript("Refund 7. " + text, prompt="Refund 7. ")
    assert with_prompt.first_event == 1 and with_prompt.episode.events[0].text == "Refund 7. "


def test_the_error_signal_can_be_chosen():
    text = PROMPT + '<tool_call>\n{"name": "lookup", "arguments": {}}\n</tool_call><|im_end|>\n'
    text += "<|im_start|>user\n<tool_response>\n{'error': 'Tool lookup failed'}\n</tool_response><|im_end|>"
    assert read_transcript(text).episode.calls[0].status == "ok"  # openai: an Error prefix or flag
    assert read_transcript(text, error_signal="trl").episode.calls[0].status == "error"  # TRL's repr


def test_turns_and_detection():
    assert detect_template("<|im_start|>user\nhi") == "chatml"
    assert detect_template("<|start_header_id|>user<|end_header_id|>") == "llama3"
    assert detect_template("plain") == "none"
    turns = split_turns("<bos><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nthere", TEMPLATES["chatml"])
    assert [(t.role, t.text) for t in turns] == [("user", "hi"), ("assistant", "there")]


@pytest.mark.parametrize(
    "kwargs,says",
    [({"template": "mistral"}, "template must be one of"), ({"error_signal": "tlr"}, "did you mean 'trl'")],
)
def test_unknown_names_are_value_errors(kwargs, says):
    with pytest.raises(ValueError, match=says):
        read_transcript("x", **kwargs)
