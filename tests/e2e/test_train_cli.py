"""rlvp-train on bad input: one clear error line, the contract's exit codes, no traceback."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from trainer.cli.train_command import main

REPO = Path(__file__).resolve().parent.parent.parent
CONFIG = REPO / "examples" / "chain4.toml"


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _config_with_rules(tmp_path: Path, rules: str) -> Path:
    text = CONFIG.read_text().replace('rules = "examples/rules/chain4_dense.rlvp"', f'rules = "{rules}"')
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_rule_file_with_a_syntax_error_is_reported_not_raised(tmp_path):
    """A rule file with a syntax error: the rendered diagnostic as rlvp-compile prints it (not
    behind an "rlvp-train: error:" of its own), then the one error line naming config and rule
    file; exit 1, for one run and for --compare."""
    rules = tmp_path / "bad.rlvp"
    rules.write_text("tool x : read\nrule x\n")
    config = _config_with_rules(tmp_path, str(rules))
    for flags in (["--iterations", "1"], ["--compare", "grpo,rlvp", "--seeds", "0"]):
        done = invoke(config, *flags, "--out", tmp_path / "out")
        assert done.exit_code == 1 and "Traceback" not in done.output
        lines = done.output.splitlines()
        assert lines[0].startswith(f"{rules}:2:1: error[RV101]: ")
        assert lines[-1] == f"rlvp-train: error: {config}: the rule file {rules} has 1 error (above)"


def test_missing_rule_file_is_reported_at_the_configs_rules_line(tmp_path):
    """A config naming a missing rule file: the config file, the line of `rules`, the value, where a
    relative path is looked up; exit 1, for one run and for --compare."""
    config = _config_with_rules(tmp_path, "nope.rlvp")
    line = next(n for n, x in enumerate(config.read_text().splitlines(), 1) if x.startswith("rules ="))
    for flags in (["--iterations", "1"], ["--compare", "grpo,rlvp"]):
        done = invoke(config, *flags, "--out", tmp_path / "out")
        assert done.exit_code == 1, done.output
        assert f'rlvp-train: error: {config}:{line}: rules = "nope.rlvp": no such rule file' in done.output
        assert "the config file's folder" in done.output and "including file" not in done.output


def test_a_bad_environment_names_the_config_line_and_value(tmp_path):
    """env = "chain99": the file, the line of `env`, the value; a bad knob: the line of env_args."""
    for old, new, key, value in [
        ('env = "chain4"', 'env = "chain99"', "env", '"chain99"'),
        (
            "env_args = { vary_tokens = false }",
            "env_args = { num_distractors = -1 }",
            "env_args",
            "{ num_distractors = -1 }",
        ),
        (
            "env_args = { vary_tokens = false }",
            'env_args = { vary_tokens = "no" }',
            "env_args",
            '{ vary_tokens = "no" }',
        ),
    ]:
        assert old in CONFIG.read_text()
        path = tmp_path / "c.toml"
        path.write_text(CONFIG.read_text().replace(old, new))
        line = next(n for n, x in enumerate(path.read_text().splitlines(), 1) if x.startswith(f"{key} ="))
        done = invoke(path, "--out", tmp_path / "out")
        assert done.exit_code == 1 and f"rlvp-train: error: {path}:{line}: {key} = {value}: " in done.output, (
            done.output
        )


def test_a_bad_knob_in_an_env_args_table_names_the_knobs_line(tmp_path):
    """env_args written as a [env_args] (or dotted [env.env_args]) table: a bad knob is blamed on its
    own line, with its value as written."""
    text = CONFIG.read_text()
    assert "env_args = { vary_tokens = false }" in text
    path = tmp_path / "c.toml"
    for header in ("[env_args]", "[env.env_args]"):
        path.write_text(text.replace("env_args = { vary_tokens = false }\n", "") + f'\n{header}\nvary_tokens = "no"\n')
        line = path.read_text().splitlines().index('vary_tokens = "no"') + 1
        done = invoke(path, "--out", tmp_path / "out")
        assert done.exit_code == 1, done.output
        assert f'rlvp-train: error: {path}:{line}: vary_tokens = "no": ' in done.output, done.output
        assert "knob 'vary_tokens' must be true or false (got 'no')" in done.output


def test_an_unknown_key_in_a_table_names_its_line_and_table(tmp_path):
    """A typo'd key inside a table: file:line, the table, the did-you-mean."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.read_text() + "\n[extra]\nlog_evry = 3\n")
    line = len(path.read_text().splitlines())
    done = invoke(path, "--out", tmp_path / "out")
    assert done.exit_code == 1, done.output
    assert (
        f"rlvp-train: error: {path}:{line}: unknown key 'log_evry' in [extra]; did you mean 'log_every'?" in done.output
    ), done.output


