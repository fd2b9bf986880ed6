"""The TRL rollout path on BFCL v4 multi-turn (examples/bfcl.toml, the embedded tiny model): TRL's real
`RlvpGRPOTrainer`, built by `trainer.experiments.trl_runs.build_trl_run` as `examples/trl_grpo.py` builds it,
trains 2 steps of 2 tasks x 8 episodes played by `EnvRollout`.  What TRL trained on is what BFCL
played: the marker spans are the rollout's call spans, the outcome is BFCL's checker verdict (replayed
through a fresh environment), each call's rule credit (rules/bfcl.rlvp) sits on exactly its tokens,
and the log-probs TRL recomputes under each task's own call mask are the sampler's."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
import torch

from rlvp_dsl.attach import call_credits
from rlvp_dsl.call_spans import find_call_spans
from rlvp_dsl.events import ASSISTANT, CALL, ERROR, OK, USER, Episode, Event
from rlvp_dsl.integrations.trl import RlvpReward
from rlvp_dsl.pipeline import load_program
from trainer.config import load_config
from trainer.envs.base import Task, ToolCall
from trainer.envs.bfcl import BfclEnv, available
from trainer.experiments import trl_rollout, trl_runs
from trainer.experiments.trl_rollout import (
    CALL_MARKERS,
    EnvTagsMixin,
    episode_messages,
    task_message,
    tool_tags,
)
from trainer.sampling.tokenizer import encode
from .credit_checks import assert_credit_on_call_tokens, replayed_call

INSTALL = 'bfcl-eval is not installed: pip install --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"'
needs_bfcl = pytest.mark.skipif(not available(), reason=INSTALL)

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "rules" / "bfcl.rlvp"
W = 0.5  # process weight (not 1, so a credit shows as W x credit)
TASKS, G, STEPS, SEED = 2, 8, 2, 3  # seed 3: successes, a needs_auth violation, turns progress within 2 steps


def _config(tmp: Path):
    cfg = load_config(ROOT / "examples" / "bfcl.toml", out_dir=str(tmp))
    return cfg.replace(
        tasks_per_iteration=TASKS,
        num_generations=G,
        seed=SEED,
        process_weight=W,
        model_args={"hidden_size": 32, "intermediate_size": 64},
        env_args={**cfg.env_args, "draw": "seed"},  # seeded draws: seed 3 plays task 139 (passes) in 2 groups
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One 2-step `build_trl_run("rlvp", ...)` on examples/bfcl.toml, recording what TRL saw: the rollouts
    played (by completion ids), the outcome rewards and rlvp rows with their completion ids, each batch
    `_compute_loss` got (with TRL's log-probs of it under the call mask), and the weights before."""
    if not available():
        pytest.skip(INSTALL)
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("trl_bfcl")
    cfg = _config(tmp)
    played: dict[tuple[int, ...], object] = {}
    outcomes_seen: list[tuple[tuple[int, ...], float]] = []
    collect = trl_rollout.collect_groups

    def recording_collect(*args, **kwargs):
        groups = collect(*args, **kwargs)
        played.update({tuple(r.completion_ids): r for group in groups for r in group})
        return groups

    def outcome_reward(completions, outcome, completion_ids=None, **kwargs):  # TRL logs it by this name
        values = trl_rollout.outcome_reward(completions, outcome, **kwargs)
        outcomes_seen.extend((tuple(ids), v) for ids, v in zip(completion_ids, values, strict=True))
        return values

    mp = pytest.MonkeyPatch()
    mp.setattr(trl_rollout, "collect_groups", recording_collect)
    mp.setattr(trl_runs, "outcome_reward", outcome_reward)
    try:
        trl_runs.quiet_libraries()
        built = trl_runs.build_trl_run("rlvp", cfg, steps=STEPS, out_dir=str(tmp / "out"), threads=1)
        trainer, reward = built.trainer, built.reward
        rows: dict[tuple[int, ...], tuple] = {}
        reward_call = type(reward).__call__  # the run's own class (build_trl_run defines it per run)

        def recording_call(self, prompts, completions, completion_ids=None, **kwargs):
            out = reward_call(self, prompts, completions, completion_ids, **kwargs)
            for ids, row, messages in zip(completion_ids, self.last_rows, kwargs["rlvp_messages"], strict=True):
                rows[tuple(ids)] = (row, messages)
            return out

        mp.setattr(type(reward), "__call__", recording_call)
        batches: list[dict] = []
        compute_loss = trainer._compute_loss

        def recording_loss(model, inputs):
            keep = ("advantages", "completion_ids", "completion_mask", "tool_mask", "sampling_per_token_logps")
            batch = {k: inputs[k].detach().clone() for k in keep}
            with torch.no_grad():  # before this batch's update: the policy that sampled it
                ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
                attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
                batch["trl_logps"] = trainer._get_per_token_logps_and_entropies(
                    model, ids, attention, inputs["completion_ids"].size(1)
                )[0].detach()
            batches.append(batch)
            return compute_loss(model, inputs)

        trainer._compute_loss = recording_loss
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
    finally:
        mp.undo()
    return {
        "cfg": cfg,
        "run": built,
        "played": played,
        "outcomes": outcomes_seen,
        "rows": rows,
        "batches": batches,
        "before": before,
    }


