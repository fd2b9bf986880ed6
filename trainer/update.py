"""The policy update of one iteration: ``updates_per_batch`` passes of micro-batches over the batch,
the clipped policy-gradient loss (`trainer.loss`) on the completion log-probs (`trainer.logprobs`),
one optimiser step per pass.

`Learner` is what an update changes (the policy, its trainable parameters, the optimiser);
`update_policy` is the update; `UpdateStats` its diagnostics (the ``loss/*`` and ``policy/entropy``
metrics).  The loop (`trainer.loop`) calls it once per iteration with the batch's advantages.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any, Callable, Sequence

import attrs
import torch

from trainer.batch import device_of, micro_batches
from trainer.config import TrainConfig
from trainer.logprobs import completion_logprobs
from trainer.loss import LossOut, action_len, normaliser, policy_loss
from trainer.types import Rollout


@attrs.define
class Learner:
    """The policy being trained and the optimiser that moves it.

    Attributes:
        model: the policy (a peft model: the LoRA adapter trains, the base is frozen).
        optimizer: the optimiser over ``params``.
        params: the trainable parameters (those the optimiser holds).
        pad_id: padding token id of the batches.
        ref_context: a context-manager factory under which ``model`` is the reference policy (the
            adapter disabled); None: there is none (``beta > 0`` then raises).
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    params: list[torch.nn.Parameter]
    pad_id: int = 0
    ref_context: Callable[[], AbstractContextManager[Any]] | None = None

    @classmethod
    def adamw(
        cls,
        model: torch.nn.Module,
        cfg: TrainConfig,
        pad_id: int = 0,
        ref_context: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> Learner:
        """AdamW (``learning_rate``, ``weight_decay``) over ``model``'s trainable parameters.

        Raises:
            ValueError: the model has no trainable parameter (no LoRA adapter attached).
        """
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters (is the LoRA adapter attached?)")
        optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        return cls(model, optimizer, params, pad_id, ref_context)


@attrs.define
class UpdateStats:
    """Diagnostics of one update, from its first pass (floats, for the metrics row).

    Attributes:
        policy: the policy loss (``loss/policy``), the micro-batches' shares of the batch's loss summed.
        kl: mean k3 KL to the reference per action token (``loss/kl``; 0 when ``beta = 0``).
        clip_frac: fraction of action tokens whose ratio was clipped (``loss/clip_frac``).
        entropy: mean token entropy on action tokens (``policy/entropy``); None when no update ran.
        grad_norm: total gradient norm before clipping (``loss/grad_norm``; 0 without an optimiser step).
    """

    policy: float = 0.0
    kl: float = 0.0
    clip_frac: float = 0.0
    entropy: float | None = None
    grad_norm: float = 0.0


def update_policy(
    cfg: TrainConfig,
    learner: Learner,
    batch: Sequence[Rollout],
    advantages: torch.Tensor,
    cmask: torch.Tensor,
    *,
    step: bool,
) -> UpdateStats:
    """One batch update: ``cfg.updates_per_batch`` passes, each over the micro-batches
    (`trainer.batch.micro_batches`) and then one optimiser step (when ``step``; without it the loss is
    computed for the diagnostics only).

    Args:
        advantages: ``[B, T]`` per-token advantages (finite), ``B = len(batch)``.
        cmask: ``[B, T]`` completion mask (1 = action token).
        step: whether to take optimiser steps (the loop passes False for a dead batch with ``beta = 0``).

    Advantages and the mask move to the model's device; the loss is computed there.  Each
    micro-batch's loss is weighted by its share of the batch's normaliser (`trainer.loss.normaliser`),
    so the gradient is the whole batch's whatever the cut.

    Raises:
        ValueError: (before any optimiser step) a micro-batch's loss or the gradient norm is not
            finite (the advantages are finite, so the model's log-probs are not); ``beta > 0`` with no
            reference (``learner.ref_context`` is None).
    """
    model = learner.model
    model.train()
    dev = device_of(model)
    advantages, cmask = advantages.to(dev), cmask.to(dev)  # (B, T)
    mbs = micro_batches(batch, cfg.micro_batch, cfg.micro_batch_tokens)
    n_tok = float(cmask.sum().clamp(min=1))
    L = action_len(cmask)  # most action tokens of one episode: `constant`'s L, never tool output
    batch_norm = float(normaliser(cmask, cfg.loss_type, L))
    old, ref = _fixed_logprobs(cfg, learner, [[batch[i] for i in idx] for idx in mbs])
    stats = UpdateStats()
    ent_sum = 0.0
    for epoch in range(cfg.updates_per_batch):
        learner.optimizer.zero_grad(set_to_none=True)
        for k, idx in enumerate(mbs):
            rs = [batch[i] for i in idx]
            grad_ctx = torch.enable_grad() if step else torch.no_grad()
            with grad_ctx:
                logp, ent = completion_logprobs(
                    model,
                    rs,
                    learner.pad_id,
                    with_entropy=epoch == 0,
                    constrained=cfg.constrained_logprobs,
                    temperature=cfg.temperature,
                )  # (b, t)
                t = logp.shape[1]
                m, A = cmask[idx, :t], advantages[idx, :t]  # (b, t)
                out = policy_loss(
                    logp,
                    old[k] if k in old else logp.detach(),
                    A,
                    m,
                    epsilon=cfg.epsilon,
                    epsilon_high=cfg.epsilon_high,
                    beta=cfg.beta,
                    ref_logp=ref.get(k),
                    kl_clip=cfg.kl_clip,
                    loss_type=cfg.loss_type,
                    max_len=L,
                )
                _check_loss(cfg, out, k, rs, epoch)
                share = float(normaliser(m, cfg.loss_type, L)) / batch_norm  # of the batch-level normaliser
                if step:
                    (out.loss * share).backward()
            if epoch == 0:
                assert ent is not None  # the first pass computes the entropy
                stats.policy += out.policy * share
                stats.kl += out.kl * float(m.sum()) / n_tok
                stats.clip_frac += out.clip_frac * float(m.sum()) / n_tok
                ent_sum += float((ent * m).sum())
        if step:
            norm = _optimiser_step(cfg, learner, epoch)
            if epoch == 0:
                stats.grad_norm = norm
    stats.entropy = ent_sum / n_tok
    model.eval()
    return stats


def _fixed_logprobs(
    cfg: TrainConfig, learner: Learner, micro: list[list[Rollout]]
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """The log-probs that stay fixed over the passes, per micro-batch ``k``: the "old" policy's
    (``updates_per_batch > 1``; with one pass the ratio is 1 and none are kept) and the reference's
    (``beta > 0``), each ``[b, t]``, computed without gradient under the sampler's mask and temperature."""
    old: dict[int, torch.Tensor] = {}
    ref: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for k, rs in enumerate(micro):
            if cfg.updates_per_batch > 1:
                old[k], _ = completion_logprobs(
                    learner.model,
                    rs,
                    learner.pad_id,
                    constrained=cfg.constrained_logprobs,
                    temperature=cfg.temperature,
                )
            if cfg.beta > 0:
                if learner.ref_context is None:
                    raise ValueError("beta > 0 needs a reference model (the backend has no ref_context)")
                with learner.ref_context():
                    ref[k], _ = completion_logprobs(
                        learner.model,
                        rs,
                        learner.pad_id,
                        constrained=cfg.constrained_logprobs,
                        temperature=cfg.temperature,
                    )
    return old, ref


def _check_loss(cfg: TrainConfig, out: LossOut, k: int, rs: Sequence[Rollout], epoch: int) -> None:
    """Raise a ValueError naming the micro-batch, its episodes and the pass when its loss is not finite."""
    if not torch.isfinite(out.loss):
        raise ValueError(
            f"the loss of micro-batch {k} (episodes {[r.episode.id for r in rs]}) is {float(out.loss.detach())} "
            f"in update pass {epoch}: the advantages are finite, so the model's log-probs are not "
            f'(overflow in {cfg.dtype}? try a lower learning_rate or dtype = "float32")'
        )


def _optimiser_step(cfg: TrainConfig, learner: Learner, epoch: int) -> float:
    """Clip the gradients (``max_grad_norm > 0``) and step; returns the total gradient norm before clipping.

    Raises:
        ValueError: the norm is not finite (no step is taken).
    """
    grads = [p.grad for p in learner.params if p.grad is not None]
    norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0  # before clipping
    if not math.isfinite(norm):
        raise ValueError(
            f"the gradient norm is {norm} in update pass {epoch} with a finite loss; "
            f"this pass made no optimiser step (the last checkpoint is intact)"
        )
    if cfg.max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(learner.params, cfg.max_grad_norm)
    learner.optimizer.step()
    return norm
