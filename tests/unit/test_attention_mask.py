"""`trainer.batch.attention_mask_for`: the 4D SDPA mask built by hand gives the model the bits of
transformers' own mask (logits `torch.equal`), and sampling with it draws the same episodes."""

from __future__ import annotations

import pytest
import torch

from trainer import batch
from trainer.envs import env_factory, make_env, make_tasks
from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling.generation import GenConfig
from trainer.sampling.rollout import collect_groups, prompt_words
from trainer.sampling.tokenizer import build_tiny_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer(prompt_words(make_env("chain4")))


@pytest.fixture(scope="module")
def model(tok):
    return build_tiny_model(tok, TinyModelConfig(seed=0))


def test_mask_values():
    attn = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 0]])
    m = batch.attention_mask_for(_Sdpa(), attn, 2)  # 2 new tokens after 2 cached columns
    assert m.shape == (2, 1, 2, 4) and m.dtype == torch.bool
    assert m[0, 0].tolist() == [[False, True, True, False], [False, True, True, True]]
    assert m[1, 0].tolist() == [[True, True, True, False], [True, True, True, False]]


def test_no_mask_where_transformers_skips_it(model):
    ones = torch.ones((3, 5), dtype=torch.long)
    assert batch.attention_mask_for(model, ones, 1) is ones  # one query, no padding: is_causal path
    assert batch.attention_mask_for(model, ones, 5) is ones  # no cache, no padding
    assert batch.attention_mask_for(model, ones, 2).dim() == 4  # a cache and two queries: a mask
    eager = build_tiny_model(build_tiny_tokenizer(["a"]), TinyModelConfig(seed=0))
    eager.config._attn_implementation = "eager"
    padded = torch.tensor([[0, 1, 1]])
    assert batch.attention_mask_for(eager, padded, 3) is padded  # eager wants its own float mask


def test_logits_equal_transformers_mask_bitwise(model, tok):
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(0)
    first = torch.randint(3, len(tok), (3, 6), generator=gen)
    attn1 = torch.tensor([[0, 0, 1, 1, 1, 1], [1] * 6, [0, 1, 1, 1, 1, 1]])
    nxt = torch.randint(3, len(tok), (3, 3), generator=gen)
    attn2 = torch.cat([attn1, torch.tensor([[1, 1, 1], [0, 1, 1], [1, 1, 1]])], dim=1)
    out = []
    for build in (True, False):
        cache = DynamicCache()
        with torch.no_grad():
            m1 = batch.attention_mask_for(model, attn1, 6) if build else attn1
            a = model(input_ids=first, attention_mask=m1, past_key_values=cache, use_cache=True).logits
            m2 = batch.attention_mask_for(model, attn2, 3) if build else attn2
            b = model(input_ids=nxt, attention_mask=m2, past_key_values=cache, use_cache=True).logits
        out.append((a, b))
    assert torch.equal(out[0][0][attn1.bool()], out[1][0][attn1.bool()])
    assert torch.equal(out[0][1][attn2[:, 6:].bool()], out[1][1][attn2[:, 6:].bool()])


def test_sampling_draws_the_same_episodes(model, tok, monkeypatch):
    def play():
        groups = collect_groups(model, tok, env_factory("chain4", max_turns=5), make_tasks(2), 4, GenConfig(), [3, 4])
        return [(r.completion_ids, r.completion_mask) for g in groups for r in g]

    calls = []
    real = batch.attention_mask_for
    monkeypatch.setattr(batch, "attention_mask_for", lambda m, a, q: calls.append(1) or real(m, a, q))
    built = play()
    assert calls
    monkeypatch.setattr(batch, "attention_mask_for", lambda m, a, q: a)  # transformers builds every mask
    assert play() == built


class _Sdpa(torch.nn.Module):
    class config:  # noqa: N801 - a stand-in for a transformers config
        model_type = "llama"
        _attn_implementation = "sdpa"
        sliding_window = None
