"""Method table and DAPO dynamic sampling (issue 3, case 4)."""

import pytest

from trainer.dapo import dynamic_sampling
from trainer.methods import METHODS, get_method

from trainer_fakes import make_rollout


def _gen(outcomes_per_round, calls):
    def generate(rnd, n):
        calls.append((rnd, n))
        outs = outcomes_per_round(rnd)
        return [[make_rollout(f"t{rnd}_{j}", [1], o) for o in outs] for j in range(n)]

    return generate


def test_all_zero_rewards_stop_after_exactly_cap_rounds():
    """Case 4: every reward 0, cap 3: exactly 3 rounds, every episode counted, clear message."""
    calls = []
    res = dynamic_sampling(_gen(lambda r: [0.0] * 4, calls), n_groups=2, max_rounds=3)
    assert res.rounds == 3 and len(calls) == 3
    assert res.groups == [] and res.episodes_generated == 3 * 2 * 4 and res.dropped_groups == 6
    assert "cap of 3 rounds" in res.message and "no gradient" in res.message


def test_resamples_until_enough_live_groups():
    """Round 0 all-fail, round 1 mixed: stops after 2 rounds with full batch, dropped episodes counted."""
    calls = []
    res = dynamic_sampling(_gen(lambda r: [0.0, 0.0] if r == 0 else [0.0, 1.0], calls), n_groups=3, max_rounds=5)
    assert res.rounds == 2 and len(res.groups) == 3
    assert res.episodes_generated == 12 and res.message == ""


def test_method_table():
    """The six methods exist with their credit modes; unknown names list the known ones."""
    assert set(METHODS) == {"grpo", "dapo", "scalar_fold", "rlvp", "rlvp_auto", "rlvp_noanneal"}
    assert get_method("rlvp").credit_mode == "token" and get_method("scalar_fold").credit_mode == "scalar"
    assert not get_method("rlvp_noanneal").anneal and get_method("dapo").dynamic_sampling
    assert get_method("rlvp_auto").rules_field == "auto_rules"
    with pytest.raises(ValueError, match="choose one of"):
        get_method("ppo")
    with pytest.raises(ValueError, match="dapo_max_rounds"):
        dynamic_sampling(lambda r, n: [], 1, 0)
