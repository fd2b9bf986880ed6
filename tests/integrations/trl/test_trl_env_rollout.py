"""`trainer.experiments.trl_rollout.EnvRollout` inside the real TRL `RlvpGRPOTrainer` on chain-4 (CPU, tiny model,
2 steps of 2 tasks x 4 episodes): the stock `RlvpReward` reads the episodes our environment played --
signals, errors, call spans -- and each call's rule credit lands on exactly that call's tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlvp_dsl.attach import call_credits, token_credits
from rlvp_dsl import episode_from_messages
from rlvp_dsl.events import ERROR, OK, USER, Episode, Event
from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward
from rlvp_dsl.pipeline import load_program
from trainer import envs
from trainer.experiments import trl_rollout
from trainer.config import load_config
from trainer.envs.base import ToolCall
from trainer.sampling.generation import GenConfig
from trainer.experiments.trl_rollout import (
    CALL_MARKERS,
    ConstrainedLogprobsMixin,
    EnvRollout,
    episode_messages,
    outcome_reward,
)
from trainer.experiments.trl_runs import grpo_config, tiny_policy
from .credit_checks import assert_credit_on_call_tokens, replayed_call

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "rules" / "chain4_dense.rlvp"
W = 0.5  # process weight (not 1, so a credit shows as W x credit)
TASKS, G, STEPS, MAX_TURNS = 2, 4, 2, 5


class RecordingTrainer(ConstrainedLogprobsMixin, RlvpGRPOTrainer):
    """Keeps what `_compute_loss` receives (TRL shuffles the rows of a generation batch first)."""

    seen: list

    def _compute_loss(self, model, inputs):
        self.seen.append({k: inputs[k].detach().clone() for k in ("advantages", "completion_ids", "completion_mask")})
        return super()._compute_loss(model, inputs)


class RecordingReward(RlvpReward):
    """The stock reward, keeping each row it read by its completion ids."""

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        out = super().__call__(prompts, completions, completion_ids, **kwargs)
        self.read_rows.update({tuple(ids): row for ids, row in zip(completion_ids, self.last_rows, strict=True)})
        return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One 2-step run; the rollouts `collect_groups` played (by completion ids) and the trainer."""
    torch.set_num_threads(1)
    cfg = load_config(ROOT / "examples" / "chain4.toml").replace(
        tasks_per_iteration=TASKS, num_generations=G, model_args={"hidden_size": 32, "intermediate_size": 64}
    )
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    model, tokenizer = tiny_policy(cfg, factory)
    rollout = EnvRollout(
        factory,
        envs.make_tasks(STEPS * TASKS, cfg.seed, prefix="chain4-"),
        GenConfig(temperature=1.0, max_turns=MAX_TURNS),
        seed=cfg.seed,
    )
    played: dict[tuple[int, ...], object] = {}
    collect = trl_rollout.collect_groups

    def recording_collect(*args, **kwargs):
        groups = collect(*args, **kwargs)
        played.update({tuple(r.completion_ids): r for group in groups for r in group})
        return groups

    reward = RecordingReward(RULES, mode="token", process_weight=W, call_markers=CALL_MARKERS)
    reward.read_rows = {}
    args = grpo_config(cfg, steps=STEPS, out_dir=str(tmp_path_factory.mktemp("trl_env")))
    trainer = RecordingTrainer(
        model=model,
        reward_funcs=[outcome_reward, reward],
        args=args,
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.seen = []
    mp = pytest.MonkeyPatch()
    mp.setattr(trl_rollout, "collect_groups", recording_collect)
    try:
        trainer.train()
    finally:
        mp.undo()
    return trainer, rollout, played


def test_two_steps_complete_with_every_span_matched(run):
    trainer, rollout, played = run
    assert trainer.state.global_step == STEPS
    assert len(rollout.history) == STEPS and len(played) >= 1
    assert len(trainer.seen) == STEPS and all(b["advantages"].shape[0] == TASKS * G for b in trainer.seen)
    unmatched = [e["rlvp/unmatched_spans"] for e in trainer.state.log_history if "rlvp/unmatched_spans" in e]
    assert unmatched and all(v == 0.0 for v in unmatched)
    unscorable = [e["rlvp/unscorable_rows"] for e in trainer.state.log_history if "rlvp/unscorable_rows" in e]
    assert unscorable and all(v == 0.0 for v in unscorable)
    assert rollout.span_mismatches == 0


def _rollout_of(played, ids: list[int], mask: list[int]):
    """The rollout a (right-padded) completion row came from: the longest played prefix."""
    for end in range(len(ids), 0, -1):
        if tuple(ids[:end]) in played:
            return played[tuple(ids[:end])]
    raise AssertionError("a completion row matches no played rollout")


def test_each_calls_credit_sits_on_exactly_its_tokens(run):
    """On every captured batch, advantage - w x C is one number per row on its action tokens and 0 on
    the rest, C being the row's call credits (the rule file scored on the played episode) spread over the
    rollout's own call spans; and it is 0 in a group whose outcomes are equal."""
    trainer, _, played = run
    program = load_program(str(RULES))
    checked_calls = equal_groups = 0
    for batch in trainer.seen:
        adv = batch["advantages"].double()
        assert adv.dim() == 2 and adv.shape == batch["completion_ids"].shape  # [B, T]
        B, T = adv.shape
        outcomes = []
        for i, (ids, cmask) in enumerate(zip(batch["completion_ids"].tolist(), batch["completion_mask"].tolist())):
            r = _rollout_of(played, ids, cmask)
            outcomes.append(r.outcome)
            episode = r.episode
            cc = call_credits(episode, program.score(episode))
            assert_credit_on_call_tokens(adv[i], r, cc, W)
            checked_calls += len(cc.values)
        for g in range(B // G):
            group = outcomes[g * G : (g + 1) * G]
            if len(set(group)) == 1:  # equal outcomes: no outcome advantage, only the credit
                equal_groups += 1
                for i in range(g * G, (g + 1) * G):
                    r = _rollout_of(played, batch["completion_ids"][i].tolist(), batch["completion_mask"][i].tolist())
                    cc = call_credits(r.episode, program.score(r.episode))
                    mask = list(r.completion_mask) + [0] * (T - len(r.completion_mask))
                    C = token_credits(cc.values, r.call_spans, T, mask)
                    assert adv[i].tolist() == pytest.approx([W * c for c in C], abs=1e-7)
    assert checked_calls > 0 and equal_groups > 0


def test_the_reward_reads_the_played_episodes(run):
    """What the stock RlvpReward read equals what our environment played: each call's tool, status
    (failed calls are errors) and signals, the starting signals on the task's user message; and its
    credits equal the rule file's credits on the played episode."""
    trainer, _, played = run
    program = load_program(str(RULES))
    statuses, positive = set(), 0
    rows = trainer.rlvp_reward.read_rows
    assert set(rows) == set(played)  # every episode played was read, and only those
    for ids, r in played.items():
        row = rows[ids]
        assert not row.problem
        read = row.episode
        assert read.events[0].kind == USER and read.events[0].signals == r.episode.events[0].signals
        assert r.episode.events[0].signals == {"stages_remaining": 4.0}
        assert [(c.tool, c.status, dict(c.signals)) for c in read.calls] == [
            (c.tool, c.status, dict(c.signals)) for c in r.episode.calls
        ]
        for call in r.episode.calls:
            statuses.add(call.status)
        got = RlvpReward(program, mode="token").credits(row)
        want = call_credits(r.episode, program.score(r.episode))
        assert got.values == pytest.approx(want.values)
        positive += sum(1 for v in want.values if v > 0)
    assert {OK, ERROR} <= statuses  # a random policy makes both
    assert positive > 0, "the progress rule never fired (no completed stage credited)"


def test_failed_calls_are_marked_errors_on_their_tool_messages():
    """`episode_messages` marks a failed call's tool message error: true (our texts start 'error ...',
    which the default trl signal does not read), so the stock reader sees status error."""
    factory = envs.env_factory("chain4", vary_tokens=False)
    env = factory()
    task = envs.make_tasks(1, 0, prefix="chain4-")[0]
    env.reset(task)
    initial = env.initial_signals()
    events = [Event(0, USER, text="go", signals=initial)]
    for call in (ToolCall("ping", {"token": "k0"}), env.expected_call()):
        events.append(replayed_call(len(events), call, env.step(call)))
    messages = episode_messages(Episode("e", tuple(events)))
    tools = [m for m in messages if m["role"] == "tool"]
    assert tools[0]["error"] is True and tools[0]["content"].startswith("error")
    assert "error" not in tools[1] and tools[1]["signals"] == {"stages_remaining": 3.0}
    read = episode_from_messages([trl_rollout.task_message("go", initial)] + messages, error_signal="trl")
    assert [c.status for c in read.calls] == [ERROR, OK]
    assert read.events[0].signals == {"stages_remaining": 4.0}
    assert [c.signals for c in read.calls] == [{"stages_remaining": 4.0}, {"stages_remaining": 3.0}]
    unflagged = [{k: v for k, v in m.items() if k != "error"} for m in messages]
    assert episode_from_messages(unflagged, error_signal="trl").calls[0].status == OK  # why the flag is needed
