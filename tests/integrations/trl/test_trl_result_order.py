"""TRL 1.16's own tool loop with an async tool: its results come back sync tools first, async after,
without ids; each result must reach its own call, so the error credit lands on the call that failed."""

from __future__ import annotations

import json

import pytest

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpReward

from .scripted import config
from .test_trl_tools import ScriptedTools, _model, _no_outcome, _tokenizer

RULES = """
tool write_file  : write target path
tool read_file   : read target path
tool delete_file : write, destructive target path
violation errored_call (-0.1) { on call error }
"""
W = 0.5


def _call(name, path):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"path": path}}) + "\n</tool_call>"


#: one model turn with three calls; the async read_file raises for "a"
ORDER = "\n".join([_call("write_file", "a"), _call("read_file", "a"), _call("delete_file", "a")]) + "<|im_end|>"
#: two async reads (the first fails) then a sync write: the reads come back after the write
SWAPPABLE = "\n".join([_call("read_file", "a"), _call("read_file", "b"), _call("write_file", "c")]) + "<|im_end|>"


def write_file(path: str) -> str:
    """Write a file.

    Args:
        path: The file to write.
    """
    return f"wrote {path}"


async def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file to read.
    """
    if path == "a":
        raise OSError(f"cannot read {path}")
    return f"text of {path}"


def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return f"deleted {path}"


class SeenCompletions(RlvpReward):
    """Keeps the completions TRL passed (its messages, in TRL's order)."""

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        self.completions = completions
        return super().__call__(prompts, completions, completion_ids, **kwargs)


def _train(tmp_path, turn):
    from datasets import Dataset

    tok = _tokenizer(extra_corpus=[ORDER, SWAPPABLE, "wrote deleted text of cannot read"])
    reward = SeenCompletions(loads(RULES), process_weight=W)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Tidy up file a."}]]})
    trainer = type("Scripted", (ScriptedTools,), {"first_turn": [turn]})(
        model=_model(tok),
        reward_funcs=[_no_outcome, reward],
        args=config(tmp_path, max_steps=1, max_completion_length=256),
        train_dataset=data,
        processing_class=tok,
        tools=[write_file, read_file, delete_file],
    )
    trainer.seen = []
    trainer.train()
    return tok, trainer, reward


def _call_spans(tok, ids):
    opener, closer = tok.convert_tokens_to_ids("<tool_call>"), tok.convert_tokens_to_ids("</tool_call>")
    starts = [t for t, i in enumerate(ids) if i == opener]
    return [(s, ids.index(closer, s) + 1) for s in starts]


def test_the_async_tools_error_lands_on_its_own_call(tmp_path):
    """[write (sync), read (async, raises), delete (sync)]: TRL writes write, delete, read; read gets the
    error and its credit, delete none (before: paired by position, delete got read's error)."""
    tok, trainer, reward = _train(tmp_path, ORDER)
    for completion in reward.completions:
        assert [m["name"] for m in completion if m["role"] == "tool"] == ["write_file", "delete_file", "read_file"]
        assert all("tool_call_id" not in m for m in completion)
    for row in reward.last_rows:
        assert [(c.tool, c.status) for c in row.episode.calls] == [
            ("write_file", "ok"),
            ("read_file", "error"),
            ("delete_file", "ok"),
        ]
        assert "cannot read a" in row.episode.calls[1].error_text
    assert trainer.seen
    for batch in trainer.seen:
        for ids, adv in zip(batch["completion_ids"].tolist(), batch["advantages"].tolist(), strict=True):
            spans = _call_spans(tok, ids)
            assert len(spans) == 3
            expected = [0.0] * len(ids)
            for t in range(*spans[1]):  # read_file's tokens
                expected[t] = W * -0.1
            assert adv == pytest.approx(expected, abs=1e-7)
    logged = [e["rlvp/ambiguous_results"] for e in trainer.state.log_history if "rlvp/ambiguous_results" in e]
    assert logged and all(v == 0.0 for v in logged)


def test_same_name_results_that_could_be_swapped_are_counted_and_get_no_error_credit(tmp_path):
    """[read a (async, raises), read b (async), write (sync)] comes back write, read, read: which read
    failed is a guess, so neither read gets errored_call credit, and rlvp/ambiguous_results counts them."""
    tok, trainer, reward = _train(tmp_path, SWAPPABLE)
    for row in reward.last_rows:
        assert [(c.tool, c.status, c.ambiguous) for c in row.episode.calls] == [
            ("read_file", "no_result", True),
            ("read_file", "no_result", True),
            ("write_file", "ok", False),
        ]
    for batch in trainer.seen:
        for adv in batch["advantages"].tolist():
            assert adv == pytest.approx([0.0] * len(adv), abs=1e-7)
    logged = [e["rlvp/ambiguous_results"] for e in trainer.state.log_history if "rlvp/ambiguous_results" in e]
    assert logged and all(v == 2.0 * len(reward.last_rows) for v in logged)
