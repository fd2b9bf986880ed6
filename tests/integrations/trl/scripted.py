"""Scripted multi-turn completions for TRL's ``rollout_func`` mode, with known call spans.

Each completion is a list of segments: ("model", words) are generated tokens,
("tool", words) are the tool's output (env_mask 0).  The episode's messages come with it.
"""

from __future__ import annotations

import torch

from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling.tokenizer import build_tiny_tokenizer

CALL_A = ["<tool_call>", '{"name":', '"cancel",', '"arguments":', '{"id":', '"A"}}', "</tool_call>"]
CALL_GET = ["<tool_call>", '{"name":', '"get",', '"arguments":', '{"id":', '"A"}}', "</tool_call>"]
BROKEN = ["<tool_call>", '{"name":', '"cancel",', "broken", "</tool_call>"]
TOOL_ERROR = ["<tool_response>", "error", "</tool_response>"]
TOOL_OK = ["<tool_response>", "ok", "</tool_response>"]
WORDS = sorted(set(CALL_A + CALL_GET + BROKEN + TOOL_ERROR + TOOL_OK + ["done", "please", "cancel", "A", "yes"]))

RULES = """
tool cancel : write, destructive target id
tool get    : read target id
violation errored_call (-0.1) { on call error }
repeat_error (-0.3)
"""


def _call(name):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {"id": "A"}}}],
    }


def _result(name, ok):
    return {"role": "tool", "name": name, "content": "ok" if ok else "{'error': 'not found'}"}


#: name -> (segments, messages): what the model wrote, and the episode TRL's tools would record.
SCRIPTS = {
    "read_then_cancel": (
        [("model", CALL_GET), ("tool", TOOL_OK), ("model", CALL_A), ("tool", TOOL_OK), ("model", ["done"])],
        [
            _call("get"),
            _result("get", True),
            _call("cancel"),
            _result("cancel", True),
            {"role": "assistant", "content": "done"},
        ],
    ),
    "repeat_error": (
        [("model", CALL_A), ("tool", TOOL_ERROR), ("model", CALL_A), ("tool", TOOL_ERROR), ("model", ["done"])],
        [
            _call("cancel"),
            _result("cancel", False),
            _call("cancel"),
            _result("cancel", False),
            {"role": "assistant", "content": "done"},
        ],
    ),
    "malformed": (
        [("model", BROKEN), ("model", ["done"])],
        [{"role": "assistant", "content": " ".join(BROKEN) + " done"}],
    ),
    "no_call": ([("model", ["done"])], [{"role": "assistant", "content": "done"}]),
}
#: the credit each call of a script earns under RULES (in call order).
CALL_CREDITS = {"read_then_cancel": [0.0, 0.0], "repeat_error": [-0.1, -0.4], "malformed": [-0.1], "no_call": []}


def tiny(seed: int = 0):
    tok = build_tiny_tokenizer(WORDS)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, intermediate_size=64, seed=seed))
    return tok, model.train()


def encode(tok, words):
    return tok.encode(" ".join(words), add_special_tokens=False)


def script_ids(tok, name):
    """(completion ids, env mask, call spans) of a script; the completion ends with EOS."""
    ids, mask, spans = [], [], []
    for kind, words in SCRIPTS[name][0]:
        seg = encode(tok, words)
        if kind == "model" and words[0] == "<tool_call>":
            spans.append((len(ids), len(ids) + len(seg)))
        ids += seg
        mask += [1 if kind == "model" else 0] * len(seg)
    return ids + [tok.eos_token_id], mask + [1], spans


def make_rollout(tok, plan, outcomes):
    """A TRL rollout_func: the k-th completion of each group follows ``plan[k]`` and gets ``outcomes[k]``."""

    def rollout(prompts, trainer):
        out = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "rlvp_messages": [],
            "outcome": [],
            "script": [],
        }
        G = trainer.num_generations
        for k, prompt in enumerate(prompts):
            name = plan[k % G]
            ids, mask, _ = script_ids(tok, name)
            out["prompt_ids"].append(encode(tok, [prompt]))
            out["completion_ids"].append(ids)
            out["logprobs"].append([0.0] * len(ids))
            out["env_mask"].append(mask)
            out["rlvp_messages"].append(SCRIPTS[name][1])
            out["outcome"].append(float(outcomes[k % G]))
            out["script"].append(name)
        return out

    return rollout


def outcome_reward(completions, outcome, **kwargs):
    """The outcome the scripted environment reported."""
    return list(outcome)


def dataset(n_prompts: int = 2):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": ["please"] * n_prompts})


def config(tmp_path, **overrides):
    from trl import GRPOConfig

    args = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=2,
        logging_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=64,
        learning_rate=1e-2,
        weight_decay=0.0,
        save_strategy="no",
        gradient_checkpointing=False,
        seed=0,
        beta=0.0,
    )
    args.update(overrides)
    return GRPOConfig(**args)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def changed(before, model):
    return any(not torch.equal(before[k], v) for k, v in model.named_parameters())
