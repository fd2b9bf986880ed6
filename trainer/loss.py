"""The clipped policy-gradient loss with optional KL, and its aggregation.

Per token (t an action token of episode i):

    ratio      = exp(logp - old_logp)
    pg         = -min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon_high) * A)     (PPO, Schulman 2017)
    kl         = k3(ref_logp - logp)                                                 (Schulman 2020 "Approximating KL")
    loss_token = pg + beta * kl

k3(r) = exp(r) - r - 1 is exact in expectation and >= 0, but exp overflows: fp32
at r > 88, and in bf16 its few mantissa bits turn exp(r) - r - 1 into noise long
before that.  `kl_k3` computes in fp32 and continues k3 *linearly* above
``kl_clip`` (value and slope match at the joint), so a token with log-ratio 90
gives a large, finite loss whose gradient still pulls it back; tokens below the
joint are computed exactly as before.

Aggregation (``loss_type``), and how each biases length (cf. TRL's docs, Dr. GRPO):

* ``token_mean`` -- sum over all action tokens of the batch / their number (DAPO).
  Every token weighs the same; a long episode weighs more in total, no per-episode
  1/len shrinkage.  The normaliser varies with the batch's total length.
* ``seq_mean`` -- mean over each episode's tokens, then over episodes (GRPO paper).
  A token of a short episode weighs more than a token of a long one: for negative
  advantages, long failures are penalised less per token (favours long wrong answers),
  and token-attached credit is diluted in long episodes.
* ``constant`` -- sum over all action tokens / (B * L), L = the most action tokens
  of any episode of the batch (Dr. GRPO's ``max_len``, counted in generated tokens)
  and B = the episodes with at least one action token.  No length bias; the gradient
  scale depends on L.

Only action tokens count, under every ``loss_type``: tool-output, template and padding
tokens, and a rollout with no action token at all (every token masked), change neither
the loss nor its gradient (`tests/unit/test_loss.py`).
"""

from __future__ import annotations

import attrs
import torch


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, kl_clip: float = 10.0) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref), finite for any finite log-ratio.

    Args:
        logp: ``[B, T]`` policy log-probs (any float dtype).
        ref_logp: ``[B, T]`` reference log-probs.
        kl_clip: log-ratio ``r = ref - logp`` above which k3 continues linearly.

    Returns:
        ``[B, T]`` float32, >= 0.
    """
    r = ref_logp.float() - logp.float()  # (B, T)
    r_c = torch.clamp(r, max=kl_clip)
    e = torch.exp(r_c)
    # exact k3 up to the joint, then its tangent line
    return e - r_c - 1.0 + (e - 1.0) * (r - r_c)


@attrs.frozen
class LossOut:
    """Scalar loss (with graph) and detached diagnostics."""

    loss: torch.Tensor
    policy: float
    kl: float
    clip_frac: float
    n_tokens: int


def normaliser(mask: torch.Tensor, loss_type: str, max_len: int | None = None) -> torch.Tensor:
    """The denominator of `aggregate` for ``mask`` (see the module docstring).

    ``token_mean``: the number of action tokens; ``seq_mean``: the number of episodes
    with any; ``constant``: ``B * max_len``, where B is the number of episodes with any
    and ``max_len`` is the most action tokens of one episode (default: of ``mask``'s
    rows; the loop passes the whole batch's, so every micro-batch divides by the same
    L).  Only action tokens count, never tool output, padding or a fully masked row.
    Never below 1.  The loop splits a batch into
    micro-batches and weighs each one's loss by its share of the batch's normaliser,
    so the summed loss is the batch's.
    """
    m = mask.float() if not mask.is_floating_point() else mask
    if loss_type == "token_mean":
        return m.sum().clamp(min=1.0)
    episodes = (m.sum(dim=1) > 0).to(m.dtype).sum()  # rows with an action token
    if loss_type == "seq_mean":
        return episodes.clamp(min=1.0)
    if loss_type == "constant":
        L = max_len if max_len is not None else action_len(m)
        return (episodes * L).clamp(min=1.0)
    raise ValueError(f"'loss_type' must be token_mean, seq_mean or constant (got {loss_type!r})")


def action_len(mask: torch.Tensor) -> int:
    """The most action tokens (mask 1) of any row of ``[B, T]`` ``mask``: the L of ``constant``."""
    return int(mask.sum(dim=1).max()) if mask.numel() else 0


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, loss_type: str, max_len: int | None = None) -> torch.Tensor:
    """Reduce ``[B, T]`` per-token losses to a scalar (see the module docstring).

    Args:
        per_token: ``[B, T]``.
        mask: ``[B, T]`` 1 for action tokens.
        loss_type: ``token_mean`` | ``seq_mean`` | ``constant``.
        max_len: the constant normaliser's L, in action tokens (default `action_len(mask)`).
    """
    m = mask.to(per_token.dtype)
    if loss_type == "seq_mean":
        per_seq = (per_token * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # (B,)
        has = (m.sum(dim=1) > 0).to(per_token.dtype)
        return (per_seq * has).sum() / normaliser(m, loss_type)
    return (per_token * m).sum() / normaliser(m, loss_type, max_len)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    kl_clip: float = 10.0,
    loss_type: str = "token_mean",
    max_len: int | None = None,
) -> LossOut:
    """Clipped surrogate + beta * KL, aggregated.

    Args:
        logp: ``[B, T]`` log-probs of the completion tokens under the current policy (with grad).
        old_logp: ``[B, T]`` under the sampling policy (no grad).
        advantages: ``[B, T]`` per-token advantages.
        mask: ``[B, T]`` 1 for action tokens; prompt/tool-output/padding tokens are 0
            and contribute nothing (their values are never exponentiated).
        epsilon, epsilon_high: clip range ``[1 - epsilon, 1 + epsilon_high]``.
        beta: KL coefficient; needs ``ref_logp`` when > 0.
        kl_clip: see `kl_k3`.
        loss_type, max_len: see `aggregate`.

    Raises:
        ValueError: shapes differ, or beta > 0 without ``ref_logp``.
    """
    if not (logp.shape == old_logp.shape == advantages.shape == mask.shape):
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, advantages {tuple(advantages.shape)} "
            f"and mask {tuple(mask.shape)} must have the same shape [B, T]"
        )
    eps_hi = epsilon if epsilon_high is None else epsilon_high
    m = mask > 0  # (B, T)
    zero = torch.zeros((), dtype=torch.float32, device=logp.device)
    lp = logp.float()
    log_ratio = torch.where(m, lp - old_logp.float(), zero)  # masked tokens: ratio 1
    ratio = torch.exp(log_ratio)
    A = advantages.float()
    unclipped = ratio * A
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + eps_hi) * A
    pg = -torch.minimum(unclipped, clipped)  # (B, T)
    per_token = pg
    kl_val = 0.0
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (the reference model's log-probs)")
        kl = kl_k3(torch.where(m, lp, zero), torch.where(m, ref_logp.float(), zero), kl_clip)  # (B, T)
        per_token = pg + beta * kl
        kl_val = float(aggregate(kl.detach(), mask, "token_mean"))
    loss = aggregate(per_token, mask, loss_type, max_len)
    with torch.no_grad():
        n = int(m.sum())
        clip_frac = float(((unclipped != clipped) & m).sum()) / max(1, n)
        pol = float(aggregate(pg.detach(), mask, loss_type, max_len))
    return LossOut(loss, pol, kl_val, clip_frac, n)
