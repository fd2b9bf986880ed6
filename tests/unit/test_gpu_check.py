"""benchmarks/gpu_check.py in its CPU smoke mode (--cpu --quick): every part runs and reports its numbers;
the BFCL part's sizes fit the time gpu_check.sh gives it."""

import importlib.util
import json
from pathlib import Path

import pytest

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
    # the rollout is timed on the loop's path (collect_groups), not read as 0
    assert all(r["rollout_s"] > 0 and r["update_s"] > 0 for r in summary["results"] if r["part"] == "compact")
    assert "| compact | rlvp |" in capsys.readouterr().out


def test_bfcl_part_sizing():
    """The BFCL part runs only when named, at the realistic size on cuda, and its budget fits the
    time gpu_check.sh gives gpu_check.py, which with the device tests fits one 10-minute device call."""
    import re

    g = _gpu_check()
    assert g.parse_args([]).parts == ["compact", "trl"]
    a = g.parse_args(["--only", "bfcl"])
    assert (a.parts, a.device, a.size, a.dtype) == (["bfcl"], "cuda", g.REALISTIC, "bfloat16")
    assert (a.bfcl_iterations, a.bfcl_budget_s) == (60, 330.0)
    quick = g.parse_args(["--cpu", "--quick", "--only", "bfcl", "--bfcl-budget-s", "30"])
    assert (quick.device, quick.size, quick.bfcl_iterations, quick.bfcl_budget_s) == ("cpu", g.QUICK, 1, 30.0)
    shell = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    tests_s = int(re.search(r"timeout -k 10 (\d+) python3 -m pytest", shell).group(1))
    check_s = int(re.search(r"timeout -k 10 (\d+) python3 benchmarks/gpu_check.py", shell).group(1))
    # grpo's half and rlvp's (as many iterations) plus model builds and one chunk of overshoot each
    assert a.bfcl_budget_s <= 0.75 * check_s and tests_s + check_s <= 600 - 30
    assert "bfcl-eval" in shell  # the version print and how to carry its wheel


def test_bfcl_part_rejects_bad_sizes(capsys):
    g = _gpu_check()
    for argv in (["--bfcl-iterations", "0"], ["--bfcl-budget-s", "0"], ["--only", "bfc"]):
        try:
            g.parse_args(argv)
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(f"{argv} was accepted")
    assert "--bfcl-iterations must be at least 1 (got 0)" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
def test_bfcl_part_quick_on_cpu(tmp_path, monkeypatch):
    """--only bfcl --quick in chunks of one iteration: grpo then rlvp, 2 iterations each (the second
    resumed from the first's checkpoint), the same first batch (same seed), rlvp's groups all live."""
    g = _gpu_check()
    monkeypatch.setattr(g, "BFCL_CHUNK", 1)
    assert g.main(["--cpu", "--quick", "--only", "bfcl", "--bfcl-iterations", "2", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == []
    grpo, rlvp = summary["results"]
    assert [(r["part"], r["method"], r["steps"], r["episodes"]) for r in (grpo, rlvp)] == [
        ("bfcl", "grpo", 2, 96),  # 6 groups (examples/bfcl.toml: one per task) x 8 x 2 iterations
        ("bfcl", "rlvp", 2, 96),
    ]
    rows = {
        m: [json.loads(x) for x in (tmp_path / f"bfcl_{m}" / "metrics.jsonl").read_text().splitlines()]
        for m in ("grpo", "rlvp")
    }
    assert [r["iteration"] for r in rows["grpo"]] == [0, 1] == [r["iteration"] for r in rows["rlvp"]]
    assert rows["grpo"][0]["rollout/success_rate"] == rows["rlvp"][0]["rollout/success_rate"]
    assert rlvp["live_groups"] == 1.0 and 0 <= grpo["live_groups"] < 1.0
    assert all(r["rollout_s"] > 0 and r["update_s"] > 0 for r in (grpo, rlvp))
