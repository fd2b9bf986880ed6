"""Two-iteration end-to-end runs on CPU with the real tiny model, env and rules (issue 3, case 7)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.config import ConfigError, TrainConfig, load_config
from trainer.loop import train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "chain4.toml"


def _small(tmp_path, **kw):
    cfg = load_config(CONFIG, out_dir=str(tmp_path), iterations=2)
    return cfg.replace(tasks_per_iteration=2, num_generations=4, **kw)


@pytest.mark.parametrize("method", ["rlvp", "dapo"])
def test_two_iterations_end_to_end(tmp_path, method):
    """Case 7: two iterations of the real pipeline finish in seconds and write metrics JSONL."""
    cfg = _small(tmp_path, method=method, dapo_max_rounds=2)
    rows = train(cfg, progress=False)
    assert [r["iteration"] for r in rows] == [0, 1]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [0, 1]
    assert rows[-1]["rollout/episodes_generated"] >= 16
    assert (tmp_path / "checkpoint.pt").exists()
    if method == "rlvp":
        assert rows[0]["process/weight"] == 1.0 and rows[0]["rollout/dead_iteration"] == 0


def test_resume_identical_with_real_model(tmp_path):
    """Checkpoint after 1 iteration + resume gives the same iteration 2 as an uninterrupted run."""
    full = train(_small(tmp_path / "a"), progress=False)
    cfg = _small(tmp_path / "b")
    train(cfg.replace(iterations=1), progress=False)
    resumed = train(cfg, resume=True, progress=False)
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("perf/")}
    assert strip(resumed[0]) == strip(full[1])


def test_kl_path_runs(tmp_path):
    """beta > 0 uses the adapter-disabled base as reference; the KL is finite and logged."""
    rows = train(_small(tmp_path, beta=0.05, iterations=1, updates_per_batch=2), progress=False)
    assert rows[0]["loss/kl"] >= 0.0


def test_config_errors_name_file_and_key(tmp_path):
    """Unknown keys and bad values name the file and the field."""
    bad = tmp_path / "bad.toml"
    bad.write_text('methd = "rlvp"\n')
    with pytest.raises(ConfigError, match=r"bad.toml: unknown key 'methd'; did you mean 'method'"):
        load_config(bad)
    bad.write_text('[loss]\nloss_type = "sum"\n')
    with pytest.raises(ConfigError, match="'loss_type' must be one of"):
        load_config(bad)
    with pytest.raises(ConfigError, match="'num_generations' must be at least 2"):
        TrainConfig(num_generations=1)


def test_cli_two_iterations(tmp_path):
    """`rlvp-train CONFIG --method rlvp --iterations 2` runs and reports; bad config exits 1."""
    cmd = [sys.executable, "-c", "from trainer.cli import main; main()"]
    out = subprocess.run(cmd + [str(CONFIG), "--method", "grpo", "--iterations", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "grpo seed 0: 2 iterations" in out.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("iterations = -3\n")
    out = subprocess.run(cmd + [str(bad)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 1 and "'iterations' must be a positive integer" in out.stderr
