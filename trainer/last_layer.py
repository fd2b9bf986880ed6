"""The decoder's last layer computed only where its output is read: the positions that predict an
action token (`trainer.logprobs`).

A decoder layer's output at position ``l`` depends on the layer's input at ``l`` (its query, the
residual, the MLP) and on the keys and values of positions ``<= l``.  The log-prob pass reads the
last layer's output only at the ``N`` predicting positions (typically a fifth of ``B x L``), so
`selected_positions` runs that layer as: input norm, keys and values at every position (the
attention needs them), but the query projection, the attention, the output projection, the MLP
and the residual only at the selected positions (per row, padded to the longest row's count).
Every other position of the layer's output keeps the layer's input: garbage nobody reads, and
no gradient flows from it.

The selected positions' values are those of the full layer to float rounding (the same
operations on fewer rows; `tests/unit/test_last_layer.py` compares values and gradients).
Only plain transformers Llama layers with SDPA attention are handled (`supported`); anything
else runs its own forward.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch

#: Decoder-layer classes whose forward `_selective_forward` reproduces (transformers' Llama).
LAYER_CLASSES = frozenset({"LlamaDecoderLayer"})


def supported(decoder: torch.nn.Module) -> bool:
    """Whether `decoder` (a transformers ``LlamaModel``) has a last layer `selected_positions` handles:
    a `LAYER_CLASSES` layer, SDPA attention, no sliding window, no attention dropout in training."""
    layers = getattr(decoder, "layers", None)
    config = getattr(decoder, "config", None)
    if not layers or config is None:
        return False
    last = layers[-1]
    return (
        type(last).__name__ in LAYER_CLASSES
        and getattr(config, "_attn_implementation", None) == "sdpa"
        and getattr(config, "sliding_window", None) is None
        and float(getattr(config, "attention_dropout", 0.0) or 0.0) == 0.0
        and len(layers) == getattr(config, "num_hidden_layers", len(layers))
    )


@contextmanager
def selected_positions(decoder: torch.nn.Module, rows: torch.Tensor, cols: torch.Tensor) -> Iterator[None]:
    """Within the context, `decoder`'s last layer computes its output only at ``(rows[i], cols[i])``
    (positions of the next forward pass's input, ``[N]`` long tensors, distinct pairs); elsewhere
    its output is its input.  The layer's own ``forward`` is back on exit (also on an exception).

    Raises:
        ValueError: `decoder` is not `supported`.
    """
    if not supported(decoder):
        raise ValueError("selected_positions: the decoder's last layer is not a plain Llama layer with SDPA attention")
    layer = decoder.layers[-1]

    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
        return _selective_forward(layer, rows, cols, hidden_states, attention_mask=attention_mask, **kwargs)

    layer.forward = forward
    try:
        yield
    finally:
        del layer.forward


def _slots(rows: torch.Tensor, cols: torch.Tensor, B: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(idx [B, n], valid [B, n])``: each row's selected columns in order, padded with column 0
    (``valid`` False) to the longest row's count ``n``."""
    counts = torch.bincount(rows, minlength=B)
    n = max(1, int(counts.max())) if rows.numel() else 1
    order = torch.argsort(rows * (cols.max() + 1 if cols.numel() else 1) + cols)
    r, c = rows[order], cols[order]
    start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(r.numel(), device=r.device) - start[r]
    idx = torch.zeros((B, n), dtype=torch.long, device=rows.device)
    valid = torch.zeros((B, n), dtype=torch.bool, device=rows.device)
    idx[r, slot] = c
    valid[r, slot] = True
    return idx, valid


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x [B, heads, n, d]`` (transformers' `apply_rotary_pos_emb`, one tensor)."""
    from transformers.models.llama.modeling_llama import rotate_half

    return (x * cos.unsqueeze(1)) + (rotate_half(x) * sin.unsqueeze(1))


def _selective_forward(
    layer: Any, rows: torch.Tensor, cols: torch.Tensor, hidden_states: torch.Tensor, **kwargs: Any
) -> torch.Tensor:
    """`LlamaDecoderLayer.forward` at the selected positions only (see the module docstring)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    attention_mask = kwargs.get("attention_mask")
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    cos, sin = kwargs["position_embeddings"]  # [B or 1, L, d]
    attn = layer.self_attn
    B, L, H = hidden_states.shape
    d = attn.head_dim
    idx, valid = _slots(rows, cols, B)  # [B, n]
    n = idx.shape[1]

    h = layer.input_layernorm(hidden_states)  # [B, L, H]: every position's keys and values
    key = attn.k_proj(h).view(B, L, -1, d).transpose(1, 2)
    value = attn.v_proj(h).view(B, L, -1, d).transpose(1, 2)
    cos, sin = cos.expand(B, -1, -1), sin.expand(B, -1, -1)
    key = _rotate(key, cos, sin)
    if cache is not None:
        key, value = cache.update(key, value, attn.layer_idx)
    K = key.shape[2]  # cached (a shared prompt) + L

    take = idx[:, :, None]
    hq = h.gather(1, take.expand(-1, -1, H))  # [B, n, H]
    query = attn.q_proj(hq).view(B, n, -1, d).transpose(1, 2)
    query = _rotate(query, cos.gather(1, take.expand(-1, -1, d)), sin.gather(1, take.expand(-1, -1, d)))

    if attention_mask is None:  # no padding, K == L or one query: causal
        i = (K - L) + idx  # [B, n] key positions of the queries
        mask = torch.arange(K, device=idx.device)[None, None, :] <= i[:, :, None]
        mask = mask[:, None]  # [B, 1, n, K]
    else:
        if attention_mask.dtype != torch.bool or attention_mask.dim() != 4:
            raise ValueError("selected_positions: expected a boolean 4D SDPA mask")
        full = attention_mask.expand(B, -1, -1, -1)
        mask = full.gather(2, idx[:, None, :, None].expand(-1, full.shape[1], -1, full.shape[3]))
    out, _ = sdpa_attention_forward(attn, query, key, value, mask, dropout=0.0, scaling=attn.scaling)
    out = attn.o_proj(out.reshape(B, n, -1).contiguous())  # [B, n, H]

    x = hidden_states.gather(1, take.expand(-1, -1, H)) + out
    x = x + layer.mlp(layer.post_attention_layernorm(x))
    keep = valid.nonzero(as_tuple=True)
    return hidden_states.index_put((keep[0], idx[keep]), x[keep])
