"""RlvpReward and RlvpGRPOTrainer inside the real TRL GRPOTrainer (rollout_func mode, CPU, tiny model):
the seams by value, rule file -> credits -> the [B, T] advantages the loss receives."""

from __future__ import annotations

import pytest
import torch
from trl import GRPOTrainer

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward

from .scripted import (
    CALL_CREDITS,
    RULES,
    changed,
    config,
    dataset,
    make_rollout,
    outcome_reward,
    script_ids,
    snapshot,
    tiny,
)

PLAN = ["read_then_cancel", "repeat_error", "malformed", "no_call"]
W = 0.5


class Recording:
    """Keeps what `_compute_loss` receives (advantages, completion ids and masks), per micro-step."""

    def _compute_loss(self, model, inputs):
        self.seen.append({k: inputs[k].detach().clone() for k in ("advantages", "completion_ids", "completion_mask")})
        return super()._compute_loss(model, inputs)


class RecordingRlvp(Recording, RlvpGRPOTrainer):
    seen: list


class RecordingStock(Recording, GRPOTrainer):
    seen: list


def _run(cls, tmp_path, rlvp, outcomes=(0, 0, 0, 0), **overrides):
    tok, model = tiny()
    trainer = cls(
        model=model,
        reward_funcs=[outcome_reward, rlvp],
        args=config(tmp_path, **overrides),
        train_dataset=dataset(),
        processing_class=tok,
        rollout_func=make_rollout(tok, PLAN, outcomes),
    )
    trainer.seen = []
    before = snapshot(trainer.model)
    trainer.train()
    return tok, trainer, before


def _expected_row(tok, ids: list[int]) -> tuple[str, list[float]]:
    """The script whose completion ids these are, and its expected process advantage per token."""
    for name in PLAN:
        script, _, spans = script_ids(tok, name)
        if ids[: len(script)] == script:
            row = [0.0] * len(ids)
            for (start, end), credit in zip(spans, CALL_CREDITS[name], strict=True):
                for t in range(start, end):
                    row[t] = W * credit
            return name, row
    raise AssertionError(f"unknown completion {ids}")


def test_each_calls_credit_lands_on_exactly_its_tokens(tmp_path):
    """A group whose outcomes all failed: the loss sees w x credit on the call's tokens and 0 elsewhere."""
    tok, trainer, before = _run(RecordingRlvp, tmp_path, RlvpReward(loads(RULES), process_weight=W))
    assert trainer.seen, "the loss was never computed"
    names = set()
    for batch in trainer.seen:
        adv = batch["advantages"]
        assert adv.shape == batch["completion_ids"].shape  # [B, T]
        for ids, row in zip(batch["completion_ids"].tolist(), adv.tolist(), strict=True):
            name, expected = _expected_row(tok, ids)
            names.add(name)
            assert row == pytest.approx(expected, abs=1e-7), name
    assert names == set(PLAN)
    assert changed(before, trainer.model)  # a live gradient from a group whose outcomes are all 0
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rlvp/live_groups", "rlvp/violations_per_episode", "rlvp/process_weight", "frac_reward_zero_std"} <= logged
    live = [e["rlvp/live_groups"] for e in trainer.state.log_history if "rlvp/live_groups" in e]
    zero_std = [e["frac_reward_zero_std"] for e in trainer.state.log_history if "frac_reward_zero_std" in e]
    assert live and all(v == 1.0 for v in live) and all(v == 1.0 for v in zero_std)


def test_the_stock_trainer_has_no_gradient_from_a_failed_group(tmp_path):
    """Under the stock GRPOTrainer the same group (all outcomes 0, no rule credit) is dead.  (A token-mode
    reward there is refused at its first call: test_trl_guards.py.)"""
    _, trainer, before = _run(RecordingStock, tmp_path, RlvpReward(loads(RULES), mode="scalar", process_weight=0.0))
    assert all(torch.count_nonzero(b["advantages"]) == 0 for b in trainer.seen)
    assert not changed(before, trainer.model)


def test_scalar_mode_adds_the_weighted_total_to_the_stock_reward(tmp_path):
    """Scalar mode under the stock trainer: reward = outcome + w x total credit per completion."""
    reward = RlvpReward(loads(RULES), mode="scalar", process_weight=W)
    _, trainer, before = _run(RecordingStock, tmp_path, reward)
    totals = {name: W * sum(CALL_CREDITS[name]) for name in PLAN}
    logged = [e["rewards/rlvp/mean"] for e in trainer.state.log_history if "rewards/rlvp/mean" in e]
    assert logged and all(v == pytest.approx(sum(totals.values()) / 4) for v in logged)
    assert changed(before, trainer.model)


def test_outcome_advantage_is_group_normalised(tmp_path):
    """With outcomes 1,0,0,0 the outcome part of the advantage is GRPO's (r - mean) / (std + 1e-4) on action tokens."""
    outcomes = (1, 0, 0, 0)
    tok, trainer, _ = _run(RecordingRlvp, tmp_path, RlvpReward(loads(RULES), process_weight=0.0), outcomes)
    r = torch.tensor(outcomes, dtype=torch.float64)
    want = ((r - r.mean()) / (r.std(unbiased=False) + 1e-4)).tolist()
    for batch in trainer.seen:
        for ids, row in zip(batch["completion_ids"].tolist(), batch["advantages"].tolist(), strict=True):
            name, _ = _expected_row(tok, ids)
            ids_script, mask, _ = script_ids(tok, name)
            a = want[PLAN.index(name)]
            assert row[: len(mask)] == pytest.approx([a * m for m in mask], abs=1e-5)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"])
def test_every_loss_type_trains_on_token_advantages(tmp_path, loss_type):
    """Every loss_type TRL offers takes the [B, T] advantages and moves the weights."""
    extra = {"epsilon_high": 5.0} if loss_type == "cispo" else {}
    if loss_type == "luspo":
        extra["importance_sampling_level"] = "sequence"
    _, trainer, before = _run(
        RecordingRlvp, tmp_path, RlvpReward(loads(RULES), process_weight=W), loss_type=loss_type, max_steps=1, **extra
    )
    assert trainer.seen and changed(before, trainer.model)


def test_gradient_accumulation_and_several_iterations(tmp_path):
    """gradient_accumulation_steps=2 and num_iterations=2: every micro-batch gets its rows' token advantages."""
    tok, trainer, before = _run(
        RecordingRlvp,
        tmp_path,
        RlvpReward(loads(RULES), process_weight=W),
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        num_iterations=2,
    )
    # 2 optimizer steps x 2 micro-batches; one generation serves both (2 iterations over it)
    assert len(trainer.seen) == 4
    assert torch.equal(trainer.seen[0]["completion_ids"], trainer.seen[2]["completion_ids"])
    for batch in trainer.seen:
        for ids, row in zip(batch["completion_ids"].tolist(), batch["advantages"].tolist(), strict=True):
            assert row == pytest.approx(_expected_row(tok, ids)[1], abs=1e-7)
    assert changed(before, trainer.model)


def test_the_trainer_needs_a_token_mode_reward(tmp_path):
    """RlvpGRPOTrainer without a token-mode RlvpReward says what to pass instead."""
    tok, model = tiny()
    with pytest.raises(ValueError, match="needs exactly one RlvpReward"):
        RlvpGRPOTrainer(
            model=model,
            reward_funcs=[outcome_reward, RlvpReward(loads(RULES), mode="scalar")],
            args=config(tmp_path),
            train_dataset=dataset(),
            processing_class=tok,
            rollout_func=make_rollout(tok, PLAN, (0, 0, 0, 0)),
        )
