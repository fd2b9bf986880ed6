"""The TRL rollout path (`trainer.experiments.trl_rollout`) on a conversation (the dialog env): answers are
written without the call markers, so the markers find exactly the rollout's call spans, and
`episode_messages` carries the later user turns and the answers, which the stock reader reads back
as the rollout's events."""

from __future__ import annotations

from pathlib import Path

import torch

from rlvp_dsl import episode_from_messages
from rlvp_dsl.call_spans import find_call_spans
from trainer import envs
from trainer.config import load_config
from trainer.experiments.trl_rollout import (
    CALL_MARKERS,
    CallMarkers,
    EnvRollout,
    episode_messages,
    task_message,
)
from trainer.experiments.trl_runs import tiny_policy
from trainer.sampling.generation import GenConfig
from trainer.sampling.rollout import collect_group

ROOT = Path(__file__).resolve().parents[3]


def test_marked_conversation_rollouts_match_spans_and_messages():
    torch.set_num_threads(1)
    cfg = load_config(ROOT / "examples" / "dialog.toml").replace(
        model_args={"hidden_size": 32, "intermediate_size": 64}
    )
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    model, tok = tiny_policy(cfg, factory)
    markers = CallMarkers(tok, CALL_MARKERS)
    answered = users = 0
    for task in envs.make_tasks(2, seed=1):
        for r in collect_group(model, tok, factory, task, 4, GenConfig(), seed=3, call_trie=markers.marked):
            assert find_call_spans(r.completion_ids, *markers.ids, r.completion_mask) == [
                tuple(s) for s in r.call_spans
            ]
            messages = [task_message(r.episode.events[0].text, dict(r.episode.events[0].signals))]
            messages += episode_messages(r.episode)
            back = episode_from_messages(messages, call_markers=CALL_MARKERS)
            want = [(e.kind, e.tool, e.status, e.text, dict(e.signals)) for e in r.episode.events]
            assert [(e.kind, e.tool, e.status, e.text, dict(e.signals)) for e in back.events] == want
            answered += sum(e.kind == "assistant" for e in r.episode.events)
            users += sum(e.kind == "user" for e in r.episode.events) - 1
    assert answered and users  # the episodes did answer and reach later user turns


def test_env_rollout_prompts_carry_the_conversations_first_signals():
    """EnvRollout's dataset gives each task's first user message with `signals()` before any call."""
    factory = envs.env_factory("dialog3")
    rollout = EnvRollout(factory, envs.make_tasks(2, seed=1, prefix="dialog-"))
    rows = rollout.dataset()["prompt"]
    assert [row[0]["signals"] for row in rows] == [{"steps_remaining": 3.0}] * 2
    assert all(row[0]["content"].endswith("use ?") for row in rows)
