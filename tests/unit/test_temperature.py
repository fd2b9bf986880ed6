"""Issue 9, section 5: temperature is applied on both sides or the suite fails.

The loop's own path, with the real tiny model and chain-4: `build_backend` hands
``cfg.temperature`` to the sampler, `trainer.loop` hands it to the log-prob
recomputation, and `trainer.logprobs` divides the logits by it.  Dropping any one
of the three makes the recomputed log-probs differ from the sampled ones.  The loop's
two other log-prob sites (issue 17) are pinned too: the old log-probs when
``updates_per_batch > 1`` and the reference model's when ``beta > 0``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

from trainer import loop, update
from trainer.sampling import rollout
from trainer.config import load_config
from trainer.logprobs import completion_logprobs

from tolerance import assert_close, tolerance, transformer_terms

torch.set_num_threads(1)
CONFIG = Path(__file__).resolve().parents[2] / "examples" / "chain4.toml"
TEMPERATURE = 0.5


def _action_runs(mask):
    """Half-open runs of consecutive action tokens (one generated turn each)."""
    runs, start = [], None
    for t, m in enumerate(list(mask) + [0]):
        if m and start is None:
            start = t
        elif not m and start is not None:
            runs.append((start, t))
            start = None
    return runs


def test_the_loop_recomputes_log_probs_at_the_sampling_temperature(tmp_path, monkeypatch):
    """Every generated token's log-prob in the update equals the sampler's, at T = 0.5 (and not at T = 1)."""
    cfg = load_config(CONFIG, out_dir=str(tmp_path), iterations=1).replace(
        tasks_per_iteration=1, num_generations=3, temperature=TEMPERATURE
    )
    sampled: dict[tuple[int, ...], list[float]] = {}  # context + turn ids -> the turn's sampled log-probs
    real_play = rollout._Group.play

    def recording_play(self, ep, sample, turn):  # every turn the sampler gave, with its context
        sampled[tuple(self.prompt_ids) + tuple(ep.ids) + tuple(sample.ids)] = sample.logprobs
        return real_play(self, ep, sample, turn)

    recomputed = []
    real_logprobs = update.completion_logprobs

    def recording_logprobs(model, rollouts, *args, **kwargs):
        logp, ent = real_logprobs(model, rollouts, *args, **kwargs)
        with torch.no_grad():
            at_one, _ = completion_logprobs(model, rollouts, *args, **{**kwargs, "temperature": 1.0})
        L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
        recomputed.append((list(rollouts), logp.detach().clone(), at_one, transformer_terms(model, L)))
        return logp, ent

    monkeypatch.setattr(rollout._Group, "play", recording_play)
    monkeypatch.setattr(update, "completion_logprobs", recording_logprobs)
    loop.train(cfg, progress=False)  # one pass, no extra epochs: every recomputation precedes the step

    assert recomputed
    n_free, off_at_one = 0, 0
    for rollouts, logp, at_one, n in recomputed:
        got, want, one = [], [], []  # the sampler's forward passes (one per turn) vs the loop's (one per batch)
        for b, r in enumerate(rollouts):
            seq = r.prompt_ids + r.completion_ids
            for start, end in _action_runs(r.completion_mask):
                want.append(torch.tensor(sampled[tuple(seq[: len(r.prompt_ids) + end])]))
                got.append(logp[b, start:end])
                one.append(at_one[b, start:end])
        got, want, one = torch.cat(got), torch.cat(want), torch.cat(one)
        assert_close(got, want, n=n, what="log-probs at T = 0.5")
        free = want != 0  # forced tokens (one allowed id) have log-prob 0 at any temperature
        n_free += int(free.sum())
        off_at_one += int(((one - want).abs() > tolerance(n) * want.abs().max())[free].sum())
    assert n_free > 10 and off_at_one >= 0.9 * n_free  # sensitive: at T = 1 the free tokens differ


def _non_zero_adapter(model) -> None:
    """LoRA B perturbed: the policy differs from its adapter-disabled reference."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)


@pytest.mark.parametrize("site", ["old", "ref"])
def test_old_and_reference_log_probs_are_at_the_sampling_temperature(tmp_path, monkeypatch, site):
    """Issue 17: with ``updates_per_batch = 2`` (old log-probs recomputed before the first pass) and
    ``beta > 0`` (the adapter-disabled reference), the tensors `policy_loss` receives are the log-probs
    at T = 0.5, computed again here on the same micro-batch before any optimiser step -- and differ
    from those at T = 1, so a site that drops the temperature fails."""
    from trainer.backend import build_backend
    from trainer.batch import micro_batches

    cfg = load_config(CONFIG, out_dir=str(tmp_path), iterations=1).replace(
        tasks_per_iteration=1,
        num_generations=3,
        temperature=TEMPERATURE,
        **({"updates_per_batch": 2} if site == "old" else {"beta": 0.1}),
    )
    be = build_backend(cfg)
    _non_zero_adapter(be.model)
    batches, checked = [], []
    real_loss = update.policy_loss

    def checking_loss(logp, old_logp, advantages, mask, **kw):
        if not checked:  # the first micro-batch of the first pass: the weights the loop computed them with
            rs = [batches[-1][i] for i in micro_batches(batches[-1], cfg.micro_batch, cfg.micro_batch_tokens)[0]]
            got = old_logp if site == "old" else kw["ref_logp"]
            want, at_one = [], []
            with torch.no_grad():
                for temperature in (TEMPERATURE, 1.0):
                    with be.ref_context() if site == "ref" else contextlib.nullcontext():
                        lp, _ = completion_logprobs(
                            be.model, rs, be.pad_id, constrained=cfg.constrained_logprobs, temperature=temperature
                        )
                    (want if temperature == TEMPERATURE else at_one).append(lp)
            checked.append((got.clone(), want[0], at_one[0], mask.clone()))
        return real_loss(logp, old_logp, advantages, mask, **kw)

    monkeypatch.setattr(update, "policy_loss", checking_loss)
    loop.train(
        cfg,
        backend=be,
        progress=False,
        on_batch=lambda it, groups, credits, weight: batches.append([r for g in groups for r in g]),
    )
    ((got, want, at_one, mask),) = checked
    assert torch.equal(got, want)  # the same computation on the same inputs: the same bits
    free = (want != 0) & (mask > 0)  # forced tokens have log-prob 0 at any temperature
    assert int(free.sum()) > 10 and bool((at_one[free] - want[free]).abs().gt(1e-3).float().mean() > 0.9)
