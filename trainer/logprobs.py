"""Log-probs of the action tokens under a model, as the loss needs them, without ``[B, T, V]`` tensors.

`completion_logprobs(model, rollouts)` runs one forward pass over the padded batch
(`trainer.batch.pad_batch`) and returns, per action token (completion mask 1), the
log-prob of the token that was sampled -- renormalised over the ids the constrained
decoder allowed at that token (`Rollout.allowed_ids`), so the ratio and the entropy are
those of the policy that sampled -- and optionally the entropy of that distribution.

How, so that nothing vocabulary-sized is built for every position:

1. The decoder runs once (``[B, L, H]`` hidden states); the output head is applied only
   at the positions that predict an action token (``N`` rows, typically a fifth of
   ``B * L`` in our episodes).  Models whose head is not a plain (or LoRA-wrapped) linear
   layer on the last hidden state fall back to the full forward pass, still reading only
   those ``N`` rows.
2. log p(token) = z[token] / T - logsumexp(z / T) over the allowed ids (Bridle's softmax,
   in its log-sum-exp form):

   * a token with a single allowed id (forced) has log-prob exactly 0, no gradient, and
     is not computed at all;
   * tokens under the call mask need only the head rows of their allowed ids: the head
     is applied to the union ``U`` of those ids (``[N_c, |U|]``, ``|U|`` = the call
     vocabulary, not V);
   * tokens sampled from the full vocabulary (free reasoning, or ``constrained = False``)
     get the whole head in chunks of at most `CHUNK_ELEMENTS` logits, recomputed in the
     backward pass (`torch.utils.checkpoint`) instead of kept.
3. The decoder's small LoRA layers run through their merged weight (`trainer.merged_lora`: the
   same function, fewer and larger products).
4. The entropy is computed only when asked for (``with_entropy``, the first pass of an
   update: it is logged, never differentiated).

The values equal the full-vocabulary ``log_softmax`` of the masked logits to float
rounding, gradients included (`tests/unit/test_logprobs.py`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Sequence

import torch

from trainer.batch import attention_mask_for, device_of, pad_batch
from trainer.last_layer import selected_positions
from trainer.last_layer import supported as last_layer_supported
from trainer.merged_lora import merged_lora
from trainer.types import Rollout

#: Most logits (rows x vocabulary) one chunk of the full-vocabulary path holds (16 MiB in float32).
CHUNK_ELEMENTS = 1 << 22
#: Model types whose logits are ``lm_head(last_hidden_state)`` with nothing after it.
PLAIN_HEAD_MODELS = frozenset({"llama", "qwen2", "qwen3", "mistral", "smollm3"})


def completion_logprobs(
    model: torch.nn.Module,
    rollouts: Sequence[Rollout],
    pad_id: int = 0,
    with_entropy: bool = False,
    constrained: bool = True,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every action token under ``model``.

    Args:
        constrained: renormalise over the ids the call mask allowed at each token
            (`Rollout.allowed_ids`, one tuple or None per completion token;
            None = unconstrained); rollouts without them use the full softmax.
        temperature: logits are divided by it, as when sampling.

    Returns:
        logp ``[B, T]`` at action tokens (completion mask 1; 0 at tool-output tokens and
        beyond each completion), entropy ``[B, T]`` of the (masked) distribution at action
        tokens (detached) or None; float32, on the model's device.
    """
    dev = device_of(model)
    ids, attn, cmask = pad_batch(rollouts, pad_id)  # (B, L), (B, L), (B, T)
    B, T = cmask.shape
    where = _action_positions(rollouts, constrained)
    # nothing after the last predicting position is needed (the last tool message, padding)
    width = max(where.pos_l, default=0) + 1
    shared = len({len(r.prompt_ids) for r in rollouts}) == 1  # then maybe one prompt: computed once
    feats, full, rows = _features(
        model,
        ids[:, :width].to(dev),
        attn[:, :width].to(dev),
        where.b,
        where.pos_l,
        len(rollouts[0].prompt_ids) if shared else None,
    )
    logp = torch.zeros(B, T, dtype=torch.float32, device=dev)
    ent = torch.zeros(B, T, dtype=torch.float32, device=dev) if with_entropy else None
    if where.masked:
        k = torch.tensor(where.masked, dtype=torch.long, device=dev)
        vals, e = _masked_logprobs(
            feats[k],
            rows,
            [where.allowed[i] for i in where.masked],
            [where.target[i] for i in where.masked],
            temperature,
            with_entropy,
            dev,
        )
        logp = _put(logp, where, where.masked, vals, dev)
        if ent is not None:
            ent = _put(ent, where, where.masked, e, dev)
    if where.free:
        k = torch.tensor(where.free, dtype=torch.long, device=dev)
        target = torch.tensor([where.target[i] for i in where.free], dtype=torch.long, device=dev)
        vals, e = _full_logprobs(feats[k], full, target, temperature, with_entropy)
        logp = _put(logp, where, where.free, vals, dev)
        if ent is not None:
            ent = _put(ent, where, where.free, e, dev)
    if not where.masked and not where.free and torch.is_grad_enabled():
        logp = logp + feats.sum() * 0.0  # every token forced: zero, but still a function of the weights
    return logp, ent