def test_output_folder_that_is_a_file_is_an_io_error(tmp_path):
    """--out naming a file: exit 2 with a one-line error."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    done = invoke(CONFIG, "--iterations", "1", "--out", blocker)
    assert done.exit_code == 2 and f"rlvp-train: error: cannot write {blocker}: it is a file" in done.output


def test_output_folder_that_cannot_be_created_is_one_line_exit_2(tmp_path):
    """--out /proc/nope (or below a file): `cannot write DIR: reason`, exit 2, for every mode; a probe
    that works leaves no folder behind when the run then fails."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for out in ("/proc/nope", blocker / "sub"):
        for flags in ([], ["--compare", "grpo"], ["--paired", "grpo,rlvp"]):
            done = invoke(CONFIG, *flags, "--out", out)
            assert done.exit_code == 2 and "Errno" not in done.output, done.output
            assert f"rlvp-train: error: cannot write {out}: " in done.output
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.read_text().replace('rules = "examples/rules/chain4_dense.rlvp"', 'rules = "nope.rlvp"'))
    assert invoke(bad, "--out", tmp_path / "new" / "run").exit_code == 1
    assert not (tmp_path / "new").exists()


def test_usage_errors_exit_2(tmp_path):
    """A missing config, an empty --seeds, --seeds without --compare, --jobs 0: exit 2."""
    assert invoke(tmp_path / "missing.toml").exit_code == 2
    assert invoke(CONFIG, "--compare", "grpo,rlvp", "--seeds", ",,").exit_code == 2
    assert invoke(CONFIG, "--seeds", "1").exit_code == 2
    assert invoke(CONFIG, "--compare", "grpo,rlvp", "--jobs", "0").exit_code == 2


def test_wrong_type_names_the_field(tmp_path):
    """learning_rate = "fast": the message names the field."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.read_text().replace("learning_rate = 0.003", 'learning_rate = "fast"'))
    done = invoke(path, "--iterations", "1")
    assert done.exit_code == 1 and "'learning_rate' must be a number" in done.output


def test_ctrl_c_exits_130(tmp_path, monkeypatch):
    """Ctrl-C during training: one line, exit 130 (as rlvp-compile and rlvp-score), no traceback."""
    import trainer.loop

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer.loop, "train", interrupted)
    done = invoke(CONFIG, "--iterations", "1", "--out", tmp_path / "out")
    assert done.exit_code == 130 and "interrupted" in done.output and "Traceback" not in done.output


def test_version_and_a_missing_train_extra():
    """rlvp-train --version prints the package version; without click (a core-only install) the entry
    point names the install command and exits 2 instead of a traceback."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from trainer.cli.entry import run; import sys; sys.argv=['rlvp-train', '--version']; run()",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.startswith("rlvp-train 0.")
    code = (
        "import sys; sys.modules['click'] = None\n"
        "from trainer.cli.entry import run\nsys.argv = ['rlvp-train', '--help']\nrun()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "rlvp-train: error: the trainer needs the train extra (click is not installed)" in done.stderr


def test_empty_config_empty_seed_items_and_two_modes_are_refused(tmp_path):
    """An empty config is a config error (no training on defaults); '0,,1' and --compare with --paired
    are usage errors (exit 2) blamed on the flag."""
    import subprocess
    import sys

    empty = tmp_path / "empty.toml"
    empty.write_text("")

    def train(*args):
        code = "import sys; from trainer.cli.entry import run; sys.argv = ['rlvp-train', *sys.argv[1:]]; run()"
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)

    done = train(empty)
    assert done.returncode == 1 and "rlvp-train: error: " in done.stderr and "the config is empty" in done.stderr
    done = train("examples/chain4.toml", "--compare", "grpo,rlvp", "--seeds", "0,,1")
    assert done.returncode == 2 and "rlvp-train: error: --seeds: has an empty item" in done.stderr
    done = train("examples/chain4.toml", "--compare", "grpo", "--paired", "grpo,rlvp")
    assert done.returncode == 2 and "rlvp-train: error: --compare and --paired" in done.stderr


