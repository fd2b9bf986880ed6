"""Hand-built rollouts and credits for the trainer's unit tests (no model, no env)."""

from __future__ import annotations

from rlvp_dsl.attach import CallCredits
from rlvp_dsl.events import Episode, Event
from trainer.types import Rollout


def make_rollout(task_id: str, call_lens: list[int], outcome: float, obs_len: int = 2) -> Rollout:
    """A rollout whose calls have the given token lengths, each followed by `obs_len` tool-output tokens."""
    ids, mask, spans, events = [], [], [], []
    for k, n in enumerate(call_lens):
        start = len(ids)
        ids += [10 + k] * n
        mask += [1] * n
        spans.append((start, start + n))
        ids += [3] * obs_len
        mask += [0] * obs_len
        events.append(Event(index=k, kind="call", tool=f"t{k}", arguments={"x": str(k)}))
    ep = Episode(id=task_id, events=events, outcome=outcome)
    return Rollout(task_id, [1, 2], ids, mask, spans, ep, outcome)


def credits_of(values: list[float]) -> CallCredits:
    return CallCredits(tuple(values), tuple(int(v < 0) for v in values), tuple(int(v > 0) for v in values))
