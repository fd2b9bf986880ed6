"""`trainer.checkpoint.copied`: the capture's copy of the optimiser state equals `copy.deepcopy`'s and
later optimiser steps leave it as it was."""

from __future__ import annotations

import copy

import torch

from trainer import checkpoint as ckpt


def _stepped_adamw() -> tuple[list[torch.nn.Parameter], torch.optim.AdamW]:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(5))]
    opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn_like(p)
        opt.step()
    return params, opt


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def test_copied_equals_deepcopy_and_is_independent_of_later_steps() -> None:
    params, opt = _stepped_adamw()
    fast, slow = ckpt.copied(opt.state_dict()), copy.deepcopy(opt.state_dict())
    assert _equal(fast, slow)
    before = fast["state"][0]["exp_avg"].clone()
    step_before = fast["state"][0]["step"].clone()
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()  # in place on the live state tensors
    assert torch.equal(fast["state"][0]["exp_avg"], before)
    assert torch.equal(fast["state"][0]["step"], step_before)
    assert not torch.equal(opt.state_dict()["state"][0]["exp_avg"], before)
    assert fast["param_groups"] is not opt.state_dict()["param_groups"]


def test_restoring_the_copy_continues_like_the_original() -> None:
    params, opt = _stepped_adamw()
    saved = ckpt.copied(opt.state_dict())
    weights = [p.detach().clone() for p in params]
    grads = [torch.full_like(p, 0.5) for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    opt.step()
    after = [p.detach().clone() for p in params]
    # roll back: the saved state and weights, then the same step again
    with torch.no_grad():
        for p, w in zip(params, weights):
            p.copy_(w)
    opt.load_state_dict(saved)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    opt.step()
    assert all(torch.equal(p, a) for p, a in zip(params, after))


def test_copied_keeps_plain_values() -> None:
    state = {"a": [1, 2.5, None, "x"], "b": (torch.tensor([1.0]), {"c": True})}
    out = ckpt.copied(state)
    assert _equal(out, state)
    assert out["a"] is not state["a"] and out["b"][0] is not state["b"][0]