def test_plot_output_must_be_an_image_and_never_an_input(tmp_path):
    """plot -o x.jsonl / x.txt: a usage error naming -o and the image extensions (exit 2); the
    metrics file given is left as it was."""
    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"
    metrics.write_text('{"iteration": 0}\n')
    for out in (metrics, tmp_path / "c.txt", tmp_path / "noext"):
        done = invoke("plot", run, "-o", out)
        assert done.exit_code == 2 and "Traceback" not in done.output, done.output
        assert "rlvp-train: error: -o: must be an image file ending in one of" in done.output
        assert ".png" in done.output and ".pdf" in done.output
    assert metrics.read_text() == '{"iteration": 0}\n' and not (tmp_path / "c.txt").exists()


def test_a_bad_config_value_is_reported_even_where_a_flag_overrides_it(tmp_path):
    """out_dir = 5 with --out, iterations = "60" with --iterations: the file's error, exit 1."""
    for line, flags, message in [
        ("out_dir = 5", ["--out", tmp_path / "x"], "'out_dir' must be a string (got 5, an integer)"),
        ('iterations = "60"', ["--iterations", "5"], "'iterations' must be a whole number (got \"60\", a string)"),
        ("iterations = 0", ["--iterations", "5"], "'iterations' must be a positive integer (got 0)"),
    ]:
        key = line.split(" = ")[0]
        lines = [x for x in CONFIG.read_text().splitlines() if not x.startswith(f"{key} =")] + [line]
        path = tmp_path / "c.toml"
        path.write_text("\n".join(lines) + "\n")
        done = invoke(path, *flags)
        assert done.exit_code == 1, done.output
        assert f"rlvp-train: error: {path}:{len(lines)}: {message}" in done.output


def test_a_rule_file_given_as_the_config_says_so_and_shows_the_usage():
    rules = REPO / "rules" / "chain.rlvp"
    done = invoke(rules)
    assert done.exit_code == 2, done.output  # not a TOML parse error (exit 1)
    assert f"rlvp-train: error: {rules} is a rule file, not a training config" in done.output
    assert "rlvp-train examples/chain4.toml" in done.output and f"rlvp-compile {rules}" in done.output


def test_a_config_that_cannot_be_read_is_an_io_error_exit_2(tmp_path):
    """A binary (not UTF-8) config: one line naming it, exit 2, as rlvp-compile for a binary rule file."""
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe\x00binary")
    done = invoke(path)
    assert (
        done.exit_code == 2
        and f"rlvp-train: error: {path}: not UTF-8 text: line 1, column 1 (byte 0xff)" in done.output
    )


def test_a_misspelt_choice_gets_a_did_you_mean(tmp_path):
    for line, message in [
        (
            'method = "rlvpp"',
            "'method' must be one of grpo, dapo, scalar_fold, rlvp, rlvp_auto, rlvp_noanneal "
            "(got 'rlvpp'); did you mean 'rlvp'?",
        ),
        (
            'scale_rewards = "grop"',
            "'scale_rewards' must be one of group, batch, none (got 'grop'); did you mean 'group'?",
        ),
    ]:
        key = line.split(" = ")[0]
        lines = [x for x in CONFIG.read_text().splitlines() if not x.startswith(f"{key} =")] + [line]
        path = tmp_path / "c.toml"
        path.write_text("\n".join(lines) + "\n")
        done = invoke(path)
        assert done.exit_code == 1 and f"rlvp-train: error: {path}:{len(lines)}: {message}" in done.output, done.output


def test_a_mistyped_method_flag_gets_the_closest_name(tmp_path):
    """`--method rvlp`: exit 2, the flag, the closest method and the known ones (as --compare says it)."""
    done = invoke(CONFIG, "--method", "rvlp", "--out", tmp_path / "out")
    assert done.exit_code == 2
    assert done.output.splitlines()[-1] == (
        "rlvp-train: error: --method: unknown method 'rvlp'; did you mean 'rlvp'? "
        "(expected one of grpo, dapo, scalar_fold, rlvp, rlvp_auto, rlvp_noanneal)"
    )
    assert not (tmp_path / "out").exists()
