"""The ``rlvp_tool_agent`` agent loop: verl's tool agent loop that scores the episode it ran.

`RlvpToolAgentLoop` runs verl's ``ToolAgentLoop`` unchanged and records, per
generation, its token ids and place in the response, whether verl parsed it, how many
of its calls ran and their tool messages (`transcript.Turn`).  When the episode ends it
reads the episode and each call's exact token span from those turns
(`transcript.episode_from_turns`), scores it with the rules of
``reward.reward_kwargs.rlvp.rules`` and attaches the credit to tokens with
`rlvp_dsl.attach.episode_token_credits` (the compact trainer's attachment: each call's
whole credit on every generated token of its span; credit on assistant turns on every
generated token)::

    P[t] = sum_k c_k * [t in span_k] * mask[t]  +  u * mask[t]          # [T], unweighted

**Token mode** (``algorithm.adv_estimator=rlvp_token``): it returns an
`RlvpAgentLoopOutput`, whose ``as_dict()`` -- what verl's v1 trainer puts into its
TransferQueue, after the reward loop scored the outcome -- writes ``rm_scores`` as the
token channel (`channel.write_row`: the outcome on the last action token, ``P`` on the
other action tokens).  verl's v1 trainer reads ``rm_scores`` as ``token_level_scores``
and, with ``use_kl_in_reward`` off, as ``token_level_rewards`` -- the tensor
``rlvp_token`` reads.  The outcome is whatever the configured reward manager computes.

**Scalar mode** (any other estimator): nothing is written on tokens; the loop's scoring
rides in ``extra_fields["rlvp"]`` to the ``rlvp`` reward manager, which folds it into
the scalar reward (so the reward manager must be ``rlvp``).

Assumed, and checked at construction where the config says it:

* one agent-loop output per session (``ToolAgentLoop`` returns one; verl's v1 GRPO path
  treats a session's last output as the trajectory);
* verl's v1 trainer (``trainer.use_v1=true``, the 0.9.1 default): the legacy trainer pads
  outputs itself and keeps only ``reward_score``, so the token credit would be lost;
* the reward loop runs inside the agent loop (no colocated reward model: that path
  rewrites ``rm_scores`` later);
* the ``hermes`` tool-call format (verl's default), whose markers tokenise as themselves.

Metrics: ``extra_fields["rlvp"]`` (mode, credit, the `scoring.METRIC_KEYS`) and the same
keys in ``reward_extra_info`` (verl's validation tables and generation dumps).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import torch
from pydantic import PrivateAttr
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

from rlvp_dsl.attach import episode_token_credits

from .channel import last_action_index, write_row
from .estimator import ESTIMATOR_NAME
from .reward_manager import REWARD_MANAGER_NAME
from .scoring import score
from .settings import SettingsError, config_value, program_for, rule_settings
from .transcript import Turn, episode_from_turns

AGENT_LOOP_NAME = "rlvp_tool_agent"
logger = logging.getLogger(__name__)


class RlvpAgentLoopOutput(AgentLoopOutput):
    """An ``AgentLoopOutput`` that writes the token channel into ``rm_scores`` in ``as_dict()``.

    ``process`` (private, ``[len(response_ids)]``, unweighted) is rlvp's per-token credit;
    the outcome is ``reward_score`` as verl's reward loop set it (0.0 if it did not).
    """

    _rlvp_process: Optional[list[float]] = PrivateAttr(default=None)

    @classmethod
    def from_output(cls, output: AgentLoopOutput, process: Optional[list[float]]) -> "RlvpAgentLoopOutput":
        """The same output (fields and which of them were set), carrying `process`."""
        fields = {name: getattr(output, name) for name in type(output).model_fields}
        new = cls.model_construct(_fields_set=set(output.model_fields_set), **fields)
        new._rlvp_process = process
        return new

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        extra = out.setdefault("extra_fields", {})
        info = extra.get("rlvp")
        if isinstance(info, dict):
            outcome = float(self.reward_score) if self.reward_score is not None else 0.0
            metrics = dict(info.get("metrics", {}), rlvp_outcome=outcome)
            info["metrics"] = metrics
            reward_extra = extra.get("reward_extra_info")
            extra["reward_extra_info"] = {**(reward_extra if isinstance(reward_extra, dict) else {}), **metrics}
        if self._rlvp_process is not None:
            outcome = float(self.reward_score) if self.reward_score is not None else 0.0
            row, _ = write_row(outcome, self._rlvp_process, out["response_mask"].tolist())
            out["rm_scores"] = torch.tensor(row, dtype=torch.float32)
        return out


def _check_config(config: Any, mode: str) -> None:
    """Fail at construction where the config makes rlvp's credit miss training."""
    fmt = config_value(config, "actor_rollout_ref.rollout.multi_turn.format", "hermes")
    if fmt != "hermes":
        raise SettingsError(
            f"'actor_rollout_ref.rollout.multi_turn.format' must be hermes for {AGENT_LOOP_NAME} "
            f"(got {fmt!r}): its calls are read from the hermes <tool_call> markers"
        )
    if mode == "token":
        if config_value(config, "trainer.use_v1", True) is False:
            raise SettingsError(
                f"'trainer.use_v1' must be true with algorithm.adv_estimator={ESTIMATOR_NAME} "
                "(got false): the legacy trainer keeps one reward per trajectory, so the "
                "token credit of rlvp_tool_agent would be lost"
            )
        if config_value(config, "reward.reward_model.enable", False) and not config_value(
            config, "reward.reward_model.enable_resource_pool", False
        ):
            raise SettingsError(
                "'reward.reward_model.enable_resource_pool' must be true when a reward model is "
                f"enabled with {AGENT_LOOP_NAME} in token mode (got false): a colocated reward "
                "model rewrites rm_scores after the agent loop, erasing the token credit"
            )
    else:
        name = config_value(config, "reward.reward_manager.name", "naive")
        if name not in (REWARD_MANAGER_NAME, "RlvpRewardManager"):
            estimator = config_value(config, "algorithm.adv_estimator", "?")
            raise SettingsError(
                f"'reward.reward_manager.name' must be {REWARD_MANAGER_NAME} when {AGENT_LOOP_NAME} runs with "
                f"algorithm.adv_estimator={estimator} (got {name!r}): in scalar mode only the rlvp reward manager "
                f"adds the credit; or set algorithm.adv_estimator={ESTIMATOR_NAME} for token credit"
            )


