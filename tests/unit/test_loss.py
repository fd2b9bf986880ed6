"""Clipped surrogate, KL and aggregation (issue 3, case 3)."""

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from trainer.config import LOSS_TYPES
from trainer.loss import action_len, aggregate, kl_k3, normaliser, policy_loss

from tolerance import assert_all_close, assert_close, terms

torch.set_num_threads(1)


def test_kl_finite_for_huge_log_ratio_fp32():
    """Case 3: a log-ratio of 90 in fp32 keeps the loss finite; other tokens' KL unchanged."""
    logp = torch.tensor([[-1.0, -2.0, -91.0, -0.5]], requires_grad=True)
    ref = torch.tensor([[-1.2, -1.5, -1.0, -0.5]])
    kl = kl_k3(logp, ref)
    assert torch.isfinite(kl).all()
    r = ref - logp.detach()
    plain = torch.exp(r) - r - 1
    assert torch.allclose(kl[0, [0, 1, 3]], plain[0, [0, 1, 3]])
    mask = torch.ones_like(ref)
    out = policy_loss(logp, logp.detach(), torch.zeros_like(ref), mask, beta=0.1, ref_logp=ref)
    assert math.isfinite(out.loss.item())
    out.loss.backward()
    assert torch.isfinite(logp.grad).all()
    assert logp.grad[0, 2] < 0  # pulled back up towards the reference


def test_kl_finite_in_bf16():
    """Case 3: a log-ratio of 12 with bf16 inputs stays finite; other tokens match fp32 k3."""
    logp = torch.tensor([[-13.0, -1.0, -2.0]], dtype=torch.bfloat16)
    ref = torch.tensor([[-1.0, -1.0, -1.5]], dtype=torch.bfloat16)
    kl = kl_k3(logp, ref)
    assert kl.dtype == torch.float32 and torch.isfinite(kl).all()
    r = ref.float() - logp.float()
    assert torch.allclose(kl[0, 1:], (torch.exp(r) - r - 1)[0, 1:])
    out = policy_loss(logp, logp, torch.ones(1, 3), torch.ones(1, 3), beta=1.0, ref_logp=ref)
    assert math.isfinite(out.loss.item())


def test_masked_tokens_never_exponentiated():
    """Garbage log-probs on masked tokens (padding) do not leak into the loss."""
    logp = torch.tensor([[-1.0, float("-inf")]])
    ref = torch.tensor([[-1.0, 0.0]])
    out = policy_loss(
        logp, torch.tensor([[-1.0, 50.0]]), torch.ones(1, 2), torch.tensor([[1.0, 0.0]]), beta=0.5, ref_logp=ref
    )
    assert math.isfinite(out.loss.item())


def test_clip_active_only_outside_range():
    """Ratio above 1+eps with positive advantage is clipped (no gradient); inside it is not."""
    old = torch.zeros(1, 2)
    logp = torch.tensor([[math.log(1.5), math.log(1.1)]], requires_grad=True)
    out = policy_loss(logp, old, torch.ones(1, 2), torch.ones(1, 2), epsilon=0.2, loss_type="token_mean")
    out.loss.backward()
    assert logp.grad[0, 0] == 0.0 and logp.grad[0, 1] < 0
    assert out.clip_frac == 0.5


