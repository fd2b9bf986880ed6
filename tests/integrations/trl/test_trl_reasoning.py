"""A call the model only wrote inside <think> is no call in a real RlvpGRPOTrainer step: the advantages
on the thought's tokens carry no call credit, whether TRL put the thought in ``reasoning_content``
(tool mode) or left it in the text (no tools)."""

from __future__ import annotations

import json

import pytest

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpReward

from .scripted import config
from .test_trl_tools import ScriptedTools, _model, _no_outcome, _tokenizer

RULES = """
tool read_file   : read target path
tool delete_file : write, destructive target path
violation errored_call (-0.1) { on call error }
blind_destructive blind_delete (-0.3) { inspected_by call read_file ok }
"""
W = 0.5
THOUGHT_CALL = "<tool_call>\n" + json.dumps({"name": "delete_file", "arguments": {"path": "a"}}) + "\n</tool_call>"
REAL_CALL = "<tool_call>\n" + json.dumps({"name": "read_file", "arguments": {"path": "a"}}) + "\n</tool_call>"
TURN = f"<think>\nI could just call {THOUGHT_CALL} but reading first is safer.\n</think>\n\n{REAL_CALL}<|im_end|>"


async def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file to read.
    """
    raise OSError(f"cannot read {path}")


def _train(tmp_path, tools):
    from datasets import Dataset

    tok = _tokenizer(extra_corpus=[TURN, "cannot read"], extra_tokens=["<think>", "</think>"])
    reward = RlvpReward(loads(RULES), process_weight=W)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Tidy up file a."}]]})
    trainer = type("Scripted", (ScriptedTools,), {"first_turn": [TURN]})(
        model=_model(tok),
        reward_funcs=[_no_outcome, reward],
        args=config(tmp_path, max_steps=1, max_completion_length=256),
        train_dataset=data,
        processing_class=tok,
        tools=tools,
    )
    trainer.seen = []
    trainer.train()
    return tok, trainer, reward


@pytest.mark.parametrize("tools", [[read_file], None], ids=["tool_mode", "text"])
def test_think_tokens_carry_no_call_credit(tmp_path, tools):
    tok, trainer, reward = _train(tmp_path, tools)
    for row in reward.last_rows:
        assert [c.tool for c in row.episode.calls] == ["read_file"]  # never delete_file
    think_open, think_close = tok.convert_tokens_to_ids("<think>"), tok.convert_tokens_to_ids("</think>")
    opener, closer = tok.convert_tokens_to_ids("<tool_call>"), tok.convert_tokens_to_ids("</tool_call>")
    # the real call: an env error in tool mode, a call TRL did not run in text mode -- both fail: -0.1
    assert trainer.seen
    for batch in trainer.seen:
        for ids, adv in zip(batch["completion_ids"].tolist(), batch["advantages"].tolist(), strict=True):
            thought = (ids.index(think_open), ids.index(think_close) + 1)
            assert opener in ids[thought[0] : thought[1]]  # the thought does hold a marked call
            start = ids.index(opener, thought[1])
            real = (start, ids.index(closer, start) + 1)
            expected = [0.0] * len(ids)
            for t in range(*real):
                expected[t] = W * -0.1
            assert adv[thought[0] : thought[1]] == [0.0] * (thought[1] - thought[0])
            assert adv == pytest.approx(expected, abs=1e-7)
    unmatched = [e["rlvp/unmatched_spans"] for e in trainer.state.log_history if "rlvp/unmatched_spans" in e]
    assert unmatched and all(v == 0.0 for v in unmatched)
