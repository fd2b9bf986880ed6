"""The rlvp_token estimator through verl's own compute_advantage, against the compact trainer's
compute_advantages on the same hand-made batch, and the token channel's edge cases."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402

import rlvp_dsl.integrations.verl  # noqa: E402,F401  (registers)
from rlvp_dsl.attach import CallCredits, token_credits  # noqa: E402
from rlvp_dsl.integrations.verl.channel import split_channel, write_row  # noqa: E402
from rlvp_dsl.integrations.verl.settings import SettingsError  # noqa: E402
from rlvp_dsl.advantages import compute_advantages, group_outcome_advantages, token_advantages  # noqa: E402

T = 12
# Two groups of three rollouts.  1 = generated, 0 = tool output; trailing 0s are padding.
MASKS = [
    [1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0],
    [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
    [1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0],
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
]
# Call spans and their credits (dyadic: exact in float32); no span reaches a row's last action token.
SPANS = [[(0, 3), (6, 8)], [(1, 4)], [(0, 3), (6, 9)], [(2, 4)], [], [(0, 1)]]
VALUES = [[-0.5, 0.25], [0.5], [-0.25, -0.5], [0.75], [], [-1.0]]
OUTCOMES = [[1.0, 0.0, 0.5], [1.0, 1.0, 1.0]]  # the second group is constant: stock GRPO gives it nothing
UIDS = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
W = 0.5


def _credits(unattached=0.0):
    return [CallCredits(tuple(v), tuple(int(x < 0) for x in v), tuple(0 for _ in v), unattached) for v in VALUES]


def _channel(credits):
    """token_level_rewards as the rlvp_tool_agent loop writes it (channel.write_row)."""
    rows, dropped = [], []
    flat = [r for g in OUTCOMES for r in g]
    for i, cc in enumerate(credits):
        process = token_credits(cc.values, SPANS[i], T, MASKS[i])
        process = [p + cc.unattached * m for p, m in zip(process, MASKS[i])]
        row, d = write_row(flat[i], process, MASKS[i])
        rows.append(row)
        dropped.append(d)
    return torch.tensor(rows, dtype=torch.float32), dropped


def _batch(rewards):
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.tensor(MASKS)}, non_tensors={"uid": UIDS.copy()}
    )


def _algorithm(**rlvp):
    return OmegaConf.create(
        {
            "adv_estimator": "rlvp_token",
            "use_kl_in_reward": False,
            "norm_adv_by_std_in_grpo": True,
            "rlvp": {"process_weight": W, **rlvp},
        }
    )


def _compact(credits, mode="token", weight=W):
    grouped = [credits[0:3], credits[3:6]]
    spans = [SPANS[0:3], SPANS[3:6]]
    return compute_advantages(
        OUTCOMES, grouped, spans, torch.tensor(MASKS), credit_mode=mode, process_weight=weight
    ).advantages


def test_verl_compute_advantage_equals_the_compact_trainer():
    """verl's compute_advantage with rlvp_token gives exactly the compact trainer's advantages."""
    rewards, dropped = _channel(_credits())
    assert dropped == [0.0] * 6
    out = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=_algorithm())
    expected = _compact(_credits())
    assert torch.equal(out.batch["advantages"], expected)
    assert torch.equal(out.batch["returns"], expected)
    # the constant group is live only through the process credit
    assert out.batch["advantages"][3:6][torch.tensor(MASKS[3:6]) == 1].abs().sum() > 0


def test_rlvp_token_is_the_shared_advantage_combination():
    """With a weight and credits that are not exact in float32, rlvp_token is rlvp_dsl.advantages.token_advantages
    (mask * A_out in float32, plus w * P in float64, rounded once) on the channel's outcomes and credit."""
    credits = [
        CallCredits(tuple(0.1 * (k + 1) * x for x in v), tuple(int(x < 0) for x in v), tuple(0 for _ in v))
        for k, v in enumerate(VALUES)
    ]
    rewards, _ = _channel(credits)
    w = 0.3
    out = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=_algorithm(process_weight=w))
    outcomes, process = split_channel(rewards, torch.tensor(MASKS))
    a_out = group_outcome_advantages(outcomes, [[0, 1, 2], [3, 4, 5]], "group", 1e-4)
    expected = token_advantages(a_out, torch.tensor(MASKS), process, w)
    assert torch.equal(out.batch["advantages"], expected)


def test_the_v1_trainer_path_routes_rlvp_token_unchanged():
    """verl's v1 trainer calls compute_advantage_for_multi_trajectories; rlvp_token goes through it unchanged."""
    rewards, _ = _channel(_credits())
    keys = [f"{u}_{k % 3}_0" for k, u in enumerate(UIDS)]
    out = compute_advantage_for_multi_trajectories(
        _batch(rewards), batch_keys=keys, adv_estimator="rlvp_token", num_repeat=3, config=_algorithm()
    )
    assert torch.equal(out.batch["advantages"], _compact(_credits()))