def test_aggregation_length_bias():
    """token_mean weighs tokens equally, seq_mean weighs episodes equally, constant divides by B * L
    (L = the most action tokens of one episode)."""
    per_tok = torch.tensor([[1.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    assert aggregate(per_tok, mask, "token_mean").item() == pytest.approx(6 / 5)
    assert aggregate(per_tok, mask, "seq_mean").item() == pytest.approx((1 + 2) / 2)
    assert aggregate(per_tok, mask, "constant").item() == pytest.approx(6 / 8)
    with pytest.raises(ValueError, match="loss_type"):
        aggregate(per_tok, mask, "sum")


def test_policy_gradient_direction():
    """With ratio 1, a positive advantage raises log-prob (negative gradient of the loss)."""
    logp = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    out = policy_loss(logp, logp.detach(), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    out.loss.backward()
    assert logp.grad[0, 0] < 0 < logp.grad[0, 1]


@pytest.mark.parametrize("loss_type", ["token_mean", "seq_mean", "constant"])
def test_micro_batch_shares_of_the_normaliser_sum_to_the_batch_loss(loss_type):
    """Weighing each micro-batch's loss by its share of the batch normaliser gives the batch's loss."""
    g = torch.Generator().manual_seed(0)
    per_token = torch.randn(5, 7, generator=g)
    mask = (torch.rand(5, 7, generator=g) > 0.4).float()
    mask[3] = 0.0  # an episode without action tokens
    L = action_len(mask)  # the batch's L, as the loop passes it to every micro-batch
    whole = aggregate(per_token, mask, loss_type)
    total = normaliser(mask, loss_type, L)
    parts = sum(
        aggregate(per_token[idx], mask[idx], loss_type, L) * normaliser(mask[idx], loss_type, L) / total
        for idx in ([0, 1], [2, 3], [4])
    )
    # 35 terms in other groupings, then a product and a division per part
    assert_close(parts, whole, n=terms(5 * 7, 3 * 2), scale=float(aggregate(per_token.abs(), mask, loss_type)))


@pytest.mark.parametrize("loss_type", ["token_mean", "seq_mean", "constant"])
def test_a_longer_tool_output_changes_neither_loss_nor_gradient(loss_type):
    """Only action tokens are normalised over: the same episodes with 9 tool-output tokens per call instead
    of 2 give the same loss and the same gradient through the loop's update (Dr. GRPO's L counts generated
    tokens, never tool output)."""
    from rlvp_dsl.advantages import compute_advantages
    from trainer.batch import pad_batch
    from trainer.config import TrainConfig
    from trainer.update import Learner, update_policy

    from trainer_fakes import FakeLM, credits_of, make_rollout

    results = []
    for obs_len in (2, 9):
        # a bigram model: an action token's log-prob does not depend on how many tool tokens precede it
        model = FakeLM(vocab=16, seed=3)
        batch = [make_rollout("a", [3, 1], 1.0, obs_len), make_rollout("a", [2, 4, 2], 0.0, obs_len)]
        _, _, cmask = pad_batch(batch)
        adv = compute_advantages(
            [[1.0, 0.0]],
            [[credits_of([0.5, -1.0]), credits_of([0.0, 2.0, -0.25])]],
            [[r.call_spans for r in batch]],
            cmask,
            credit_mode="token",
        )
        cfg = TrainConfig(loss_type=loss_type, max_grad_norm=0.0, micro_batch=1, out_dir="unused")
        params = list(model.parameters())
        learner = Learner(model, torch.optim.SGD(params, lr=0.0), params)
        stats = update_policy(cfg, learner, batch, adv.advantages, cmask, step=True)
        # ratio 1 (one pass): the per-token loss is -A, so sum|x_i| of the loss's sum is the aggregate of |A|
        magnitude = float(aggregate(adv.advantages.abs(), cmask, loss_type))
        results.append((stats.policy, [p.grad.clone() for p in params], cmask.shape))
    (loss_a, grad_a, shape_a), (loss_b, grad_b, shape_b) = results
    # another padding width sums in another order: embedding, output layer, then the batch's positions
    n = terms(model.emb.embedding_dim, model.out.out_features, shape_b[0] * shape_b[1])
    assert loss_a != 0.0
    assert_close(loss_a, loss_b, n=n, dtype=torch.float32, scale=magnitude, what="loss")  # logged as floats
    assert_all_close(grad_a, grad_b, n=n, what="gradients")
    assert any(a.abs().sum() > 0 for a in grad_a)


def _loss_and_grad(logp, old, adv, mask, ref, loss_type, beta):
    """(loss, gradient w.r.t. logp, sum|terms| of the loss's sum: Higham's sum|x_i| for `assert_close`)."""
    from unittest import mock

    from trainer import loss as loss_mod

    seen = []
    real = loss_mod.aggregate

    def spy(per_token, m, kind, max_len=None):
        if kind == loss_type and per_token.requires_grad:
            seen.append(float((per_token.detach() * m).abs().sum() / normaliser(m, kind, max_len)))
        return real(per_token, m, kind, max_len)

    logp = logp.clone().requires_grad_(True)
    with mock.patch.object(loss_mod, "aggregate", spy):
        out = policy_loss(logp, old, adv, mask, beta=beta, ref_logp=ref, loss_type=loss_type)
    out.loss.backward()
    (magnitude,) = seen
    return out.loss.detach(), logp.grad, magnitude


@settings(max_examples=40)
@given(
    st.sampled_from(LOSS_TYPES),
    st.sampled_from([0.0, 0.1]),
    st.integers(1, 5),
    st.integers(1, 8),
    st.integers(1, 4),
    st.integers(0, 2**31 - 1),
)
def test_fully_masked_rows_and_padding_change_neither_loss_nor_gradient(loss_type, beta, B, T, extra, seed):
    """Every aggregation: appending rollouts with no action token, or padding columns, with garbage
    log-probs, advantages and reference values under their zero mask, leaves the loss and the gradient
    of every action token as they were (the appended tokens get gradient exactly 0)."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float()  # noqa: E731
    logp, old, ref = -rand(B, T).abs(), -rand(B, T).abs(), -rand(B, T).abs()
    adv = rand(B, T)
    mask = (torch.rand(B, T, generator=g) > 0.3).float()
    mask[0, 0] = 1.0  # at least one action token
    want_loss, want_grad, magnitude = _loss_and_grad(logp, old, adv, mask, ref, loss_type, beta)
    garbage = lambda *shape: 50.0 * rand(*shape)  # noqa: E731
    rows = lambda x, y: torch.cat([x, y])  # noqa: E731
    cols = lambda x, y: torch.cat([x, y], dim=1)  # noqa: E731
    for grow, shape in ((rows, (extra, T)), (cols, (B, extra))):
        loss, grad, _ = _loss_and_grad(
            grow(logp, garbage(*shape)),
            grow(old, garbage(*shape)),
            grow(adv, garbage(*shape)),
            grow(mask, torch.zeros(shape)),
            grow(ref, garbage(*shape)),
            loss_type,
            beta,
        )
        # the same terms, summed over a larger (zero-padded) tensor: the order may differ
        # one sum of the B x T terms (seq_mean: of T, then of B), a division or two
        assert_close(loss, want_loss, n=terms(B * T, 2), scale=magnitude, what=f"{loss_type} loss")
        assert torch.equal(grad[:B, :T], want_grad)  # elementwise: the same operations
        assert torch.equal(grad[B:], torch.zeros_like(grad[B:])) and torch.equal(
            grad[:, T:], torch.zeros_like(grad[:, T:])
        )


def test_a_fully_masked_rollout_does_not_halve_the_constant_loss():
    """Dr. GRPO's B counts the rollouts with an action token: one more rollout with none keeps the loss."""
    per_tok, mask = torch.ones(1, 4), torch.ones(1, 4)
    assert aggregate(per_tok, mask, "constant").item() == 1.0
    assert aggregate(torch.ones(2, 4), torch.cat([mask, torch.zeros(1, 4)]), "constant").item() == 1.0


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_a_fully_masked_rollout_in_the_batch_leaves_the_loops_update_unchanged(loss_type):
    """Through the loop's update, micro-batch shares included: a rollout with no action token (its one call
    masked) in its own micro-batch changes neither the logged loss nor the gradient."""
    from dataclasses import replace

    from rlvp_dsl.advantages import compute_advantages
    from trainer.batch import pad_batch
    from trainer.config import TrainConfig
    from trainer.update import Learner, update_policy

    from trainer_fakes import FakeLM, credits_of, make_rollout

    batch = [make_rollout("a", [3, 1], 1.0), make_rollout("a", [2, 4, 2], 0.0)]
    _, _, cmask = pad_batch(batch)
    adv = compute_advantages(
        [[1.0, 0.0]],
        [[credits_of([0.5, -1.0]), credits_of([0.0, 2.0, -0.25])]],
        [[r.call_spans for r in batch]],
        cmask,
        credit_mode="token",
    ).advantages
    silent = make_rollout("a", [5], 0.0)
    silent = replace(silent, completion_mask=[0] * len(silent.completion_mask))
    results = []
    for rollouts in (batch, batch + [silent]):
        _, _, m = pad_batch(rollouts)
        A = torch.zeros(m.shape)
        A[: adv.shape[0], : adv.shape[1]] = adv
        A[len(batch) :] = 3.0  # never read: the row is masked
        model = FakeLM(vocab=16, seed=3)
        params = list(model.parameters())
        cfg = TrainConfig(loss_type=loss_type, max_grad_norm=0.0, micro_batch=1, out_dir="unused")
        stats = update_policy(cfg, Learner(model, torch.optim.SGD(params, lr=0.0), params), rollouts, A, m, step=True)
        results.append((stats.policy, [p.grad.clone() for p in params]))
    (loss_a, grad_a), (loss_b, grad_b) = results
    n = terms(model.emb.embedding_dim, model.out.out_features, m.numel())
    assert loss_a != 0.0
    # ratio 1 (one pass): the per-token loss is -A, so sum|x_i| of the loss's sum is the aggregate of |A|
    assert_close(
        loss_b, loss_a, n=n, dtype=torch.float32, scale=float(aggregate(adv.abs(), cmask, loss_type)), what="loss"
    )
    assert_all_close(grad_b, grad_a, n=n, what="gradients")
