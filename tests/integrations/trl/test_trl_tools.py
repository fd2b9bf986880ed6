"""RlvpGRPOTrainer in TRL's own tool-calling loop (``tools=``): TRL parses the calls, runs the
tools, writes its ``{'error': ...}`` texts and the tool mask; only the model's sampling is
scripted, so the tokens of each call are known."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import trl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward

from .scripted import changed, config, snapshot

RULES = """
tool cancel_reservation : write, destructive target reservation_id
tool get_reservation    : read target reservation_id
violation errored_call (-0.1) { on call error }
"""
CALL = '<tool_call>\n{{"name": "{name}", "arguments": {{"reservation_id": "A"}}}}\n</tool_call><|im_end|>'
FIRST_TURN = [
    CALL.format(name="cancel_reservation"),  # the tool raises: TRL writes {'error': ...}
    CALL.format(name="get_reservation"),  # fine
    '<tool_call>\n{"name": "cancel_reservation", "arguments": {"reservation_id": A}}\n</tool_call><|im_end|>',  # not JSON
    "Done.<|im_end|>",
]
LATER_TURN = "Done.<|im_end|>"
W = 0.5


def cancel_reservation(reservation_id: str) -> str:
    """Cancel a reservation.

    Args:
        reservation_id: The reservation to cancel.
    """
    raise ValueError(f"reservation {reservation_id} cannot be cancelled")


def get_reservation(reservation_id: str) -> str:
    """Look up a reservation.

    Args:
        reservation_id: The reservation to look up.
    """
    return f"reservation {reservation_id}: 1 passenger"


def _tokenizer(extra_corpus=(), extra_tokens=()):
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    corpus = [
        template,
        *FIRST_TURN,
        "Cancel reservation A please. You are a helpful assistant.",
        "reservation_id cancel_reservation get_reservation error cannot be cancelled passenger",
        *extra_corpus,
    ]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        corpus * 3,
        trainer=trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tok.add_tokens(["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", *extra_tokens])
    tok.chat_template = template
    return tok


def _model(tok):
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


class ScriptedTools(RlvpGRPOTrainer):
    """TRL's tool loop with the model's sampling replaced by `first_turn` / `LATER_TURN`."""

    seen: list
    first_turn = FIRST_TURN

    def _generate(self, prompts):
        self._first_turn = True
        return super()._generate(prompts)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        turns = self.first_turn
        texts = (
            [turns[i % len(turns)] for i in range(len(prompt_ids))]
            if self._first_turn
            else ([LATER_TURN] * len(prompt_ids))
        )
        self._first_turn = False
        return [self.processing_class(t, add_special_tokens=False)["input_ids"] for t in texts], None

    def _compute_loss(self, model, inputs):
        self.seen.append(
            {
                k: inputs[k].detach().clone()
                for k in ("advantages", "completion_ids", "completion_mask", "tool_mask")
                if k in inputs
            }
        )
        return super()._compute_loss(model, inputs)


def _no_outcome(completions, **kwargs):
    return [0.0] * len(completions)


def test_trl_tool_errors_and_unparsed_calls_get_the_failed_call_credit(tmp_path):
    """TRL's tool errors fire errored_call, an unparsed call is malformed; credit only on those calls' tokens."""
    from datasets import Dataset

    tok = _tokenizer()
    model = _model(tok)
    reward = RlvpReward(loads(RULES), process_weight=W)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Cancel reservation A please."}]] * 2})
    trainer = ScriptedTools(
        model=model,
        reward_funcs=[_no_outcome, reward],
        args=config(tmp_path, max_steps=1, max_completion_length=128),
        train_dataset=data,
        processing_class=tok,
        tools=[cancel_reservation, get_reservation],
    )
    trainer.seen = []
    before = snapshot(trainer.model)
    trainer.train()
    statuses = sorted(tuple(e.status for e in row.episode.calls) for row in reward.last_rows)
    assert statuses == [(), ("error",), ("malformed",), ("ok",)]
    for batch in trainer.seen:
        for ids, adv, tool_mask in zip(
            batch["completion_ids"].tolist(), batch["advantages"].tolist(), batch["tool_mask"].tolist(), strict=True
        ):
            text = tok.decode(ids)
            start = ids.index(tok.convert_tokens_to_ids("<tool_call>")) if "<tool_call>" in text else None
            end = ids.index(tok.convert_tokens_to_ids("</tool_call>")) + 1 if start is not None else None
            failed = "cancel_reservation" in text  # the raising tool and the unparsed call
            for t, value in enumerate(adv):
                on_call = start is not None and start <= t < end
                assert value == pytest.approx(W * -0.1 if (failed and on_call) else 0.0, abs=1e-7), (text, t)
                if tool_mask[t] == 0:
                    assert value == 0.0  # tool output carries no credit
    assert changed(before, trainer.model)


class Reservations:
    """A TRL environment: its public methods are the tools, `get_reward` the outcome."""

    def reset(self, **row) -> None:
        self.looked_up = False

    def get_reservation(self, reservation_id: str) -> str:
        """Look up a reservation.

        Args:
            reservation_id: The reservation to look up.
        """
        self.looked_up = True
        return f"reservation {reservation_id}: 1 passenger"

    def cancel_reservation(self, reservation_id: str) -> str:
        """Cancel a reservation.

        Args:
            reservation_id: The reservation to cancel.
        """
        raise ValueError(f"reservation {reservation_id} cannot be cancelled")

    def get_reward(self) -> float:
        return 1.0 if self.looked_up else 0.0


def test_environment_factory_counts_the_outcome_once(tmp_path):
    """environment_factory: the env's get_reward is the outcome (TRL adds it), rlvp adds only token credit."""
    from datasets import Dataset

    tok = _tokenizer()
    reward = RlvpReward(loads(RULES), process_weight=W)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Cancel reservation A please."}]] * 2})
    trainer = ScriptedTools(
        model=_model(tok),
        reward_funcs=[reward],
        args=config(tmp_path, max_steps=1, max_completion_length=128),
        train_dataset=data,
        processing_class=tok,
        environment_factory=Reservations,
    )
    trainer.seen = []
    trainer.train()
    assert trainer.reward_func_names == ["rlvp", "Reservations"]
    r = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)  # only the get_reservation rollout looked up
    a_out = ((r - r.mean()) / (r.std(unbiased=False) + 1e-4)).tolist()
    for batch in trainer.seen:
        for ids, adv, mask, tool_mask in zip(
            batch["completion_ids"].tolist(),
            batch["advantages"].tolist(),
            batch["completion_mask"].tolist(),
            batch["tool_mask"].tolist(),
            strict=True,
        ):
            text = tok.decode(ids)
            k = next(i for i, first in enumerate(FIRST_TURN) if tok.decode(tok(first)["input_ids"]) in text)
            action = [m * t for m, t in zip(mask, tool_mask, strict=True)]
            start = ids.index(tok.convert_tokens_to_ids("<tool_call>")) if k < 3 else None
            end = ids.index(tok.convert_tokens_to_ids("</tool_call>")) + 1 if k < 3 else None
            for t, value in enumerate(adv):
                credit = W * -0.1 if k in (0, 2) and start <= t < end else 0.0
                assert value == pytest.approx(a_out[k] * action[t] + credit, abs=1e-5), (k, t)