class _Positions:
    """Where the action tokens are: per action token i, its (row, completion index), the hidden
    position that predicts it, its target id and allowed ids; `masked` / `free` index the tokens
    computed over allowed ids / the full vocabulary (forced tokens are in neither)."""

    def __init__(self) -> None:
        self.b: list[int] = []
        self.t: list[int] = []
        self.target: list[int] = []
        self.allowed: list[tuple[int, ...] | None] = []
        self.masked: list[int] = []
        self.free: list[int] = []
        self.pos_l: list[int] = []


def _action_positions(rollouts: Sequence[Rollout], constrained: bool) -> _Positions:
    where = _Positions()
    for b, r in enumerate(rollouts):
        P = len(r.prompt_ids)
        allowed_ids = r.allowed_ids if constrained else None
        for t, (tid, m) in enumerate(zip(r.completion_ids, r.completion_mask, strict=True)):
            if not m:
                continue
            allowed = allowed_ids[t] if allowed_ids else None
            if allowed is not None and len(allowed) == 1 and allowed[0] == tid:
                continue  # forced: log-prob 0 exactly, no gradient
            i = len(where.b)
            where.b.append(b)
            where.t.append(t)
            where.target.append(int(tid))
            where.allowed.append(allowed)
            where.pos_l.append(max(0, P + t - 1))  # the hidden state at P+t-1 predicts token t
            (where.free if allowed is None else where.masked).append(i)
    return where


def _put(out: torch.Tensor, where: _Positions, which: list[int], values: torch.Tensor, dev) -> torch.Tensor:
    bi = torch.tensor([where.b[i] for i in which], dtype=torch.long, device=dev)
    ti = torch.tensor([where.t[i] for i in which], dtype=torch.long, device=dev)
    return out.index_put((bi, ti), values)


def _features(model, ids, attn, pos_b: list[int], pos_l: list[int], prompt_len: int | None = None):
    """``(feats [N, H], full(x) -> [n, V], rows(x, U) -> [n, |U|])`` at the N predicting positions:
    hidden states and the head when the model allows it, else the rows of the full logits."""
    dev = ids.device
    bi = torch.tensor(pos_b, dtype=torch.long, device=dev)
    li = torch.tensor(pos_l, dtype=torch.long, device=dev)
    split = _decoder_and_head(model)
    if split is None:
        with merged_lora(model):
            logits = model(input_ids=ids, attention_mask=attn).logits  # (B, L, V)
        return logits[bi, li], (lambda x: x), (lambda x, U: x[:, U])
    decoder, head = split
    with merged_lora(decoder):  # not the head: its chunks are recomputed in the backward pass
        hidden = _shared_prompt_hidden(decoder, ids, attn, prompt_len, bi, li)
        if hidden is None:
            mask = attention_mask_for(decoder, attn, ids.shape[1])
            with _last_layer_at(decoder, bi, li):
                hidden = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state  # (B, L, H)
    return hidden[bi, li], head, (lambda x, U: _head_rows(head, x, U))


def _last_layer_at(decoder, rows: torch.Tensor, cols: torch.Tensor):
    """The decoder's last layer only at the predicting positions (`trainer.last_layer`) when it allows it."""
    return selected_positions(decoder, rows, cols) if last_layer_supported(decoder) else nullcontext()


def _shared_prompt_hidden(
    decoder,
    ids: torch.Tensor,
    attn: torch.Tensor,
    prompt_len: int | None,
    bi: torch.Tensor | None = None,
    li: torch.Tensor | None = None,
):
    """``[B, L, H]`` hidden states with a prompt that every row shares computed once: the prompt
    pass's keys and values are repeated for the rows (gradients flow back through them) and the
    completions continue from them, the last layer only at the predicting positions ``(bi, li)``
    of the completions (None: everywhere).  None when the rows do not share one prompt."""
    import inspect

    B, L = ids.shape
    P = prompt_len or 0
    if B < 2 or not 0 < P < L or not bool((ids[:, :P] == ids[:1, :P]).all()) or not bool(attn[:, :P].all()):
        return None
    kw = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    head = decoder(input_ids=ids[:1, :P], attention_mask=attn[:1, :P], use_cache=True)
    cache = getattr(head, kw, None)
    if cache is None or not hasattr(cache, "batch_repeat_interleave"):
        return None
    cache.batch_repeat_interleave(B)
    positions = torch.arange(P, L, device=ids.device)[None, :].expand(B, -1)
    mask = attention_mask_for(decoder, attn, L - P)
    if bi is None or li is None:
        select: Any = nullcontext()
    else:
        select = _last_layer_at(decoder, bi[li >= P], li[li >= P] - P)
    with select:
        tail = decoder(input_ids=ids[:, P:], attention_mask=mask, position_ids=positions, use_cache=True, **{kw: cache})
    prompt = head.last_hidden_state.expand(B, -1, -1)
    return torch.cat([prompt, tail.last_hidden_state], dim=1)


