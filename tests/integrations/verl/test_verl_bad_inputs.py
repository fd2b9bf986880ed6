"""Bad input to the verl side, replayed from a table (issue 17: a new user's mistakes).

The settings rlvp reads from a verl config (`rule_settings`, `estimator_settings`) and the
``rlvp_token`` estimator's arguments: each bad value is a `SettingsError` (or, for the estimator's
tensors, a ValueError) naming the key or argument, never an OverflowError, a TypeError from inside
or a silently accepted value.  Runs under .venv-verl (tests/integrations/verl/run.sh).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from rlvp_dsl.integrations.verl.estimator import rlvp_token_advantage  # noqa: E402
from rlvp_dsl.integrations.verl.settings import SettingsError, estimator_settings, rule_settings  # noqa: E402

RULES = str(Path(__file__).resolve().parents[3] / "rules" / "tau2_airline.rlvp")
R = "reward.reward_kwargs.rlvp"
A = "algorithm.rlvp"


def _reward(**values):
    return OmegaConf.create({"reward": {"reward_kwargs": {"rlvp": values}}})


RULE_CASES = [
    ("no-rules", _reward(), f"'{R}.rules' must name the rule file"),
    ("rules-empty", _reward(rules=""), f"'{R}.rules' must name the rule file"),
    ("rules-a-list", _reward(rules=[RULES]), f"'{R}.rules' must name the rule file"),
    ("rules-a-number", _reward(rules=5), f"'{R}.rules' must name the rule file"),
    ("rules-missing", _reward(rules="/nonexistent/r.rlvp"), "which is not a file"),
    ("rules-a-folder", _reward(rules="/tmp"), "which is not a file"),
    ("rules-a-device", _reward(rules="/dev/zero"), "which is not a file"),
    ("rules-relative-missing", _reward(rules="nope.rlvp"), "give an absolute path"),
    ("unknown-key", _reward(rules=RULES, rule="x"), "unknown key(s) 'rule' (did you mean 'rules'?)"),
    (
        "unknown-key-error-signal",
        _reward(rules=RULES, error_signl="trl"),
        f"'{R}' has unknown key(s) 'error_signl' (did you mean 'error_signal'?); known keys: rules, process_weight, "
        "error_signal, call_markers",
    ),
    ("process-weight-text", _reward(rules=RULES, process_weight="1"), f"'{R}.process_weight' must be a finite number"),
    ("process-weight-bool", _reward(rules=RULES, process_weight=True), "must be a finite number"),
    ("process-weight-nan", _reward(rules=RULES, process_weight=float("nan")), "must be a finite number"),
    ("process-weight-inf", _reward(rules=RULES, process_weight=float("inf")), "must be a finite number"),
    (
        "process-weight-400-digits",
        {"reward": {"reward_kwargs": {"rlvp": {"rules": RULES, "process_weight": 10**400}}}},
        "must be a finite number",
    ),
    ("process-weight-negative", _reward(rules=RULES, process_weight=-0.5), f"'{R}.process_weight' must be >= 0"),
    ("process-weight-none", _reward(rules=RULES, process_weight=None), "must be a finite number"),
    ("error-signal-unknown", _reward(rules=RULES, error_signal="vrl"), "did you mean 'verl'"),
    ("error-signal-number", _reward(rules=RULES, error_signal=5), f"'{R}.error_signal'"),
    ("error-signal-empty", _reward(rules=RULES, error_signal=""), f"'{R}.error_signal'"),
    ("markers-empty", _reward(rules=RULES, call_markers=["", ""]), "two non-empty strings"),
    ("markers-same", _reward(rules=RULES, call_markers=["<x>", "<x>"]), "two different strings"),
    ("markers-one", _reward(rules=RULES, call_markers=["<x>"]), "two non-empty strings"),
    ("markers-a-string", _reward(rules=RULES, call_markers="<x></x>"), "two non-empty strings"),
    ("section-a-list", {"reward": {"reward_kwargs": {"rlvp": [RULES]}}}, f"'{R}' must be a mapping"),
    ("section-a-string", {"reward": {"reward_kwargs": {"rlvp": RULES}}}, f"'{R}' must be a mapping"),
    ("config-none", None, f"'{R}.rules' must name the rule file"),
]


@pytest.mark.parametrize("config, words", [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_bad_rule_settings_are_refused_by_key(config, words):
    with pytest.raises(SettingsError) as raised:
        rule_settings(config)
    assert words in str(raised.value), str(raised.value)


ESTIMATOR_CASES = [
    ("process-weight-text", {"rlvp": {"process_weight": "x"}}, f"'{A}.process_weight' must be a finite number"),
    ("process-weight-nan", {"rlvp": {"process_weight": float("nan")}}, "must be a finite number"),
    ("process-weight-400-digits", {"rlvp": {"process_weight": 10**400}}, "must be a finite number"),
    ("process-weight-negative", {"rlvp": {"process_weight": -1.0}}, f"'{A}.process_weight' must be >= 0"),
    ("eps-negative", {"rlvp": {"eps": -1e-4}}, f"'{A}.eps' must be >= 0"),
    ("eps-inf", {"rlvp": {"eps": float("inf")}}, "must be a finite number"),
    ("scale-unknown", {"rlvp": {"scale_rewards": "batchh"}}, f"'{A}.scale_rewards' must be one of"),
    ("scale-a-list", {"rlvp": {"scale_rewards": ["group"]}}, f"'{A}.scale_rewards' must be one of"),
    ("unknown-key", {"rlvp": {"proces_weight": 1.0}}, "unknown key(s) 'proces_weight'"),
    (
        "unknown-key-near-miss",
        {"rlvp": {"process_weigth": 1.0}},
        f"'{A}' has unknown key(s) 'process_weigth' (did you mean 'process_weight'?); known keys: ",
    ),
    (
        "unknown-keys-one-near-miss",
        {"rlvp": {"process_weigth": 1.0, "zzz": 1}},
        "unknown key(s) 'process_weigth', 'zzz' (did you mean 'process_weight' for 'process_weigth'?)",
    ),
    ("section-a-list", {"rlvp": [1.0]}, f"'{A}' must be a mapping"),
    ("kl-in-reward", {"use_kl_in_reward": True}, "'algorithm.use_kl_in_reward' must be false"),
]


@pytest.mark.parametrize("algorithm, words", [c[1:] for c in ESTIMATOR_CASES], ids=[c[0] for c in ESTIMATOR_CASES])
def test_bad_estimator_settings_are_refused_by_key(algorithm, words):
    with pytest.raises(SettingsError) as raised:
        estimator_settings(algorithm)  # a plain dict, as a hand call gives (OmegaConf cannot hold 10**400)
    assert words in str(raised.value), str(raised.value)


ONES = torch.ones(4, 3)
GROUPS = [0, 0, 1, 1]

ADVANTAGE_CASES = [
    ("shapes-differ", (torch.zeros(4, 3), torch.ones(4, 2), GROUPS), "must be the same [B, T] shape"),
    ("one-dimensional", (torch.zeros(4), torch.ones(4), GROUPS), "must be the same [B, T] shape"),
    ("nan-reward", (torch.full((4, 3), float("nan")), ONES, GROUPS), "rewards must be finite"),
    ("inf-reward", (torch.full((4, 3), float("inf")), ONES, GROUPS), "rewards must be finite"),
    ("index-short", (torch.zeros(4, 3), ONES, [0, 0]), "index has 2 group ids for 4 rows"),
    ("index-long", (torch.zeros(4, 3), ONES, [0, 0, 1, 1, 2]), "index has 5 group ids for 4 rows"),
    ("index-missing", (torch.zeros(4, 3), ONES, None), "rlvp_token needs the group ids"),
    ("index-unhashable", (torch.zeros(4, 3), ONES, [[0], [0], [1], [1]]), "is not a str or number"),
]


@pytest.mark.parametrize(
    "rewards, mask, index, words", [c[1] + (c[2],) for c in ADVANTAGE_CASES], ids=[c[0] for c in ADVANTAGE_CASES]
)
def test_bad_estimator_arguments_are_a_value_error_naming_them(rewards, mask, index, words):
    with pytest.raises(ValueError) as raised:
        rlvp_token_advantage(rewards, mask, index=index)
    assert words in str(raised.value), str(raised.value)


def test_degenerate_batches_give_zero_advantages_not_an_error():
    """No rows, no tokens, no action token: advantages of the batch's shape, all 0."""
    for rewards, mask, index in (
        (torch.zeros(0, 3), torch.ones(0, 3), []),
        (torch.zeros(4, 0), torch.ones(4, 0), GROUPS),
        (torch.zeros(4, 3), torch.zeros(4, 3), GROUPS),
    ):
        advantages, returns = rlvp_token_advantage(rewards, mask, index=index)
        assert advantages.shape == rewards.shape and not advantages.any() and torch.equal(advantages, returns)