def _rollout_of(played, ids: list[int]):
    """The rollout a (right-padded) completion row came from: the longest played prefix."""
    for end in range(len(ids), 0, -1):
        if tuple(ids[:end]) in played:
            return played[tuple(ids[:end])]
    raise AssertionError("a completion row matches no played rollout")


def _replay(env: BfclEnv, episode: Episode) -> float:
    """BFCL's verdict on an episode's calls, replayed turn by turn through a fresh `env`."""
    first = next(e.text for e in episode.events if e.kind == USER)
    env.reset(Task(next(t.id for t in env.tasks if t.turns[0] == first), 0))
    turns: list[list[ToolCall]] = []
    for event in episode.events:
        if event.kind == USER:
            turns.append([])
        elif event.kind == CALL and event.tool is not None:
            turns[-1].append(ToolCall(event.tool, dict(event.arguments)))
    for calls in turns:
        for call in calls:
            env.step(call)
        env.end_turn("answer")
    return env.outcome()


def test_two_steps_complete_with_every_span_matched(run):
    trainer, rollout = run["run"].trainer, run["run"].rollout
    assert trainer.state.global_step == STEPS
    assert len(rollout.history) == STEPS and len(run["batches"]) == STEPS
    assert all(b["advantages"].shape[0] == TASKS * G for b in run["batches"])
    tokenizer = trainer.processing_class
    markers = [encode(tokenizer, m) for m in CALL_MARKERS]
    calls = 0
    for r in run["played"].values():
        found = find_call_spans(r.completion_ids, *markers, r.completion_mask)
        assert found == [tuple(s) for s in r.call_spans], r.episode.id
        calls += len(found)
    assert calls > 0 and rollout.span_mismatches == 0
    logs = trainer.state.log_history
    for key in ("rlvp/unmatched_spans", "rlvp/unscorable_rows", "rlvp/calls_without_span"):
        values = [e[key] for e in logs if key in e]
        assert values and all(v == 0.0 for v in values), key


def test_the_outcome_trl_saw_is_bfcls_verdict_replayed(run):
    env = BfclEnv(**dict(run["cfg"].env_args))
    seen = run["outcomes"]
    assert len(seen) == STEPS * TASKS * G
    for ids, value in seen:
        r = run["played"][ids]
        assert value == r.outcome == float(r.info["verdict"]["valid"])
        assert _replay(env, r.episode) == value, r.episode.id
    assert 0 < sum(v for _, v in seen) < len(seen)  # seed 3: some episodes pass BFCL's checker
    means = [e["rewards/outcome_reward/mean"] for e in run["run"].trainer.state.log_history if "loss" in e]
    assert means == pytest.approx([h["rollout/success_rate"] for h in run["run"].rollout.history])


