"""Issue 9, section 2 (trainer side): a None/NaN/inf credit never stops training and never spreads.

A credit source -- a user function ``fn(episode) -> list[float]`` or an object with
``score(episode) -> list[Credit]`` -- that returns a bad value for some calls: the run
completes, ``process/flagged_credits`` counts exactly the bad values of each
iteration, one warning names the source, the flagged calls carry only the outcome
advantage, and advantages, loss and gradient norm stay finite.
"""

from __future__ import annotations

import logging
import math

import attrs
import pytest
import torch

from rlvp_dsl import attach, loads
from trainer import loop, update
from trainer.config import TrainConfig
from trainer.loop import check_outcomes, train

from trainer_fakes import fake_backend, make_rollout

torch.set_num_threads(1)

BAD = {"t0": None, "t3": float("nan"), "t4": float("inf")}  # by the call's tool (its first sampled token)
GOOD = {"t1": 0.25, "t2": -0.5}


def _cfg(tmp_path, **kw):
    base = dict(
        method="rlvp",
        iterations=3,
        tasks_per_iteration=2,
        num_generations=4,
        learning_rate=0.05,
        out_dir=str(tmp_path),
        micro_batch=5,
    )
    base.update(kw)
    return TrainConfig(**base)


def _spy(monkeypatch):
    """Record every advantage tensor and loss the loop computes (its own functions, wrapped)."""
    seen = {"adv": [], "loss": []}
    real_adv, real_loss = loop.compute_advantages, update.policy_loss

    def compute_advantages(*a, **kw):
        out = real_adv(*a, **kw)
        seen["adv"].append(out)
        return out

    def policy_loss(*a, **kw):
        out = real_loss(*a, **kw)
        seen["loss"].append(out)
        return out

    monkeypatch.setattr(loop, "compute_advantages", compute_advantages)
    monkeypatch.setattr(update, "policy_loss", policy_loss)
    return seen


class NaNProgram:
    """A compiled program whose credits on some calls are replaced by bad values."""

    path = "nan_rules.rlvp"

    def __init__(self):
        self.program = loads("violation every_call (-0.1) { on call }\n")
        self.bad_returned = 0

    def score(self, episode):
        credits = []
        for c in self.program.score(episode):
            tool = episode.events[c.event_index].tool
            if tool in BAD:
                self.bad_returned += 1
                credits.append(attrs.evolve(c, value=BAD[tool]))
            else:
                credits.append(c)
        return credits


@pytest.mark.parametrize("source", ["function", "program"])
def test_bad_credits_are_counted_and_never_reach_the_update(tmp_path, monkeypatch, caplog, source):
    """The run completes; the per-iteration counter equals the bad values returned; everything stays finite."""
    monkeypatch.setattr(attach, "_warned", set())  # one warning per source and rule, counted from here
    be = fake_backend(calls=3)
    returned = {"bad": 0}
    if source == "function":

        def user_credits(episode):
            out = []
            for e in episode.calls:
                value = BAD.get(e.tool, GOOD.get(e.tool, 0.0))
                returned["bad"] += e.tool in BAD
                out.append(value)
            return out

        be.credit_source = user_credits
    else:
        be.credit_source = NaNProgram()
    per_iteration, batches = [], []

    def on_batch(it, groups, credits, weight):
        bad_so_far = returned["bad"] if source == "function" else be.credit_source.bad_returned
        per_iteration.append(bad_so_far - sum(per_iteration))
        batches.append((groups, credits))

    seen = _spy(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="rlvp_dsl.attach"):
        rows = train(_cfg(tmp_path), backend=be, progress=False, on_batch=on_batch)

    assert len(rows) == 3
    assert [r["process/flagged_credits"] for r in rows] == per_iteration
    assert sum(per_iteration) > 0 and all(n > 0 for n in per_iteration)  # the case is exercised every iteration
    name = "user_credits" if source == "function" else "nan_rules.rlvp"
    warnings = [rec for rec in caplog.records if rec.name == "rlvp_dsl.attach"]
    assert len(warnings) == 1 and name in warnings[0].getMessage()  # one per source and rule, naming it
    # a flagged call carries only the outcome advantage; a good call its credit on top
    for (groups, credits), adv in zip(batches, seen["adv"], strict=True):
        assert torch.isfinite(adv.advantages).all() and torch.isfinite(adv.process).all()
        batch = [r for g in groups for r in g]
        for b, (r, cc) in enumerate(zip(batch, [c for cs in credits for c in cs], strict=True)):
            n_bad = sum(e.tool in BAD for e in r.episode.calls)
            assert len(cc.flagged) == n_bad
            for (start, end), e, value in zip(r.call_spans, r.episode.calls, cc.values, strict=True):
                if e.tool in BAD:
                    assert value == 0.0
                    assert torch.equal(adv.advantages[b, start:end], adv.outcome[b].expand(end - start))
    assert seen["loss"] and all(torch.isfinite(out.loss) for out in seen["loss"])
    for r in rows:
        assert all(math.isfinite(r[k]) for k in ("loss/policy", "loss/grad_norm", "policy/entropy"))
    assert any(r["loss/grad_norm"] > 0 for r in rows)  # a real update happened
    assert all(torch.isfinite(p).all() for p in be.model.parameters())
    assert all(line.count("NaN") == 0 for line in (tmp_path / "metrics.jsonl").read_text().splitlines())


def test_clean_credits_flag_nothing(tmp_path):
    """With a finite credit source the counter is 0 on every iteration."""
    rows = train(_cfg(tmp_path, iterations=2), backend=fake_backend(), progress=False)
    assert [r["process/flagged_credits"] for r in rows] == [0, 0]


def test_a_non_finite_outcome_is_a_clear_error():
    """An outcome is not a credit: NaN there is reported with the episode, not dropped."""
    good, bad = make_rollout("task", [2], 1.0), make_rollout("task", [2], float("nan"))
    check_outcomes([good])
    with pytest.raises(ValueError, match=r"outcome of episode 'task' \(task 'task'\) must be a finite number"):
        check_outcomes([good, bad])


def test_a_non_finite_loss_is_a_clear_error_before_any_step(tmp_path, monkeypatch):
    """Log-probs that overflow give an error naming the micro-batch; the weights do not move."""
    be = fake_backend()
    real = update.completion_logprobs

    def broken(model, rollouts, *a, **kw):
        logp, ent = real(model, rollouts, *a, **kw)
        return logp * float("nan"), ent

    monkeypatch.setattr(update, "completion_logprobs", broken)
    before = [p.detach().clone() for p in be.model.parameters()]
    with pytest.raises(ValueError, match=r"the loss of micro-batch 0 \(episodes .*\) is nan"):
        train(_cfg(tmp_path, iterations=1), backend=be, progress=False)
    assert all(torch.equal(p, q) for p, q in zip(be.model.parameters(), before, strict=True))
