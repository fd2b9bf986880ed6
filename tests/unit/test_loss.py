"""Clipped surrogate, KL and aggregation (issue 3, case 3)."""

import math

import pytest
import torch

from trainer.loss import action_len, aggregate, kl_k3, normaliser, policy_loss

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
    out = policy_loss(logp, torch.tensor([[-1.0, 50.0]]), torch.ones(1, 2), torch.tensor([[1.0, 0.0]]),
                      beta=0.5, ref_logp=ref)
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
    parts = sum(aggregate(per_token[idx], mask[idx], loss_type, L) * normaliser(mask[idx], loss_type, L) / total
                for idx in ([0, 1], [2, 3], [4]))
    assert torch.allclose(parts, whole)


@pytest.mark.parametrize("loss_type", ["token_mean", "seq_mean", "constant"])
def test_a_longer_tool_output_changes_neither_loss_nor_gradient(loss_type):
    """Only action tokens are normalised over: the same episodes with 9 tool-output tokens per call instead
    of 2 give the same loss and the same gradient through the loop's update (Dr. GRPO's L counts generated
    tokens, never tool output)."""
    from trainer.advantages import compute_advantages
    from trainer.backend import Backend
    from trainer.batch import pad_batch
    from trainer.config import TrainConfig
    from trainer.loop import _update

    from trainer_fakes import FakeLM, credits_of, make_rollout

    results = []
    for obs_len in (2, 9):
        # a bigram model: an action token's log-prob does not depend on how many tool tokens precede it
        model = FakeLM(vocab=16, seed=3)
        batch = [make_rollout("a", [3, 1], 1.0, obs_len), make_rollout("a", [2, 4, 2], 0.0, obs_len)]
        _, _, cmask = pad_batch(batch)
        adv = compute_advantages([[1.0, 0.0]], [[credits_of([0.5, -1.0]), credits_of([0.0, 2.0, -0.25])]],
                                 [[r.call_spans for r in batch]], cmask, credit_mode="token")
        cfg = TrainConfig(loss_type=loss_type, max_grad_norm=0.0, micro_batch=1, out_dir="unused")
        params = list(model.parameters())
        stats = _update(cfg, Backend(model, None, None, None), model, torch.optim.SGD(params, lr=0.0), params,
                        batch, adv.advantages, cmask, step=True)
        results.append((stats["policy"], [p.grad.clone() for p in params]))
    (loss_a, grad_a), (loss_b, grad_b) = results
    assert loss_a != 0.0 and loss_a == pytest.approx(loss_b, rel=1e-6)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-8) for a, b in zip(grad_a, grad_b, strict=True))
    assert any(a.abs().sum() > 0 for a in grad_a)
