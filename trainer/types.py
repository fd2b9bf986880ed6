"""Data passed between rollout collection and the GRPO update.

One `Rollout` is one episode of one policy sample on one task; a *group* is the
`num_generations` rollouts of the same task.  Token lists are aligned: index t of
`completion_ids`, `completion_mask` and `allowed_ids` is the same token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvp_dsl.events import ASSISTANT, Episode


@dataclass
class Rollout:
    """One episode, as token ids and as events.

    Attributes:
        task_id: the task this rollout attempted (rollouts of one group share it).
        prompt_ids: the prompt tokens, `[prompt_len]` (never trained on).
        completion_ids: every token after the prompt, in order: generated tokens
            and the tool-output tokens the environment appended, `[completion_len]`.
        completion_mask: 1 for tokens the policy generated (action tokens), 0 for
            tool-output / template tokens, `[completion_len]`.
        call_spans: one `(start, end)` half-open span into `completion_ids` per tool
            call, in call order, taken from the generated token ids (never from
            re-tokenised text).  `call_spans[k]` belongs to `episode.calls[k]`.  An
            empty span (`start == end`) is allowed and receives no credit.
        episode: the same rollout as rlvp events (calls with status/result), the
            input of the compiled rules.
        outcome: the outcome reward (1.0 success, 0.0 failure).
        allowed_ids: per completion token, the ids the constrained decoder allowed when
            it was sampled (None at a token: unconstrained, e.g. free reasoning or tool
            output), `[completion_len]`; None when not recorded.  The loss renormalises
            over them (`trainer.logprobs`, ``constrained_logprobs``).
        info: diagnostics that no computation reads (call texts, turn count, env name).
        turn_spans: a conversation's answers the policy sampled: the ``assistant`` event's
            index -> the half-open span of its tokens in `completion_ids` (the answer's
            credit lands there, `rlvp_dsl.attach.episode_token_credits`); an answer the
            rollout forced has none (its credit is spread over the action tokens).
    """

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    call_spans: list[tuple[int, int]]
    episode: Episode
    outcome: float
    allowed_ids: list[tuple[int, ...] | None] | None = None
    info: dict = field(default_factory=dict)
    turn_spans: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.completion_ids)
        if len(self.completion_mask) != n:
            raise ValueError(
                f"rollout {self.task_id!r}: completion_mask has {len(self.completion_mask)} entries, "
                f"completion_ids has {n}"
            )
        if self.allowed_ids is not None and len(self.allowed_ids) != n:
            raise ValueError(
                f"rollout {self.task_id!r}: allowed_ids has {len(self.allowed_ids)} entries, completion_ids has {n}"
            )
        if len(self.call_spans) != len(self.episode.calls):
            raise ValueError(
                f"rollout {self.task_id!r}: {len(self.call_spans)} call spans for {len(self.episode.calls)} calls"
            )
        for k, (start, end) in enumerate(self.call_spans):
            if not 0 <= start <= end <= n:
                raise ValueError(f"rollout {self.task_id!r}: call span {k} = {(start, end)} outside [0, {n}]")
        for index, (start, end) in self.turn_spans.items():
            events = self.episode.events
            if not (0 <= index < len(events) and events[index].kind == ASSISTANT):
                raise ValueError(f"rollout {self.task_id!r}: turn span of event {index}, which is no assistant event")
            if not 0 <= start <= end <= n:
                raise ValueError(
                    f"rollout {self.task_id!r}: turn span of event {index} = {(start, end)} outside [0, {n}]"
                )
