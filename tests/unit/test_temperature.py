"""Issue 9, section 5: temperature is applied on both sides or the suite fails.

The loop's own path, with the real tiny model and chain-4: `build_backend` hands
``cfg.temperature`` to the sampler, `trainer.loop` hands it to the log-prob
recomputation, and `trainer.logprobs` divides the logits by it.  Dropping any one
of the three makes the recomputed log-probs differ from the sampled ones.
"""

from __future__ import annotations

from pathlib import Path

import torch

from trainer import loop, rollout
from trainer.config import load_config
from trainer.logprobs import completion_logprobs

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
        tasks_per_iteration=1, num_generations=3, temperature=TEMPERATURE)
    sampled: dict[tuple[int, ...], list[float]] = {}  # context + turn ids -> the turn's sampled log-probs
    real_play = rollout._Group.play

    def recording_play(self, ep, sample, turn):  # every turn the sampler gave, with its context
        sampled[tuple(self.prompt_ids) + tuple(ep.ids) + tuple(sample.ids)] = sample.logprobs
        return real_play(self, ep, sample, turn)

    recomputed = []
    real_logprobs = loop.completion_logprobs

    def recording_logprobs(model, rollouts, *args, **kwargs):
        logp, ent = real_logprobs(model, rollouts, *args, **kwargs)
        with torch.no_grad():
            at_one, _ = completion_logprobs(model, rollouts, *args, **{**kwargs, "temperature": 1.0})
        recomputed.append((list(rollouts), logp.detach().clone(), at_one))
        return logp, ent

    monkeypatch.setattr(rollout._Group, "play", recording_play)
    monkeypatch.setattr(loop, "completion_logprobs", recording_logprobs)
    loop.train(cfg, progress=False)  # one pass, no extra epochs: every recomputation precedes the step

    assert recomputed
    n_free, off_at_one = 0, 0
    for rollouts, logp, at_one in recomputed:
        for b, r in enumerate(rollouts):
            seq = r.prompt_ids + r.completion_ids
            for start, end in _action_runs(r.completion_mask):
                want = torch.tensor(sampled[tuple(seq[: len(r.prompt_ids) + end])])
                assert torch.allclose(logp[b, start:end], want, atol=1e-4), (b, start, end)
                free = want != 0  # forced tokens (one allowed id) have log-prob 0 at any temperature
                n_free += int(free.sum())
                off_at_one += int((~torch.isclose(at_one[b, start:end], want, atol=1e-4) & free).sum())
    assert n_free > 10 and off_at_one >= 0.9 * n_free  # sensitive: at T = 1 the free tokens differ
