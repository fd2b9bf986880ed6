"""The ``rlvp`` reward manager for verl's reward loop: outcome plus weighted rule credit.

    reward_score = outcome + w * credit

* ``outcome`` -- verl's ``naive`` manager on the same row, unchanged: the configured
  ``reward.custom_reward_function`` or verl's ``default_compute_score`` for the row's
  ``data_source`` (this class subclasses ``NaiveRewardManager`` and calls it first);
* ``credit`` -- the episode's total rule credit (calls and assistant turns), from
  ``reward.reward_kwargs.rlvp.rules``; ``w`` is ``reward.reward_kwargs.rlvp.process_weight``
  (`settings.rule_settings`).

This is **scalar mode** -- rlvp's ``scalar_fold``: one number per trajectory, so it works
with verl's stock ``grpo`` (or any) estimator.  The episode comes from, in order:

1. the ``rlvp_tool_agent`` loop's own scoring, when the row carries it
   (``tool_extra_fields["rlvp"]``: exact token spans, verl's messages).  If that loop
   runs in token mode (``algorithm.adv_estimator=rlvp_token``) the credit already rides on
   the tokens, so this manager adds nothing (``rlvp_process = 0``) -- never counted twice;
2. else the decoded response (`transcript.episode_from_response_text`): calls in
   ``<tool_call>`` blocks, results in the ``<tool_response>`` blocks a Hermes/Qwen template
   renders for verl's stock ``tool_agent``, after the row's ``raw_prompt`` messages.

verl builds reward managers in each ``RewardLoopWorker`` actor by name
(``reward.reward_manager.name=rlvp``), from the registry the ``verl.plugins`` entry point
fills on every ``import verl``.  ``run_single`` gets the rows of one trajectory and scores
the last one, as verl's managers do.
"""

from __future__ import annotations

from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from .scoring import Scored, as_floats, score
from .settings import program_for, rule_settings
from .transcript import episode_from_response_text

REWARD_MANAGER_NAME = "rlvp"


def _messages(value: Any) -> list[dict] | None:
    """The row's ``raw_prompt`` as a list of message dicts (verl stores a list or an object array)."""
    if value is None:
        return None
    items = value.tolist() if hasattr(value, "tolist") else list(value)
    return [dict(m) for m in items if isinstance(m, dict)] or None


class RlvpRewardManager(NaiveRewardManager):
    """verl reward manager ``rlvp`` (see the module docstring)."""

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        super().__init__(
            config,
            tokenizer,
            compute_score,
            reward_router_address=reward_router_address,
            reward_model_tokenizer=reward_model_tokenizer,
        )
        self.settings = rule_settings(config)
        self.program = program_for(self.settings.rules)

    def score_row(self, item: Any) -> tuple[Scored | None, dict[str, Any] | None]:
        """``(scored, agent_info)``: the episode of one row scored here, or the agent loop's
        own scoring when the row carries it (then ``scored`` is None)."""
        extra = item.non_tensor_batch.get("tool_extra_fields")
        if isinstance(extra, dict) and isinstance(extra.get("rlvp"), dict):
            return None, extra["rlvp"]
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = self.tokenizer.decode(response_ids[:length].tolist(), skip_special_tokens=True)
        read = episode_from_response_text(
            text,
            prompt_messages=_messages(item.non_tensor_batch.get("raw_prompt")),
            call_markers=self.settings.call_markers,
            error_signal=self.settings.error_signal,
        )
        response_calls = [e for e in read.episode.events[read.first_event :] if e.kind == "call"]
        malformed = sum(1 for e in response_calls if e.status == "malformed")
        return score(
            self.program, read.episode, source=self.settings.rules, malformed=malformed, first_event=read.first_event
        ), None

    async def run_single(self, data: DataProto) -> dict:
        result = await super().run_single(data)
        outcome = float(result["reward_score"])
        scored, agent = self.score_row(data[-1:][0])
        if agent is not None:
            credit = float(agent.get("credit", 0.0))
            process = 0.0 if agent.get("mode") == "token" else self.settings.process_weight * credit
            metrics = as_floats(
                {**agent.get("metrics", {}), "rlvp_credit": credit, "rlvp_outcome": outcome, "rlvp_process": process}
            )
        else:
            process = self.settings.process_weight * scored.credits.total
            metrics = scored.metrics(outcome=outcome, process=process)
        result["reward_extra_info"].update(metrics)
        result["reward_score"] = outcome + process
        return result
