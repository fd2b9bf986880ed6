"""LoRA layers computed through their merged weight, in the training forward pass and in sampling,
where that is cheaper.

A peft LoRA `Linear` computes ``y = x W^T + s (x A^T) B^T`` (``W`` ``[out, in]`` frozen, ``A``
``[r, in]``, ``B`` ``[out, r]``, ``s = alpha / r``; Hu et al. 2021, eq. 3).  `merged_lora(module)`
is a context under which each eligible one computes instead

    y = x (W + s B A)^T

the same function of ``x``, ``A`` and ``B`` (matrix products are associative), so values and
gradients agree to float rounding: one reduction of length ``r`` in ``B A`` in another place
(`tests/unit/test_merged_lora.py` compares both against peft's own forward within
`tests/tolerance.py`'s bound).  Autograd differentiates the merge: ``dL/dA = s B^T G``,
``dL/dB = s G A^T`` with ``G = g^T x`` the gradient of the merged weight.  Nothing is written into
any weight (peft's ``merge_adapter`` would add ``s B A`` to ``W`` and subtract it again, rounding
``W`` each time); outside the context every layer runs peft's forward.  Used by `trainer.logprobs` (the decoder's
layers, gradients through the merge) and by the sampler (`trainer.sampling.rollout.collect_groups`).
Each weight is merged once per context: once per log-prob pass (prompt and completion passes
share it), once per batch of rollouts.

When it pays: per input row the merged layer costs one extra product of ``in x out`` (the
merged weight's gradient), the separate path about ``3 r (in + out)`` (the two rank-``r``
products forward, four backward) plus three element-wise passes over the output (scale, add,
their gradient) -- products with an inner dimension of ``r`` run far below the CPU's matmul
speed.  Measured (one thread, 3,904 rows, r = 8, forward + backward): 64 x 64 0.55x the time,
64 x 128 0.65x, 128 x 128 0.77x, 256 x 256 0.91x, 576 x 576 1.17x, 576 x 1536 1.14x.  A layer is
merged when ``in * out <= MERGE_RATIO * 3 r (in + out)`` (`MERGE_RATIO` = 4: the tiny model's
64/128-wide layers, not SmolLM2's 576-wide ones).

Eligible: a peft ``lora.Linear`` over a plain `torch.nn.Linear`, one active adapter, vanilla
LoRA (no DoRA or other variant), no dropout (`torch.nn.Identity`: with dropout the two forms are
different functions), the adapter in the base weight's dtype (peft keeps a float32 adapter over
a bfloat16 base; merging would round the update to bfloat16), not ``fan_in_fan_out``, not
merged, no ``forward`` of its own set on the instance (accelerate's hooks).  At call time a
layer whose adapters are disabled (the reference policy) or that gets ``adapter_names`` runs
peft's forward.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Iterator

import torch

#: A layer is merged when its merged weight's extra product is at most this many times the
#: adapter's own products (see the module docstring for the measurements behind it).
MERGE_RATIO = 4


def mergeable(layer: torch.nn.Module) -> bool:
    """Whether `layer` is a peft LoRA `Linear` that `merged_lora` computes through its merged weight."""
    try:
        from peft.tuners.lora.layer import Linear as LoraLinear
    except ImportError:  # pragma: no cover - peft is a dependency of the trainer
        return False
    if not isinstance(layer, LoraLinear) or getattr(layer, "merged", False) or layer.fan_in_fan_out:
        return False
    if "forward" in vars(layer):  # a forward set on the instance (a hook of accelerate's, say): left as it is
        return False
    base = layer.base_layer
    active = list(layer.active_adapters)
    if type(base) is not torch.nn.Linear or len(active) != 1:
        return False
    name = active[0]
    if name not in layer.lora_A or name in getattr(layer, "lora_variant", {}):
        return False
    a, b = layer.lora_A[name], layer.lora_B[name]
    if a.bias is not None or b.bias is not None or type(layer.lora_dropout[name]) is not torch.nn.Identity:
        return False
    if not (a.weight.dtype == b.weight.dtype == base.weight.dtype):
        return False
    r, (out_f, in_f) = a.weight.shape[0], base.weight.shape
    return in_f * out_f <= MERGE_RATIO * 3 * r * (in_f + out_f)


def _merged_weight(layer) -> torch.Tensor:
    """``W + s B A`` (``[out, in]``), a function of ``A`` and ``B`` under autograd."""
    name = layer.active_adapters[0]
    return layer.base_layer.weight + (layer.lora_B[name].weight @ layer.lora_A[name].weight) * layer.scaling[name]


def _merged_forward(self, weight: torch.Tensor, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x (W + s B A)^T + bias`` with the merged weight `merged_lora` computed on entry; merged afresh
    when gradients are on now but were off then (the adapter gets its gradient); peft's forward when
    the adapter is off or per-row adapters are asked for."""
    if self.disable_adapters or args or kwargs:
        return type(self).forward(self, x, *args, **kwargs)
    if torch.is_grad_enabled() and not weight.requires_grad:
        weight = _merged_weight(self)
    return torch.nn.functional.linear(x, weight, self.base_layer.bias)


@contextmanager
def merged_lora(module: torch.nn.Module) -> Iterator[int]:
    """Within the context, every `mergeable` layer of `module` computes through its merged weight;
    yields how many.  The layers' own ``forward`` is back on exit (also on an exception).

    Each merged weight is computed once, on entry (under the grad mode of the caller), and reused
    by every forward pass inside: the weights must not change within the context (one log-prob
    pass; one batch of rollouts).
    """
    patched = [m for m in module.modules() if mergeable(m)]
    for m in patched:
        m.forward = functools.partial(_merged_forward, m, _merged_weight(m))
    try:
        yield len(patched)
    finally:
        for m in patched:
            del m.forward
