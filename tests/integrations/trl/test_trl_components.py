"""RlvpReward(..., components=True): one TRL reward function per rule, logged by a real GRPOTrainer."""

from __future__ import annotations

import pytest
from trl import GRPOTrainer

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpReward, RlvpRuleReward

from .scripted import RULES, SCRIPTS, config, dataset, make_rollout, outcome_reward, tiny

PLAN = ["read_then_cancel", "repeat_error", "malformed", "no_call"]
#: each script's credit per rule under RULES (errored_call: -0.1 a failed call; repeat_error: -0.3).
PER_RULE = {
    "read_then_cancel": {"errored_call": 0.0, "repeat_error": 0.0},
    "repeat_error": {"errored_call": -0.2, "repeat_error": -0.3},
    "malformed": {"errored_call": -0.1, "repeat_error": 0.0},
    "no_call": {"errored_call": 0.0, "repeat_error": 0.0},
}


def _batch():
    prompts = [[{"role": "user", "content": "please"}] for _ in PLAN]
    messages = [SCRIPTS[name][1] for name in PLAN]
    return prompts, messages


def test_components_split_the_scalar_reward_by_rule():
    w = 0.5
    reward = RlvpReward(loads(RULES), mode="scalar", process_weight=w, components=True)
    parts = list(reward)
    assert [p.__name__ for p in parts] == ["rlvp/errored_call", "rlvp/repeat_error"]
    assert all(isinstance(p, RlvpRuleReward) for p in parts)
    prompts, messages = _batch()
    completions = [[] for _ in PLAN]
    got = {p.rule: p(prompts=prompts, completions=completions, rlvp_messages=messages) for p in parts}
    rows = reward.last_rows
    parts[0](prompts=prompts, completions=completions, rlvp_messages=messages)
    assert reward.last_rows is rows  # one TRL batch is read once, whatever the number of rules
    for rule, values in got.items():
        assert values == pytest.approx([w * PER_RULE[name][rule] for name in PLAN])
    total = RlvpReward(loads(RULES), mode="scalar", process_weight=w)(
        prompts=prompts, completions=completions, rlvp_messages=messages
    )
    assert [a + b for a, b in zip(got["errored_call"], got["repeat_error"])] == pytest.approx(total)
    assert total == pytest.approx([0.0, -0.25, -0.05, 0.0])


def test_trl_logs_each_rule(tmp_path):
    w = 0.5
    tok, model = tiny()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[outcome_reward, *RlvpReward(loads(RULES), mode="scalar", process_weight=w, components=True)],
        args=config(tmp_path, max_steps=1),
        train_dataset=dataset(),
        processing_class=tok,
        rollout_func=make_rollout(tok, PLAN, (1, 0, 0, 0)),
    )
    trainer.train()
    (log,) = [e for e in trainer.state.log_history if "rewards/rlvp/errored_call/mean" in e]
    for rule in ("errored_call", "repeat_error"):
        assert log[f"rewards/rlvp/{rule}/mean"] == pytest.approx(w * sum(PER_RULE[n][rule] for n in PLAN) / 4)
    assert log["reward"] == pytest.approx(0.25 + w * (-0.3 - 0.3) / 4)  # outcome + both rules, as the scalar reward


def test_components_are_refused_where_they_would_mislead():
    with pytest.raises(ValueError, match="components=True splits scalar mode"):
        RlvpReward(loads(RULES), components=True)
    with pytest.raises(TypeError, match="components=True"):
        list(RlvpReward(loads(RULES), mode="scalar"))
    with pytest.raises(TypeError, match="True or False"):
        RlvpReward(loads(RULES), mode="scalar", components="yes")
