"""Per-iteration metrics (JSONL, optional TensorBoard) and run summaries.

Metric names are namespaced:

| name | meaning |
| --- | --- |
| ``rollout/success_rate`` | mean outcome of the iteration's first round of episodes |
| ``rollout/frac_dead_groups`` | groups whose per-token advantages are all zero |
| ``rollout/dead_iteration`` | 1 when every group is dead (no policy gradient) |
| ``rollout/episodes_generated`` | cumulative episodes generated, resampling included |
| ``rollout/episode_calls`` | tool calls per episode |
| ``process/violations_per_episode`` | negative credits per episode |
| ``process/discharges_per_episode`` | obligation discharges (and progress credits) per episode |
| ``process/credit_per_episode`` | summed process credit per episode (before the weight) |
| ``process/flagged_credits`` | credit values the source gave as None, NaN or infinite this iteration (each episode scored once); their calls got no credit |
| ``process/weight`` | the (annealed) process weight used this iteration |
| ``loss/policy``, ``loss/kl``, ``loss/clip_frac`` | the update's diagnostics |
| ``loss/grad_norm`` | total gradient norm of the first update pass, before clipping (0 without a step) |
| ``policy/entropy`` | mean token entropy of the policy on action tokens |
| ``perf/tokens_per_s``, ``perf/iteration_s`` | throughput |
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence


class MetricsLogger:
    """Append one JSON object per iteration to ``out_dir/metrics.jsonl``.

    Args:
        out_dir: folder (created).
        tensorboard: also write TensorBoard scalars when ``torch.utils.tensorboard``
            is importable (silently skipped otherwise, with a note in ``self.note``).
        append: keep existing lines (resume) instead of truncating.
    """

    def __init__(self, out_dir: str | os.PathLike, tensorboard: bool = False, append: bool = False):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        self._fh = open(self.path, "a" if append else "w", encoding="utf-8")
        self.tb = None
        self.note = ""
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

                self.tb = SummaryWriter(str(self.dir / "tb"))
            except Exception as exc:  # pragma: no cover - depends on installs
                self.note = f"tensorboard not available ({exc.__class__.__name__}); JSONL only"

    def log(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row, sort_keys=True) + "\n")
        self._fh.flush()
        if self.tb is not None:
            step = int(row.get("iteration", 0))
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and "/" in key:
                    self.tb.add_scalar(key, value, step)

    def close(self) -> None:
        self._fh.close()
        if self.tb is not None:
            self.tb.close()


def trailing_mean(values: Sequence[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at each position (shorter at the start)."""
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1): i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def episodes_to_success(rows: Sequence[dict], threshold: float = 0.5, window: int = 3) -> float | None:
    """Episodes generated (cumulative, resampling included) when the trailing-``window``
    mean success rate first reaches ``threshold``; None if never."""
    succ = trailing_mean([float(r["rollout/success_rate"]) for r in rows], window)
    for i, (row, s) in enumerate(zip(rows, succ, strict=True)):
        if i >= window - 1 and s >= threshold:  # full windows only: one lucky early batch does not count
            return float(row["rollout/episodes_generated"])
    return None


def summarise_run(rows: Sequence[dict], threshold: float = 0.5, window: int = 3, final_k: int = 5) -> dict[str, Any]:
    """One run's summary: episodes to threshold, dead iterations, final success, ..."""
    if not rows:
        raise ValueError("no metrics rows to summarise")
    last = rows[-final_k:]
    return {
        "iterations": len(rows),
        "episodes_to_threshold": episodes_to_success(rows, threshold, window),
        "dead_iterations": int(sum(int(r["rollout/dead_iteration"]) for r in rows)),
        "frac_dead_groups": sum(float(r["rollout/frac_dead_groups"]) for r in rows) / len(rows),
        "final_success": sum(float(r["rollout/success_rate"]) for r in last) / len(last),
        "violations_per_episode": sum(float(r["process/violations_per_episode"]) for r in last) / len(last),
        "episodes_generated": int(rows[-1]["rollout/episodes_generated"]),
        "wall_s": sum(float(r.get("perf/iteration_s", 0.0)) for r in rows),
    }


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """(mean, population std, n) over the non-None values; (None, None, 0) when none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None, 0
    m = sum(vals) / len(vals)
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals)), len(vals)
