"""Log-probs of the completion tokens under a model, as the loss needs them.

`completion_logprobs(model, rollouts)` runs one forward pass over the padded batch
(`trainer.batch.pad_batch`) and returns, per completion token, the log-prob of the
token that was sampled -- renormalised over the ids the constrained decoder allowed
at that token (`Rollout.allowed_ids`), so the ratio and the entropy are those of the
policy that sampled -- and optionally the entropy of that distribution.
"""

from __future__ import annotations

from typing import Sequence

import torch

from trainer.batch import device_of, pad_batch
from trainer.types import Rollout


def completion_logprobs(model: torch.nn.Module, rollouts: Sequence[Rollout], pad_id: int = 0,
                        with_entropy: bool = False, constrained: bool = True,
                        temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every completion token under ``model``.

    Args:
        constrained: renormalise over the ids the call mask allowed at each token
            (`Rollout.allowed_ids`, one tuple or None per completion token;
            None = unconstrained); rollouts without them use the full softmax.
        temperature: logits are divided by it, as when sampling.

    Returns:
        logp ``[B, T]`` (0 beyond each completion), entropy ``[B, T]`` of the (masked)
        distribution (detached) or None; float32, on the model's device.
    """
    dev = device_of(model)
    ids, attn, cmask = pad_batch(rollouts, pad_id)  # (B, L), (B, L), (B, T)
    ids, attn = ids.to(dev), attn.to(dev)
    B, T = cmask.shape
    logits = model(input_ids=ids, attention_mask=attn).logits  # (B, L, V)
    V = logits.shape[-1]
    P = torch.tensor([len(r.prompt_ids) for r in rollouts], device=dev)  # (B,)
    C = torch.tensor([len(r.completion_ids) for r in rollouts], device=dev)  # (B,)
    t = torch.arange(T, device=dev)[None, :]  # (1, T)
    valid = t < C[:, None]  # (B, T)
    pos = torch.clamp(P[:, None] + t - 1, max=logits.shape[1] - 1)  # logits at pos predict token pos+1
    pos = torch.where(valid, pos, torch.zeros_like(pos))
    sel = logits.gather(1, pos[:, :, None].expand(B, T, V)).float() / temperature  # (B, T, V)
    if constrained:
        allow = allowed_mask(rollouts, T, V)  # (B, T, V) bool or None
        if allow is not None:
            sel = sel.masked_fill(~allow.to(dev), float("-inf"))
    logsm = torch.log_softmax(sel, dim=-1)  # (B, T, V)
    target = ids.gather(1, torch.clamp(pos + 1, max=ids.shape[1] - 1))  # (B, T)
    logp = logsm.gather(2, target[:, :, None]).squeeze(2)  # (B, T)
    logp = torch.where(valid, logp, torch.zeros_like(logp))
    ent = None
    if with_entropy:
        with torch.no_grad():
            p = logsm.exp()
            ent = -(p * torch.where(p > 0, logsm, torch.zeros_like(logsm))).sum(-1) * valid  # (B, T)
    return logp, ent


def allowed_mask(rollouts: Sequence[Rollout], T: int, V: int) -> torch.Tensor | None:
    """``[B, T, V]`` bool: the ids the sampler allowed per completion token (all True where
    unconstrained); None when no rollout recorded any."""
    if not any(r.allowed_ids for r in rollouts):
        return None
    allow = torch.ones(len(rollouts), T, V, dtype=torch.bool)
    for i, r in enumerate(rollouts):
        for t, ids in enumerate(r.allowed_ids or []):
            if ids is not None and r.completion_mask[t]:
                allow[i, t] = False
                allow[i, t, list(ids)] = True
    return allow
