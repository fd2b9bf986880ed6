"""The decoder's last layer only at the predicting positions (`trainer.last_layer`): the log-probs,
entropies and gradients of `completion_logprobs` equal those of the full last layer (within the
summation-order bound), on the shared-prompt path and on the full path with padding."""

from __future__ import annotations

import pytest
import torch

from trainer import last_layer, logprobs
from trainer.envs import env_factory, make_env, make_tasks
from trainer.logprobs import completion_logprobs
from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling.generation import GenConfig
from trainer.sampling.rollout import collect_groups, prompt_words
from trainer.sampling.tokenizer import build_tiny_tokenizer

from tolerance import assert_all_close, assert_close, transformer_terms
from trainer_fakes import trained_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer(prompt_words(make_env("chain4")))


@pytest.fixture(scope="module")
def model(tok):
    return trained_policy(tok)


@pytest.fixture(scope="module")
def rollouts(model, tok):
    groups = collect_groups(model, tok, env_factory("chain4", max_turns=4), make_tasks(2), 4, GenConfig(), [0, 1])
    rs = [r for g in groups for r in g]
    assert len({len(r.completion_ids) for r in rs}) > 1  # rows of several lengths: padding is exercised
    return rs


def _run(model, tok, rollouts, selective: bool, monkeypatch, shared: bool):
    monkeypatch.setattr(logprobs, "last_layer_supported", last_layer.supported if selective else lambda d: False)
    if not shared:  # the full path: every row through the whole decoder, padding and all
        monkeypatch.setattr(logprobs, "_shared_prompt_hidden", lambda *a: None)
    calls = []
    real = last_layer._selective_forward
    monkeypatch.setattr(last_layer, "_selective_forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    logp, ent = completion_logprobs(model, rollouts, tok.pad_token_id, with_entropy=True)
    (logp * torch.linspace(-1, 1, logp.shape[1])).sum().backward()
    return logp.detach(), ent, [p.grad.clone() for p in params], len(calls)


@pytest.mark.parametrize("shared", [True, False])
def test_selected_positions_give_the_full_layers_values_and_gradients(model, tok, rollouts, monkeypatch, shared):
    a, ea, ga, na = _run(model, tok, rollouts, True, monkeypatch, shared)
    b, eb, gb, nb = _run(model, tok, rollouts, False, monkeypatch, shared)
    assert na == 1 and nb == 0  # the selective layer ran once (the completions' pass), then not at all
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    n = transformer_terms(model, L, sum(sum(r.completion_mask) for r in rollouts)) + 8 * 2
    assert_close(a, b, n=n, what="log-probs")
    assert_close(ea, eb, n=n, what="entropy")
    assert_all_close(ga, gb, n=n, what="gradients")
    assert (a != 0).sum() > 10  # real action tokens were compared
    assert "forward" not in vars(model.base_model.model.model.layers[-1])  # the layer's own forward is back


def test_slots_pad_each_row_to_the_longest():
    rows = torch.tensor([2, 0, 2, 2, 0])
    cols = torch.tensor([7, 3, 1, 4, 9])
    idx, valid = last_layer._slots(rows, cols, 4)
    assert idx.tolist() == [[3, 9, 0], [0, 0, 0], [1, 4, 7], [0, 0, 0]]
    assert valid.tolist() == [[True, True, False], [False] * 3, [True] * 3, [False] * 3]


def test_unsupported_decoders_are_refused(tok):
    plain = torch.nn.Module()
    assert not last_layer.supported(plain)
    with pytest.raises(ValueError, match="not a plain Llama layer"):
        with last_layer.selected_positions(plain, torch.tensor([0]), torch.tensor([0])):
            pass
    eager = build_tiny_model(tok, TinyModelConfig(seed=0))
    eager.config._attn_implementation = "eager"
    assert not last_layer.supported(eager.model)


def test_grouped_query_attention_and_padding_give_the_full_layers_values():
    """A Llama with fewer key/value heads than query heads (SmolLM2's 9 / 3), rows left-padded: the
    selected positions' hidden states equal the full last layer's (within the summation-order bound)."""
    from transformers import LlamaConfig, LlamaModel

    from trainer.batch import attention_mask_for

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        attn_implementation="sdpa",
    )
    decoder = LlamaModel(config).eval()
    ids = torch.randint(0, 50, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # a left-padded row
    mask[2, :2] = 0
    assert last_layer.supported(decoder)
    rows = torch.tensor([0, 0, 1, 2, 2, 2])
    cols = torch.tensor([3, 10, 6, 2, 5, 10])
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        full = decoder(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state
        four_d = attention_mask_for(decoder, mask, ids.shape[1])
        with last_layer.selected_positions(decoder, rows, cols):
            part = decoder(input_ids=ids, attention_mask=four_d, position_ids=positions).last_hidden_state
    assert_close(part[rows, cols], full[rows, cols], n=transformer_terms(decoder, 11, 6), what="hidden states")
    assert not torch.allclose(part[0, 4], full[0, 4])  # a position not selected: the layer did not run there
