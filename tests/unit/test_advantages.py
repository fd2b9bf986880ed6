"""Outcome and process advantages (issue 3, cases 1, 2 and 6)."""

import pytest
import torch

from rlvp_dsl.advantages import (
    compute_advantages,
    constant_groups,
    group_outcome_advantages,
    outcome_advantages,
    token_advantages,
)
from trainer.batch import pad_batch

from trainer_fakes import credits_of, make_rollout


def _adv(groups, credits, mode, **kw):
    rollouts = [r for g in groups for r in g]
    _, _, mask = pad_batch(rollouts)
    return compute_advantages(
        [[r.outcome for r in g] for g in groups],
        credits,
        [[r.call_spans for r in g] for g in groups],
        mask,
        credit_mode=mode,
        **kw,
    ), mask


def test_float_rounding_group_is_constant():
    """Case 1: rewards 0.1+0.2 and 0.3 give advantages below 1e-6, never blown up."""
    r = torch.tensor([[0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2]], dtype=torch.float64)
    for scale in ("group", "batch", "none"):
        a = outcome_advantages(r, scale, eps=1e-8)
        assert a.abs().max() < 1e-6
    assert constant_groups(r).tolist() == [True]


def test_constant_group_exactly_zero_under_batch_scaling():
    """Case 2: one constant, one mixed group, batch scaling: constant group exactly 0, mixed unaffected."""
    r = torch.tensor([[0.7, 0.7 + 1e-12, 0.7, 0.7], [0.0, 1.0, 0.0, 1.0]], dtype=torch.float64)
    a = outcome_advantages(r, "batch", eps=1e-4)
    assert torch.equal(a[0], torch.zeros(4))
    mixed = r[1] - r[1].mean()
    expected = mixed / (r.std(unbiased=False) + 1e-4)
    assert torch.allclose(a[1].double(), expected, atol=1e-6)
    # the mixed group alone, group scaling: +-1
    g = outcome_advantages(r, "group", eps=0.0)
    assert torch.allclose(g[1], torch.tensor([-1.0, 1.0, -1.0, 1.0]), atol=1e-6)


def test_constant_group_dead_and_mixed_live_with_tokens():
    """Per-token: a constant group with no process credit is dead; a mixed one is live."""
    groups = [
        [make_rollout("a", [3], 0.0) for _ in range(2)],
        [make_rollout("b", [3], 0.0), make_rollout("b", [3], 1.0)],
    ]
    adv, mask = _adv(groups, None, "none", scale_rewards="batch")
    assert adv.dead_groups.tolist() == [True, False]
    assert torch.equal(adv.advantages[:2], torch.zeros_like(adv.advantages[:2]))
    assert not adv.dead_iteration


def test_process_credit_lands_on_exactly_its_span():
    """Token-attached credit sits on the call's tokens only, not on tool-output tokens."""
    r = make_rollout("a", [2, 3], 0.0)
    groups = [[r, make_rollout("a", [2, 3], 0.0)]]
    credits = [[credits_of([-0.5, 1.0]), credits_of([0.0, 0.0])]]
    adv, mask = _adv(groups, credits, "token", process_weight=2.0)
    row = adv.advantages[0].tolist()
    # spans (0,2) obs (2,4) span (4,7) obs (7,9)
    assert row == [-1.0, -1.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0, 0.0]
    assert adv.dead_groups.tolist() == [False]  # all-fail group, but process credit gives gradient
    assert torch.equal(adv.advantages[1], torch.zeros(9))


def test_empty_span_gets_no_credit():
    """A call with an empty span gives its credit to no token (not the last one)."""
    r = make_rollout("a", [2, 0], 0.0)
    adv, _ = _adv([[r, make_rollout("a", [2, 0], 0.0)]], [[credits_of([0.0, -1.0]), credits_of([0.0, 0.0])]], "token")
    assert torch.equal(adv.advantages, torch.zeros_like(adv.advantages))
    assert adv.dead_iteration


def test_scalar_fold_moves_reward():
    """Scalar fold sums credit into the reward before the group advantage (all action tokens)."""
    groups = [[make_rollout("a", [2], 0.0), make_rollout("a", [2], 0.0)]]
    adv, mask = _adv(groups, [[credits_of([-1.0]), credits_of([0.0])]], "scalar", scale_rewards="none")
    assert adv.advantages[0].tolist() == [-0.5, -0.5, 0.0, 0.0]
    assert adv.advantages[1].tolist() == [0.5, 0.5, 0.0, 0.0]


def test_extra_zero_credit_calls_never_change_totals():
    """Case 6: same outcome and useful calls, 0-3 extra zero-credit calls: equal summed advantages."""
    useful = [0.5, 0.5]
    for outcome in (0.0, 1.0):
        group = [make_rollout("a", [3, 3] + [2] * k, outcome) for k in range(4)]
        credits = [[credits_of(useful + [0.0] * k) for k in range(4)]]
        for mode in ("token", "scalar"):
            for norm in ("none", "group_rms"):
                adv, mask = _adv([group], credits, mode, process_norm=norm)
                token_sums = (adv.advantages * mask).sum(dim=1)
                assert torch.allclose(token_sums, token_sums[0].expand(4)), (mode, norm)
                totals = adv.episode_totals()
                assert torch.allclose(totals, totals[0].expand(4))


def test_extra_calls_never_raise_total_in_mixed_group():
    """Case 6 in a mixed group: an episode with extra zero-credit calls never gets a higher total."""
    base = make_rollout("a", [3], 1.0)
    extra = make_rollout("a", [3, 2, 2], 1.0)
    fail = make_rollout("a", [3], 0.0)
    credits = [[credits_of([0.5]), credits_of([0.5, 0.0, 0.0]), credits_of([0.5])]]
    adv, mask = _adv([[base, extra, fail]], credits, "token")
    assert adv.episode_totals()[1] <= adv.episode_totals()[0] + 1e-7


