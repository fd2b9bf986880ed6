"""chain-N and gated environments: semantics, hidden precondition, manifests, knobs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trainer.envs import (
    MANIFEST_FORMAT,
    SIGNAL,
    ChainEnv,
    GatedEnv,
    Task,
    ToolCall,
    ToolEnv,
    all_calls,
    make_env,
    make_tasks,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[2]


def solve(env, task):
    """Play the expected calls; returns the results."""
    env.reset(task)
    results = []
    while (call := env.expected_call()) is not None:
        results.append(env.step(call))
    return results


def test_expected_calls_complete_the_chain():
    """Following the chain gives outcome 1, stages_remaining counting down to 0, done on the last call."""
    env = make_env("chain4")
    results = solve(env, Task("t", 7))
    assert [r.signals[SIGNAL] for r in results] == [3.0, 2.0, 1.0, 0.0]
    assert all(r.ok for r in results) and [r.done for r in results] == [False, False, False, True]
    assert env.outcome() == 1.0


def test_outcome_is_zero_until_the_last_stage():
    """Outcome stays 0 after every stage but the last."""
    env = make_env("chain4")
    env.reset(Task("t", 3))
    for _ in range(3):
        assert env.step(env.expected_call()).ok
        assert env.outcome() == 0.0
    env.step(env.expected_call())
    assert env.outcome() == 1.0


def test_wrong_tool_and_wrong_token_are_errors_without_progress():
    """A tool of another stage, a distractor or a wrong token errors and changes nothing."""
    env = make_env("chain4", num_distractors=2)
    env.reset(Task("t", 11))
    good = env.expected_call()
    wrong_token = next(v for v in env.values if v != good.arguments["token"])
    for call in (
        ToolCall("parse", good.arguments),
        ToolCall("delete", good.arguments),
        ToolCall("lookup", good.arguments),
        ToolCall(good.tool, {"token": wrong_token}),
    ):
        result = env.step(call)
        assert not result.ok and result.text.startswith("error") and not result.done
        assert result.signals[SIGNAL] == 4.0
    assert env.expected_call() == good and env.step(good).ok


def test_errors_do_not_end_the_episode_before_max_turns():
    """The environment keeps answering after errors (the rollout enforces max_turns)."""
    env = make_env("chain4")
    env.reset(Task("t", 1))
    for _ in range(env.max_turns + 3):
        assert not env.step(ToolCall("delete", {"token": "k0"})).ok
    assert env.outcome() == 0.0


def test_step_before_reset_and_after_completion_raise():
    env = make_env("chain4")
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(ToolCall("fetch", {"token": "k0"}))
    solve(env, Task("t", 2))
    with pytest.raises(RuntimeError, match="after the chain completed"):
        env.step(ToolCall("fetch", {"token": "k0"}))


def test_reset_starts_over():
    """A second reset clears progress."""
    env = make_env("chain4")
    solve(env, Task("t", 2))
    env.reset(Task("u", 5))
    assert env.outcome() == 0.0 and env.stages_remaining == 4


def test_tokens_vary_by_task_unless_fixed():
    """vary_tokens draws tokens from the task seed; vary_tokens=False gives every task the same chain."""

    def chain(env, task):
        env.reset(task)
        seen = []
        while (call := env.expected_call()) is not None:
            seen.append(call.arguments["token"])
            env.step(call)
        return seen

    tasks = make_tasks(12, seed=0)
    varied = {tuple(chain(make_env("chain4", num_values=4), t)) for t in tasks}
    fixed = {tuple(chain(make_env("chain4", num_values=4, vary_tokens=False), t)) for t in tasks}
    assert len(varied) > 1 and len(fixed) == 1


def test_gated_stage_needs_unlock_and_hides_it():
    """The gated stage errors without unlock, with exactly the text a wrong token gets."""
    env = make_env("gated")
    env.reset(Task("t", 4))
    assert env.step(env.expected_call()).ok  # stage 1
    gate = ToolCall("parse", {"token": env._tokens[1]})  # the right call, gate closed
    locked = env.step(gate)
    wrong_token = next(v for v in env.values if v != env._tokens[1])
    wrong = env.step(ToolCall("parse", {"token": wrong_token}))
    assert not locked.ok and locked.text == f"error bad token {env._tokens[1]}"
    assert wrong.text == f"error bad token {wrong_token}"
    assert "unlock" not in locked.text and locked.signals == wrong.signals
    assert not env.step(ToolCall("unlock", {"token": wrong_token})).ok
    unlocked = env.step(ToolCall("unlock", {"token": env._tokens[1]}))
    assert unlocked.ok and unlocked.text == "ok" and unlocked.signals[SIGNAL] == 3.0
    assert env.step(gate).ok


def test_gated_solves_with_unlock_and_resets_the_gate():
    env = make_env("gated")
    results = solve(env, Task("t", 9))
    assert env.outcome() == 1.0 and len(results) == 5
    env.reset(Task("t", 9))
    env.step(env.expected_call())
    assert env.expected_call().tool == "unlock"


def test_random_policy_succeeds_rarely_but_not_never():
    """The calibrated chain4 defaults: a uniform random valid-call policy wins a few percent."""
    env = make_env("chain4")
    rng = random.Random(0)
    calls = [c for spec in env.schema() for c in all_calls(spec)]
    wins = 0
    for task in make_tasks(2000, seed=1):
        env.reset(task)
        for _ in range(env.max_turns):
            if env.step(rng.choice(calls)).done:
                break
        wins += env.outcome() == 1.0
    assert 0.01 < wins / 2000 < 0.06


@pytest.mark.parametrize("name,cls", [("chain4", ChainEnv), ("chain6", ChainEnv), ("gated", GatedEnv)])
def test_protocol_schema_and_manifest(name, cls):
    """Each env satisfies ToolEnv; its manifest lists the schema's tools with tags and the target."""
    env = make_env(name)
    assert isinstance(env, cls) and isinstance(env, ToolEnv)
    manifest = env.manifest()
    assert manifest["format"] == MANIFEST_FORMAT
    assert [t["name"] for t in manifest["tools"]] == [s.name for s in env.schema()]
    for tool in manifest["tools"]:
        assert tool["tags"] and tool["target"] == "token"
        assert tool["parameters"] == [{"name": "token", "type": "string"}]


