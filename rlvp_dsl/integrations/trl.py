"""rlvp credit in Hugging Face TRL's `GRPOTrainer` (extra ``trl``; tested with TRL 1.16).

Two ways in, one line each::

    from rlvp_dsl.integrations.trl import RlvpReward, RlvpGRPOTrainer

    # scalar mode: the stock GRPOTrainer, rule credit added to the reward
    trainer = GRPOTrainer(model, reward_funcs=[outcome, RlvpReward("rules/my.rlvp", mode="scalar")], ...)

    # token mode: each call's credit on exactly the tokens of that call
    trainer = RlvpGRPOTrainer(model, reward_funcs=[outcome, RlvpReward("rules/my.rlvp")], ...)

**Scalar mode.**  `RlvpReward` returns ``process_weight * (total rule credit)`` per
completion; TRL adds it to the other reward functions' outputs before its group
advantage (the ``scalar_fold`` of docs/results.md).  In a group whose outcomes are all
equal (all failed) TRL's group std z-scores the rule credit's differences, however
small, into unit-size advantages: penalties a few hundredths apart become +-1, shaping
noise as a full-size gradient.  Such *amplified* groups are counted
(``rlvp/amplified_groups``, `rlvp_dsl.advantages.amplified_groups`) and logged once;
token mode has no such step (its process part is ``w * C``, at most ``w * |c|`` a token).

**Token mode.**  `RlvpReward` adds nothing to the scalar reward (it returns 0.0) and
keeps each row's episode; `RlvpGRPOTrainer` (or `RlvpAdvantageMixin` on a trainer you
already subclass) replaces TRL's ``[B]`` advantages with ``[B, T]`` ones::

    A[i, t] = mask[i, t] * (A_out[i] + w * u[i]) + w * C[i, t]

computed by `rlvp_dsl.advantages.compute_advantages` -- the same function the compact
trainer and the verl estimator use: ``A_out`` is the group-normalised outcome (the
other reward functions' weighted sum, TRL's ``scale_rewards``; a group with equal
outcomes gets exactly 0), ``C[i, t]`` the credit of the call whose tokens include t,
``u`` the credit of assistant turns (no span), ``w`` the process weight (optionally
annealed, `rlvp_dsl.advantages.ProcessWeightSchedule`).  TRL's ``_compute_loss`` takes 2-D
advantages as they are, for every ``loss_type``.

**Reading TRL's completions.**  Tool mode (``tools=``, ``environment_factory``) gives
message lists: tool errors are TRL's ``{'error': ...}`` text (error signal ``trl``), and
a call whose arguments were not valid JSON stays text in the message -- with the
template's markers it becomes a malformed call.  Plain-text completions are read for
marked calls.  TRL's tool messages carry no ids (and TRL writes sync tools' results before
async ones'): each answers the oldest unanswered call of its ``name``.  A call written
inside ``<think>...</think>`` is no call, in the text and in the spans.  In
``rollout_func`` mode a rollout may return the messages under the key
``rlvp_messages`` (one message list per completion), which takes precedence.  The
prompt's messages are part of the episode (a rule may look at what the user said), but
credit never lands on them.

**Spans.**  In token mode the trainer finds each call's tokens from the completion ids,
the completion mask times the tool mask, and the marker tokens, and pairs them with
the episode's calls (`rlvp_dsl.call_spans`); a span TRL did not read as a call becomes a
malformed call, scored as failed.  A bad completion never stops training: the row
gets no credit and is counted (``rlvp/unscorable_rows``).

**Outcome once.**  In ``environment_factory`` mode TRL adds the environment's
``get_reward`` as a reward function of its own; it is part of the outcome here, and
`RlvpReward` never adds an outcome, so nothing is counted twice.

Metrics, next to TRL's (``frac_reward_zero_std`` reads 1.0 where every group's outcomes
are equal; ``rlvp/live_groups`` shows that token credit kept them live):
``rlvp/live_groups``, ``rlvp/dead_groups``, ``rlvp/violations_per_episode``,
``rlvp/credit_per_episode``, ``rlvp/process_weight``, ``rlvp/unmatched_spans``,
``rlvp/calls_without_span`` (calls whose tokens were not found: their credit reaches
no token), ``rlvp/unscorable_rows``, ``rlvp/flagged_credits`` (non-finite credits and
sums dropped, `rlvp_dsl.attach`), ``rlvp/ambiguous_results`` (calls whose result, paired
by tool name, could be a same-name call's: docs/readers.md); in scalar mode
``rlvp/amplified_groups``.

Importing this module imports torch and trl.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Iterator, Sequence

import attrs
import torch
import trl
from trl import GRPOTrainer

from rlvp_dsl.advantages import ProcessWeightSchedule, amplified_groups, compute_advantages
from rlvp_dsl.attach import CallCredits, completion_credits
from rlvp_dsl.compile import Program
from rlvp_dsl.events import Episode
from rlvp_dsl.pipeline import load_program
from rlvp_dsl.readers import (
    HERMES_MARKERS,
    THINK_MARKERS,
    ReaderError,
    checked_markers,
    episode_from_messages,
    episode_from_text,
    marked_calls,
)
from rlvp_dsl.readers import error_signal as resolve_error_signal
from rlvp_dsl.call_spans import align_call_spans, find_call_spans

__all__ = ["RlvpAdvantageMixin", "RlvpGRPOTrainer", "RlvpReward", "RlvpRuleReward", "ScoredRow", "TESTED_TRL"]

#: The TRL minor version this module is tested with (the ``trl`` extra pins it).
TESTED_TRL = "1.16"

log = logging.getLogger(__name__)

if not trl.__version__.startswith(TESTED_TRL + "."):  # pragma: no cover - depends on the install
    log.warning(
        "rlvp_dsl.integrations.trl is tested with TRL %s.x; this is TRL %s "
        "(pip install 'rlvp[trl]' installs the tested version)",
        TESTED_TRL,
        trl.__version__,
    )


@attrs.frozen
class ScoredRow:
    """One completion as rlvp read it.

    Attributes:
        episode: the prompt's and the completion's events.
        first_event: index of the completion's first event (credit before it is dropped).
        first_call: how many calls precede the completion (in the prompt's messages).
        problem: why the row could not be read (then `episode` is empty), else ``""``.
    """

    episode: Episode
    first_event: int = 0
    first_call: int = 0
    problem: str = ""


def _as_program(rules: Program | str | os.PathLike) -> Program:
    if not isinstance(rules, (Program, str, os.PathLike)):
        raise TypeError(f"'rules' must be a compiled Program or the path of a .rlvp file (got {rules!r})")
    return rules if isinstance(rules, Program) else load_program(os.fspath(rules))


def _checked_weight(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"'process_weight' must be a number (got {value!r})")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int past a float
        finite = False
    if not finite or value < 0:
        raise ValueError(f"'process_weight' must be a finite, non-negative number (got {value!r})")
    return float(value)


def _calling_trainer(kwargs: dict[str, Any]) -> Any:
    """The trainer whose ``_calculate_rewards`` made this call (TRL passes its bound ``log_metric``), or None."""
    return getattr(kwargs.get("log_metric"), "__self__", None)


def _check_batch(prompts: Any, completions: Any, messages: Any) -> None:
    """One prompt per completion (and one ``rlvp_messages`` row per completion, when given).

    Raises:
        ValueError: not sequences, or of different lengths (a caller's mistake: TRL passes them aligned).
    """
    for name, value in (("prompts", prompts), ("completions", completions), ("rlvp_messages", messages)):
        if value is not None and (isinstance(value, (str, bytes)) or not hasattr(value, "__len__")):
            raise ValueError(
                f"RlvpReward: {name!r} must be a list, one entry per completion (got {type(value).__name__})"
            )
    if prompts is None or completions is None:
        raise ValueError("RlvpReward: needs prompts and completions (lists of the same length)")
    lengths = {"prompts": len(prompts), "completions": len(completions)}
    if messages is not None:
        lengths["rlvp_messages"] = len(messages)
    if len(set(lengths.values())) > 1:
        raise ValueError(
            "RlvpReward: one prompt (and message list) per completion, got "
            + ", ".join(f"{n} {name}" for name, n in lengths.items())
        )


class RlvpReward:
    """A TRL reward function that scores completions with an rlvp rule program.

    Args:
        rules: a compiled `Program` or the path of a ``.rlvp`` file (raises `RuleError`
            with rendered diagnostics when it has errors).
        mode: ``token`` (credit on tokens via `RlvpGRPOTrainer`; returns 0.0 per
            completion) or ``scalar`` (returns ``process_weight`` x total credit).
        process_weight: w, the weight of rule credit against the outcome.
        error_signal: how a tool message is recognised as an error (``trl``, ``verl``,
            ``mcp``, ``openai`` or an `ErrorSignal`); default TRL's ``{'error': ...}``.
        call_markers: the chat template's tool-call markers.
        name: the name TRL logs the function under (``rewards/<name>/mean``).
        components: scalar mode only: also make one TRL reward function per rule
            (`RlvpRuleReward`, logged as ``rewards/<name>/<rule>/mean``); iterating the
            reward yields them, so ``reward_funcs=[outcome, *RlvpReward(..., mode="scalar",
            components=True)]`` gives TRL the rule credit split by rule (their sum is the
            scalar reward).  Pass the components or the reward itself, never both (the
            credit would count twice).

    Call: ``reward(prompts=..., completions=..., completion_ids=..., **kwargs) ->
    list[float]`` (TRL's reward-function contract); `last_rows` keeps the rows of the
    latest call, in batch order.

    Scalar mode in all-failed groups: TRL z-scores each group's summed reward, so in a
    group whose outcomes are all equal the rule credit's differences alone are divided
    by their own std -- penalties 0.01 apart become advantages of about +-1.  Such groups
    are counted in ``rlvp/amplified_groups`` (from the second generation batch on: the
    reward meets its trainer in its first call) and logged once.  Token mode keeps each
    call's process advantage at ``w * |c|``.

    Reasoning: a call the model only wrote inside its thought (`reasoning_markers`, the
    class attribute: ``<think>``/``</think>``; None for none) is no call, in the text and in
    the token spans, so thought tokens carry no call credit.

    Raises:
        ValueError: an unknown mode or error signal, a process weight that is negative,
            NaN or infinite, call markers that are empty or identical; at the first call,
            a token-mode reward called by a trainer that is not an `RlvpAdvantageMixin`
            (the stock `GRPOTrainer` would train on 0 for every completion);
            ``components=True`` in token mode (its credit reaches TRL as advantages, not rewards).
        TypeError: a process weight or rules of the wrong type.
    """

    #: The markers of the model's thought (set to None on an instance for a template without them).
    reasoning_markers: tuple[str, str] | None = THINK_MARKERS

    def __init__(
        self,
        rules: Program | str | os.PathLike,
        *,
        mode: str = "token",
        process_weight: float = 1.0,
        error_signal: Any = "trl",
        call_markers: tuple[str, str] = HERMES_MARKERS,
        name: str = "rlvp",
        components: bool = False,
    ):
        if not isinstance(mode, str) or mode not in ("token", "scalar"):
            raise ValueError(f"'mode' must be token or scalar (got {mode!r})")
        if not isinstance(components, bool):
            raise TypeError(f"'components' must be True or False (got {components!r})")
        if components and mode != "scalar":
            raise ValueError(
                "components=True splits scalar mode's reward by rule; in token mode the credit reaches TRL "
                "as per-token advantages, not as rewards (use mode='scalar')"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"'name' must be a non-empty string, the name TRL logs the reward under (got {name!r})")
        self.process_weight = _checked_weight(process_weight)
        try:
            resolve_error_signal(error_signal, default="trl")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"'error_signal': {exc}") from None
        self.call_markers = checked_markers(call_markers)
        self.program = _as_program(rules)
        self.mode = mode
        self.error_signal = error_signal
        self.__name__ = name
        self.last_rows: list[ScoredRow] = []
        self.unscorable_rows = 0
        self.owned_by_mixin = False  # set by RlvpAdvantageMixin, which reads token-mode rows
        self._watched: Any = None  # the trainer whose amplified groups scalar mode counts
        self._warned_amplified = False
        self.components: list[RlvpRuleReward] = (
            [RlvpRuleReward(self, rule.name) for rule in self.program.rules] if components else []
        )
        self._batch: tuple[tuple[Any, ...], list[dict[str, float]]] | None = None

    def __iter__(self) -> Iterator[RlvpRuleReward]:
        """The per-rule reward functions (``components=True``).

        Raises:
            TypeError: the reward was made without ``components=True``.
        """
        if not self.components:
            raise TypeError("RlvpReward yields per-rule reward functions only when made with components=True")
        return iter(self.components)

    def rule_totals(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[dict[str, float]]:
        """Per completion, each rule's summed credit (unweighted; credit on the prompt's events
        dropped).  The batch is read once: the components of one TRL reward computation (the same
        ``prompts`` and ``completions`` objects) share it."""
        key = (prompts, completions, kwargs.get("rlvp_messages"))
        if self._batch is not None and all(a is b for a, b in zip(self._batch[0], key)):
            return self._batch[1]
        self(prompts, completions, completion_ids, **kwargs)
        totals = []
        for row in self.last_rows:
            per_rule = {rule.name: 0.0 for rule in self.program.rules}
            for credit in self.credits(row).credits:
                per_rule[credit.rule] = per_rule.get(credit.rule, 0.0) + credit.value
            totals.append(per_rule)
        self._batch = (key, totals)
        return totals

    # ---- reading one completion ------------------------------------------------------
    def read(self, prompt: Any, completion: Any, messages: Any = None) -> ScoredRow:
        """The episode of one prompt + completion; never raises for a bad completion."""
        try:
            prompt_part = (
                prompt
                if isinstance(prompt, list)
                else ([{"role": "user", "content": prompt}] if isinstance(prompt, str) and prompt else [])
            )
            if messages is None and isinstance(completion, str):
                head = episode_from_messages(prompt_part, error_signal=self.error_signal)
                tail = episode_from_text(
                    completion, call_markers=self.call_markers, reasoning_markers=self.reasoning_markers
                )
                events = head.events + tuple(attrs.evolve(e, index=len(head.events) + e.index) for e in tail.events)
                return ScoredRow(Episode("completion", events), len(head.events), len(head.calls))
            completion_part = messages if messages is not None else completion
            if not isinstance(completion_part, (list, tuple)):
                raise TypeError(
                    f"a completion must be text or a list of chat messages (got {type(completion_part).__name__})"
                )
            head = episode_from_messages(
                prompt_part,
                error_signal=self.error_signal,
                call_markers=self.call_markers,
                reasoning_markers=self.reasoning_markers,
            )
            whole = episode_from_messages(
                list(prompt_part) + list(completion_part),
                error_signal=self.error_signal,
                call_markers=self.call_markers,
                reasoning_markers=self.reasoning_markers,
                id="completion",
            )
            return ScoredRow(whole, len(head.events), len(head.calls))
        except (ReaderError, TypeError, ValueError) as exc:
            self.unscorable_rows += 1
            log.warning("rlvp: a completion could not be read, it gets no rule credit: %s", exc)
            return ScoredRow(Episode("completion", ()), problem=str(exc))

    def credits(self, row: ScoredRow, episode: Episode | None = None) -> CallCredits:
        """Per-call credit of a row's episode (credit on the prompt's events dropped)."""
        episode = row.episode if episode is None else episode
        return completion_credits(self.program, episode, first_event=row.first_event, source=self.__name__)

    # ---- TRL's reward-function contract ------------------------------------------------
    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        trainer = _calling_trainer(kwargs)
        by_trainer = trainer is not None or "trainer_state" in kwargs  # TRL passes both; a hand call neither
        owned = isinstance(trainer, RlvpAdvantageMixin) if trainer is not None else self.owned_by_mixin
        if self.mode == "token" and by_trainer and not owned:
            raise ValueError(
                f"RlvpReward(mode='token') was called by {type(trainer).__name__ if trainer else 'a trainer'}, which "
                "is not an RlvpAdvantageMixin: token-mode credit reaches only that mixin's per-token advantages, so "
                "this trainer would train on 0 for every completion. Use RlvpGRPOTrainer (or add "
                "RlvpAdvantageMixin in front of your GRPOTrainer subclass), or RlvpReward(..., mode='scalar') "
                "with the stock GRPOTrainer"
            )
        if self.mode == "scalar" and trainer is not None:
            self._watch(trainer)
        messages = kwargs.get("rlvp_messages")
        _check_batch(prompts, completions, messages)
        self.last_rows = [
            self.read(p, c, messages[k] if messages is not None else None)
            for k, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        if self.mode == "token":
            return [0.0] * len(self.last_rows)
        return [self.process_weight * self.credits(row).total for row in self.last_rows]

    # ---- scalar mode: the groups TRL's z-score amplifies ----------------------------------
    def _watch(self, trainer: Any) -> None:
        """Count amplified groups after each of `trainer`'s reward computations (its
        ``_calculate_rewards`` returns every reward function's values, gathered: whole groups)."""
        if self._watched is trainer:
            return
        self._watched = trainer
        compute = trainer._calculate_rewards

        def calculate_rewards(*args: Any, **kwargs: Any) -> torch.Tensor:
            rewards = compute(*args, **kwargs)
            self._count_amplified(trainer, rewards)
            return rewards

        trainer._calculate_rewards = calculate_rewards

    def _count_amplified(self, trainer: Any, rewards: torch.Tensor) -> None:
        """Log ``rlvp/amplified_groups`` for one batch; `rewards` is ``[B_global, n_funcs]``."""
        index = next((k for k, f in enumerate(trainer.reward_funcs) if f is self), None)
        G = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        if index is None or G < 2 or rewards.shape[0] % G:
            return
        weighted = rewards.double().cpu() * trainer.reward_weights.double().cpu().unsqueeze(0)  # (B, n_funcs)
        others = [k for k in range(weighted.shape[1]) if k != index]
        if trainer.multi_objective_aggregation == "normalize_then_sum":  # each function z-scored by its group std
            outcome, folded = torch.zeros(weighted.shape[0], dtype=torch.float64), weighted[:, index]
            scale = "group"
        else:
            outcome = weighted[:, others].nansum(dim=1)
            folded = outcome + weighted[:, index].nan_to_num(0.0)
            scale = trainer.scale_rewards
        found = amplified_groups(outcome.view(-1, G), folded.view(-1, G), scale)
        n = int(found.sum())
        trainer._log_metric("rlvp/amplified_groups", float(n))
        if n and not self._warned_amplified:
            self._warned_amplified = True
            log.warning(
                "rlvp scalar mode: %d of %d groups have equal outcomes and rule credit that differs; "
                "TRL's group std scales those differences up to unit-size advantages (shaping noise as a "
                "full-size gradient; counted in rlvp/amplified_groups). RlvpGRPOTrainer with "
                "mode='token' keeps each call's credit at w x |c|",
                n,
                found.numel(),
            )


class RlvpRuleReward:
    """One rule's part of a scalar-mode `RlvpReward` (``components=True``): a TRL reward function
    returning ``process_weight`` x that rule's credit per completion, named ``<reward>/<rule>``
    (TRL logs ``rewards/<reward>/<rule>/mean`` and ``.../std``)."""

    def __init__(self, parent: RlvpReward, rule: str):
        self.parent = parent
        self.rule = rule
        self.__name__ = f"{parent.__name__}/{rule}"

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        totals = self.parent.rule_totals(prompts, completions, completion_ids, **kwargs)
        return [self.parent.process_weight * t[self.rule] for t in totals]


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
