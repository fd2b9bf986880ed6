"""A config's gen_args / model_args tables: checked when the config loads, each error one line that
names the file, the line of the setting, the setting, what was expected and what was given (with a
did-you-mean), as the config's own keys and env_args are."""

from __future__ import annotations

import pytest

from trainer.config import ConfigError, load_config
from trainer.config_args import gen_args_problem, model_args_problem, token_ids_problem

KNOWN_GEN = "(known: call_style, system_prompt, think_max_tokens, think_token_ids)"
KNOWN_TINY = "(known: hidden_size, init_std, intermediate_size, max_positions, num_heads, num_layers, seed)"


@pytest.mark.parametrize(
    "table, message",
    [
        ('gen_args = { call_style = "xml" }', "'gen_args.call_style' must be one of plain, json (got \"xml\")"),
        (
            'gen_args = { call_style = "jsn" }',
            "'gen_args.call_style' must be one of plain, json (got \"jsn\"); did you mean 'json'?",
        ),
        (
            'gen_args = { call_stlye = "json" }',
            f"gen_args: unknown setting 'call_stlye'; did you mean 'call_style'? {KNOWN_GEN}",
        ),
        ("gen_args = { top_k = 5 }", f"gen_args: unknown setting 'top_k' {KNOWN_GEN}"),
        (
            'gen_args = { think_max_tokens = "x" }',
            "'gen_args.think_max_tokens' must be a whole number (got \"x\", a string)",
        ),
        (
            "gen_args = { think_max_tokens = -1 }",
            "'gen_args.think_max_tokens' must be a whole number >= 0 (0: no reasoning segment) (got -1)",
        ),
        (
            "gen_args = { temperature = 0.5 }",
            "'temperature' is a top-level setting, not a gen_args one: set it at the top level, temperature = 0.5",
        ),
        (
            "gen_args = { max_turns = 3 }",
            "'max_turns' is a top-level setting, not a gen_args one: set it at the top level, max_turns = 3",
        ),
        (
            "gen_args = { max_new_tokens = 0 }",
            "'max_new_tokens' is a top-level setting, not a gen_args one: set it at the top level, max_new_tokens = 0",
        ),
        (
            'gen_args = { system_prompt = "yes" }',
            "'gen_args.system_prompt' must be a boolean, true or false (got \"yes\", a string)",
        ),
        (
            'gen_args = { think_token_ids = "abc" }',
            "'gen_args.think_token_ids' must be an array of token ids (whole numbers), e.g. [5, 6] (got \"abc\")",
        ),
        ("gen_args = { think_token_ids = [3, -1] }", "'gen_args.think_token_ids' must hold token ids >= 0 (got -1)"),
        (
            "model_args = { num_layer = 2 }",
            f"model_args: unknown setting 'num_layer' for the tiny model; did you mean 'num_layers'? {KNOWN_TINY}",
        ),
        ('model_args = { num_layers = "2" }', "model_args: 'num_layers' must be a positive integer (got '2')"),
    ],
)
def test_a_bad_args_table_is_one_line_at_its_line(tmp_path, table, message):
    path = tmp_path / "c.toml"
    path.write_text(f'method = "rlvp"\n\n{table}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:3: {message}"


def test_a_setting_in_an_args_table_written_as_a_table_is_named_at_its_own_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('method = "rlvp"\n\n[gen_args]\nthink_max_tokens = 2\ncall_style = "xml"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:5: 'gen_args.call_style' must be one of plain, json (got \"xml\")"
    assert caught.value.key == "gen_args.call_style"


def test_good_tables_pass_and_reach_the_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'gen_args = { call_style = "json", think_max_tokens = 2, think_token_ids = [4, 5], system_prompt = false }\n'
        "model_args = { num_layers = 1, hidden_size = 32 }\n"
    )
    cfg = load_config(path)
    assert cfg.gen_args["call_style"] == "json" and cfg.model_args == {"num_layers": 1, "hidden_size": 32}


def test_model_args_for_another_model_are_refused():
    assert model_args_problem("smollm2", {"num_layers": 2}) is not None
    problem = model_args_problem("smollm2", {"num_layers": 2})
    assert problem.key == "model_args"
    assert problem.detail == "'model_args' (num_layers) is only used by the tiny model (model = 'smollm2')"
    assert model_args_problem("smollm2", {}) is None


def test_token_ids_are_checked_against_the_vocabulary():
    assert token_ids_problem({"think_token_ids": [0, 78]}, 79) is None
    assert token_ids_problem({}, 79) is None
    problem = token_ids_problem({"think_token_ids": [3, 100000, 79]}, 79)
    assert problem.key == "gen_args.think_token_ids"
    assert problem.detail == (
        "'gen_args.think_token_ids' must be ids of the model's vocabulary, 0 to 78 (got 100000 and 1 more)"
    )
    assert gen_args_problem({"think_token_ids": [1, 2]}) is None


def test_an_override_of_the_wrong_type_blames_the_call_not_a_flag(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('method = "rlvp"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, iterations="3")
    assert str(caught.value) == "load_config: 'iterations' must be a whole number (got \"3\", a string)"
