"""benchmarks/gpu_check.py in its CPU smoke mode (--cpu --quick): every part runs and reports its numbers."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_quick_on_cpu(tmp_path, capsys):
    """--cpu --quick: compact grpo and rlvp (and TRL stock and rlvp where trl is installed) with step times."""
    has_trl = importlib.util.find_spec("trl") is not None
    argv = ["--cpu", "--quick", "--out", str(tmp_path)] + ([] if has_trl else ["--only", "compact"])
    assert _gpu_check().main(argv) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    runs = [(r["part"], r["method"]) for r in summary["results"]]
    assert runs == [("compact", "grpo"), ("compact", "rlvp")] + ([("trl", "stock"), ("trl", "rlvp")] if has_trl else [])
    assert summary["failed"] == [] and all(r["step_s"] > 0 and r["base_params"] > 0 for r in summary["results"])
    assert "| compact | rlvp |" in capsys.readouterr().out
