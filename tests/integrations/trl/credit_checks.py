"""The by-value check both TRL rollout tests make on a captured batch row (chain-4 and BFCL), and the
replay of an environment's answers that the tests build their expected episodes from."""

from __future__ import annotations

import pytest
import torch

from rlvp_dsl.attach import CallCredits, token_credits
from rlvp_dsl.events import CALL, ERROR, OK, Event


def replayed_call(index: int, call, result, tags=frozenset()) -> Event:
    """The call event of `call` (a `ToolCall`) and the environment's answer `result` (a `ToolResult`),
    as the rollouts write it -- built here from the fields, not by `ToolResult.event`, so the tests
    check that code against an independent reading: ok and its text, or error and its text."""
    return Event(
        index,
        CALL,
        tool=call.tool,
        arguments=dict(call.arguments),
        status=OK if result.ok else ERROR,
        result=result.text if result.ok else "",
        error_text="" if result.ok else result.text,
        tags=tags,
        signals=dict(result.signals),
    )


def assert_credit_on_call_tokens(adv_row: torch.Tensor, rollout, cc: CallCredits, weight: float) -> None:
    """`adv_row` (``[T]``, float64) minus ``weight`` x each call's credit on its span is one number on
    the row's action tokens and 0 elsewhere (TRL spreads an answer's credit over every action token),
    and each call's tokens carry that number plus ``weight`` x its credit."""
    T = adv_row.shape[0]
    assert len(cc.values) == len(rollout.call_spans) == len(rollout.episode.calls)
    mask = list(rollout.completion_mask) + [0] * (T - len(rollout.completion_mask))
    C = torch.tensor(token_credits(cc.values, rollout.call_spans, T, mask), dtype=torch.float64)
    rest = adv_row - weight * C
    on = torch.tensor(mask, dtype=torch.bool)
    assert torch.all(rest[~on] == 0.0), "advantage on a tool-output or padding token"
    base = rest[on]
    assert torch.allclose(base, base[0].expand_as(base), atol=1e-6), "credit off its call's tokens"
    for (start, end), value in zip(rollout.call_spans, cc.values, strict=True):
        assert adv_row[start:end].tolist() == pytest.approx([base[0].item() + weight * value] * (end - start), abs=1e-6)
