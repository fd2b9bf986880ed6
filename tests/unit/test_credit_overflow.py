"""Issue 17, section 2: credit sums that overflow are flagged and isolated like non-finite credits.

Two finite weights of -1e308 on one call sum to -inf; a single -1e308 is a finite float64
but no float32 advantage.  Neither may stop training or spread: the call (or the episode's
process part) is dropped, counted in ``process/flagged_credits``, and everything else keeps
its credit.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch

from rlvp_dsl import attach, check_text, loads
from rlvp_dsl.attach import call_credits, per_call_values
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.advantages import compute_advantages
from trainer.config import TrainConfig
from trainer.loop import train

from trainer_fakes import credits_of, fake_backend, make_rollout

torch.set_num_threads(1)

HUGE = -1e308  # the largest weight RV104 accepts is below 1.8e308; two of them overflow


def _episode(*tools: str) -> Episode:
    return Episode("ep", tuple(Event(index=k, kind="call", tool=t, arguments={}) for k, t in enumerate(tools)))


def test_two_finite_credits_that_overflow_on_one_call_give_that_call_nothing(monkeypatch, caplog):
    monkeypatch.setattr(attach, "_warned", set())
    program = loads(
        f"tool a : write\ntool b : write\nviolation v1 ({HUGE}) {{ on call a }}\n"
        f"violation v2 ({HUGE}) {{ on call a }}\nviolation v3 (-0.5) {{ on call b }}\n"
    )
    episode = _episode("a", "b")
    with caplog.at_level(logging.WARNING, logger="rlvp_dsl.attach"):
        cc = call_credits(episode, program.score(episode), source="huge.rlvp")
    assert cc.values == (0.0, -0.5) and cc.total == -0.5
    assert cc.violations == (0, 1) and [c.rule for c in cc.credits] == ["v3"]
    assert len(cc.flagged) == 1 and "call 0" in cc.flagged[0] and "overflow" in cc.flagged[0]
    assert any("huge.rlvp" in r.getMessage() for r in caplog.records)


def test_calls_whose_episode_total_overflows_are_dropped_largest_first(monkeypatch):
    monkeypatch.setattr(attach, "_warned", set())
    program = loads(
        f"tool a : write\ntool b : write\nviolation big ({HUGE}) {{ on call }}\n"
        "violation small (-0.25) { on call b }\n"
    )
    episode = _episode("a", "b", "a")  # -1e308, -1e308 - 0.25, -1e308: finite per call, -inf in total
    cc = call_credits(episode, program.score(episode))
    assert math.isfinite(cc.total) and all(math.isfinite(v) for v in cc.values)
    assert sum(v == 0.0 for v in cc.values) == 2 and len(cc.flagged) == 2  # the fewest calls dropped
    assert all("episode's total overflow" in f for f in cc.flagged)
    # a plain per-call function: the same rule
    cc = per_call_values("fn", episode, [1e308, 1e308, 0.5])
    assert cc.values == (0.0, 1e308, 0.5) and len(cc.flagged) == 1 and math.isfinite(cc.total)


@pytest.mark.parametrize("mode", ["token", "scalar"])
@pytest.mark.parametrize("weight", [1.0, 3.0])
def test_a_credit_past_float32_is_isolated_to_its_episode(mode, weight):
    """-1e308 is a float64 but no float32 advantage (and w x 1e308 with w > 1 no float64)."""
    group = [make_rollout("a", [2], 0.0), make_rollout("a", [2], 0.0), make_rollout("a", [2], 0.0)]
    credits = [[credits_of([HUGE]), credits_of([-0.5]), credits_of([0.0])]]
    _, _, mask = __import__("trainer.batch", fromlist=["pad_batch"]).pad_batch(group)
    adv = compute_advantages(
        [[0.0, 0.0, 0.0]],
        credits,
        [[r.call_spans for r in group]],
        mask,
        credit_mode=mode,
        process_weight=weight,
        scale_rewards="none",
    )
    assert torch.isfinite(adv.advantages).all() and torch.isfinite(adv.process).all()
    assert adv.overflowed.tolist() == [True, False, False]
    if mode == "token":
        assert adv.advantages[0].tolist() == [0.0] * mask.shape[1]  # no credit, outcome advantage 0
        assert adv.advantages[1, :2].tolist() == [-0.5 * weight] * 2  # the others keep theirs
    else:
        assert adv.rewards.tolist() == pytest.approx([0.0, -0.5 * weight, 0.0])


def test_training_survives_credits_that_overflow(tmp_path, monkeypatch):
    """The compact trainer on rules whose sum overflows (two -1e308 on every t2 call): it runs, counts them."""
    monkeypatch.setattr(attach, "_warned", set())
    be = fake_backend(calls=3)
    be.credit_source = loads(
        f"tool t2 : write\ntool t3 : write\nviolation v1 ({HUGE}) {{ on call t2 }}\n"
        f"violation v2 ({HUGE}) {{ on call t2 }}\nviolation v3 (-0.5) {{ on call t3 }}\n"
    )
    cfg = TrainConfig(
        method="rlvp",
        iterations=2,
        tasks_per_iteration=2,
        num_generations=4,
        learning_rate=0.05,
        out_dir=str(tmp_path),
        micro_batch=8,
    )
    rows = train(cfg, backend=be, progress=False)
    assert len(rows) == 2 and sum(r["process/flagged_credits"] for r in rows) > 0
    assert all(math.isfinite(r["loss/policy"]) and math.isfinite(r["process/credit_per_episode"]) for r in rows)


def test_training_survives_one_credit_past_float32(tmp_path, monkeypatch):
    """A single -1e308 weight: finite as a credit, not as a float32 advantage; counted, never fatal."""
    be = fake_backend(calls=3)
    be.credit_source = loads(f"tool t2 : write\nviolation v1 ({HUGE}) {{ on call t2 }}\n")
    cfg = TrainConfig(
        method="rlvp",
        iterations=2,
        tasks_per_iteration=2,
        num_generations=4,
        learning_rate=0.05,
        out_dir=str(tmp_path),
        micro_batch=8,
    )
    rows = train(cfg, backend=be, progress=False)
    assert len(rows) == 2 and sum(r["process/flagged_credits"] for r in rows) > 0
    assert all(math.isfinite(r["loss/policy"]) for r in rows)


def _rv302(source: str) -> list:
    return [d for d in check_text(source, lints=True).diagnostics if d.code == "RV302"]


def test_rv302_never_suggests_a_weight_rv104_rejects():
    source = f"tool a : write\nviolation v1 ({HUGE}) {{ on call a }}\nviolation v2 ({HUGE}) {{ on call a }}\n"
    found = _rv302(source)
    assert len(found) == 1
    help_text = found[0].help
    assert "inf" not in help_text and "merge" in help_text
    three = source + f"violation v3 ({HUGE}) {{ on call a }}\n"
    assert all("inf" not in d.help for d in _rv302(three))
    # a weight that stays finite is still suggested
    ok = _rv302("tool a : write\nviolation v1 (-0.2) { on call a }\nviolation v2 (-0.3) { on call a }\n")
    assert "weight -0.5" in ok[0].help


def test_scoring_totals_leave_overflowing_sums_out_and_say_so(monkeypatch):
    """rlvp-score's summary on real tau-bench trajectories: before, -inf totals and a NaN correlation, unflagged."""
    from rlvp_dsl.readers import read_episodes
    from rlvp_dsl.report import render_summary, summarise

    from conftest import data_path

    monkeypatch.setattr(attach, "_warned", set())
    program = loads(
        f"violation v1 ({HUGE}) {{ on call }}\nviolation v2 ({HUGE}) {{ on call }}\n"
        "violation v3 (-0.5) { on assistant }\n"
    )
    path = data_path("tau_bench_v1/gpt-4o-airline.sample.json")
    episodes = list(read_episodes(str(path)))
    summary = summarise(program, [(e, program.score(e)) for e in episodes])
    calls = sum(len(e.calls) for e in episodes)
    assert summary.flagged_credits == calls > 0  # every call's two -1e308 overflow; v3's turns are kept
    assert math.isfinite(summary.mean_process_total) and summary.mean_process_total < 0
    by_rule = {r.name: r for r in summary.rules}
    assert by_rule["v1"].total == 0.0 and math.isfinite(by_rule["v3"].total)
    assert summary.process_outcome_correlation is None or math.isfinite(summary.process_outcome_correlation)
    assert f"flagged: {calls} credit sum(s) overflow a float" in render_summary(summary)
    # one -1e308 rule: the episode totals overflow; each keeps one call, the mean stays finite
    one = loads(f"violation v1 ({HUGE}) {{ on call }}\n")
    summary = summarise(one, [(e, one.score(e)) for e in episodes])
    assert summary.flagged_credits > 0 and math.isfinite(summary.rules[0].per_episode)
    assert math.isfinite(summary.mean_process_total)