def test_group_rms_normalisation_scales_not_centres():
    """group_rms divides by the RMS episode credit, leaving zero-credit tokens at zero."""
    groups = [[make_rollout("a", [1], 0.0), make_rollout("a", [1], 0.0)]]
    adv, _ = _adv(groups, [[credits_of([-2.0]), credits_of([0.0])]], "token", process_norm="group_rms")
    rms = (4.0 / 2) ** 0.5
    assert abs(adv.advantages[0, 0].item() - (-2.0 / rms)) < 1e-6
    assert adv.advantages[1, 0].item() == 0.0


def test_constant_group_gets_only_kl_gradient_under_batch_scaling():
    """Case 2 with KL on: the constant group's tokens get exactly the KL-only gradient; the mixed group's differ."""
    from trainer.loss import policy_loss

    groups = [
        [make_rollout("a", [2], 1.0), make_rollout("a", [2], 1.0)],
        [make_rollout("b", [2], 0.0), make_rollout("b", [2], 1.0)],
    ]
    adv, mask = _adv(groups, None, "none", scale_rewards="batch")
    assert torch.equal(adv.advantages[:2], torch.zeros_like(adv.advantages[:2]))
    ref = torch.full(mask.shape, -1.0)
    grads = []
    for A in (adv.advantages, torch.zeros_like(adv.advantages)):
        logp = torch.full(mask.shape, -0.7, requires_grad=True)
        policy_loss(logp, logp.detach(), A, mask, beta=0.1, ref_logp=ref).loss.backward()
        grads.append(logp.grad)
    assert torch.equal(grads[0][:2], grads[1][:2])
    assert not torch.equal(grads[0][2:], grads[1][2:])


def test_non_finite_inputs_are_named_errors_never_spread():
    """A NaN outcome, weight or hand-built call credit is a ValueError naming where it is, not a NaN batch."""
    import pytest

    from rlvp_dsl.attach import CallCredits

    group = [make_rollout("a", [2, 1], 1.0), make_rollout("a", [2, 1], 0.0)]
    good = [[credits_of([0.5, 0.0]), credits_of([0.0, -1.0])]]
    adv, _ = _adv([group], good, "token")
    assert torch.isfinite(adv.advantages).all()
    bad_call = [[credits_of([0.5, 0.0]), CallCredits((0.0, float("nan")), (0, 0), (0, 0))]]
    with pytest.raises(ValueError, match=r"credit of call 1 \(group 0, rollout 1\) must be finite \(got nan\)"):
        _adv([group], bad_call, "token")
    bad_turn = [[credits_of([0.5, 0.0]), CallCredits((0.0, 0.0), (0, 0), (0, 0), unattached=float("inf"))]]
    with pytest.raises(ValueError, match=r"unattached credit \(group 0, rollout 1\) must be finite"):
        _adv([group], bad_turn, "scalar")
    with pytest.raises(ValueError, match="process_weight must be finite"):
        _adv([group], good, "token", process_weight=float("nan"))
    group[1].outcome = float("nan")
    with pytest.raises(ValueError, match=r"rewards must be finite \(group 0, rollout 1 is nan\)"):
        _adv([group], good, "none")


def test_token_advantages_is_the_combination_in_float64_rounded_once():
    """A = mask * A_out + w * P: the outcome part in float32, the sum with w * P in float64, one rounding."""
    a_out = torch.tensor([0.1, -0.7], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    process = torch.tensor([[0.3, 0.0, 0.0], [0.0, 0.0, -1.1]], dtype=torch.float64)
    got = token_advantages(a_out, mask, process, 0.3)
    outcome_part = a_out[:, None] * mask.float()
    assert got.dtype == torch.float32
    assert torch.equal(got, (outcome_part.double() + 0.3 * process).float())
    assert torch.equal(token_advantages(a_out, mask), outcome_part)


def test_ragged_groups_match_the_stacked_outcome_advantages():
    """Groups given as row numbers (verl) get exactly the [n_groups, G] result; ragged sizes stack apart."""
    rewards = torch.tensor([[1.0, 0.0, 0.5], [0.2, 0.2, 0.9]])
    flat = rewards.reshape(-1)
    got = group_outcome_advantages(flat, [[0, 1, 2], [3, 4, 5]], "group", 1e-4)
    assert torch.equal(got, outcome_advantages(rewards).reshape(-1))
    ragged = group_outcome_advantages(torch.tensor([1.0, 0.0, 3.0]), [[0, 1], [2]], "group", 1e-4)
    assert ragged[2] == 0.0 and ragged[0] > 0 > ragged[1]


def test_the_credit_maths_import_no_trainer():
    """Importing rlvp_dsl.advantages loads nothing under trainer/ (the credit maths stand without the compact trainer)."""
    import subprocess
    import sys

    code = (
        "import sys, rlvp_dsl.advantages; "
        "bad = [m for m in sys.modules if m == 'trainer' or m.startswith('trainer.')]; assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_a_credit_mode_without_credits_is_refused():
    """credit_mode token or scalar with credits=None is a ValueError, not silently outcome-only."""
    masks = torch.ones(2, 3)
    for mode in ("token", "scalar"):
        with pytest.raises(ValueError, match=f"credit_mode '{mode}' needs the per-call credits"):
            compute_advantages([[1.0, 0.0]], None, [[[], []]], masks, credit_mode=mode)
