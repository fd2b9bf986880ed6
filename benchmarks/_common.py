"""Shared helpers of the trainer benchmarks: run a comparison, print and save its tables."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run(
    config: str,
    methods: list[str],
    seeds: list[int],
    out: str,
    jobs: int,
    iterations: int | None = None,
    paired: bool = False,
    **overrides,
) -> str:
    """Run methods x seeds (+ the paired mode), print the tables, save them in OUT; returns the Markdown."""
    from trainer.config import load_config
    from trainer.experiments.compare import compare, paired as run_paired, paired_table

    cfg = load_config(ROOT / config, iterations=iterations)
    if overrides:
        cfg = cfg.replace(**overrides)
    t0 = time.perf_counter()
    table, summary = compare(cfg, methods, seeds, out, jobs=jobs)
    parts = [
        f"config: {config}  iterations: {cfg.iterations}  groups x G: {cfg.tasks_per_iteration} x "
        f"{cfg.num_generations}  seeds: {seeds}",
        "",
        table,
    ]
    if paired:
        for s in seeds:
            res = run_paired(cfg.replace(seed=s), "grpo", ["grpo", "rlvp"], Path(out) / "paired" / f"seed{s}")
            parts += ["", f"paired, seed {s}: " + paired_table(res)]
    parts += ["", f"wall time: {time.perf_counter() - t0:.0f} s; curves: {out}/curves.png"]
    text = "\n".join(parts)
    print(text)
    Path(out, "tables.md").write_text(text + "\n")
    return text


def median_range(values: list[float | None], digits: int = 2) -> str:
    """``median [min-max]`` of the values that exist; ``never (0/n)`` when none does, and
    ``(k/n)`` appended when only k of n seeds have one (e.g. reached 50 %)."""
    import statistics

    got = [v for v in values if v is not None]
    if not got:
        return f"never (0/{len(values)})"
    text = f"{statistics.median(got):.{digits}f} [{min(got):.{digits}f}-{max(got):.{digits}f}]"
    return text + (f" ({len(got)}/{len(values)})" if len(got) < len(values) else "")


def seed_stats(folder: str | Path) -> dict[str, dict[str, list]]:
    """Per method of a `--compare` folder (``METHOD/seedN/metrics.jsonl``), one value per seed:
    ``e30``/``e50`` episodes to 30 %/50 % (None: never), ``final`` success over the last 5
    iterations, ``live`` mean share of live groups, ``dead`` dead iterations, ``viol`` violations per
    episode over the last 5, ``best`` best trailing-3 success, ``episodes`` episodes generated."""
    import statistics

    from trainer.metrics import episodes_to_success, read_metrics, trailing_mean

    out: dict[str, dict[str, list]] = {}
    for mdir in sorted(p for p in Path(folder).iterdir() if p.is_dir() and list(p.glob("seed*/metrics.jsonl"))):
        runs = [read_metrics(p) for p in sorted(mdir.glob("seed*/metrics.jsonl"))]
        success = [[r["rollout/success_rate"] for r in rows] for rows in runs]
        out[mdir.name] = {
            "e30": [episodes_to_success(rows, 0.3, 3) for rows in runs],
            "e50": [episodes_to_success(rows, 0.5, 3) for rows in runs],
            "final": [statistics.mean(s[-5:]) for s in success],
            "live": [statistics.mean(1 - r["rollout/frac_dead_groups"] for r in rows) for rows in runs],
            "dead": [float(sum(r["rollout/dead_iteration"] for r in rows)) for rows in runs],
            "viol": [statistics.mean(r["process/violations_per_episode"] for r in rows[-5:]) for rows in runs],
            "best": [max(trailing_mean(s, 3)[2:] or [0.0]) for s in success],
            "episodes": [int(rows[-1]["rollout/episodes_generated"]) if rows else 0 for rows in runs],
        }
    return out


def collapsed(stats: dict[str, list]) -> int:
    """Seeds whose trailing success reached 0.5 and whose final success is below it."""
    return sum(1 for b, f in zip(stats["best"], stats["final"]) if b >= 0.5 and f < 0.5)
