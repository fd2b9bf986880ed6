"""Batch tensors: a list of rollouts -> right-padded model inputs and the completion mask;
`micro_batches`, how a batch is cut for the forward passes; `device_of(model)`, the device
the tensors must move to (they are built on the CPU)."""

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
    L = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    T = max(1, max(len(r.completion_ids) for r in rollouts))
    n = [len(r.prompt_ids) + len(r.completion_ids) for r in rollouts]
    # rows built as lists, each tensor made in one call
    ids = torch.tensor(
        [[*r.prompt_ids, *r.completion_ids] + [pad_id] * (L - k) for r, k in zip(rollouts, n)], dtype=torch.long
    )
    attn = torch.tensor([[1] * k + [0] * (L - k) for k in n], dtype=torch.long)
    cmask = torch.tensor(
        [[*r.completion_mask] + [0] * (T - len(r.completion_ids)) for r in rollouts], dtype=torch.float32
    )
    return ids, attn, cmask


def micro_batches(rollouts: Sequence[Rollout], size: int, max_tokens: int = 0) -> list[list[int]]:
    """Indices of `rollouts` cut into micro-batches of at most `size` episodes.

    ``max_tokens = 0``: consecutive runs of `size` (the batch order).  Otherwise the
    episodes are taken longest first (prompt + completion) and a micro-batch also stops
    before its padded size (episodes x its longest episode) would exceed `max_tokens`;
    an episode longer than `max_tokens` is a micro-batch of its own.  Every index occurs once.
    """
    n = len(rollouts)
    if max_tokens <= 0:
        return [list(range(s, min(n, s + size))) for s in range(0, n, size)]
    length = [len(r.prompt_ids) + len(r.completion_ids) for r in rollouts]
    out: list[list[int]] = []
    for i in sorted(range(n), key=lambda i: (-length[i], i)):
        current = out[-1] if out else None
        # longest first: the micro-batch's longest episode is its first
        if current is not None and len(current) < size and (len(current) + 1) * length[current[0]] <= max_tokens:
            current.append(i)
        else:
            out.append([i])
    return out


def device_of(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (the CPU for a model without any)."""
    first = next(iter(model.parameters()), None)
    return first.device if first is not None else torch.device("cpu")


#: Model types whose every layer attends causally over the whole context (no sliding window), so one
#: 4D mask serves all layers (`attention_mask_for`).
FULL_CAUSAL_MODELS = frozenset({"llama"})


def attention_mask_for(model: torch.nn.Module, attn: torch.Tensor, q_len: int) -> torch.Tensor:
    """The ``attention_mask`` to pass ``model`` for `q_len` new tokens over the 2D padding mask `attn`
    (``[B, K]``, 1 = a real token; ``K`` = cached tokens + `q_len`): the 4D boolean mask
    ``[B, 1, q_len, K]`` that transformers' `create_causal_mask` would build for its SDPA attention
    (query ``i`` sees key ``j`` when ``j <= K - q_len + i`` and ``attn[b, j]``), built here in three
    tensor operations instead of its ~150 us of mask-function machinery per forward pass.

    The same tensor values reach the attention kernel, so the outputs are bitwise those of passing
    `attn` (`tests/unit/test_attention_mask.py`).  `attn` itself is returned wherever transformers
    would not build that mask: a model that is not a full-causal `FULL_CAUSAL_MODELS` type with
    SDPA attention (eager attention wants an additive float mask, sliding windows another mask per
    layer), or a mask it skips for SDPA's ``is_causal`` (no padding and ``q_len == 1`` or ``q_len == K``).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if (
        getattr(config, "model_type", None) not in FULL_CAUSAL_MODELS
        or getattr(config, "_attn_implementation", None) != "sdpa"
        or getattr(config, "sliding_window", None) is not None
    ):
        return attn
    K = attn.shape[1]
    if (q_len == 1 or q_len == K) and bool(attn.all()):
        return attn
    i = torch.arange(K - q_len, K, device=attn.device)[:, None]
    j = torch.arange(K, device=attn.device)[None, :]
    return (j <= i)[None, None] & attn.bool()[:, None, None, :]