#: The manifests shipped in examples/manifests: environment name -> file.
SHIPPED_MANIFESTS = {
    "chain4": "chain4_tools.json",
    "chain6": "chain6_tools.json",
    "gated": "gated_tools.json",
    "dialog": "dialog_tools.json",
}


@pytest.mark.parametrize("name,file", SHIPPED_MANIFESTS.items())
def test_shipped_manifests_are_current(name, file):
    """examples/manifests/*.json equal what the default environments write."""
    shipped = json.loads((ROOT / "examples" / "manifests" / file).read_text())
    assert shipped == make_env(name).manifest(), (
        f"regenerate: trainer.envs.write_manifest(make_env({name!r}), 'examples/manifests/{file}')"
    )


def test_default_manifests_round_trip(tmp_path):
    """write_manifest writes exactly the shipped files."""
    for name, file in SHIPPED_MANIFESTS.items():
        path = write_manifest(make_env(name), tmp_path / file)
        assert json.loads(path.read_text()) == json.loads((ROOT / "examples" / "manifests" / file).read_text())


def test_schema_is_the_core_tool_spec_with_closed_values():
    """The schema is rlvp_dsl's ToolSpec: params in order, closed values; all_calls is their product."""
    from rlvp_dsl.tools import ToolSpec

    env = make_env("chain4", num_values=3)
    spec = env.schema()[0]
    assert isinstance(spec, ToolSpec) and spec.params == ("token",) and spec.target == "token"
    assert spec.values_for("token") == ("k0", "k1", "k2") and spec.tags == frozenset({"read"})
    assert all_calls(spec) == [ToolCall(spec.name, {"token": v}) for v in ("k0", "k1", "k2")]
    two = ToolSpec("move", params=("a", "b"), values={"a": ("x", "y"), "b": ("1",)})
    assert [c.arguments for c in all_calls(two)] == [{"a": "x", "b": "1"}, {"a": "y", "b": "1"}]


def test_vocabulary_covers_every_text():
    """Every word the env shows during random play is in env.vocabulary()."""
    for name in ("chain4", "gated"):
        env = make_env(name)
        vocab = env.vocabulary()
        rng = random.Random(2)
        calls = [c for spec in env.schema() for c in all_calls(spec)]
        for task in make_tasks(30, seed=3):
            assert set(env.reset(task).split()) <= vocab
            for _ in range(env.max_turns):
                result = env.step(rng.choice(calls))
                assert set(result.text.split()) <= vocab
                if result.done:
                    break


@pytest.mark.parametrize(
    "knobs,field",
    [
        ({"num_stages": 0}, "num_stages"),
        ({"num_values": 0}, "num_values"),
        ({"max_turns": 0}, "max_turns"),
        ({"num_distractors": 9}, "num_distractors"),
        ({"num_stages": 11}, "num_stages"),
    ],
)
def test_bad_knobs_name_the_field(knobs, field):
    with pytest.raises(ValueError, match=field):
        make_env("chain4", **knobs)


@pytest.mark.parametrize(
    "knobs,message",
    [
        ({"vary_tokens": "no"}, "knob 'vary_tokens' must be true or false (got 'no')"),
        ({"show_progress": 1}, "knob 'show_progress' must be true or false (got 1)"),
        ({"max_turns": 12.7}, "knob 'max_turns' must be an integer (got 12.7)"),
        ({"num_values": True}, "knob 'num_values' must be an integer (got true)"),
        ({"vary_tokenz": False}, "unknown knob 'vary_tokenz'; did you mean 'vary_tokens'?"),
    ],
)
def test_knobs_are_typed_strictly(knobs, message):
    """A knob of the wrong type is refused, not coerced (a string "no" is not false, 12.7 is not 12)."""
    with pytest.raises(ValueError) as err:
        make_env("chain4", **knobs)
    assert message in str(err.value)


