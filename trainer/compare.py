"""Comparing methods: methods x seeds -> summary table (Markdown, JSON) and learning curves
(PNG); and the paired mode (identical rollout batches, advantages under several methods).

The front door is `rlvp-train` (`trainer.cli`), which calls `compare` and `paired`:

    rlvp-train examples/chain4.toml --compare grpo,rlvp --seeds 0,1 --out runs/compare
    rlvp-train examples/chain4.toml --paired grpo,rlvp

Summary columns (one row per method, mean +- population std over seeds):

* ``episodes to X %`` -- episodes generated (resampling included) when the trailing
  mean success (``success_window`` iterations) first reaches ``success_threshold``;
  ``(k/n)`` when only k of n seeds got there (the mean is over those k);
* ``dead iters`` -- iterations with no policy gradient at all;
* ``final success`` -- mean success of the last 5 iterations;
* ``violations/ep`` -- over the last 5 iterations;
* ``episodes generated`` -- in total.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

from trainer.advantages import compute_advantages
from trainer.batch import pad_batch
from trainer.config import TrainConfig
from trainer.loop import train
from trainer.methods import get_method
from trainer.metrics import mean_std, summarise_run
from trainer.plots import plot_curves


def _run_one(cfg: TrainConfig) -> list[dict]:
    return train(cfg, progress=False, log=lambda s: print(f"[{cfg.method} s{cfg.seed}] {s}", file=sys.stderr))


def run_grid(cfg: TrainConfig, methods: Sequence[str], seeds: Sequence[int], out_dir: str | os.PathLike,
             jobs: int = 1, say: Callable[[str], None] | None = None) -> dict[str, list[list[dict]]]:
    """Train every (method, seed); returns method -> per-seed metric rows.

    Each run writes to ``out_dir/<method>/seed<k>/``.  ``jobs > 1`` runs that many in
    parallel processes (each with ``cfg.threads`` torch threads).
    """
    say = say or (lambda s: print(s, file=sys.stderr))
    out = Path(out_dir)
    todo = [(m, s, cfg.replace(method=m, seed=s, out_dir=str(out / m / f"seed{s}"))) for m in methods for s in seeds]
    results: dict[str, list[list[dict]]] = {m: [[] for _ in seeds] for m in methods}
    t0 = time.perf_counter()
    if jobs <= 1:
        for k, (m, s, c) in enumerate(todo, 1):
            results[m][list(seeds).index(s)] = _run_one(c)
            say(f"[{k}/{len(todo)}] {m} seed {s} done ({time.perf_counter() - t0:.0f}s)")
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_run_one, c): (m, s) for m, s, c in todo}
            for k, fut in enumerate(futures, 1):
                m, s = futures[fut]
                results[m][list(seeds).index(s)] = fut.result()
                say(f"[{k}/{len(todo)}] {m} seed {s} done ({time.perf_counter() - t0:.0f}s)")
    return results


def summarise(results: dict[str, list[list[dict]]], threshold: float = 0.5, window: int = 3) -> dict[str, Any]:
    """Per method: per-seed summaries and their mean/std."""
    out: dict[str, Any] = {}
    for method, seeds in results.items():
        runs = [summarise_run(rows, threshold, window) for rows in seeds if rows]
        agg: dict[str, Any] = {"seeds": runs, "n": len(runs)}
        for key in ("episodes_to_threshold", "dead_iterations", "final_success", "violations_per_episode",
                    "episodes_generated", "frac_dead_groups", "wall_s"):
            m, s, n = mean_std(r[key] for r in runs)
            agg[key] = {"mean": m, "std": s, "n": n}
        out[method] = agg
    return out


def _fmt(stat: dict, digits: int = 0, total: int | None = None) -> str:
    if stat["mean"] is None:
        return "never" if total else "-"
    text = f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"
    if total is not None and stat["n"] < total:
        text += f" ({stat['n']}/{total})"
    return text


def markdown_table(summary: dict[str, Any], threshold: float = 0.5) -> str:
    """The summary as a Markdown table."""
    pct = int(round(threshold * 100))
    lines = [
        f"| method | episodes to {pct} % | dead iters | final success | violations/ep | episodes generated |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for method, agg in summary.items():
        lines.append(
            f"| {method} | {_fmt(agg['episodes_to_threshold'], 0, agg['n'])} | {_fmt(agg['dead_iterations'], 1)} | "
            f"{_fmt(agg['final_success'], 2)} | {_fmt(agg['violations_per_episode'], 2)} | "
            f"{_fmt(agg['episodes_generated'], 0)} |"
        )
    return "\n".join(lines)


def compare(cfg: TrainConfig, methods: Sequence[str], seeds: Sequence[int], out_dir: str | os.PathLike,
            jobs: int = 1, say: Callable[[str], None] | None = None) -> tuple[str, dict[str, Any]]:
    """Run the grid, write ``summary.json``, ``summary.md`` and ``curves.png`` into ``out_dir``.

    Returns:
        (markdown table, summary dict).
    """
    out = Path(out_dir)
    results = run_grid(cfg, methods, seeds, out, jobs=jobs, say=say)
    summary = summarise(results, cfg.success_threshold, cfg.success_window)
    table = markdown_table(summary, cfg.success_threshold)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"config": cfg.to_dict(), "methods": list(methods),
                                                  "seeds": list(seeds), "summary": summary}, indent=2) + "\n")
    (out / "summary.md").write_text(table + "\n")
    plot_curves(results, out / "curves.png", window=cfg.success_window, threshold=cfg.success_threshold,
                title=f"{cfg.env}: {', '.join(methods)} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})")
    return table, summary


# ----------------------------------------------------------------------------
# paired mode
# ----------------------------------------------------------------------------
def paired(cfg: TrainConfig, driver: str, methods: Sequence[str], out_dir: str | os.PathLike) -> dict[str, Any]:
    """Train with ``driver``; on every batch it generates, compute the advantages each of
    ``methods`` would use and count the updates that would be dead (all advantages 0).

    The process weight of the evaluated methods is ``cfg.process_weight`` (un-annealed).
    Returns ``{"driver", "iterations", "dead": {method: count}, "pct_dead": {method: %}}``
    and writes it to ``out_dir/paired.json``.
    """
    dead = {m: 0 for m in methods}
    dead_groups = {m: 0 for m in methods}
    n_groups = 0
    iters = 0

    def on_batch(it, groups, credits, weight):
        nonlocal n_groups, iters
        iters += 1
        if not groups:
            for m in methods:
                dead[m] += 1
            return
        _, _, cmask = pad_batch([r for g in groups for r in g])
        n_groups += len(groups)
        for m in methods:
            spec = get_method(m)
            adv = compute_advantages(
                [[r.outcome for r in g] for g in groups], credits, [[r.call_spans for r in g] for g in groups], cmask,
                credit_mode=spec.credit_mode, process_weight=cfg.process_weight, scale_rewards=cfg.scale_rewards,
                process_norm=cfg.process_norm, eps=cfg.adv_eps,
            )
            dead[m] += int(adv.dead_iteration)
            dead_groups[m] += int(adv.dead_groups.sum())

    c = cfg.replace(method=driver, out_dir=str(Path(out_dir) / f"driver_{driver}"))
    train(c, progress=None, on_batch=on_batch)
    result = {
        "driver": driver,
        "iterations": iters,
        "dead": dead,
        "pct_dead": {m: 100.0 * dead[m] / max(1, iters) for m in methods},
        "pct_dead_groups": {m: 100.0 * dead_groups[m] / max(1, n_groups) for m in methods},
    }
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "paired.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def paired_table(result: dict[str, Any]) -> str:
    """The paired result as one line and a Markdown table (dead updates and groups per method)."""
    lines = [f"identical batches from a `{result['driver']}` policy, {result['iterations']} iterations",
             "", "| method | dead updates | dead groups |", "| --- | --- | --- |"]
    for m, pct in result["pct_dead"].items():
        lines.append(f"| {m} | {result['dead'][m]}/{result['iterations']} ({pct:.0f} %) | "
                     f"{result['pct_dead_groups'][m]:.0f} % |")
    return "\n".join(lines)
