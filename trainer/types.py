"""Data passed between rollout collection and the GRPO update.

One `Rollout` is one episode of one policy sample on one task; a *group* is the
`num_generations` rollouts of the same task.  Token lists are aligned: index t of
`completion_ids`, `completion_mask` and `old_logprobs` is the same token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvp_dsl.events import Episode


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
        old_logprobs: log-probabilities of the completion tokens under the sampling
            policy, `[completion_len]` (0.0 on masked tokens); None if not recorded.
    """

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    call_spans: list[tuple[int, int]]
    episode: Episode
    outcome: float
    old_logprobs: list[float] | None = None
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.completion_ids)
        if len(self.completion_mask) != n:
            raise ValueError(
                f"rollout {self.task_id!r}: completion_mask has {len(self.completion_mask)} entries, "
                f"completion_ids has {n}"
            )
        if self.old_logprobs is not None and len(self.old_logprobs) != n:
            raise ValueError(
                f"rollout {self.task_id!r}: old_logprobs has {len(self.old_logprobs)} entries, "
                f"completion_ids has {n}"
            )
        if len(self.call_spans) != len(self.episode.calls):
            raise ValueError(
                f"rollout {self.task_id!r}: {len(self.call_spans)} call spans for "
                f"{len(self.episode.calls)} calls"
            )
        for k, (start, end) in enumerate(self.call_spans):
            if not 0 <= start <= end <= n:
                raise ValueError(f"rollout {self.task_id!r}: call span {k} = {(start, end)} outside [0, {n}]")
