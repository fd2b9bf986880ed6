"""Action-position log-probs (`trainer.logprobs`) equal the full-vocabulary computation, gradients included."""

from __future__ import annotations

import pytest
import torch

from trainer.envs import env_factory, make_env, make_tasks
from trainer.sampling.generation import GenConfig
from trainer.logprobs import completion_logprobs
from trainer.model import LoraSettings, TinyModelConfig, apply_lora, build_tiny_model
from trainer.sampling.rollout import collect_groups, prompt_words
from trainer.sampling.tokenizer import THINK_CLOSE, THINK_OPEN, build_tiny_tokenizer

from tolerance import assert_all_close, assert_close, transformer_terms

torch.set_num_threads(1)


def chain(model, rollouts, tok, gradient: bool = False) -> int:
    """The reduction length behind one log-prob (`tolerance.transformer_terms`); a gradient also sums
    over the action tokens."""
    from trainer.batch import pad_batch

    _, _, cmask = pad_batch(rollouts, tok.pad_token_id)
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    return transformer_terms(model, L, int(cmask.sum()) if gradient else 0)


def reference_logprobs(model, rollouts, pad_id, with_entropy, constrained, temperature):
    """The former implementation: full logits at every position, ``[B, T, V]`` gather, mask, log_softmax."""
    from trainer.batch import pad_batch

    ids, attn, cmask = pad_batch(rollouts, pad_id)
    B, T = cmask.shape
    logits = model(input_ids=ids, attention_mask=attn).logits
    V = logits.shape[-1]
    P = torch.tensor([len(r.prompt_ids) for r in rollouts])
    C = torch.tensor([len(r.completion_ids) for r in rollouts])
    t = torch.arange(T)[None, :]
    valid = t < C[:, None]
    pos = torch.clamp(P[:, None] + t - 1, max=logits.shape[1] - 1)
    pos = torch.where(valid, pos, torch.zeros_like(pos))
    sel = logits.gather(1, pos[:, :, None].expand(B, T, V)).float() / temperature
    if constrained and any(r.allowed_ids for r in rollouts):
        allow = torch.ones(B, T, V, dtype=torch.bool)
        for i, r in enumerate(rollouts):
            for k, allowed in enumerate(r.allowed_ids or []):
                if allowed is not None and r.completion_mask[k]:
                    allow[i, k] = False
                    allow[i, k, list(allowed)] = True
        sel = sel.masked_fill(~allow, float("-inf"))
    logsm = torch.log_softmax(sel, dim=-1)
    target = ids.gather(1, torch.clamp(pos + 1, max=ids.shape[1] - 1))
    logp = logsm.gather(2, target[:, :, None]).squeeze(2)
    act = cmask > 0  # the new computation gives action tokens only
    logp = torch.where(act, logp, torch.zeros_like(logp))
    ent = None
    if with_entropy:
        p = logsm.detach().exp()
        ent = -(p * torch.where(p > 0, logsm.detach(), torch.zeros_like(logsm))).sum(-1) * act
    return logp, ent


@pytest.fixture(scope="module")
def setup():
    env = make_env("chain4")
    words = prompt_words(env, ("plain", "json")) | {"hmm", "so"}
    tok = build_tiny_tokenizer(words)
    think = tuple(tok.convert_tokens_to_ids(w) for w in ("hmm", "so", "fetch", "k0"))
    policies = {}
    for name, targets in (
        ("attn", LoraSettings().target_modules),
        ("head", LoraSettings().target_modules + ("lm_head",)),
    ):
        torch.manual_seed(1)
        policy = apply_lora(build_tiny_model(tok, TinyModelConfig(seed=0)), LoraSettings(target_modules=targets))
        with torch.no_grad():  # a non-zero adapter, so its gradient path is exercised
            for n, p in policy.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape) * 0.1)
        policies[name] = policy
    factory = env_factory("chain4", max_turns=4)
    plain = collect_groups(policies["attn"], tok, factory, make_tasks(2), 3, GenConfig(temperature=1.3), [0, 1])
    thinking = collect_groups(
        policies["attn"], tok, factory, make_tasks(1), 3, GenConfig(think_max_tokens=2, think_token_ids=think), [2]
    )
    rollouts = [r for g in plain + thinking for r in g]
    assert any(a is None for r in rollouts for a, m in zip(r.allowed_ids, r.completion_mask) if m)  # free tokens
    assert THINK_OPEN in tok.get_vocab() and THINK_CLOSE in tok.get_vocab()
    return tok, policies, rollouts