def test_each_calls_rule_credit_sits_on_exactly_its_tokens(run):
    """advantage - W x C is one number per row on its action tokens and 0 elsewhere, C being the compiled
    rules/bfcl.rlvp's per-call credit of the played episode spread over the rollout's call spans."""
    program = load_program(str(RULES))
    checked = nonzero = 0
    fired: set[str] = set()
    for batch in run["batches"]:
        adv = batch["advantages"].double()
        assert adv.shape == batch["completion_ids"].shape  # [B, T]
        for i, ids in enumerate(batch["completion_ids"].tolist()):
            r = _rollout_of(run["played"], ids)
            credits = program.score(r.episode)
            fired.update(c.rule for c in credits)
            cc = call_credits(r.episode, credits)
            assert_credit_on_call_tokens(adv[i], r, cc, W)
            checked += len(cc.values)
            nonzero += sum(value != 0.0 for value in cc.values)
    assert checked > 0 and nonzero > 0
    # a tag-only rule (place_order is needs_auth in BFCL's tag table; rules/bfcl.rlvp does not declare it)
    assert {"acted_unauthenticated", "errored_call", "turns_progress"} <= fired


def test_violations_are_the_rule_files_on_the_played_episodes(run):
    """The rollout's violations per episode (what `TrlRun.rows` reports for both methods) are the negative
    call credits of rules/bfcl.rlvp on the episodes played, and what RlvpGRPOTrainer logged."""
    program = load_program(str(RULES))
    trainer, rollout = run["run"].trainer, run["run"].rollout
    logged = [e["rlvp/violations_per_episode"] for e in trainer.state.log_history if "loss" in e]
    counted = [h["process/violations_per_episode"] for h in rollout.history]
    assert counted == pytest.approx(logged) and sum(counted) > 0
    assert [r["process/violations_per_episode"] for r in run["run"].rows()] == counted
    for batch, value in zip(run["batches"], counted, strict=True):
        episodes = [_rollout_of(run["played"], ids).episode for ids in batch["completion_ids"].tolist()]
        negative = sum(v < 0 for e in episodes for v in call_credits(e, program.score(e)).values)
        assert value == pytest.approx(negative / len(episodes))


def test_the_reward_reads_the_played_episodes(run):
    """What RlvpReward read from the messages TRL passed equals what BFCL played: each call's tool,
    arguments, status, tags (the manifest's) and signals; its credits equal the compiled program's."""
    program = load_program(str(RULES))
    rows = run["rows"]
    assert set(rows) == set(run["played"])
    for ids, r in run["played"].items():
        row, _ = rows[ids]
        assert not row.problem
        assert row.episode.events[0].signals == r.episode.events[0].signals == {"turns_matched": 0.0}
        got = [(c.tool, dict(c.arguments), c.status, c.tags, dict(c.signals)) for c in row.episode.calls]
        want = [(c.tool, dict(c.arguments), c.status, c.tags, dict(c.signals)) for c in r.episode.calls]
        assert got == want, r.episode.id
        assert run["run"].reward.credits(row).values == pytest.approx(
            call_credits(r.episode, program.score(r.episode)).values
        )


def test_later_user_turns_and_answers_reach_the_messages(run):
    """The messages TRL passed (`episode_messages`) hold every later user turn, with its turns_matched,
    and every answer, in the order played."""
    later = answers = 0
    matched = 0.0
    for ids, r in run["played"].items():
        _, messages = run["rows"][ids]
        want = [
            task_message(e.text, dict(e.signals)) if e.kind == USER else {"role": "assistant", "content": e.text}
            for e in r.episode.events[1:]
            if e.kind in (USER, ASSISTANT)
        ]
        got = [m for m in messages if m["role"] == "user" or m == {"role": "assistant", "content": "answer"}]
        assert got == want, r.episode.id
        later += sum(m["role"] == "user" for m in got)
        answers += sum(m["role"] == "assistant" for m in got)
        matched = max([matched] + [m["signals"]["turns_matched"] for m in got if m["role"] == "user"])
    assert later > 0 and answers > 0
    assert matched >= 1.0  # a passed turn's progress rides on the next user message


def test_trl_logprobs_under_each_tasks_call_mask_are_the_samplers(run):
    """Before each update, TRL's log-probs (renormalised over the call mask of the row's own task) equal
    the sampler's on every action token; rows of two different tasks with their different masks."""
    tasks = set()
    for batch in run["batches"]:
        mask = (batch["completion_mask"] * batch["tool_mask"]).bool()
        assert mask.any()
        assert torch.allclose(batch["trl_logps"][mask], batch["sampling_per_token_logps"][mask], atol=1e-4)
        tasks.update(_rollout_of(run["played"], ids).episode.events[0].text for ids in batch["completion_ids"].tolist())
    assert len(tasks) > 1


