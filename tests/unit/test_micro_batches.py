"""`micro_batches`: every episode once, within the caps; a token cap changes the passes, not the update."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from trainer.batch import micro_batches
from trainer.config import ConfigError, TrainConfig
from trainer.loop import train

from tolerance import assert_all_close, terms, tolerance
from trainer_fakes import fake_backend, make_rollout

torch.set_num_threads(1)


@given(st.lists(st.integers(1, 12), min_size=1, max_size=30), st.integers(1, 8), st.integers(0, 60))
def test_every_episode_once_within_the_caps(lengths, size, max_tokens):
    rollouts = [make_rollout(f"t{i}", [n], 0.0, obs_len=0) for i, n in enumerate(lengths)]
    mbs = micro_batches(rollouts, size, max_tokens)
    assert sorted(i for mb in mbs for i in mb) == list(range(len(lengths)))
    total = [2 + n for n in lengths]  # prompt of 2 + the call
    for mb in mbs:
        assert 1 <= len(mb) <= size
        if max_tokens and len(mb) > 1:
            assert len(mb) * max(total[i] for i in mb) <= max_tokens
    if not max_tokens:
        assert mbs == [list(range(s, min(len(lengths), s + size))) for s in range(0, len(lengths), size)]


def test_a_token_cap_gives_the_same_update(tmp_path):
    """One iteration with micro-batches cut by a token cap moves the weights as the plain cut does: the
    gradients agree to rounding (another summation order), and so does AdamW's step."""
    base = dict(
        iterations=1, tasks_per_iteration=2, num_generations=4, learning_rate=0.05, method="rlvp", micro_batch=5
    )
    weights, grads = [], []
    for cap in (0, 25):
        be = fake_backend()
        rows = train(
            TrainConfig(out_dir=str(tmp_path / str(cap)), micro_batch_tokens=cap, **base), backend=be, progress=False
        )
        assert rows[0]["rollout/dead_iteration"] == 0
        weights.append([p.detach().clone() for p in be.model.parameters()])
        grads.append([p.grad.clone() for p in be.model.parameters()])  # the update's (zeroed before each pass)
    model = be.model
    # embedding row, output layer over the vocabulary, summed over the batch's 8 x 6 action tokens
    n = terms(model.emb.embedding_dim, model.out.out_features, 8 * 6)
    assert_all_close(grads[1], grads[0], n=n, what="gradients")
    for g in grads[0]:  # AdamW's first step is ~ lr * sign(g): every sign is clear of the rounding
        assert bool(((g == 0) | (g.abs() > 10 * tolerance(n) * g.abs().max())).all())
    assert_all_close(weights[1], weights[0], n=10, what="weights")  # AdamW: ~10 roundings per weight
    assert any(not torch.equal(a, p) for a, p in zip(weights[0], fake_backend().model.parameters(), strict=True))


def test_a_negative_cap_is_a_config_error():
    with pytest.raises(ConfigError, match="'micro_batch_tokens' must be a non-negative integer"):
        TrainConfig(micro_batch_tokens=-1)
