"""Shared pieces of the verl integration tests: an offline tokenizer with a chat template,
rules, function tools, a scripted LLM server, configs and batches (no hub, no GPU)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.tools.function_tool import function_tool, get_function_tool
from verl.workers.rollout.replica import TokenOutput

OPEN, CLOSE = "<tool_call>", "</tool_call>"

RULES = """
tool calc
tool boom
violation failed_call (-0.5) { on call error }
violation rambling (-0.125) { on assistant says "hmm" }
obligation recover (+0.25, expire -0.25) {
  open on call error
  discharge on call ok
  deadline within 3 calls
}
"""

CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{%- elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}<tool_call>{{ tc.function | tojson }}</tool_call>"
    "{%- endfor %}{%- endif %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def build_tokenizer(save_dir: str | Path | None = None):
    """A byte-level tokenizer without merges (decode(encode(s)) == s), Qwen-like special and
    added tokens, and a Hermes chat template; built in code."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
    )
    hf.add_tokens([OPEN, CLOSE, "<tool_response>", "</tool_response>"])  # added, not special (as in Qwen)
    if save_dir is not None:
        hf.save_pretrained(str(save_dir))
    return hf


@function_tool
def calc(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: first integer
        b: second integer
    """
    return str(a + b)


@function_tool
def boom(x: str) -> str:
    """Always fails.

    Args:
        x: anything
    """
    raise RuntimeError("kaboom " + x)


def tools():
    return [get_function_tool("calc"), get_function_tool("boom")]


def write_rules(directory: Path, text: str = RULES) -> str:
    path = directory / "tools.rlvp"
    path.write_text(text, encoding="utf-8")
    return str(path)


def config(
    rules: str, *, estimator: str = "rlvp_token", manager: str = "naive", process_weight: float = 0.5, **multi_turn
):
    """The parts of verl's trainer config the agent loop and the reward pieces read."""
    turns = {
        "max_user_turns": 4,
        "max_assistant_turns": 4,
        "max_parallel_calls": 5,
        "max_tool_response_length": 256,
        "tool_response_truncate_side": "middle",
        "format": "hermes",
        **multi_turn,
    }
    return OmegaConf.create(
        {
            "trainer": {"use_v1": True},
            "algorithm": {
                "adv_estimator": estimator,
                "use_kl_in_reward": False,
                "norm_adv_by_std_in_grpo": True,
                "rlvp": {"process_weight": process_weight},
            },
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": 512,
                    "full_determinism": False,
                    "multi_turn": turns,
                }
            },
            "data": {},
            "reward": {
                "num_workers": 1,
                "reward_manager": {"source": "register", "name": manager, "module": {"path": None, "name": manager}},
                "custom_reward_function": {"path": None, "name": "compute_score", "reward_kwargs": {}},
                "reward_kwargs": {"rlvp": {"rules": rules, "process_weight": process_weight}},
                "reward_model": {
                    "enable": False,
                    "enable_resource_pool": False,
                    "model_path": None,
                    "rollout": {"full_determinism": False},
                },
                "sandbox_fusion": {"url": None},
            },
        }
    )


class ScriptedServer:
    """verl's LLM server client, answering each generate() with the next scripted text."""

    def __init__(self, tokenizer, turns: list[str]):
        self.tokenizer, self.turns, self.calls = tokenizer, turns, 0

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        text = self.turns[min(self.calls, len(self.turns) - 1)]
        self.calls += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.1] * len(ids))


def run_agent(cfg, tokenizer, turns: list[str], raw_prompt: list[dict], name: str = "rlvp_tool_agent"):
    """Build the registered agent loop as verl's AgentLoopWorker does (inside the running
    event loop) and run one episode; returns (output, loop)."""

    async def go():
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry[name],
            trainer_config=DictConfigWrap(config=cfg),
            server_manager=ScriptedServer(tokenizer, turns),
            tokenizer=tokenizer,
            processor=None,
            hf_model_type=None,
            dataset_cls=None,
            data_config=DictConfigWrap(cfg.data),
            tools=ToolListWrap(tools()),
        )
        return await loop.run({"temperature": 1.0}, raw_prompt=raw_prompt), loop

    return asyncio.run(go())


def marked_spans(ids: list[int], mask: list[int], open_id: int, close_id: int) -> list[tuple[int, int]]:
    """Test oracle: [open, close] token ranges among generated tokens, written plainly."""
    spans, start = [], None
    for t, (token, m) in enumerate(zip(ids, mask)):
        if not m:
            if start is not None:
                spans.append((start, t))
                start = None
            continue
        if token == open_id and start is None:
            start = t
        elif token == close_id and start is not None:
            spans.append((start, t + 1))
            start = None
    if start is not None:
        spans.append((start, len(ids)))
    return spans


def reward_batch(
    tokenizer,
    prompts: list[str],
    responses: list[str],
    ground_truths: list[str],
    *,
    data_source: str = "rlvp_test",
    prompt_len: int = 16,
    response_len: int = 200,
) -> DataProto:
    """verl's reward-loop layout: left-padded prompts, right-padded responses, attention mask over both."""
    B = len(prompts)
    P = torch.full((B, prompt_len), tokenizer.pad_token_id, dtype=torch.long)
    R = torch.full((B, response_len), tokenizer.pad_token_id, dtype=torch.long)
    A = torch.zeros((B, prompt_len + response_len), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        pi = tokenizer.encode(p, add_special_tokens=False)[-prompt_len:]
        ri = tokenizer.encode(r, add_special_tokens=False)
        assert len(ri) <= response_len, "response_len too small for the test response"
        P[i, prompt_len - len(pi) :] = torch.tensor(pi)
        R[i, : len(ri)] = torch.tensor(ri)
        A[i, prompt_len - len(pi) : prompt_len] = 1
        A[i, prompt_len : prompt_len + len(ri)] = 1
    raw = np.empty(B, dtype=object)
    raw[:] = [[{"role": "user", "content": p}] for p in prompts]
    return DataProto.from_dict(
        tensors={"prompts": P, "responses": R, "attention_mask": A, "input_ids": torch.cat([P, R], 1)},
        non_tensors={
            "data_source": np.array([data_source] * B, dtype=object),
            "reward_model": np.array([{"ground_truth": g} for g in ground_truths], dtype=object),
            "raw_prompt": raw,
            "uid": np.array([f"g{i // 2}" for i in range(B)], dtype=object),
        },
    )


CUSTOM_SCORE = (
    "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
    "    return 1.0 if ground_truth in solution_str else 0.0\n"
)


def write_score_fn(directory: Path) -> str:
    path = directory / "score.py"
    path.write_text(CUSTOM_SCORE, encoding="utf-8")
    return str(path)