def test_process_weight_is_read_from_a_composed_verl_config():
    """`+algorithm.rlvp.process_weight=...` on verl's own Hydra config reaches the estimator."""
    import os

    from hydra import compose, initialize_config_dir

    import verl

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(
            "ppo_trainer", overrides=["algorithm.adv_estimator=rlvp_token", "+algorithm.rlvp.process_weight=0.25"]
        )
    rewards, _ = _channel(_credits())
    out = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=cfg.algorithm)
    assert torch.equal(out.batch["advantages"], _compact(_credits(), weight=0.25))


def test_defaults_without_rlvp_settings():
    """With verl's AlgoConfig dataclass or no config the weight is 1.0 and the scaling is per group."""
    rewards, _ = _channel(_credits())
    for config in (AlgoConfig(adv_estimator="rlvp_token"), None):
        out = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=config)
        assert torch.equal(out.batch["advantages"], _compact(_credits(), weight=1.0))


def test_unattached_credit_reaches_every_action_token_but_the_last():
    """Credit on assistant turns: equal to the compact trainer except on each row's last action token,
    which carries the outcome only (the difference there is exactly w * u)."""
    u = -0.125
    rewards, dropped = _channel(_credits(u))
    assert dropped == [u] * 6
    got = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=_algorithm()).batch["advantages"]
    expected = _compact(_credits(u))
    mask = torch.tensor(MASKS)
    last = torch.tensor([max(t for t in range(T) if m[t]) for m in MASKS])
    at_last = torch.zeros_like(mask, dtype=torch.bool)
    at_last[torch.arange(6), last] = True
    assert torch.equal(got[~at_last], expected[~at_last])
    assert torch.equal(expected[at_last] - got[at_last], torch.full((6,), W * u))


def test_stock_scalar_rewards_read_as_outcome():
    """A stock reward (scalar at the last response token, tool output included) is all outcome:
    rlvp_token then equals the compact trainer's outcome-only advantages."""
    flat = [r for g in OUTCOMES for r in g]
    rewards = torch.zeros(6, T)
    for i, m in enumerate(MASKS):
        length = T if i == 0 else max(t for t in range(T) if m[t]) + 1  # row 0 ends in 2 tool tokens
        rewards[i, length - 1] = flat[i]
    got = compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=_algorithm()).batch["advantages"]
    assert torch.equal(got, _compact(_credits(), mode="none"))


def test_split_channel_edge_rows():
    """A row without action tokens is all outcome; a single action token carries only the outcome."""
    X = torch.tensor([[0.0, 0.0, 2.0], [3.0, 0.0, 0.0], [0.5, 1.5, 0.0]])
    M = torch.tensor([[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    outcomes, process = split_channel(X, M)
    assert outcomes.tolist() == [2.0, 3.0, 1.5]
    assert process.tolist() == [[0, 0, 0], [0, 0, 0], [0.5, 0, 0]]
    with pytest.raises(ValueError, match="did not generate"):
        write_row(1.0, [0.0, 0.5], [1, 0])


def test_ragged_groups_and_the_constant_group_rule():
    """Groups of different sizes normalise separately; a single-rollout group gets exactly 0."""
    X = torch.tensor([[1.0], [0.0], [0.0], [7.0]])
    M = torch.ones(4, 1)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": X, "response_mask": M},
        non_tensors={"uid": np.array(["a", "a", "b", "c"], dtype=object)},
    )
    adv = compute_advantage(data, adv_estimator="rlvp_token", config=_algorithm()).batch["advantages"]
    assert adv[2:].tolist() == [[0.0], [0.0]] and adv[0, 0] > 0 > adv[1, 0]
    with pytest.raises(ValueError, match="needs groups of one size"):
        compute_advantage(data, adv_estimator="rlvp_token", config=_algorithm(scale_rewards="batch"))


def test_settings_errors_are_loud():
    """use_kl_in_reward, a typo in algorithm.rlvp and a missing uid each raise naming the key."""
    rewards, _ = _channel(_credits())
    kl = OmegaConf.merge(_algorithm(), {"use_kl_in_reward": True})
    with pytest.raises(SettingsError, match="use_kl_in_reward' must be false"):
        compute_advantage(_batch(rewards), adv_estimator="rlvp_token", config=kl)
    with pytest.raises(SettingsError, match="unknown key.*'process_wieght'"):
        compute_advantage(
            _batch(rewards), adv_estimator="rlvp_token", config=OmegaConf.create({"rlvp": {"process_wieght": 1}})
        )
    data = _batch(rewards)
    data.non_tensor_batch.pop("uid")
    with pytest.raises(ValueError, match="needs the group ids"):
        compute_advantage(data, adv_estimator="rlvp_token", config=_algorithm())
