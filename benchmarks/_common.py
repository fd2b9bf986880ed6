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
