"""The bfcl env's ``system_prompt`` knob: with ``"bfcl"`` the first user message is exactly what
BFCL's own inference code sends a prompting model without a system role (its system prompt over
the task's function docs, turned into the user message and joined to it), checked against
BFCL's functions themselves; bad values are named."""

from __future__ import annotations

import ast
import copy
import json
import re

import pytest

from trainer.envs import make_env
from trainer.envs.base import Task
from trainer.envs.bfcl import available
from trainer.envs.bfcl.env import BfclConfig, BfclEnv, bfcl_system_prompt
from trainer.envs.bfcl.tasks import package_root

needs_bfcl = pytest.mark.skipif(not available(), reason="bfcl-eval is not installed (examples/setup.sh installs it)")
SUBSET = {"max_gt_calls_per_turn": 1, "tools": "path", "max_values": 3, "max_calls_per_turn": 2}  # examples/bfcl.toml
#: BFCL's prompt path for prompting models (bfcl_eval/model_handler/utils.py), from its own source
BFCL_FUNCTIONS = (
    "system_prompt_pre_processing_chat_model",
    "formulate_system_prompt",
    "parse_prompt_variation_params",
    "format_function_doc",
    "convert_system_prompt_into_user_prompt",
    "combine_consecutive_user_prompts",
)


def bfcl_prompt_functions() -> dict:
    """BFCL's own prompt functions, compiled from the installed ``model_handler/utils.py``: that
    module cannot be imported here (its parsers need ``tree_sitter``), so its function definitions
    are taken from its syntax tree and run over the package's own constants and helpers."""
    from bfcl_eval.constants import default_prompts
    from bfcl_eval.utils import extract_prompt_format_from_id

    path = package_root() / "model_handler" / "utils.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in BFCL_FUNCTIONS]
    assert sorted(n.name for n in defs) == sorted(BFCL_FUNCTIONS)
    namespace = {k: v for k, v in vars(default_prompts).items() if not k.startswith("__")}
    namespace.update(json=json, re=re, extract_prompt_format_from_id=extract_prompt_format_from_id)
    exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


@needs_bfcl
def test_the_first_message_is_bfcls_own():
    """Every task of the examples/bfcl.toml subset: BFCL's dataset entry (its docs with BFCL's hint),
    its system prompt over the offered functions, turned into the first user message as BFCL does
    it for a model without a system role == what the env's reset returns."""
    from bfcl_eval.utils import load_dataset_entry

    bfcl = bfcl_prompt_functions()
    entries = {e["id"]: e for e in load_dataset_entry("multi_turn_base")}
    env = BfclEnv(**SUBSET, system_prompt="bfcl")
    assert len(env.tasks) >= 6
    for task in env.tasks:
        first = env.reset(Task(task.id, 0))
        offered = {spec.name for spec in env.schema()}
        entry = entries[task.id]
        functions = [f for f in entry["function"] if f["name"] in offered]
        assert [f["name"] for f in functions] == [s.name for s in env.schema()]
        messages = bfcl["system_prompt_pre_processing_chat_model"](
            copy.deepcopy(entry["question"][0]), functions, task.id
        )
        messages = bfcl["combine_consecutive_user_prompts"](bfcl["convert_system_prompt_into_user_prompt"](messages))
        assert messages == [{"role": "user", "content": first}]
        assert first.endswith("\n\n" + task.turns[0]) and first.startswith("You are an expert in composing functions.")
        assert env.system_prompt() == first[: -len("\n\n" + task.turns[0])]
        assert all(f'"name": "{name}"' in first for name in offered)


@needs_bfcl
def test_the_default_leaves_the_message_alone():
    """``rlvp`` (the default): the first user message is the user's text; later turns never carry the prompt."""
    plain, bfcl = BfclEnv(**SUBSET), BfclEnv(**SUBSET, system_prompt="bfcl")
    task = Task(plain.tasks[0].id, 0)
    assert plain.reset(task) == plain.tasks[0].turns[0]
    bfcl.reset(task)
    second = bfcl.end_turn()
    assert second == bfcl.task.turns[1] and "expert in composing functions" not in second


@needs_bfcl
def test_every_tool_is_listed_with_tools_classes():
    """``tools = "classes"``: the prompt lists every doc the task has (BFCL's list), with BFCL's hint."""
    env = BfclEnv(**{**SUBSET, "tools": "classes"}, system_prompt="bfcl")
    task = env.tasks[0]
    env.reset(Task(task.id, 0))
    listed = json.loads(env.system_prompt().split("that you can invoke.\n", 1)[1])
    assert [d["name"] for d in listed] == [d["name"] for d in task.docs] and len(listed) > 10
    assert all(d["description"].endswith("Note that the provided function is in Python 3 syntax.") for d in listed)
    assert bfcl_system_prompt(task, env.schema()) == env.system_prompt()


@needs_bfcl
def test_the_tiny_vocabulary_holds_the_prompt():
    """The tiny tokenizer's words (`vocabulary`) include the prompt's, so the tiny model reads it too."""
    env = BfclEnv(**SUBSET, system_prompt="bfcl")
    words = env.vocabulary()
    first = env.reset(Task(env.tasks[0].id, 0))
    assert set(first.split()) <= words
    assert not set(first.split()) <= BfclEnv(**SUBSET).vocabulary()


@needs_bfcl
def test_bad_values_are_named():
    with pytest.raises(ValueError, match="'system_prompt' must be one of rlvp, bfcl .got 'BFCL'."):
        BfclConfig(system_prompt="BFCL")
    with pytest.raises(ValueError, match="knob 'system_prompt'"):
        make_env("bfcl", **SUBSET, system_prompt=True)
