"""TRL reward functions: `RlvpReward` reads TRL's completions into episodes and scores them with a rule
program (scalar mode: the credit as reward; token mode: the episodes kept for `RlvpGRPOTrainer`);
`RlvpRuleReward` is one rule's total (``components=True``).  The package docstring says how.
"""

from __future__ import annotations

import logging
import math
import os
import re
from typing import Any, Iterator, Sequence

import attrs
import torch
import trl

from rlvp_dsl.advantages import amplified_groups
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
)
from rlvp_dsl.readers import error_signal as resolve_error_signal

TESTED_TRL = "1.16"

log = logging.getLogger("rlvp_dsl.integrations.trl")  # one logger for the package (its documented name)

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
        problem: why the row could not be read (then `episode` is empty), else ``""``; it names the
            message (`RlvpReward.read`: ``completion (messages[1]): field 'role': ...``) and, in
            `RlvpReward.last_rows`, the batch row (``completions[2] (messages[1]): ...``).
    """

    episode: Episode
    first_event: int = 0
    first_call: int = 0
    problem: str = ""


def _as_program(rules: Program | str | os.PathLike) -> Program:
    """`rules` compiled.  Raises TypeError for a value of another type, RuleError for a rule file
    with errors -- a missing one included, whose help says where a relative path is looked up."""
    if not isinstance(rules, (Program, str, os.PathLike)):
        raise TypeError(f"'rules' must be a compiled Program or the path of a .rlvp file (got {rules!r})")
    if isinstance(rules, Program):
        return rules
    return load_program(os.fspath(rules))  # a missing file: RuleError, its help says where a relative path starts


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


def _where(exc: Exception, part: str, prompt_len: int) -> str:
    """A reader's error about one row, named as the caller wrote the row: ``completion
    (messages[1]): ...`` -- the reader read the prompt's and the completion's messages as one list
    (``messages[3]``), so the index is taken back to the part it is in (``part``: ``completion``, or
    ``rlvp_messages`` when they replaced it; ``prompt`` for an index inside the prompt)."""
    if not isinstance(exc, ReaderError):
        return f"{part}: {exc}"
    found = re.fullmatch(r"messages\[(\d+)\](.*)", exc.record)
    name, record = part, f" ({exc.record})" if exc.record else ""
    if found is not None:
        index = int(found[1])
        name, index = ("prompt", index) if index < prompt_len else (part, index - prompt_len)
        record = f" (messages[{index}]{found[2]})"
    rest = [f"field {exc.field!r}"] if exc.field else []
    return ": ".join([name + record, *rest, *([exc.detail] if exc.detail else [])])


def _numbered(problem: str, row: int) -> str:
    """`_where`'s ``completion (messages[1]): ...`` of batch row ``row``: ``completions[2] (messages[1]): ...``."""
    for name, batch in (("completion", "completions"), ("prompt", "prompts"), ("rlvp_messages", "rlvp_messages")):
        if problem.startswith((name + " ", name + ":")):
            return f"{batch}[{row}]{problem[len(name) :]}"
    return f"row {row}: {problem}"


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
            NaN or infinite, an empty name, call markers that are not two, empty or identical; at the first call,
            a token-mode reward called by a trainer that is not an `RlvpAdvantageMixin`
            (the stock `GRPOTrainer` would train on 0 for every completion);
            ``components=True`` in token mode (its credit reaches TRL as advantages, not rewards).
        TypeError: a value of the wrong type (Python's convention): ``mode``, ``name`` not a string,
            ``process_weight`` not a number, ``error_signal`` neither a name nor an `ErrorSignal`,
            ``call_markers`` not a list or tuple of strings, ``components`` not a bool, ``rules`` neither
            a `Program` nor a path.
        RuleError: the rule file has errors, or is not there (the help says where a relative path
            is looked up: the current folder).
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
        if not isinstance(mode, str):
            raise TypeError(f"'mode' must be a string, token or scalar (got {type(mode).__name__} {mode!r})")
        if mode not in ("token", "scalar"):
            raise ValueError(f"'mode' must be token or scalar (got {mode!r})")
        if not isinstance(components, bool):
            raise TypeError(f"'components' must be True or False (got {components!r})")
        if components and mode != "scalar":
            raise ValueError(
                "components=True splits scalar mode's reward by rule; in token mode the credit reaches TRL "
                "as per-token advantages, not as rewards (use mode='scalar')"
            )
        if not isinstance(name, str):
            raise TypeError(
                f"'name' must be a string, the name TRL logs the reward under (got {type(name).__name__} {name!r})"
            )
        if not name:
            raise ValueError(f"'name' must be a non-empty string, the name TRL logs the reward under (got {name!r})")
        self.process_weight = _checked_weight(process_weight)
        try:
            resolve_error_signal(error_signal, default="trl")
        except TypeError as exc:  # not a name nor an ErrorSignal
            raise TypeError(f"'error_signal': {exc}") from None
        except ValueError as exc:
            raise ValueError(f"'error_signal': {exc}") from None
        if not isinstance(call_markers, (list, tuple)) or not all(isinstance(m, str) for m in call_markers):
            raise TypeError(
                f"'call_markers' must be a pair of strings, the chat template's opening and closing tool-call "
                f"markers (got {type(call_markers).__name__} {call_markers!r}); Qwen/Hermes: {HERMES_MARKERS!r}"
            )
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
        """The episode of one prompt + completion; never raises for a bad completion.

        A row that cannot be read gets an empty episode and a `ScoredRow.problem` that names the
        message at fault within its part: ``completion (messages[1]): field 'role': ...`` (or
        ``prompt (messages[0])``, or ``rlvp_messages (...)`` when they replaced the completion);
        a call numbers it by its batch row (``completions[2] (messages[1])``)."""
        prompt_len = len(prompt) if isinstance(prompt, list) else 1 if isinstance(prompt, str) and prompt else 0
        part = "rlvp_messages" if messages is not None else "completion"
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
            return ScoredRow(Episode("completion", ()), problem=_where(exc, part, prompt_len))

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
        # an RlvpAdvantageMixin says so with RLVP_TOKEN_CREDIT (trainer.py imports this module, not the reverse)
        owned = getattr(trainer, "RLVP_TOKEN_CREDIT", False) is True if trainer is not None else self.owned_by_mixin
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
        for k, row in enumerate(self.last_rows):
            if row.problem:  # named by its batch row
                self.last_rows[k] = attrs.evolve(row, problem=_numbered(row.problem, k))
                log.warning(
                    "rlvp: a completion could not be read, it gets no rule credit: %s", self.last_rows[k].problem
                )
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