class RlvpToolAgentLoop(ToolAgentLoop):
    """verl agent loop ``rlvp_tool_agent`` (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rlvp = rule_settings(self.config)
        self.program = program_for(self.rlvp.rules)
        estimator = config_value(self.config, "algorithm.adv_estimator", None)
        self.rlvp_mode = "token" if estimator == ESTIMATOR_NAME else "scalar"
        _check_config(self.config, self.rlvp_mode)
        self.marker_ids = tuple(self.tokenizer.encode(m, add_special_tokens=False) for m in self.rlvp.call_markers)
        if any(len(ids) != 1 for ids in self.marker_ids):
            logger.warning(
                "rlvp: the call markers %r are not single tokens (%r); call spans are found only where "
                "they tokenise the same in context",
                self.rlvp.call_markers,
                self.marker_ids,
            )
        self._turns: list[dict[str, Any]] = []
        self._prompt_messages: list[dict[str, Any]] = []

    async def _handle_pending_state(self, agent_data, sampling_params):
        self._prompt_messages = [dict(m) for m in agent_data.messages]
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _handle_generating_state(self, agent_data, sampling_params, ignore_termination=False):
        n_messages = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        ids = tuple(agent_data.response_ids)  # this generation's tokens, as the server returned them
        parsed = len(agent_data.messages) > n_messages
        self._turns.append(
            {
                "start": len(agent_data.response_mask) - len(ids),
                "ids": ids,
                "parsed": parsed,
                "executed": min(len(agent_data.tool_calls), self.max_parallel_calls) if parsed else 0,
                "results": (),
            }
        )
        return state

    async def _handle_processing_tools_state(self, agent_data):
        n_messages = len(agent_data.messages)
        state = await super()._handle_processing_tools_state(agent_data)
        if self._turns:
            self._turns[-1]["results"] = tuple(m for m in agent_data.messages[n_messages:] if m.get("role") == "tool")
        return state

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        output = await super().run(sampling_params, **kwargs)
        return await self.loop.run_in_executor(None, self.scored_output, output)

    def _turns_in(self, response_ids: list[int]) -> list[Turn]:
        """The recorded turns, each cut to the tokens that are still its own in the response
        (a template's boundary handling may trim a generation's last tokens)."""
        turns = []
        for t in self._turns:
            ids, start = t["ids"], t["start"]
            keep = 0
            while keep < len(ids) and start + keep < len(response_ids) and response_ids[start + keep] == ids[keep]:
                keep += 1
            turns.append(Turn(start, tuple(ids[:keep]), t["parsed"], t["executed"], t["results"]))
        return turns

    def scored_output(self, output: AgentLoopOutput) -> RlvpAgentLoopOutput:
        """Score the episode of `output` and return it with rlvp's credit (see the module docstring)."""
        response_ids, mask = list(output.response_ids), list(output.response_mask)
        T = len(response_ids)
        read = episode_from_turns(
            self._prompt_messages,
            self._turns_in(response_ids),
            lambda ids, skip: self.tokenizer.decode(list(ids), skip_special_tokens=skip),
            self.marker_ids,
            n_tokens=T,
            call_markers=self.rlvp.call_markers,
            error_signal=self.rlvp.error_signal,
        )
        scored = score(
            self.program, read.episode, source=self.rlvp.rules, malformed=read.malformed, first_event=read.first_event
        )
        cc = scored.credits
        process = episode_token_credits(cc, read.spans, T, mask)  # (T,) calls on their spans, turns everywhere
        last = last_action_index(mask)
        token_mode = self.rlvp_mode == "token"
        dropped = process[last] if token_mode and last is not None else 0.0
        output.extra_fields["rlvp"] = {
            "mode": self.rlvp_mode,
            "credit": float(cc.total),
            "metrics": scored.metrics(outcome=0.0, process=0.0, dropped=dropped),
        }
        return RlvpAgentLoopOutput.from_output(output, process if token_mode else None)
