"""rlvp-train before the first iteration: a bad gen_args / model_args / lora_target_modules value is
one config error at its line, found before anything is written to --out (so the retry is not
refused); the rule file's lint warnings are shown once and never stop the run; --out inside a
comparison is refused; --resume refuses a run whose metrics are gone; calibrate's --groups is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainer.cli.train_command import main

REPO = Path(__file__).resolve().parent.parent.parent
#: A run of a few seconds: one group of two on chain-4, one iteration.
SMALL = 'method = "rlvp"\ntasks_per_iteration = 1\nnum_generations = 2\niterations = 1\ntoken_page_every = 0\n'


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def _config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(SMALL + extra)
    return path


@pytest.mark.parametrize(
    "extra, message",
    [
        ('gen_args = { call_style = "xml" }', "'gen_args.call_style' must be one of plain, json (got \"xml\")"),
        (
            "gen_args = { think_max_tokens = 3, think_token_ids = [100000] }",
            "'gen_args.think_token_ids' must be ids of the model's vocabulary, 0 to 78 (got 100000)",
        ),
        (
            'lora_target_modules = ["q_prj"]',
            "LoRA 'target_modules' ['q_prj'] match no module of the model; did you mean 'q_proj'? (its linear "
            "layers: down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj)",
        ),
    ],
)
def test_a_setting_the_run_cannot_use_is_one_line_and_writes_nothing(tmp_path, extra, message):
    """The audit's case: a bad call_style failed mid-run with attrs' tuple, and a token id past the
    vocabulary with an IndexError, each after metrics.jsonl was written (which then refused the retry)."""
    config = _config(tmp_path, extra)
    out = tmp_path / "out"
    done = invoke(config, "--out", out)
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert done.output.splitlines()[-1] == f"rlvp-train: error: {config}:6: {message}"
    assert not out.exists()


def test_the_retry_after_a_failed_start_trains(tmp_path):
    config = _config(tmp_path, 'gen_args = { call_style = "xml" }')
    out = tmp_path / "out"
    assert invoke(config, "--out", out).exit_code == 1
    config.write_text(SMALL + 'gen_args = { call_style = "json" }\n')
    done = invoke(config, "--out", out)
    assert done.exit_code == 0, done.output
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1


def test_lint_warnings_of_the_rule_file_are_shown_once_and_the_run_goes_on(tmp_path):
    manifest = REPO / "examples" / "manifests" / "chain4_tools.json"
    rules = tmp_path / "warn.rlvp"
    rules.write_text(
        f'tools from "{manifest}"\nviolation big (-50) {{\n  on call error\n}}\n'
        "violation dup (-0.2) {\n  on call error\n}\n"
    )
    config = _config(tmp_path, f'rules = "{rules}"\n')
    done = invoke(config, "--out", tmp_path / "out")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == (
        f"rlvp-train: warning: the rule file {rules} has 3 lint warnings (in full: rlvp-compile {rules}); "
        "rlvp trains with it as it is"
    )
    # one line each, under it: file:line:col: warning[CODE]: message
    assert [line.split(": ", 2)[1] for line in lines if line.startswith(f"  {rules}:")] == [
        "warning[RV304]",
        "warning[RV304]",
        "warning[RV302]",
    ]
    assert sum("lint warning" in line for line in lines) == 1
    assert done.stdout.splitlines()[-1] == f"metrics: {tmp_path / 'out' / 'metrics.jsonl'}"  # trained


def test_an_empty_rule_file_is_a_warning_for_the_method_that_trains_with_it(tmp_path):
    rules = tmp_path / "empty.rlvp"
    rules.write_text("")
    config = _config(tmp_path, f'rules = "{rules}"\n')
    done = invoke(config, "--out", tmp_path / "out")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[:2] == [
        f"rlvp-train: warning: the rule file {rules} has 1 lint warning (in full: rlvp-compile {rules}); "
        "rlvp trains with it as it is",
        f"  {rules}: warning[RV306]: the rule set has no rules: it gives no credit to any episode",
    ]


def _comparison(folder: Path) -> None:
    """What --compare grpo,rlvp leaves: METHOD/seed0 runs and the summary."""
    for method in ("grpo", "rlvp"):
        run = folder / method / "seed0"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text(json.dumps({"iteration": 0}) + "\n")
    (folder / "summary.json").write_text("{}")
    (folder / "summary.md").write_text("")


@pytest.mark.parametrize("below", ["rlvp", "rlvp/new", "new"])
def test_out_inside_a_comparison_is_refused(tmp_path, below):
    cmp = tmp_path / "cmp"
    _comparison(cmp)
    config = _config(tmp_path, "")
    out = cmp / below
    done = invoke(config, "--out", out)
    assert done.exit_code == 2
    assert done.output.splitlines()[-1] == (
        f"rlvp-train: error: --out {out} lies inside the comparison folder {cmp}: a run needs a folder of its own"
    )
    grid = invoke(config, "--compare", "grpo,rlvp", "--out", out)
    assert grid.exit_code == 2
    assert grid.output.splitlines()[-1] == (
        f"rlvp-train: error: --out {out} lies inside the comparison folder {cmp}: a comparison needs a folder "
        "of its own"
    )
    assert not (cmp / "rlvp" / "checkpoint.pt").exists() and not (cmp / "new").exists()


def test_resume_of_a_run_whose_metrics_are_gone_is_refused(tmp_path):
    config = _config(tmp_path, "")
    out = tmp_path / "out"
    assert invoke(config, "--out", out).exit_code == 0
    (out / "metrics.jsonl").unlink()
    done = invoke(config, "--out", out, "--iterations", "2", "--resume")
    assert done.exit_code == 1
    assert done.output.splitlines()[-1] == (
        f"rlvp-train: error: --resume: {out}/checkpoint.pt holds 1 iteration(s) but {out}/metrics.jsonl is "
        "missing: the resumed run's summary and curves would start at iteration 1, without iterations 0; "
        "restore metrics.jsonl from a copy, or start the run again with --overwrite"
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ('rules = "."', 'rules = ".": is a folder, not a rule file (name the .rlvp file in it)'),
        (
            'env = "chain99"',
            "env = \"chain99\": environment 'chain99': the number in its name is its number of stages, and "
            "'num_stages' must be <= 10 (got 99)",
        ),
    ],
)
def test_what_the_user_wrote_is_named(tmp_path, extra, message):
    config = _config(tmp_path, extra)
    done = invoke(config, "--out", tmp_path / "out")
    assert done.exit_code == 1
    assert done.output.splitlines()[-1] == f"rlvp-train: error: {config}:6: {message}"


def test_a_misspelt_compare_method_gets_a_did_you_mean(tmp_path):
    done = invoke(_config(tmp_path, ""), "--compare", "grpo,rlvpp")
    assert done.exit_code == 2
    assert done.output.splitlines()[-1] == (
        "rlvp-train: error: --compare: unknown method 'rlvpp'; did you mean 'rlvp'? (expected one of grpo, dapo, "
        "scalar_fold, rlvp, rlvp_auto, rlvp_noanneal)"
    )


@pytest.mark.parametrize("groups", ["0", "-2"])
def test_calibrate_refuses_no_groups(groups, capsys):
    from trainer.experiments.calibrate import main as calibrate

    assert calibrate(["--env", "chain4", "--groups", groups]) == 2
    assert capsys.readouterr().err == f"error: 'groups' must be >= 1 (got {groups})\n"
