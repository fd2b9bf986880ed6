"""LoRA layers through their merged weight (`trainer.merged_lora`): the same values and gradients as
peft's own forward, only where eligible, and peft's forward back after the context."""

from __future__ import annotations

import pytest
import torch

from trainer import merged_lora as ml
from trainer.envs import env_factory, make_env, make_tasks
from trainer.logprobs import completion_logprobs
from trainer.sampling.generation import GenConfig
from trainer.sampling.rollout import collect_groups, prompt_words
from trainer.sampling.tokenizer import build_tiny_tokenizer

from tolerance import assert_all_close, assert_close, transformer_terms
from trainer_fakes import trained_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer(prompt_words(make_env("chain4")))


def lora_layers(model):
    from peft.tuners.lora.layer import Linear

    return [m for m in model.modules() if isinstance(m, Linear)]


def forward_and_grads(model, ids, merged: bool):
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    if merged:
        with ml.merged_lora(model) as n:
            assert n == len(lora_layers(model))  # every layer of the tiny model qualifies
            logits = model(input_ids=ids).logits
    else:
        logits = model(input_ids=ids).logits
    (logits * torch.linspace(-1, 1, logits.shape[-1])).sum().backward()
    return logits.detach(), [p.grad.clone() for p in params]


def test_values_and_gradients_equal_peft_forward(tok):
    model = trained_policy(tok)
    ids = torch.randint(3, len(tok), (4, 40), generator=torch.Generator().manual_seed(0))
    a, ga = forward_and_grads(model, ids, merged=True)
    b, gb = forward_and_grads(model, ids, merged=False)
    # one more reduction per layer than peft's order: B A sums over the rank
    n = transformer_terms(model, ids.shape[1], ids.numel()) + 8 * model.config.num_hidden_layers
    assert_close(a, b, n=n, what="logits")
    assert_all_close(ga, gb, n=n, what="gradients")
    assert not any("forward" in vars(m) for m in lora_layers(model))  # peft's forward is back


def test_completion_logprobs_take_the_merged_path_and_agree_with_peft(tok, monkeypatch):
    model = trained_policy(tok)
    rollouts = [
        r
        for g in collect_groups(model, tok, env_factory("chain4", max_turns=3), make_tasks(2), 3, GenConfig(), [0, 1])
        for r in g
    ]
    params = [p for p in model.parameters() if p.requires_grad]
    calls = []
    real = ml._merged_forward

    def counting(self, weight, x, *a, **k):
        calls.append(self)
        return real(self, weight, x, *a, **k)

    out = []
    for ratio in (ml.MERGE_RATIO, 0):  # 0: no layer qualifies, peft's forward everywhere
        monkeypatch.setattr(ml, "MERGE_RATIO", ratio)
        monkeypatch.setattr(ml, "_merged_forward", counting)
        calls.clear()
        model.zero_grad(set_to_none=True)
        logp, ent = completion_logprobs(model, rollouts, tok.pad_token_id, with_entropy=True)
        (logp * torch.linspace(-1, 1, logp.shape[1])).sum().backward()
        out.append((logp.detach(), ent, [p.grad.clone() for p in params], len(calls)))
    (a, ea, ga, na), (b, eb, gb, nb) = out
    assert na > 0 and nb == 0
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    n = transformer_terms(model, L, sum(sum(r.completion_mask) for r in rollouts)) + 8 * 2
    assert_close(a, b, n=n, what="log-probs")
    assert_close(ea, eb, n=n, what="entropy")
    assert_all_close(ga, gb, n=n, what="gradients")


def test_a_disabled_adapter_runs_peft_forward_exactly(tok):
    """The reference policy (adapters off) inside the context: the base model's bits, not a merge."""
    model = trained_policy(tok)
    ids = torch.randint(3, len(tok), (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), model.disable_adapter():
        plain = model(input_ids=ids).logits
        with ml.merged_lora(model):
            inside = model(input_ids=ids).logits
    assert torch.equal(plain, inside)


@pytest.mark.parametrize(
    "lora,why",
    [
        ({"dropout": 0.1}, "dropout makes the merged form another function"),
    ],
)
def test_ineligible_layers_keep_peft_forward(tok, lora, why):
    model = trained_policy(tok, **lora)
    assert not any(ml.mergeable(m) for m in model.modules()), why
    with ml.merged_lora(model) as n:
        assert n == 0


def test_dora_and_wide_layers_are_not_merged():
    from peft import LoraConfig, get_peft_model

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.small = torch.nn.Linear(64, 64, bias=False)
            self.wide = torch.nn.Linear(576, 576, bias=False)

    lora = get_peft_model(Net(), LoraConfig(r=8, target_modules=["small", "wide"]))
    assert ml.mergeable(lora.base_model.model.small) and not ml.mergeable(lora.base_model.model.wide)
    dora = get_peft_model(Net(), LoraConfig(r=8, target_modules=["small"], use_dora=True))
    assert not ml.mergeable(dora.base_model.model.small)


def test_a_layer_with_a_forward_of_its_own_is_left_alone_and_keeps_it():
    """A forward set on the instance (accelerate's hooks do that) is neither merged nor removed."""
    from peft import LoraConfig, get_peft_model

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.small = torch.nn.Linear(64, 64, bias=False)

    layer = get_peft_model(Net(), LoraConfig(r=8, target_modules=["small"])).base_model.model.small
    assert ml.mergeable(layer)
    hooked = layer.forward
    layer.forward = hooked
    assert not ml.mergeable(layer)
    with ml.merged_lora(layer) as n:
        assert n == 0
    assert layer.__dict__["forward"] is hooked


def _play(model, tok, seeds):
    turns = []

    def on_turn(group, generation, offset, sample):
        turns.append((group, generation, offset, sample.ids, sample.logprobs))

    groups = collect_groups(
        model,
        tok,
        env_factory("chain4", max_turns=6),
        make_tasks(3),
        4,
        GenConfig(temperature=1.2),
        seeds,
        on_turn=on_turn,
    )
    return [r for g in groups for r in g], turns


def test_sampling_through_merged_weights_samples_the_same_rollouts(tok, monkeypatch):
    """The sampler through merged weights: the same ids for the same seeds as
    peft's forward (each weight merged once per batch; a draw flips only within float rounding of a boundary, see tests/tolerance.py),
    and the same log-probs to float rounding."""
    model = trained_policy(tok)
    merged = _play(model, tok, [3, 4, 5])
    monkeypatch.setattr(ml, "MERGE_RATIO", 0)
    plain = _play(model, tok, [3, 4, 5])
    (ra, ta), (rb, tb) = merged, plain
    assert [r.completion_ids for r in ra] == [r.completion_ids for r in rb]
    assert [t[:4] for t in ta] == [t[:4] for t in tb]
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in ra)
    n = transformer_terms(model, L) + 8 * 2
    assert_close(
        [x for t in ta for x in t[4]], [x for t in tb for x in t[4]], n=n, dtype=torch.float32, what="sampled log-probs"
    )


def test_weights_merged_without_gradient_are_merged_afresh_under_autograd(tok):
    """A context entered without gradient (sampling) and a forward pass with it: the merge is
    recomputed, so the adapter gets its gradient, with the same values."""
    model = trained_policy(tok)
    ids = torch.randint(3, len(tok), (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        context = ml.merged_lora(model)
        context.__enter__()
    try:
        with torch.no_grad():
            frozen = model(input_ids=ids).logits
        live = model(input_ids=ids).logits
    finally:
        context.__exit__(None, None, None)
    live.sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)
    assert torch.equal(frozen, live.detach())  # the same products in the same order