@pytest.mark.parametrize("adapter", ["attn", "head"])
@pytest.mark.parametrize("constrained,temperature", [(True, 1.0), (True, 0.7), (False, 1.3)])
def test_values_entropy_and_gradients_equal_the_full_vocabulary_computation(setup, adapter, constrained, temperature):
    tok, policies, rollouts = setup
    model = policies[adapter]
    params = [p for p in model.parameters() if p.requires_grad]
    weights = torch.linspace(-1, 1, 50)

    def run(fn):
        model.zero_grad(set_to_none=True)
        logp, ent = fn(model, rollouts, tok.pad_token_id, True, constrained, temperature)
        w = weights.repeat(logp.shape[1] // 50 + 1)[: logp.shape[1]]
        (logp * w).sum().backward()
        return logp.detach(), ent, [p.grad.clone() for p in params]

    new_lp, new_ent, new_grad = run(
        lambda *a: completion_logprobs(*a[:2], a[2], with_entropy=a[3], constrained=a[4], temperature=a[5])
    )
    ref_lp, ref_ent, ref_grad = run(reference_logprobs)
    assert torch.isfinite(ref_lp).all() and (ref_lp != 0).sum() > 20
    assert_close(new_lp, ref_lp, n=chain(model, rollouts, tok), what="log-probs")
    assert_close(new_ent, ref_ent, n=chain(model, rollouts, tok), what="entropy")
    assert_all_close(new_grad, ref_grad, n=chain(model, rollouts, tok, gradient=True), what="gradients")
    assert any(float(g.abs().sum()) > 0 for g in ref_grad)


def test_a_batch_of_forced_tokens_only_is_zero_and_differentiable(setup):
    """Every action token forced (one allowed id): log-prob 0, and backward still runs (zero gradient)."""
    tok, policies, rollouts = setup
    model = policies["attn"]
    r = rollouts[0]
    forced = [(r.completion_ids[t],) if m else None for t, m in enumerate(r.completion_mask)]
    from dataclasses import replace

    only = replace(r, allowed_ids=forced)
    logp, _ = completion_logprobs(model, [only], tok.pad_token_id)
    assert torch.equal(logp, torch.zeros_like(logp))
    logp.sum().backward()


def test_the_fallback_for_other_models_gives_the_same_values(setup):
    """A model whose head cannot be split off (here: a plain forward wrapper) takes the full-forward path."""
    tok, policies, rollouts = setup
    inner = policies["head"]

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    with torch.no_grad():
        a, ea = completion_logprobs(Wrapped(), rollouts, tok.pad_token_id, with_entropy=True)
        b, eb = completion_logprobs(inner, rollouts, tok.pad_token_id, with_entropy=True)
    assert_close(a, b, n=chain(inner, rollouts, tok), what="log-probs")  # the same head, full logits first
    assert_close(ea, eb, n=chain(inner, rollouts, tok), what="entropy")


@pytest.mark.parametrize("adapter", ["attn", "head"])
def test_a_shared_prompt_computed_once_gives_the_same_values_and_gradients(setup, adapter):
    """One group (every row the same prompt): the prompt pass is shared; values and gradients as before."""
    tok, policies, rollouts = setup
    model = policies[adapter]
    group = [r for r in rollouts if r.prompt_ids == rollouts[0].prompt_ids]
    assert len(group) >= 3
    from trainer import logprobs as lp_mod
    from trainer.batch import pad_batch

    ids, attn, _ = pad_batch(group, tok.pad_token_id)
    decoder, _ = lp_mod._decoder_and_head(model)
    with torch.no_grad():  # the shared path is taken here
        assert lp_mod._shared_prompt_hidden(decoder, ids, attn, len(group[0].prompt_ids)) is not None
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for fn in (
        lambda: completion_logprobs(model, group, tok.pad_token_id, with_entropy=True),
        lambda: reference_logprobs(model, group, tok.pad_token_id, True, True, 1.0),
    ):
        model.zero_grad(set_to_none=True)
        logp, ent = fn()
        (logp * torch.linspace(-1, 1, logp.shape[1])).sum().backward()
        out.append((logp.detach(), ent, [p.grad.clone() for p in params]))
    (a, ea, ga), (b, eb, gb) = out
    assert_close(a, b, n=chain(model, group, tok), what="log-probs")
    assert_close(ea, eb, n=chain(model, group, tok), what="entropy")
    assert_all_close(ga, gb, n=chain(model, group, tok, gradient=True), what="gradients")
