"""chain-4 through TRL's own multi-turn loop (``GRPOTrainer(environment_factory=...)``): TRL's real
`RlvpGRPOTrainer`, built by `trainer.experiments.trl_env_factory.build_env_factory_trainer` as
benchmarks/trainer_vs_trl.py builds run (c), trains 1 step of 2 tasks x 8 episodes on the embedded
tiny model.  What TRL trained on is what chain-4 played: TRL's parsed tool calls are the calls the
environment ran, the reward column is the outcome of those calls replayed through a fresh
environment, rlvp's credit for each call is what our scorer gives the replayed episode, and it sits
on exactly that call's tokens of the advantages TRL's loss received."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlvp_dsl.attach import call_credits
from rlvp_dsl.call_spans import find_call_spans
from rlvp_dsl.events import USER, Episode, Event
from rlvp_dsl.pipeline import load_program
from trainer import envs
from trainer.config import load_config
from trainer.envs.base import Task, ToolCall
from trainer.experiments import trl_runs
from trainer.experiments.trl_env_factory import build_env_factory_trainer
from trainer.experiments.trl_rollout import CALL_MARKERS
from trainer.sampling.tokenizer import encode
from .credit_checks import assert_credit_on_call_tokens, replayed_call

ROOT = Path(__file__).resolve().parents[3]
W = 0.5  # process weight (not 1, so a credit shows as W x credit)
TASKS, G, SEED = 2, 8, 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One step, recording per row what TRL's reward computation saw (prompt, parsed completion,
    the environment's calls, the rewards per function, rlvp's row) and the batch `_compute_loss` got."""
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("trl_env_factory")
    cfg = load_config(ROOT / "examples" / "chain4.toml", out_dir=str(tmp)).replace(
        tasks_per_iteration=TASKS,
        num_generations=G,
        seed=SEED,
        process_weight=W,
        model_args={"hidden_size": 32, "intermediate_size": 64},
    )
    trl_runs.quiet_libraries()
    trainer, setup = build_env_factory_trainer(cfg, steps=1, out_dir=str(tmp / "out"), threads=1)
    reward = trainer.rlvp_reward
    seen: dict = {}
    calculate = trainer._calculate_rewards

    def recording_rewards(inputs, prompts, completions, completion_ids_list):
        rewards = calculate(inputs, prompts, completions, completion_ids_list)
        seen.update(
            inputs=inputs,
            prompts=prompts,
            completions=completions,
            ids=[list(ids) for ids in completion_ids_list],
            calls=[list(e.calls) for e in trainer.environments],
            rewards=rewards.detach().clone(),
            rows=list(reward.last_rows),
        )
        return rewards

    batches: list[dict] = []
    compute_loss = trainer._compute_loss

    def recording_loss(model, inputs):
        batches.append(
            {k: inputs[k].detach().clone() for k in ("advantages", "completion_ids", "completion_mask", "tool_mask")}
        )
        return compute_loss(model, inputs)

    trainer._calculate_rewards = recording_rewards
    trainer._compute_loss = recording_loss
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return {"cfg": cfg, "trainer": trainer, "setup": setup, "seen": seen, "batches": batches}


def _parsed_calls(completion: list[dict]) -> list[ToolCall]:
    """The tool calls TRL parsed from the generated text, in order."""
    return [
        ToolCall(tc["function"]["name"], dict(tc["function"]["arguments"]))
        for message in completion
        if message["role"] == "assistant"
        for tc in message.get("tool_calls") or []
    ]


def _replay(cfg, row: dict, calls: list[ToolCall]):
    """A fresh chain-4 environment on the row's task, stepped through `calls`: (outcome, episode)
    as the compact rollout writes it (the task's user event with the initial signals, then one
    event per call with its status, result or error, and signals)."""
    env = envs.make_env(cfg.env, **cfg.env_args)
    text = env.reset(Task(row["task_id"], int(row["seed"])))
    events = [Event(0, USER, text=text, signals=dict(env.initial_signals()))]
    for call in calls:
        events.append(replayed_call(len(events), call, env.step(call)))
    return env.outcome(), Episode("replay", tuple(events))


def test_trl_ran_the_calls_the_model_wrote(run):
    seen = run["seen"]
    assert len(seen["completions"]) == TASKS * G
    n_calls = 0
    for completion, calls in zip(seen["completions"], seen["calls"], strict=True):
        parsed = _parsed_calls(completion)
        assert parsed == [call for call, _ in calls]
        assert 1 <= len(parsed) <= run["setup"].environment.max_turns
        n_calls += len(parsed)
    assert n_calls > 2 * TASKS * G  # multi-turn episodes, not single calls


def test_outcome_column_is_the_replayed_outcome(run):
    seen, trainer = run["seen"], run["trainer"]
    column = trainer.reward_func_names.index("ChainEnv")
    outcomes = []
    for row, completion, got in zip(seen["inputs"], seen["completions"], seen["rewards"], strict=True):
        outcome, _ = _replay(run["cfg"], row, _parsed_calls(completion))
        outcomes.append(outcome)
        assert got[column].item() == outcome
        assert torch.isnan(got[trainer.rlvp_index]) or got[trainer.rlvp_index].item() == 0.0  # token mode
    assert 0.0 in outcomes  # the step is not trivially all-solved


def test_rlvp_credits_are_ours_on_the_replayed_episode(run):
    seen = run["seen"]
    program = load_program(run["cfg"].rules)
    reward = run["trainer"].rlvp_reward
    nonzero = 0
    for row, completion, scored in zip(seen["inputs"], seen["completions"], seen["rows"], strict=True):
        _, episode = _replay(run["cfg"], row, _parsed_calls(completion))
        ours = call_credits(episode, program.score(episode)).values
        theirs = reward.credits(scored).values
        assert list(theirs) == pytest.approx(list(ours))
        nonzero += sum(1 for v in ours if v)
    assert nonzero > 0  # the rules fired (failed calls, progress)


def test_credit_sits_on_each_calls_tokens(run):
    seen, batch = run["seen"], run["batches"][0]
    program = load_program(run["cfg"].rules)
    tok = run["trainer"].processing_class
    markers = [encode(tok, m) for m in CALL_MARKERS]
    by_ids = {tuple(ids): k for k, ids in enumerate(seen["ids"])}
    checked = 0
    rows = zip(batch["advantages"], batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True)
    for adv, ids, attention, mask in rows:
        n = int(attention.sum())
        k = by_ids[tuple(ids[:n].tolist())]
        _, episode = _replay(run["cfg"], seen["inputs"][k], _parsed_calls(seen["completions"][k]))
        cc = call_credits(episode, program.score(episode))
        row_mask = mask[:n].tolist()
        spans = find_call_spans(ids[:n].tolist(), *markers, row_mask)
        rollout = SimpleNamespace(completion_mask=row_mask, call_spans=spans, episode=episode)
        assert_credit_on_call_tokens(adv.double(), rollout, cc, W)
        checked += 1
    assert checked == TASKS * G
