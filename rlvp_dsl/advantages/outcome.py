"""The outcome advantage: GRPO's group-relative advantage of each episode's outcome reward.

    A_out[i] = (R_i - mean_g R) / (std + eps)

for episode i in its group g (the rollouts of one task or prompt); ``std`` is the group's
(``scale_rewards="group"``), the batch's (``"batch"``) or 1 (``"none"``).  A group whose
rewards are all equal gets exactly 0 (`constant_groups`), whatever the scaling: constancy
is tested on the raw rewards with a tolerance relative to their scale, never through a
tiny std (0.1 + 0.2 vs 0.3 must not become +-0.7).

Groups of one size are a ``[n_groups, G]`` tensor (`outcome_advantages`, the compact
trainer and TRL); groups of different sizes are lists of row numbers
(`group_outcome_advantages`, verl, which drops failed sessions).  Scalar mode's
*amplified* groups (`amplified_groups`) are the groups whose std scales the folded
process credit's differences up.

Formula: Shao et al. 2024 (DeepSeekMath, GRPO), outcome supervision; ``batch`` scaling as
in Liu et al. 2025 (Dr. GRPO) / TRL ``scale_rewards="batch"``.
"""

from __future__ import annotations

from typing import Sequence

import torch

#: Tolerance of `constant_groups`, relative to the rewards' scale.
CONSTANT_RTOL = 1e-6


def constant_groups(rewards: torch.Tensor, rtol: float = CONSTANT_RTOL) -> torch.Tensor:
    """Which groups have all-equal rewards.

    Args:
        rewards: ``[n_groups, G]``.
        rtol: tolerance relative to the reward scale: constant when
            ``max - min <= rtol * max(1, max |R|)``.

    Returns:
        ``[n_groups]`` bool.
    """
    r = rewards.double()
    spread = r.max(dim=1).values - r.min(dim=1).values
    scale = torch.clamp(r.abs().max(dim=1).values, min=1.0)
    return spread <= rtol * scale


def outcome_advantages(rewards: torch.Tensor, scale_rewards: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """Group-relative advantage of each episode.

    Args:
        rewards: ``[n_groups, G]`` episode rewards.
        scale_rewards: ``group`` (std of the group), ``batch`` (std of all rewards),
            ``none`` (no division).
        eps: added to the std.

    Returns:
        ``[n_groups, G]`` float32; exactly 0 for constant groups (`constant_groups`).

    Raises:
        ValueError: rewards not ``[n_groups, G]``, a reward that is not finite, or an
            unknown `scale_rewards`.

    Formula: Shao et al. 2024 (DeepSeekMath, GRPO) eq. for outcome supervision;
    ``batch`` scaling as in Liu et al. 2025 (Dr. GRPO) / TRL ``scale_rewards="batch"``.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 1:
        raise ValueError(f"rewards must be [n_groups, G] (got shape {tuple(rewards.shape)})")
    if not torch.isfinite(rewards).all():
        g, i = (int(x) for x in (~torch.isfinite(rewards)).nonzero()[0])
        raise ValueError(f"rewards must be finite (group {g}, rollout {i} is {float(rewards[g, i])})")
    r = rewards.double()
    centred = r - r.mean(dim=1, keepdim=True)  # (n_groups, G)
    if scale_rewards == "group":
        std = r.std(dim=1, keepdim=True, unbiased=False) if r.shape[1] > 1 else torch.zeros_like(r[:, :1])
        adv = centred / (std + eps)
    elif scale_rewards == "batch":
        std = r.std(unbiased=False) if r.numel() > 1 else torch.zeros((), dtype=r.dtype)
        adv = centred / (std + eps)
    elif scale_rewards == "none":
        adv = centred
    else:
        raise ValueError(f"'scale_rewards' must be group, batch or none (got {scale_rewards!r})")
    const = constant_groups(rewards)
    adv[const] = 0.0
    return adv.float()


def group_outcome_advantages(
    outcomes: torch.Tensor, groups: Sequence[Sequence[int]], scale_rewards: str, eps: float
) -> torch.Tensor:
    """``A_out`` per row for groups of different sizes: `outcome_advantages` on each stack of
    same-size groups.

    Args:
        outcomes: ``[B]`` outcome rewards.
        groups: row numbers of each group (every row in exactly one).
        scale_rewards, eps: see `outcome_advantages`.

    Returns:
        ``[B]`` float32.

    Raises:
        ValueError: ``scale_rewards="batch"`` with groups of different sizes (its one std
            needs one group size), or what `outcome_advantages` raises.
    """
    by_size: dict[int, list[Sequence[int]]] = {}
    for rows in groups:
        by_size.setdefault(len(rows), []).append(rows)
    if scale_rewards == "batch" and len(by_size) > 1:
        raise ValueError(
            f"scale_rewards='batch' needs groups of one size (got sizes {sorted(by_size)}); "
            "use algorithm.rlvp.scale_rewards=group or none"
        )
    out = torch.zeros(outcomes.shape[0], dtype=torch.float32)
    for stack in by_size.values():
        index = torch.tensor(stack, dtype=torch.long)  # (n_groups, G) row numbers
        out[index] = outcome_advantages(outcomes.double().cpu()[index], scale_rewards, eps)
    return out


def amplified_groups(
    outcomes: torch.Tensor, rewards: torch.Tensor, scale_rewards: str = "group", eps: float = 1e-4
) -> torch.Tensor:
    """Which groups scalar mode turns shaping noise into a full-size advantage.

    A group is *amplified* when its outcomes are all equal (`constant_groups`: say all
    failed), its folded rewards (outcome + w * process credit) are not, and the
    divisor of the group advantage is below 1 (``std + eps`` of the group for
    ``scale_rewards="group"``, of the batch for ``"batch"``; ``"none"`` never divides).
    Its advantages are then the process credit's differences scaled *up* by
    ``1 / (std + eps)``: unit-size (+-1 for two rollouts) whether the penalties differ
    by 1 or by 0.01.  Token mode has no such step (its process part is ``w * C``).

    Args:
        outcomes: ``[n_groups, G]`` outcome rewards.
        rewards: ``[n_groups, G]`` the rewards the group advantage is computed from.
        scale_rewards, eps: as `outcome_advantages`.

    Returns:
        ``[n_groups]`` bool.
    """
    r = rewards.double()
    if scale_rewards == "none" or r.numel() == 0:
        return torch.zeros(r.shape[0], dtype=torch.bool)
    if scale_rewards == "batch":
        std = (r.std(unbiased=False) if r.numel() > 1 else torch.zeros((), dtype=r.dtype)).expand(r.shape[0])
    else:
        std = r.std(dim=1, unbiased=False) if r.shape[1] > 1 else torch.zeros(r.shape[0], dtype=r.dtype)
    return constant_groups(outcomes) & ~constant_groups(rewards) & (std + eps < 1.0)
