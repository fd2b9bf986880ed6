"""The ``rlvp_token`` advantage estimator: group-normalised outcome plus token-attached credit.

    A[i, t] = mask[i, t] * A_out[i] + w * P[i, t]

* ``R_i`` and ``P[i, t]`` are read from ``token_level_rewards`` by the token-channel
  convention (`channel.split_channel`: the outcome on the last action token and on tool
  output, the process credit on the other action tokens);
* ``A_out = rlvp_dsl.advantages.group_outcome_advantages(R)`` over the groups of ``index``
  (verl's ``uid``: the rollouts of one prompt) -- GRPO's group normalisation (Shao et al.
  2024, DeepSeekMath) with the compact trainer's constant-group rule: a group whose
  outcomes are all equal gets exactly 0, never ``+-0.7`` from a tiny std;
* ``w`` is ``algorithm.rlvp.process_weight`` (`settings.estimator_settings`).

This is `rlvp_dsl.advantages.compute_advantages(..., credit_mode="token",
process_norm="none")` -- the same function for the outcome term, the same per-token
credit (written by the agent loop with `rlvp_dsl.attach.episode_token_credits`), the same
combination (`rlvp_dsl.advantages.token_advantages`) -- except on the last action token,
which carries the outcome only (`channel`'s edge cases).
``process_norm="group_rms"`` is not available here: the channel carries per-token credit,
not the per-call totals it divides by.

Shapes: ``token_level_rewards``, ``response_mask`` ``[B, T]``; ``index`` ``[B]``; returns
``(advantages [B, T] float32, returns [B, T])`` with ``returns = advantages`` as verl's GRPO.
Groups may have different sizes (verl drops failed sessions) except with
``scale_rewards="batch"``, whose one std needs one group size.
"""

from __future__ import annotations

from typing import Any

import torch

from rlvp_dsl.advantages import group_outcome_advantages, token_advantages

from .channel import split_channel
from .settings import estimator_settings

ESTIMATOR_NAME = "rlvp_token"


def _groups(index: Any, n_rows: int) -> list[list[int]]:
    """Row numbers per group id, groups in order of first appearance."""
    ids = index.tolist() if hasattr(index, "tolist") else list(index)
    if len(ids) != n_rows:
        raise ValueError(f"index has {len(ids)} group ids for {n_rows} rows")
    groups: dict[Any, list[int]] = {}
    for row, gid in enumerate(ids):
        try:
            groups.setdefault(gid, []).append(row)
        except TypeError:  # a list or dict as a group id
            raise ValueError(f"index: group id {gid!r} of row {row} is not a str or number (verl's uid)") from None
    return list(groups.values())


def rlvp_token_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, config: Any = None, **kwargs: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator ``rlvp_token`` (the module docstring's formula).

    Args:
        token_level_rewards: ``[B, T]`` the token channel.
        response_mask: ``[B, T]``.
        index: ``[B]`` group ids (``non_tensor_batch["uid"]``); verl passes it when the
            batch has ``uid``, which the trainer always sets.
        config: verl's algorithm config (``DictConfig``, ``AlgoConfig`` or None).
        **kwargs: what else verl passes (``reward_baselines``), unused.

    Returns:
        ``(advantages, returns)``, both ``[B, T]`` float32 and equal.

    Raises:
        SettingsError: a bad ``algorithm.rlvp`` setting, or ``use_kl_in_reward`` on.
        ValueError: no ``index``, or shapes that do not match.
    """
    settings = estimator_settings(config)
    if index is None:
        raise ValueError(
            "rlvp_token needs the group ids: the batch must carry non_tensor_batch['uid'] "
            "(verl sets one per prompt for its rollout.n samples)"
        )
    outcomes, process = split_channel(token_level_rewards, response_mask)  # (B,), (B, T)
    mask = (response_mask != 0).to(torch.float32)  # (B, T)
    a_out = group_outcome_advantages(outcomes, _groups(index, mask.shape[0]), settings.scale_rewards, settings.eps).to(
        mask.device
    )  # (B,)
    advantages = token_advantages(a_out, mask, process, settings.process_weight)  # (B, T)
    return advantages, advantages