def test_an_optimizer_step_changed_the_weights(run):
    after = dict(run["run"].trainer.model.named_parameters())
    changed = [n for n, p in run["before"].items() if not torch.equal(p, after[n].detach())]
    assert changed, "no trainable weight moved in 2 steps"


@needs_bfcl
def test_calls_read_from_messages_carry_the_environments_tags():
    """Regression: messages carry no tags, so the stock RlvpReward saw place_order untagged (rules/bfcl.rlvp
    does not declare it; BFCL's tag table says needs_auth) and missed the -0.3 the compact trainer gives a
    call refused for want of a login; `EnvTagsMixin` gives the manifest's tags and the same credits."""
    env = BfclEnv(**dict(load_config(ROOT / "examples" / "bfcl.toml").env_args))
    text = env.reset(Task("multi_turn_base_122", 0))
    tags = tool_tags(env)
    assert tags["place_order"] == {"needs_auth", "write"} and tags["cancel_order"] == {"destructive", "write"}
    events = [Event(0, USER, text=text, signals=dict(env.signals()))]
    order = ToolCall("place_order", {"order_type": "Buy", "symbol": "AAPL", "price": "150", "amount": "100"})
    calls = [order, ToolCall("cancel_order", {"order_id": "12446"}), ToolCall("trading_logout", {}), order]
    for call in calls:
        events.append(replayed_call(len(events), call, env.step(call), tags[call.tool]))
    played = Episode("e", tuple(events))
    assert [c.status for c in played.calls] == [OK, OK, OK, ERROR]
    program = load_program(str(RULES))
    want = call_credits(played, program.score(played)).values
    # the order passes turn 1 (+0.2 progress); cancelling and logging out leave turn 1's path (-0.1 each);
    # the same order after logging out: needs_auth, failed and off the path (-0.5)
    assert want == pytest.approx((0.2, -0.1, -0.1, -0.5))

    class EnvRlvpReward(EnvTagsMixin, RlvpReward):
        pass

    prompt = [task_message(text, dict(events[0].signals))]
    messages = episode_messages(played)
    stock = RlvpReward(program, call_markers=CALL_MARKERS)
    tagged = EnvRlvpReward(program, call_markers=CALL_MARKERS, tool_tags=tags)
    assert stock.credits(stock.read(prompt, None, messages)).values == pytest.approx((0.2, -0.1, -0.1, -0.2))
    row = tagged.read(prompt, None, messages)
    assert [c.tags for c in row.episode.calls] == [c.tags for c in played.calls]
    assert tagged.credits(row).values == pytest.approx(want)


def test_load_checked_without_bfcl_eval_is_the_install_line_exit_2(monkeypatch, capsys):
    """The entry's check (`examples/trl_grpo.py`, `benchmarks/trl_chain4.py` --config examples/bfcl.toml)
    without bfcl-eval: one error line with the pip command, exit 2, before any model is built."""
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # find_spec: not installed
    cfg, code = trl_runs.load_checked("examples/bfcl.toml", None, ROOT)
    err = capsys.readouterr().err
    assert (cfg, code) == (None, 2)
    assert err.startswith("error: the bfcl environment needs the bfcl-eval package")
    assert 'pip install --no-deps "bfcl-eval==2026.3.23"' in err and err.count("\n") == 1


@needs_bfcl
def test_load_checked_names_a_bad_environment_knob_exit_1(tmp_path, capsys):
    text = (ROOT / "examples" / "bfcl.toml").read_text().replace('tools = "path"', 'tools = "every"')
    (tmp_path / "bfcl.toml").write_text(text)
    cfg, code = trl_runs.load_checked(str(tmp_path / "bfcl.toml"), str(RULES), ROOT)
    assert (cfg, code) == (None, 1)
    assert capsys.readouterr().err == "error: bfcl: 'tools' must be one of classes, path (got 'every')\n"
