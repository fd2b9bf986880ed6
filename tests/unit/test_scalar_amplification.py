"""Issue 17, section 2: scalar mode in all-failed groups, and group_rms within the token mode's bound.

A group whose outcomes all failed but whose penalties differ by a few hundredths: the
group std z-scores the differences into unit-size advantages (counted as *amplified*),
and ``process_norm = "group_rms"`` must never scale a call's credit past ``w * |c|``.
"""

from __future__ import annotations

import pytest
import torch

from rlvp_dsl.advantages import amplified_groups, compute_advantages, process_scale
from trainer.batch import pad_batch
from trainer.config import TrainConfig
from trainer.loop import train

from trainer_fakes import credits_of, fake_backend, make_rollout

torch.set_num_threads(1)

PENALTIES = [-0.02, -0.01, 0.0, -0.03]  # shaping noise: a few hundredths apart
W = 0.5


def _adv(outcomes, penalties, mode, **kw):
    groups = [[make_rollout("a", [2], o) for o in outcomes]]
    _, _, mask = pad_batch(groups[0])
    return compute_advantages(
        [list(outcomes)],
        [[credits_of([p]) for p in penalties]],
        [[r.call_spans for r in groups[0]]],
        mask,
        credit_mode=mode,
        process_weight=W,
        **kw,
    )


def test_group_rms_never_scales_credit_past_the_token_bound():
    """Before: divided by the RMS (0.0187), each call got 53x w x |c|; now at most w x |c|."""
    adv = _adv([0.0] * 4, PENALTIES, "token", process_norm="group_rms")
    for i, c in enumerate(PENALTIES):
        assert adv.advantages[i, :2].abs().max().item() <= W * abs(c) + 1e-7  # the bound, in float32
    # a group whose credit is larger than the outcome's scale is still shrunk by its RMS
    big = _adv([0.0] * 4, [-4.0, -2.0, 0.0, -2.0], "token", process_norm="group_rms")
    rms = (sum(c * c for c in [-4.0, -2.0, 0.0, -2.0]) / 4) ** 0.5
    assert big.advantages[0, 0].item() == pytest.approx(W * -4.0 / rms, rel=1e-6)
    assert process_scale(torch.tensor([[0.0, 0.0]]), "group_rms").item() == 1.0


def test_scalar_mode_marks_an_all_failed_group_it_amplifies():
    """All outcomes 0: the z-score makes hundredths unit-size; the group is marked amplified."""
    adv = _adv([0.0] * 4, PENALTIES, "scalar")
    assert adv.amplified_groups.tolist() == [True]
    assert adv.outcome.abs().max().item() > 1.0  # +-1.34: shaping noise as a full-size advantage
    # a group whose outcomes differ is the outcome's; no division ("none"): nothing amplified
    assert _adv([1.0, 0.0, 0.0, 0.0], PENALTIES, "scalar").amplified_groups.tolist() == [False]
    assert _adv([0.0] * 4, PENALTIES, "scalar", scale_rewards="none").amplified_groups.tolist() == [False]
    # equal penalties: a dead group, not an amplified one; token mode never amplifies
    assert _adv([0.0] * 4, [-0.1] * 4, "scalar").amplified_groups.tolist() == [False]
    assert not _adv([0.0] * 4, PENALTIES, "token").amplified_groups.any()


def test_amplified_groups_by_batch_std():
    outcomes = torch.zeros(2, 4, dtype=torch.float64)
    folded = torch.tensor([PENALTIES, [0.0] * 4], dtype=torch.float64)
    assert amplified_groups(outcomes, folded, "batch").tolist() == [True, False]
    assert amplified_groups(outcomes, folded * 1000, "batch").tolist() == [False, False]  # std above 1: shrunk


def test_the_compact_trainer_counts_and_says_amplified_groups(tmp_path):
    """scalar_fold in the compact trainer: process/amplified_groups counts them, one message says so."""
    said = []
    cfg = TrainConfig(
        method="scalar_fold",
        iterations=2,
        tasks_per_iteration=2,
        num_generations=4,
        learning_rate=0.05,
        out_dir=str(tmp_path),
        micro_batch=8,
        process_weight=0.02,
    )
    rows = train(cfg, backend=fake_backend(calls=3), progress=False, log=said.append)
    assert all("process/amplified_groups" in r for r in rows)
    assert sum(r["process/amplified_groups"] for r in rows) > 0
    assert sum("process/amplified_groups" in s for s in said) == 1