def _decoder_and_head(model):
    """(decoder, output head) of a HF causal LM (peft-wrapped or not) whose logits are the head of
    the decoder's last hidden state; None for anything else."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if getattr(config, "model_type", None) not in PLAIN_HEAD_MODELS:
        return None
    decoder = getattr(base, getattr(base, "base_model_prefix", "") or "", None)
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    if decoder is None or decoder is base or head is None:
        return None
    return decoder, head


def _head_rows(head: torch.nn.Module, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``head(x)[:, ids]`` computed from the weight rows of ``ids`` only (``[n, |ids|]``).

    A plain `nn.Linear` or a peft LoRA `Linear` around one (adapters added as peft
    adds them); any other module is applied whole and then indexed.
    """
    F = torch.nn.functional
    if type(head) is torch.nn.Linear:
        return F.linear(x, head.weight[ids], None if head.bias is None else head.bias[ids])
    base = getattr(head, "base_layer", None)
    lora_a, lora_b = getattr(head, "lora_A", None), getattr(head, "lora_B", None)
    plain = (
        type(base) is torch.nn.Linear
        and lora_a is not None
        and not getattr(head, "merged", False)
        and not any(getattr(head, "use_dora", {}).values())
        and all(getattr(lora_b[k], "bias", None) is None for k in lora_b)
    )
    if not plain:
        return head(x)[..., ids]
    out = F.linear(x, base.weight[ids], None if base.bias is None else base.bias[ids])
    if getattr(head, "disable_adapters", False):
        return out
    dtype = out.dtype
    for name in head.active_adapters:
        if name not in lora_a:
            continue
        a, b = lora_a[name], lora_b[name]
        h = a(head.lora_dropout[name](x.to(a.weight.dtype)))
        out = out + F.linear(h, b.weight[ids]) * head.scaling[name]
    return out.to(dtype)


def _masked_logprobs(
    x: torch.Tensor,
    rows: Callable,
    allowed: list[tuple[int, ...]],
    target: list[int],
    temperature: float,
    with_entropy: bool,
    dev,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs renormalised over each token's allowed ids, from the head rows of their union."""
    union = sorted({i for ids in allowed for i in ids} | set(target))
    local = {tok: j for j, tok in enumerate(union)}
    keep = torch.zeros(len(allowed), len(union), dtype=torch.bool)
    at = [n for n, ids in enumerate(allowed) for _ in ids]
    keep[at, [local[i] for ids in allowed for i in ids]] = True  # one scatter for every token
    keep = keep.to(dev)
    tgt = torch.tensor([local[i] for i in target], dtype=torch.long, device=dev)
    U = torch.tensor(union, dtype=torch.long, device=dev)
    z = rows(x, U).float() / temperature  # (N_c, |U|)
    z = z.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(z, dim=-1)
    logp = z.gather(1, tgt[:, None])[:, 0] - lse
    ent = None
    if with_entropy:
        with torch.no_grad():
            ls = z - lse[:, None]
            p = ls.exp()
            ent = -(p * torch.where(p > 0, ls, torch.zeros_like(ls))).sum(-1)
    return logp, ent


def _full_logprobs(
    x: torch.Tensor, head: Callable, target: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Full-vocabulary log-probs in chunks of rows; under autograd each chunk's logits are
    recomputed in the backward pass rather than kept."""
    from torch.utils.checkpoint import checkpoint

    def chunk_logp(xc: torch.Tensor, tc: torch.Tensor) -> torch.Tensor:
        z = head(xc).float() / temperature
        return z.gather(1, tc[:, None])[:, 0] - torch.logsumexp(z, dim=-1)

    def chunk_entropy(xc: torch.Tensor) -> torch.Tensor:
        ls = torch.log_softmax(head(xc).float() / temperature, dim=-1)
        p = ls.exp()
        return -(p * torch.where(p > 0, ls, torch.zeros_like(ls))).sum(-1)

    V = _vocab_of(head, x)
    step = max(1, CHUNK_ELEMENTS // max(1, V))
    grad = torch.is_grad_enabled() and x.requires_grad
    parts, ents = [], []
    for s in range(0, x.shape[0], step):
        xc, tc = x[s : s + step], target[s : s + step]
        parts.append(checkpoint(chunk_logp, xc, tc, use_reentrant=False) if grad else chunk_logp(xc, tc))
        if with_entropy:
            with torch.no_grad():
                ents.append(chunk_entropy(xc.detach()))
    return torch.cat(parts), (torch.cat(ents) if with_entropy else None)


def _vocab_of(head: Callable, x: torch.Tensor) -> int:
    weight = getattr(getattr(head, "base_layer", head), "weight", None)
    return int(weight.shape[0]) if isinstance(weight, torch.Tensor) else int(x.shape[-1])
