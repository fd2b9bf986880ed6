"""Batch tensors: a list of rollouts -> right-padded model inputs and the completion mask;
`device_of(model)`, the device they must move to (they are built on the CPU)."""

from __future__ import annotations

from typing import Sequence

import torch

from trainer.types import Rollout


def pad_batch(rollouts: Sequence[Rollout], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded model inputs and completion mask.

    Returns:
        input_ids ``[B, L]`` (prompt + completion), attention_mask ``[B, L]``,
        completion_mask ``[B, T]`` (1 = action token; prompt, tool output and
        padding are 0), with ``L = max(P_i + C_i)`` and ``T = max(C_i)``.
    """
    B = len(rollouts)
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    T = max(1, max(len(r.completion_ids) for r in rollouts))
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn = torch.zeros(B, L, dtype=torch.long)
    cmask = torch.zeros(B, T, dtype=torch.float32)
    for i, r in enumerate(rollouts):
        seq = list(r.prompt_ids) + list(r.completion_ids)
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attn[i, : len(seq)] = 1
        cmask[i, : len(r.completion_ids)] = torch.tensor(r.completion_mask, dtype=torch.float32)
    return ids, attn, cmask


def device_of(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (the CPU for a model without any)."""
    first = next(iter(model.parameters()), None)
    return first.device if first is not None else torch.device("cpu")