def test_typed_knobs_still_build():
    """Right types pass through; max_turns may stay None (its default)."""
    env = make_env("gated", max_turns=None, vary_tokens=False, num_values=3)
    assert env.config.max_turns is not None and env.config.vary_tokens is False and env.config.num_values == 3


def test_make_env_errors():
    with pytest.raises(ValueError, match="unknown environment"):
        make_env("maze")
    with pytest.raises(ValueError, match="known knobs"):
        make_env("chain4", colour="red")
    with pytest.raises(ValueError, match="gate_stage"):
        make_env("gated", gate_stage=9)


def test_make_tasks_reproducible_and_distinct():
    a, b = make_tasks(50, seed=4), make_tasks(50, seed=4)
    assert a == b and len({t.task_id for t in a}) == 50 and make_tasks(50, seed=5) != a


# --- dialog: the scripted conversation (trainer/envs/dialog.py) ------------------------------------


def _random_dialog(env, task, rng):
    """One episode of the random policy of the dialog docstring: a tool or END_TURN uniformly, then a
    value; END_TURN forced after max_calls_per_turn calls; returns every text the env showed."""
    from trainer.envs.base import END_TURN

    texts = [env.reset(task)]
    specs, calls, in_turn = env.schema(), 0, 0
    while True:
        k = rng.randrange(len(specs) + 1)
        if in_turn >= env.max_calls_per_turn or k == len(specs):
            in_turn, message = 0, env.end_turn()
            if message is None:
                return texts
            texts.append(message)
            continue
        texts.append(env.step(rng.choice(all_calls(specs[k]))).text)
        calls, in_turn = calls + 1, in_turn + 1
        if calls >= env.max_turns:
            return texts
        assert END_TURN not in {s.name for s in specs}


@pytest.mark.parametrize("name,low,high", [("dialog", 0.015, 0.05), ("dialog3", 0.0005, 0.01)])
def test_dialog_random_policy_rate_and_vocabulary(name, low, high):
    """The random policy succeeds about as the docstring says; every text it sees is in vocabulary()."""
    env, rng, wins = make_env(name), random.Random(0), 0
    vocab = env.vocabulary()
    for task in make_tasks(2000, seed=1):
        texts = _random_dialog(env, task, rng)
        assert {w for t in texts for w in t.split()} <= vocab
        wins += env.outcome() == 1.0
    assert low < wins / 2000 < high


def test_dialog_value_sets_are_per_task_and_fixed_values_optional():
    """Each task draws its value sets (holding the right value); with vary_values = False the right
    values are the same in every task."""
    for vary in (True, False):
        env = make_env("dialog", vary_values=vary, num_values=3)
        schemas, rights = set(), set()
        for task in make_tasks(20, seed=2):
            env.reset(task)
            specs = {s.name: s for s in env.schema()}
            calls = [a for a in env.expected_actions() if isinstance(a, ToolCall)]
            for call in calls:
                ((param, value),) = call.arguments.items()
                assert value in specs[call.tool].values_for(param) and len(specs[call.tool].values_for(param)) == 3
            schemas.add(tuple(v for s in specs.values() for v in s.values_for(s.params[0])))
            rights.add(tuple(str(c.arguments) for c in calls))
        assert len(schemas) > 10 and (len(rights) > 1) == vary


@pytest.mark.parametrize(
    "knobs,field",
    [
        ({"num_turns": 1}, "num_turns"),
        ({"num_turns": 4}, "num_turns"),
        ({"num_values": 7}, "num_values"),
        ({"num_distractors": 2}, "num_distractors"),
        ({"max_calls_per_turn": 0}, "max_calls_per_turn"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_dialog_bad_knobs_name_the_field(knobs, field):
    with pytest.raises(ValueError, match=field):
        make_env("dialog", **knobs)
    with pytest.raises(ValueError, match="known knobs"):
        make_env("dialog", colour="red")


def test_dialog_step_and_end_turn_outside_an_episode_raise():
    env = make_env("dialog")
    for action in (lambda: env.step(ToolCall("find", {"team": "red"})), env.end_turn):
        with pytest.raises(RuntimeError, match="before reset"):
            action()
    env.reset(make_tasks(1)[0])
    assert env.end_turn() is not None and env.end_turn() is None
    with pytest.raises(RuntimeError, match="after the conversation ended"):
        env.end_turn()
    with pytest.raises(RuntimeError, match="after the conversation ended"):
        env.step(ToolCall("find", {"team": "red"}))
