"""Token advantages: the group-relative outcome term plus the token-attached process term.

    A[i, t] = mask[i, t] * A_out[i] + w * P[i, t]
    P[i, t] = C[i, t] + u[i] * mask[i, t]

* ``A_out[i]`` -- GRPO's outcome advantage of episode i in its group
  (`rlvp_dsl.advantages.outcome`; exactly 0 for a group whose rewards are all equal).
* ``C[i, t]`` -- token-attached process credit: the call's credit on every token
  of the call's span (an answer's on its tokens where the rollout knows them), 0
  elsewhere; ``u[i]`` -- credit on non-call events with no span (forced answers, TRL's
  and verl's turns): broadcast over the episode's action tokens.  Both are
  `rlvp_dsl.attach.episode_token_credits`.
* ``w`` -- the (annealed) process weight (`rlvp_dsl.advantages.schedule`), divided by
  the group's `process_scale`.

`token_advantages` is the combination, one definition for the compact trainer
(`compute_advantages`) and verl's ``rlvp_token`` estimator.

``scalar_fold`` instead adds ``w * P_i`` (the episode's total process credit) to
``R_i`` before the group advantage and attaches nothing to tokens.

A *dead* group is one whose per-token advantages are all exactly zero: it gives
no policy gradient.  A dead iteration is one where every group is dead.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import attrs
import torch

from rlvp_dsl.attach import CallCredits, episode_token_credits
from rlvp_dsl.call_spans import TokenSpan

from .outcome import amplified_groups, outcome_advantages


def process_scale(totals: torch.Tensor, norm: str) -> torch.Tensor:
    """Per-group divisor of the process credit.

    Args:
        totals: ``[n_groups, G]`` total process credit per episode.
        norm: ``none`` (1) or ``group_rms`` (``max(1, RMS of the group's totals)``).
            No centring: a call that earned no credit keeps none, and extra
            zero-credit calls stay neutral.  Never below 1: ``group_rms`` shrinks a
            group whose credit is larger than the outcome's scale (1) and never
            enlarges one, so a call's process advantage stays within ``w * |c|``, the
            token mode's bound.  (Dividing by a small RMS -- an all-failed group whose
            penalties differ by a few hundredths -- would make shaping noise a
            full-size gradient: 53x ``w * |c|`` at an RMS of 0.019.)

    Returns:
        ``[n_groups, 1]`` divisors (>= 1).
    """
    if norm == "none":
        return torch.ones(totals.shape[0], 1, dtype=torch.float64)
    if norm == "group_rms":
        rms = totals.double().pow(2).mean(dim=1, keepdim=True).sqrt()
        return torch.clamp(rms, min=1.0)
    raise ValueError(f"'process_norm' must be none or group_rms (got {norm!r})")


#: The largest magnitude a float32 advantage can hold.
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def _representable(x: float) -> bool:
    """`x` is finite and stays finite as a float32."""
    return math.isfinite(x) and abs(x) <= FLOAT32_MAX


def _check_credits(credits: Sequence[Sequence[CallCredits]]) -> None:
    """Raise a ValueError naming group, rollout and call for a non-finite credit."""
    for g, group in enumerate(credits):
        for i, cc in enumerate(group):
            for k, v in enumerate(cc.values):
                if not math.isfinite(v):
                    raise ValueError(
                        f"credit of call {k} (group {g}, rollout {i}) must be finite (got {v}); "
                        "build CallCredits with rlvp_dsl.attach.score_calls, which flags such values"
                    )
            if not math.isfinite(cc.unattached):
                raise ValueError(f"unattached credit (group {g}, rollout {i}) must be finite (got {cc.unattached})")


@attrs.frozen
class Advantages:
    """Per-token advantages of a batch and what they imply.

    Attributes:
        advantages: ``[B, T]`` float32 (B = n_groups * G, row order = group-major).
        outcome: ``[B]`` the outcome advantage A_out per episode.
        process: ``[B]`` w * (summed token-attached + unattached credit) per episode.
        dead_groups: ``[n_groups]`` bool, no non-zero advantage on any action token.
        rewards: ``[B]`` the reward that entered the group advantage (folded for scalar_fold).
        amplified_groups: ``[n_groups]`` bool, scalar mode only: groups whose outcomes are
            equal and whose process credit's differences the group std scaled up
            (`amplified_groups`).
        overflowed: ``[B]`` bool, episodes whose weighted process credit would not be a
            finite float32 advantage; they get none (their outcome advantage stays).
    """

    advantages: torch.Tensor
    outcome: torch.Tensor
    process: torch.Tensor
    dead_groups: torch.Tensor
    rewards: torch.Tensor
    amplified_groups: torch.Tensor = attrs.field(factory=lambda: torch.zeros(0, dtype=torch.bool))
    overflowed: torch.Tensor = attrs.field(factory=lambda: torch.zeros(0, dtype=torch.bool))

    @property
    def dead_iteration(self) -> bool:
        return bool(self.dead_groups.all())

    @property
    def frac_dead_groups(self) -> float:
        return float(self.dead_groups.float().mean()) if self.dead_groups.numel() else 1.0

    def episode_totals(self) -> torch.Tensor:
        """``[B]`` A_out + process: the advantage an episode gets as a whole (one decision per call)."""
        return self.outcome + self.process


def token_advantages(
    outcome: torch.Tensor, mask: torch.Tensor, process: torch.Tensor | None = None, weight: float = 1.0
) -> torch.Tensor:
    """The advantage combination ``A[i, t] = mask[i, t] * A_out[i] + w * P[i, t]``.

    One definition for the compact trainer (`compute_advantages`, which passes ``P``
    already weighted -- each call's credit times ``w / divisor`` before overlapping
    credits add -- and ``weight=1``) and verl's ``rlvp_token`` estimator (unweighted
    ``P`` read from the token channel, ``weight=w``).

    Args:
        outcome: ``[B]`` the outcome advantage ``A_out`` (`outcome_advantages`).
        mask: ``[B, T]`` completion mask (1 = action token).
        process: ``[B, T]`` per-token process credit ``P``
            (`rlvp_dsl.attach.episode_token_credits`), or None for none.
        weight: ``w``.

    Returns:
        ``[B, T]`` float32.  Precision: ``mask * A_out`` in float32, its sum with
        ``w * P`` in float64, rounded once to float32.
    """
    outcome_part = outcome.float()[:, None] * mask.float()  # (B, T)
    if process is None:
        return outcome_part
    return (outcome_part.double() + weight * process.double()).float()


def compute_advantages(
    outcomes: Sequence[Sequence[float]],
    credits: Sequence[Sequence[CallCredits]] | None,
    spans: Sequence[Sequence[Sequence[TokenSpan]]],
    masks: torch.Tensor,
    *,
    credit_mode: str,
    process_weight: float = 1.0,
    scale_rewards: str = "group",
    process_norm: str = "none",
    eps: float = 1e-4,
    turn_spans: Sequence[Sequence[Mapping[int, TokenSpan]]] | None = None,
) -> Advantages:
    """All advantages of one batch.

    Args:
        outcomes: ``[n_groups][G]`` outcome rewards.
        credits: ``[n_groups][G]`` per-call credits (None when ``credit_mode == "none"``).
        spans: ``[n_groups][G][n_calls]`` call spans into each completion.
        masks: ``[B, T]`` completion masks (1 = action token), padded with 0.
        credit_mode: ``none`` (outcome only), ``token`` (attached) or ``scalar`` (folded).
        process_weight: w.
        scale_rewards, process_norm, eps: see `outcome_advantages`, `process_scale`.
        turn_spans: ``[n_groups][G]`` answer event index -> the span of its tokens
            (`trainer.types.Rollout.turn_spans`); None: no answer's tokens are known, their
            credit is spread over the episode's action tokens.

    Returns:
        `Advantages`.

    An episode whose weighted process credit would not be a finite float32 advantage
    (a total past 3.4e38, or past a quarter of it in scalar mode, where centring and
    the outcome add to it) gets no process credit, only its outcome advantage, and is
    marked in `Advantages.overflowed`: isolated to its episode, never spread, never
    fatal.  Scalar mode marks the groups it amplifies (`amplified_groups`).

    Raises:
        ValueError: ragged groups, shapes that do not match, ``credits=None`` with a
            ``credit_mode`` other than ``none``, or a value that is not
            finite (an outcome, the weight, a call credit of a hand-made `CallCredits`;
            `rlvp_dsl.attach.score_calls` never makes one) -- nothing non-finite is
            spread over a group or a batch.
    """
    n_groups = len(outcomes)
    G = len(outcomes[0]) if n_groups else 0
    if any(len(g) != G for g in outcomes):
        raise ValueError(f"all groups must have {G} rollouts (got sizes {[len(g) for g in outcomes]})")
    B, T = masks.shape
    if B != n_groups * G:
        raise ValueError(f"masks has {B} rows for {n_groups} groups of {G}")
    if credit_mode not in ("none", "token", "scalar"):
        raise ValueError(f"credit_mode must be none, token or scalar (got {credit_mode!r})")
    if credit_mode != "none" and credits is None:
        raise ValueError(f"credit_mode {credit_mode!r} needs the per-call credits (got credits=None)")
    mask = masks.float()
    R = torch.tensor(outcomes, dtype=torch.float64).reshape(n_groups, G)  # (n_groups, G)
    w = float(process_weight)
    if not math.isfinite(w):
        raise ValueError(f"process_weight must be finite (got {w})")
    if credits is not None:
        _check_credits(credits)
    use_process = credit_mode != "none" and credits is not None and w != 0.0

    # --- process totals per episode; one whose weighted credit is no float32 is dropped ---
    totals = torch.zeros(n_groups, G, dtype=torch.float64)
    overflowed = torch.zeros(n_groups, G, dtype=torch.bool)
    if credits is not None:
        for g in range(n_groups):
            for i in range(G):
                t = credits[g][i].total
                if use_process and not _representable(w * t):
                    overflowed[g, i] = True
                else:
                    totals[g, i] = t
    div = process_scale(totals, process_norm) if use_process else torch.ones(n_groups, 1, dtype=torch.float64)

    # --- outcome term ---
    amplified = torch.zeros(n_groups, dtype=torch.bool)
    if credit_mode == "scalar" and use_process:
        folded = w * totals / div
        # headroom for centring (at most doubles) and the outcome: every sum stays a float32
        too_big = folded.abs() > FLOAT32_MAX / 4
        overflowed |= too_big
        R_used = R + folded.masked_fill(too_big, 0.0)
        amplified = amplified_groups(R, R_used, scale_rewards, eps)
    else:
        R_used = R
    A_out = outcome_advantages(R_used, scale_rewards, eps).reshape(B)  # (B,)

    # --- token-attached process term (each call's credit weighted before credits add) ---
    process = torch.zeros(B)
    rows: torch.Tensor | None = None
    if credit_mode == "token" and use_process and credits is not None:
        rows = torch.zeros(B, T, dtype=torch.float64)  # (B, T) w / div * P
        for g in range(n_groups):
            for i in range(G):
                b, cc = g * G + i, credits[g][i]
                if overflowed[g, i]:
                    continue
                scale = w / float(div[g, 0])
                row = torch.tensor(
                    episode_token_credits(
                        cc,
                        spans[g][i],
                        T,
                        masks[b].tolist(),
                        weight=scale,
                        turn_spans=turn_spans[g][i] if turn_spans else None,
                    ),
                    dtype=torch.float64,
                )  # (T,)
                total = scale * (sum(cc.values) + cc.unattached)
                outcome_row = (A_out[b] * mask[b]).double()  # (T,)
                if not (_representable(total) and bool(((row + outcome_row).abs() <= FLOAT32_MAX).all())):
                    overflowed[g, i] = True  # overlapping spans or w > 1 pushed a token past float32
                    continue
                rows[b] = row
                process[b] = total
    adv = token_advantages(A_out, mask, rows)  # (B, T); rows already carry w / div

    # --- dead groups: no non-zero advantage on any action token ---
    live_tok = (adv != 0) & (mask > 0)  # (B, T)
    dead = ~live_tok.reshape(n_groups, G * T).any(dim=1) if B else torch.ones(0, dtype=torch.bool)
    return Advantages(
        adv.float(), A_out.float(), process.float(), dead, R_used.reshape(B).float(), amplified, overflowed.reshape(B)
    )
