"""`RlvpAdvantageMixin` / `RlvpGRPOTrainer`: TRL's ``[B]`` advantages replaced by ``[B, T]`` ones, each
call's credit on its own tokens (the package docstring gives the formula).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from trl import GRPOTrainer

from rlvp_dsl.advantages import ProcessWeightSchedule, compute_advantages
from rlvp_dsl.attach import CallCredits
from rlvp_dsl.readers import (
    marked_calls,
)
from rlvp_dsl.call_spans import align_call_spans, find_call_spans

from .reward import RlvpReward

log = logging.getLogger("rlvp_dsl.integrations.trl")  # one logger for the package (its documented name)


def _marker_ids(tokenizer: Any, marker: str) -> list[int]:
    ids = tokenizer.encode(marker, add_special_tokens=False)
    if not ids:
        raise ValueError(f"the tokenizer encodes the call marker {marker!r} as no tokens")
    return list(ids)


def _reasoning_ids(tokenizer: Any, markers: tuple[str, str] | None) -> tuple[list[int], list[int]] | None:
    """The token ids of the reasoning markers, or None where the tokenizer cannot write them
    (a marker that encodes to nothing, to the unknown token, or does not decode back to itself)."""
    if markers is None:
        return None
    out = []
    for marker in markers:
        ids = list(tokenizer.encode(marker, add_special_tokens=False))
        unk = getattr(tokenizer, "unk_token_id", None)
        if not ids or (unk is not None and unk in ids) or tokenizer.decode(ids).strip() != marker:
            return None
        out.append(ids)
    return out[0], out[1]


class RlvpAdvantageMixin:
    """Per-token rlvp advantages for a `trl.GRPOTrainer` (subclass: ``class T(RlvpAdvantageMixin,
    GRPOTrainer)``).  The constructor is GRPOTrainer's, plus ``process_schedule`` (a
    `ProcessWeightSchedule`; default: the reward's constant ``process_weight``).

    One `RlvpReward` in ``mode="token"`` must be among ``reward_funcs``; the outcome is
    the weighted sum of the other reward functions (``multi_objective_aggregation`` is
    ``sum_then_normalize``).

    Raises:
        ValueError: no token-mode `RlvpReward` among the reward functions, or call markers
            the tokenizer encodes as no tokens or as the same tokens.
    """

    #: What `RlvpReward` checks on the trainer that calls it: this trainer reads token-mode rows.
    RLVP_TOKEN_CREDIT = True

    def __init__(self, *args: Any, process_schedule: ProcessWeightSchedule | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        found = [k for k, f in enumerate(self.reward_funcs) if isinstance(f, RlvpReward) and f.mode == "token"]
        if len(found) != 1:
            raise ValueError(
                f"{type(self).__name__} needs exactly one RlvpReward(rules, mode='token') among "
                f"reward_funcs (found {len(found)}); for scalar credit use the stock GRPOTrainer "
                "with RlvpReward(rules, mode='scalar')"
            )
        self.rlvp_index = found[0]
        self.rlvp_reward: RlvpReward = self.reward_funcs[self.rlvp_index]
        self.rlvp_reward.owned_by_mixin = True
        weights = self.reward_weights.tolist()
        if not any(w != 0 for k, w in enumerate(weights) if k != self.rlvp_index):
            log.warning(
                "%s has no outcome reward: reward_funcs holds only the RlvpReward (or the others weigh 0), "
                "so every group's outcome advantage is 0 and the policy learns the rules alone; add the "
                "task's reward function to reward_funcs",
                type(self).__name__,
            )
        self._rlvp_warned_markers = False
        self.rlvp_schedule = process_schedule or ProcessWeightSchedule(self.rlvp_reward.process_weight, enabled=False)
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        self._rlvp_tokenizer = tokenizer
        self._rlvp_markers = tuple(_marker_ids(tokenizer, m) for m in self.rlvp_reward.call_markers)
        if self._rlvp_markers[0] == self._rlvp_markers[1]:
            raise ValueError(
                f"the tokenizer encodes both call markers {self.rlvp_reward.call_markers!r} as the same "
                f"tokens {self._rlvp_markers[0]}, so no call's end can be found; give "
                "RlvpReward(call_markers=...) markers in the tokenizer's vocabulary"
            )
        self._rlvp_rewards_per_func: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rlvp_rewards_per_func = rewards  # [B_global, n_funcs], NaN where a function returned None
        return rewards

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        out["advantages"] = self.rlvp_advantages(out)
        return out

    # ---- the advantages ------------------------------------------------------------------
    def _local_outcomes(self, n_rows: int) -> list[float]:
        rewards = self._rlvp_rewards_per_func
        weights = self.reward_weights.to(rewards.device).clone()
        weights[self.rlvp_index] = 0.0
        others = torch.ones(rewards.shape[1], dtype=torch.bool, device=rewards.device)
        others[self.rlvp_index] = False
        summed = (rewards * weights.unsqueeze(0)).nansum(dim=1)  # (B_global,)
        summed[torch.isnan(rewards[:, others]).all(dim=1)] = torch.nan  # no outcome at all: unscorable
        start = self.accelerator.process_index * n_rows
        local = summed[start : start + n_rows].double()
        G = self.num_generations
        groups = local.view(-1, G)
        fill = torch.nanmean(groups, dim=1, keepdim=True).nan_to_num(0.0).expand_as(groups)
        return torch.where(torch.isnan(groups), fill, groups).reshape(-1).tolist()  # unscorable: the group mean

    def _rlvp_reasoning(self) -> tuple[list[int], list[int]] | None:
        """The reasoning markers' token ids (None: no reasoning to skip), found once."""
        key = self.rlvp_reward.reasoning_markers
        cached = getattr(self, "_rlvp_reasoning_cache", None)
        if cached is None or cached[0] != key:
            cached = self._rlvp_reasoning_cache = (key, _reasoning_ids(self._rlvp_tokenizer, key))
        return cached[1]

    def _span_tools(self, ids: list[int], spans: list[tuple[int, int]]) -> list[str | None]:
        names = []
        for start, end in spans:
            text = self._rlvp_tokenizer.decode(ids[start:end], skip_special_tokens=False)
            _, blocks = marked_calls(text, self.rlvp_reward.call_markers)
            names.append(blocks[0].tool if blocks else None)
        return names

    def rlvp_advantages(self, out: dict[str, Any]) -> torch.Tensor:
        """The ``[B, T]`` advantages for one generation batch (`out` is what TRL's
        ``_generate_and_score_completions`` returned; T is its completion length)."""
        completion_mask = out["completion_mask"]
        mask = completion_mask * out["tool_mask"] if "tool_mask" in out else completion_mask  # (B, T)
        B, T = mask.shape
        G = self.num_generations
        if B % G:
            raise ValueError(
                f"RlvpGRPOTrainer needs whole groups on each process: {B} local rows for "
                f"num_generations={G}; make per_device_train_batch_size * steps_per_generation "
                "a multiple of num_generations"
            )
        rows = self.rlvp_reward.last_rows
        if len(rows) != B:
            raise RuntimeError(f"RlvpReward scored {len(rows)} completions for a batch of {B}")
        ids, masks = out["completion_ids"].tolist(), mask.tolist()
        credits: list[CallCredits] = []
        spans: list[tuple[tuple[int, int], ...]] = []
        unmatched = without_span = markerless = 0
        reasoning = self._rlvp_reasoning()
        for row, row_ids, row_mask in zip(rows, ids, masks, strict=True):
            found = find_call_spans(row_ids, *self._rlvp_markers, row_mask, reasoning=reasoning)
            agree = len(found) == len(row.episode.calls) - row.first_call  # then names are not needed
            names = None if agree else self._span_tools(row_ids, found)
            aligned = align_call_spans(row.episode, found, names, first_call=row.first_call)
            unmatched += aligned.inserted
            without_span += aligned.without_span
            markerless += bool(aligned.without_span and not found)
            credits.append(self.rlvp_reward.credits(row, aligned.episode))
            spans.append(aligned.spans)
        step = self.state.global_step
        violations = sum(sum(1 for v in cc.values if v < 0) for cc in credits) / B
        self.rlvp_schedule.observe(step, violations)
        w = self.rlvp_schedule.weight(step)
        outcomes = self._local_outcomes(B)
        result = compute_advantages(
            [outcomes[g * G : (g + 1) * G] for g in range(B // G)],
            [credits[g * G : (g + 1) * G] for g in range(B // G)],
            [spans[g * G : (g + 1) * G] for g in range(B // G)],
            mask.detach().cpu(),
            credit_mode="token",
            process_weight=w,
            scale_rewards=self.scale_rewards,
        )
        mode = "train" if self.model.training else "eval"
        metrics = self._metrics[mode]
        metrics["rlvp/live_groups"].append(1.0 - result.frac_dead_groups)
        metrics["rlvp/dead_groups"].append(result.frac_dead_groups)
        metrics["rlvp/violations_per_episode"].append(violations)
        metrics["rlvp/credit_per_episode"].append(sum(cc.total for cc in credits) / B)
        metrics["rlvp/process_weight"].append(w)
        metrics["rlvp/unmatched_spans"].append(float(unmatched))
        metrics["rlvp/calls_without_span"].append(float(without_span))
        metrics["rlvp/unscorable_rows"].append(float(sum(1 for r in rows if r.problem)))
        metrics["rlvp/flagged_credits"].append(
            float(sum(len(cc.flagged) for cc in credits) + int(result.overflowed.sum()))
        )
        metrics["rlvp/ambiguous_results"].append(
            float(sum(sum(1 for call in r.episode.calls[r.first_call :] if call.ambiguous) for r in rows))
        )
        if markerless:
            self._rlvp_warn_markers(markerless)
        return result.advantages.to(completion_mask.device)

    def _rlvp_warn_markers(self, rows: int) -> None:
        """Say once that the call markers never occur in completions that have calls."""
        if self._rlvp_warned_markers:
            return
        self._rlvp_warned_markers = True
        log.warning(
            "rlvp: the call markers %r never occur among the generated tokens of %d completion(s) whose "
            "episodes have calls, so those calls' credit reaches no token (counted in "
            "rlvp/calls_without_span); pass your chat template's markers as RlvpReward(call_markers=...)",
            self.rlvp_reward.call_markers,
            rows,
        )


class RlvpGRPOTrainer(RlvpAdvantageMixin, GRPOTrainer):
    """`trl.GRPOTrainer` with rlvp's per-token advantages (see `RlvpAdvantageMixin`)."""
