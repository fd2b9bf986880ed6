"""rlvp credit as Tinker training data (extra ``tinker``; tested with tinker 0.38).

Tinker takes per-token advantages as plain data: a ``tinker.Datum`` whose
``loss_fn_inputs["advantages"]`` is aligned with ``loss_fn_inputs["target_tokens"]`` (the
sequence shifted by one: position j predicts token j + 1).  This module writes them::

    from rlvp_dsl.integrations.tinker import RlvpTinker, TokenRollout

    credit = RlvpTinker("rules/my.rlvp", marker_ids=(tok.encode("<tool_call>"), tok.encode("</tool_call>")))
    datums = credit.datums(groups)  # groups: [n_groups][G] TokenRollout
    training_client.forward_backward(datums, loss_fn="importance_sampling")

The advantage of token t of a rollout is the compact trainer's (`rlvp_dsl.advantages`)::

    A[t] = sampled[t] * A_out + w * P[t]

computed by `rlvp_dsl.advantages.compute_advantages` on the batch: ``A_out`` the group-relative
outcome advantage (`TokenRollout.outcome`; a group whose outcomes are all equal gets exactly 0),
``P[t]`` the rule credit attached to tokens (`rlvp_dsl.attach`: the credit of each call on every
token of that call's span; the credit of answers, which come without spans, on every sampled
token), ``w`` the process weight.  Prompt tokens and tool outputs (``sampled`` 0) get 0.

**Spans.**  A call's tokens are found among the sampled tokens by the chat template's marker
ids (`rlvp_dsl.call_spans.find_call_spans`) and paired in order with the episode's calls (read
from the rollout's OpenAI-chat messages); a marked span with no call in the messages becomes a
malformed call, scored as failed; a call with no span keeps its credit off the tokens.

`TokenCredit` is the part that needs no Tinker (the verifiers adapter shares it):
`TokenCredit.advantages` gives the per-token advantages, ``[N]`` per rollout, aligned with
`TokenRollout.tokens`.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import attrs
import torch

from rlvp_dsl.advantages import Advantages, compute_advantages
from rlvp_dsl.attach import CallCredits, completion_credits
from rlvp_dsl.call_spans import TokenSpan, align_call_spans, find_call_spans
from rlvp_dsl.compile import Program
from rlvp_dsl.events import Episode
from rlvp_dsl.pipeline import load_program
from rlvp_dsl.readers import HERMES_MARKERS, THINK_MARKERS, ReaderError, episode_from_messages

__all__ = ["TESTED_TINKER", "RlvpTinker", "TokenCredit", "TokenRollout", "TokenAdvantages"]

#: The tinker minor version this module is tested with (the ``tinker`` extra pins it).
TESTED_TINKER = "0.38"


def _ints(value: Any, what: str) -> list[int]:
    try:
        out = [int(x) for x in value]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a sequence of ints (got {type(value).__name__})") from None
    return out


@attrs.frozen
class TokenRollout:
    """One rollout as token data.

    Attributes:
        tokens: ``[N]`` the whole sequence's token ids: the prompt, then the policy's tokens and
            the tool outputs between them.
        sampled: ``[N]`` 1 where the policy sampled the token, 0 on the prompt, tool outputs and
            template scaffold.
        messages: the OpenAI-chat messages of the prompt and then the completion (the rules see
            them all; credit never lands on the prompt's).
        n_prompt_messages: how many of `messages` are the prompt's.
        outcome: the outcome reward.
        logprobs: ``[N]`` the sampler's log-probabilities (any value where ``sampled`` is 0), or
            None (then the datum has no ``logprobs`` input).
    """

    tokens: Sequence[int]
    sampled: Sequence[int]
    messages: Sequence[Mapping[str, Any]]
    n_prompt_messages: int
    outcome: float
    logprobs: Sequence[float] | None = None


@attrs.frozen
class TokenAdvantages:
    """The advantages of a batch of rollouts.

    Attributes:
        per_token: ``[n_groups][G]`` lists of ``[N]`` floats (float32 values), aligned with each
            rollout's `TokenRollout.tokens`; 0 where ``sampled`` is 0.
        credits: ``[n_groups][G]`` the per-call credit of each rollout's completion.
        spans: ``[n_groups][G]`` the call spans, into `TokenRollout.tokens`.
        result: `rlvp_dsl.advantages.Advantages` of the batch (rows group-major, padded to the
            longest rollout).
    """

    per_token: list[list[list[float]]]
    credits: list[list[CallCredits]]
    spans: list[list[tuple[TokenSpan, ...]]]
    result: Advantages


def _weight(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"process_weight must be a finite number (got {value!r})")
    return float(value)


class TokenCredit:
    """Rule credit + group outcome -> per-token advantages of rollouts given as token data.

    Args:
        rules: a compiled `rlvp_dsl.compile.Program` or the path of a ``.rlvp`` file.
        marker_ids: the token ids of the call markers, ``(open_ids, close_ids)``
            (``tokenizer.encode("<tool_call>", add_special_tokens=False)`` and its closer).
        reasoning_ids: the token ids of the thought markers (``<think>``, ``</think>``); a
            marked block inside a thought is no call.  None: no thoughts.
        call_markers, reasoning_markers: the same markers as text, for reading the messages.
        error_signal: how a tool message reads as an error (`rlvp_dsl.readers.ERROR_SIGNALS`;
            default ``openai``).
        process_weight: ``w``.
        scale_rewards: ``group``, ``batch`` or ``none`` (`rlvp_dsl.advantages.outcome_advantages`).
        process_norm: ``none`` or ``group_rms`` (`rlvp_dsl.advantages.process_scale`).

    Raises:
        TypeError, ValueError: a bad argument (named); RuleError: rules that do not compile.
    """

    def __init__(
        self,
        rules: Program | str | os.PathLike[str],
        marker_ids: tuple[Sequence[int], Sequence[int]],
        *,
        reasoning_ids: tuple[Sequence[int], Sequence[int]] | None = None,
        call_markers: tuple[str, str] = HERMES_MARKERS,
        reasoning_markers: tuple[str, str] | None = THINK_MARKERS,
        error_signal: str | None = None,
        process_weight: float = 1.0,
        scale_rewards: str = "group",
        process_norm: str = "none",
    ):
        if not isinstance(rules, (Program, str, os.PathLike)):
            raise TypeError(f"'rules' must be a compiled Program or the path of a .rlvp file (got {rules!r})")
        self.program = rules if isinstance(rules, Program) else load_program(os.fspath(rules))
        self.source = str(getattr(self.program, "path", None) or "rules")
        if not (isinstance(marker_ids, (tuple, list)) and len(marker_ids) == 2):
            raise TypeError("marker_ids must be (open_ids, close_ids), two sequences of token ids")
        self.marker_ids = (_ints(marker_ids[0], "marker_ids[0]"), _ints(marker_ids[1], "marker_ids[1]"))
        if not all(self.marker_ids):
            raise ValueError("marker_ids must be non-empty token sequences")
        self.reasoning_ids = (
            None
            if reasoning_ids is None
            else (_ints(reasoning_ids[0], "reasoning_ids[0]"), _ints(reasoning_ids[1], "reasoning_ids[1]"))
        )
        self.call_markers = call_markers
        self.reasoning_markers = reasoning_markers
        self.error_signal = error_signal
        self.process_weight = _weight(process_weight)
        if scale_rewards not in ("group", "batch", "none"):
            raise ValueError(f"scale_rewards must be group, batch or none (got {scale_rewards!r})")
        self.scale_rewards = scale_rewards
        if process_norm not in ("none", "group_rms"):
            raise ValueError(f"process_norm must be none or group_rms (got {process_norm!r})")
        self.process_norm = process_norm

    def episode(self, rollout: TokenRollout) -> tuple[Episode, int, int]:
        """``(episode, first_event, first_call)``: the rollout's messages read, and where its
        completion starts.  Raises `ReaderError` for messages that are not OpenAI chat."""
        messages = list(rollout.messages)
        k = rollout.n_prompt_messages
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(messages):
            raise ValueError(f"n_prompt_messages must be an int in [0, {len(messages)}] (got {k!r})")
        read = dict(
            error_signal=self.error_signal, call_markers=self.call_markers, reasoning_markers=self.reasoning_markers
        )
        head = episode_from_messages(messages[:k], **read)  # type: ignore[arg-type]
        whole = episode_from_messages(messages, id="completion", **read)  # type: ignore[arg-type]
        return whole, len(head.events), len(head.calls)

    def _row(
        self, rollout: TokenRollout, where: str
    ) -> tuple[list[int], list[int], CallCredits, tuple[TokenSpan, ...]]:
        if not isinstance(rollout, TokenRollout):
            raise TypeError(f"{where} must be a TokenRollout (got {type(rollout).__name__})")
        tokens = _ints(rollout.tokens, f"{where}.tokens")
        sampled = [1 if s else 0 for s in rollout.sampled]
        if len(sampled) != len(tokens):
            raise ValueError(f"{where}.sampled has {len(sampled)} entries for {len(tokens)} tokens")
        if rollout.logprobs is not None and len(rollout.logprobs) != len(tokens):
            raise ValueError(f"{where}.logprobs has {len(rollout.logprobs)} entries for {len(tokens)} tokens")
        if isinstance(rollout.outcome, bool) or not isinstance(rollout.outcome, (int, float)):
            raise TypeError(f"{where}.outcome must be a number (got {rollout.outcome!r})")
        try:
            episode, first_event, first_call = self.episode(rollout)
        except ReaderError as exc:
            raise ValueError(f"{where}.messages: {exc}") from None
        found = find_call_spans(tokens, *self.marker_ids, sampled, reasoning=self.reasoning_ids)
        aligned = align_call_spans(episode, found, first_call=first_call)
        credits = completion_credits(self.program, aligned.episode, first_event=first_event, source=self.source)
        return tokens, sampled, credits, aligned.spans

    def advantages(self, groups: Sequence[Sequence[TokenRollout]]) -> TokenAdvantages:
        """The per-token advantages of ``groups`` (``[n_groups][G]`` rollouts of the same prompt
        per group), by `rlvp_dsl.advantages.compute_advantages` in token mode.

        Raises:
            ValueError, TypeError: ragged groups, a rollout whose fields disagree in length or
                whose messages cannot be read (naming ``groups[g][i]`` and the field), a
                non-finite outcome.
        """
        if not groups or not all(len(g) for g in groups):
            raise ValueError("groups must be a non-empty list of non-empty groups of rollouts")
        G = len(groups[0])
        if any(len(g) != G for g in groups):
            raise ValueError(f"all groups must have {G} rollouts (got sizes {[len(g) for g in groups]})")
        rows = [[self._row(r, f"groups[{g}][{i}]") for i, r in enumerate(group)] for g, group in enumerate(groups)]
        T = max(len(tokens) for group in rows for tokens, *_ in group)
        masks = torch.zeros(len(groups) * G, T)  # (B, T)
        for b, (_, sampled, _, _) in enumerate(row for group in rows for row in group):
            masks[b, : len(sampled)] = torch.tensor(sampled, dtype=torch.float32)
        result = compute_advantages(
            [[float(r.outcome) for r in group] for group in groups],
            [[row[2] for row in group] for group in rows],
            [[row[3] for row in group] for group in rows],
            masks,
            credit_mode="token",
            process_weight=self.process_weight,
            scale_rewards=self.scale_rewards,
            process_norm=self.process_norm,
        )
        per_token = [
            [result.advantages[g * G + i, : len(row[0])].tolist() for i, row in enumerate(group)]
            for g, group in enumerate(rows)
        ]
        return TokenAdvantages(
            per_token,
            [[row[2] for row in group] for group in rows],
            [[row[3] for row in group] for group in rows],
            result,
        )


class RlvpTinker(TokenCredit):
    """`TokenCredit` that writes ``tinker.Datum`` s (same arguments).

    One datum per rollout, group-major::

        model_input                   = tokens[:-1]
        loss_fn_inputs["target_tokens"] = tokens[1:]
        loss_fn_inputs["advantages"]    = A[1:]          (A: `TokenCredit.advantages`)
        loss_fn_inputs["logprobs"]      = logprobs[1:]   (when the rollout has them)

    the inputs of Tinker's policy-gradient losses (``importance_sampling``, ``ppo``, ``cispo``).
    """

    def datums(self, groups: Sequence[Sequence[TokenRollout]]) -> list[Any]:
        """``[n_groups * G]`` ``tinker.Datum`` s of ``groups`` (see the class).

        Raises:
            ImportError: tinker is not installed (``pip install 'rlvp[tinker]'``).
            ValueError: a rollout of fewer than 2 tokens, or whose first token is sampled (no
                position predicts it), and as `TokenCredit.advantages`.
        """
        try:
            import tinker
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("RlvpTinker.datums needs tinker: pip install 'rlvp[tinker]'") from exc
        for g, group in enumerate(groups):
            for i, r in enumerate(group):
                if isinstance(r, TokenRollout) and len(r.tokens) < 2:
                    raise ValueError(f"groups[{g}][{i}] has {len(r.tokens)} tokens; a datum needs at least 2")
                if isinstance(r, TokenRollout) and len(r.sampled) and r.sampled[0]:
                    raise ValueError(f"groups[{g}][{i}]'s first token is sampled: no position predicts it")
        adv = self.advantages(groups)
        out = []
        for group, adv_group in zip(groups, adv.per_token, strict=True):
            for r, a in zip(group, adv_group, strict=True):
                tokens = [int(t) for t in r.tokens]
                inputs: dict[str, Any] = {"target_tokens": tokens[1:], "advantages": [float(x) for x in a[1:]]}
                if r.logprobs is not None:
                    inputs["logprobs"] = [float(x) for x in r.logprobs[1:]]
                out.append(tinker.Datum(model_input=tinker.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs))
        return out
