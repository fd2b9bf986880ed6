"""A short real training run on BFCL v4 multi-turn (examples/bfcl.toml, the embedded tiny model):
it completes, writes metrics, and its success rate is BFCL's own checker verdict, which a replay of
each episode's calls through a fresh environment reproduces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.config import load_config
from trainer.envs.base import Task, ToolCall
from trainer.envs.bfcl import BfclEnv, available
from trainer.loop import train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
needs_bfcl = pytest.mark.skipif(
    not available(), reason='bfcl-eval is not installed: pip install --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"'
)


def _replay(env: BfclEnv, events) -> float:
    """BFCL's verdict on `events` (an episode's user / call events) replayed through a fresh `env`."""
    first = next(e.text for e in events if e.kind == "user")
    message = env.reset(Task(next(t.id for t in env.tasks if t.turns[0] == first), 0))
    turns: list[list[ToolCall]] = []
    for event in events:
        if event.kind == "user":
            turns.append([])
        elif event.kind == "call":
            turns[-1].append(ToolCall(event.tool, dict(event.arguments)))
    for calls in turns:
        assert message is not None
        for call in calls:
            env.step(call)
        message = env.end_turn("answer")
    return env.outcome()


@needs_bfcl
def test_two_iterations_on_bfcl_write_metrics_with_bfcl_verdicts(tmp_path):
    """Two rlvp iterations on the calibrated subset finish; success = BFCL's checker verdict, replayable."""
    cfg = load_config(ROOT / "examples" / "bfcl.toml", out_dir=str(tmp_path), iterations=2)
    cfg = cfg.replace(tasks_per_iteration=2, num_generations=4)
    batches = []
    rows = train(cfg, progress=False, on_batch=lambda it, groups, credits, w: batches.append(groups))
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [0, 1] == [r["iteration"] for r in rows]
    assert rows[-1]["rollout/episodes_generated"] == 16
    env = BfclEnv(**dict(cfg.env_args))
    for row, groups in zip(lines, batches, strict=True):
        rollouts = [r for g in groups for r in g]
        verdicts = [r.info["verdict"] for r in rollouts]
        assert all(isinstance(v["valid"], bool) for v in verdicts)
        assert all(r.outcome == float(v["valid"]) for r, v in zip(rollouts, verdicts, strict=True))
        assert row["rollout/success_rate"] == pytest.approx(sum(r.outcome for r in rollouts) / len(rollouts))
        for r in rollouts:
            assert r.info["env"] == "bfcl" and r.info["answers"] >= 1
            assert _replay(env, r.episode.events) == r.outcome, r.episode.id
    assert "process/violations_per_episode" in lines[-1]


def test_benchmark_without_the_package_exits_2(tmp_path):
    """benchmarks/bfcl.py with bfcl_eval blocked: the pip line, exit 2, no traceback, nothing run."""
    code = (
        "import runpy, sys; sys.modules['bfcl_eval'] = None\n"
        "sys.argv = ['benchmarks/bfcl.py', '--seeds', '1', '--iterations', '1', '--out', sys.argv[1]]\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "runpy.run_path('benchmarks/bfcl.py', run_name='__main__')\n"
    )
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert 'pip install --no-deps "bfcl-eval==2026.3.23"' in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
