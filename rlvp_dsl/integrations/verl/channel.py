"""The token channel: how the outcome and rlvp's process credit share verl's one reward tensor.

verl hands an advantage estimator exactly one reward tensor, ``token_level_rewards``
``[B, T]`` (the trainer's ``rm_scores``, right-padded with 0), with ``response_mask``
``[B, T]`` (1 = a token the policy generated, 0 = tool output or padding) and the group
ids.  rlvp needs two things from it: each episode's outcome reward ``R_i`` (to normalise
within its group) and each token's process credit ``P[i, t]`` (added as it is).  They
share the tensor by position.  For row ``i`` let ``L_i`` be its **last action token**,
the last ``t`` with ``response_mask[i, t] == 1``.  Then, with ``X = token_level_rewards``::

    R_i     = X[i, L_i] + sum_{t : mask[i, t] == 0} X[i, t]        # the outcome
    P[i, t] = X[i, t]   for action tokens t != L_i                  # the process credit
    P[i, t] = 0         on L_i and on every mask-0 token

Writing (`write_row`, used by the ``rlvp_tool_agent`` loop) is the inverse: ``R_i`` on
``L_i``, ``P`` on the other action tokens, 0 on tool output.  Why this split:

1. It reads verl's own rewards correctly.  verl writes a scalar reward at the last
   response token (``valid_response_length - 1``); that token is either ``L_i`` or a
   tool-output token after it, and both count as outcome above.  So ``rlvp_token`` on a
   stock reward manager (or on the ``rlvp`` manager in scalar mode) is the plain
   group-normalised outcome -- nothing is mistaken for process credit.
2. Both parts are exact: the outcome is one stored float (plus zeros), the process
   credit is stored token by token, and no token holds both.  Process credit is never
   on a mask-0 token (`rlvp_dsl.attach.token_credits` honours the mask), so tool output
   is free to carry the outcome.

Edge cases (all on one token, none raises):

* the process credit that would land on ``L_i`` is not written (`write_row` returns it
  as ``dropped``): the unattached credit of assistant turns, which the compact trainer
  broadcasts over every action token, reaches every action token but the last; a call
  whose span reaches ``L_i`` (cut off by the length limit, or not followed by an end of
  turn token) keeps its credit on its other tokens.  In a tool agent loop ``L_i`` is the
  final turn's end-of-turn token, outside every call span, so only the unattached credit
  is affected.  On that token the advantage is the outcome advantage alone.
* a response with a single action token carries only its outcome;
* a row with no action token (empty generation): all of it is outcome, and its
  advantage is 0 everywhere (mask 0), but its outcome still counts in its group.
* ``use_kl_in_reward`` would subtract a KL penalty on every action token, which this
  split would read as process credit: ``rlvp_token`` refuses it (see `settings`).
"""

from __future__ import annotations

from typing import Sequence

import torch


def last_action_index(mask: Sequence[int]) -> int | None:
    """``L``: the last index with mask 1, or None when there is none."""
    for t in range(len(mask) - 1, -1, -1):
        if mask[t]:
            return t
    return None


def write_row(outcome: float, process: Sequence[float], mask: Sequence[int]) -> tuple[list[float], float]:
    """One row of the channel.

    Args:
        outcome: ``R``, the episode's outcome reward.
        process: ``[T]`` per-token process credit (0 on mask-0 tokens).
        mask: ``[T]`` the response mask.

    Returns:
        ``([T] channel values, dropped)`` where ``dropped`` is the process credit on the
        last action token, which the channel cannot carry (see the module docstring).

    Raises:
        ValueError: lengths differ, or process credit on a mask-0 token.
    """
    T = len(mask)
    if len(process) != T:
        raise ValueError(f"process has {len(process)} entries for a response of {T} tokens")
    bad = next((t for t in range(T) if not mask[t] and process[t] != 0.0), None)
    if bad is not None:
        raise ValueError(
            f"process credit {process[bad]!r} on token {bad}, which the policy did not generate (response_mask 0)"
        )
    row = [float(v) for v in process]
    last = last_action_index(mask)
    if last is None:
        if T:
            row[-1] = float(outcome)
        return row, 0.0
    dropped = row[last]
    row[last] = float(outcome)
    return row, dropped


def split_channel(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split the channel into outcomes and process credit (the module docstring's formula).

    Args:
        token_level_rewards: ``[B, T]``.
        response_mask: ``[B, T]`` (any dtype; nonzero = action token).

    Returns:
        ``(outcomes [B] float64, process [B, T] in token_level_rewards' dtype)``.
    """
    if token_level_rewards.shape != response_mask.shape or token_level_rewards.dim() != 2:
        raise ValueError(
            f"token_level_rewards {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must be the same [B, T] shape"
        )
    X = token_level_rewards
    action = response_mask != 0  # (B, T)
    B, T = X.shape
    positions = torch.arange(T, device=X.device).expand(B, T)
    last = (
        torch.where(action, positions, torch.full_like(positions, -1)).max(dim=1).values
        if T
        else torch.full((B,), -1, dtype=torch.long)
    )  # (B,)
    at_last = action & (positions == last[:, None])  # (B, T), one True per row with an action token
    outcome_slots = at_last | ~action
    outcomes = torch.where(outcome_slots, X, torch.zeros_like(X)).double().sum(dim=1)  # (B,)
    process = torch.where(action & ~at_last, X, torch.zeros_like(X))  # (B, T)
    return outcomes, process
