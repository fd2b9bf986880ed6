"""Two scripted tool-using rollouts as token data, with the token positions of every call known.

Token ids are made up (no tokenizer): OPEN/CLOSE are the call markers.  Layout of a rollout::

    prompt (3, not sampled) | call (4) | tool output (2) | call (4) | tool output (2) | answer (2)
"""

from __future__ import annotations

import json

from rlvp_dsl.pipeline import loads

RULES = """
tool cancel : write, destructive target id
tool get    : read target id
violation errored_call (-0.1) { on call error }
repeat_error (-0.3)
"""

OPEN, CLOSE = 10, 13
PROMPT = [1, 2, 3]
CALL = [OPEN, 11, 12, CLOSE]
TOOL = [20, 21]
ANSWER = [30, 31]
TOKENS = PROMPT + CALL + TOOL + CALL + TOOL + ANSWER  # 17 tokens
SAMPLED = [0] * 3 + [1] * 4 + [0] * 2 + [1] * 4 + [0] * 2 + [1] * 2
CALL_SPANS = ((3, 7), (9, 13))  # into TOKENS
ANSWER_SPAN = (15, 17)
LOGPROBS = [-0.01 * (t + 1) for t in range(len(TOKENS))]

PROMPT_MESSAGES = [
    {"role": "system", "content": "You cancel reservations."},
    {"role": "user", "content": "please cancel A"},
]


def _call(k: int, name: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": json.dumps({"id": "A"})}}
        ],
    }


def _result(k: int, content: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{k}", "content": content}


#: get ok, cancel ok: no rule credit.
CLEAN = [
    _call(0, "get"),
    _result(0, "ok"),
    _call(1, "cancel"),
    _result(1, "ok"),
    {"role": "assistant", "content": "done"},
]
#: cancel fails twice, unchanged: call 0 gets -0.1, call 1 -0.1 - 0.3.
REPEAT = [
    _call(0, "cancel"),
    _result(0, "Error: not found"),
    _call(1, "cancel"),
    _result(1, "Error: not found"),
    {"role": "assistant", "content": "done"},
]
REPEAT_CREDITS = (-0.1, -0.4)


def program():
    return loads(RULES)
