"""chain-4 inside Hugging Face TRL: stock GRPO vs TRL + rlvp token credit, same model, seeds and batch.

    python benchmarks/trl_chain4.py --seeds 3                 # 60 steps per run, 2 runs in parallel
    python benchmarks/trl_chain4.py --seeds 3 --steps 80 --config examples/chain4_calibrated.toml
    python benchmarks/trl_chain4.py --seeds 2 --methods rlvp

Every run is TRL's `GRPOTrainer` in ``rollout_func`` mode (`trainer.experiments.trl_rollout`): the embedded
tiny model with a LoRA adapter plays chain-4 episodes itself, 4 tasks x 8 episodes per step,
log-probs renormalised over the call mask in both trainers.  Methods:

* ``grpo`` -- ``GRPOTrainer(reward_funcs=[outcome_reward])``;
* ``rlvp`` -- ``RlvpGRPOTrainer(reward_funcs=[outcome_reward, RlvpReward(rules)])``, token mode:
  the stock reward, reading the environment's signals and failed calls from the messages
  the rollout writes (`trainer.experiments.trl_rollout.episode_messages`).

Printed, mean +- population std over seeds: episodes to 50 % (cumulative episodes when the
trailing mean success of 3 steps first reaches 0.5, `trainer.metrics.episodes_to_success`;
``(k/n)`` when only k of n seeds got there), dead groups (stock: TRL's
``frac_reward_zero_std``; rlvp: ``1 - rlvp/live_groups``), final success (last 5 steps),
seconds per TRL step (generation included), and rlvp's own time per step -- inside
`RlvpReward.__call__` and `RlvpGRPOTrainer.rlvp_advantages`: reading, scoring, span finding,
attachment -- as a share of its TRL step (the bar: under 1 %).  Not part of the test suite.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlvp_dsl.cli import whole_number  # noqa: E402

METHODS = {
    "grpo": ("grpo", "TRL GRPOTrainer (outcome only)"),
    "rlvp": ("rlvp", "TRL + rlvp token credit"),
}
OVERHEAD_BAR = 1.0  # % of a TRL step


def _methods(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown method(s) {unknown or text!r}; choose from {', '.join(METHODS)}")
    return names


def _run(method: str, cfg, steps: int, out: str, rules: str | None):
    from trainer.experiments.trl_runs import train_and_summarise

    kind, _ = METHODS[method]
    result = train_and_summarise(kind, cfg, steps, out, rules=rules, threads=1)
    result["method"] = method
    return result


def _stat(values, digits: int = 0, scale: float = 1.0, unit: str = "") -> str:
    from trainer.metrics import mean_std

    m, s, n = mean_std(v * scale if v is not None else None for v in values)
    if m is None:
        return "never"
    text = f"{m:.{digits}f} ± {s:.{digits}f}{unit}"
    return text + (f" ({n}/{len(values)})" if n < len(values) else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/trl_chain4.py", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=whole_number(1), default=3, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--steps", type=whole_number(1), default=60, help="TRL optimiser steps per run (default 60)")
    ap.add_argument(
        "--jobs", type=whole_number(1), default=2, help="runs in parallel, one torch thread each (default 2)"
    )
    ap.add_argument("--methods", type=_methods, default=["grpo", "rlvp"], help="default grpo,rlvp")
    ap.add_argument("--config", default="examples/chain4.toml")
    ap.add_argument("--rules", help="rule file for rlvp (default: the config's rules)")
    ap.add_argument("--out", default="runs/bench_trl_chain4")
    a = ap.parse_args(argv)
    try:
        import trl  # noqa: F401
    except ImportError:
        print("error: this benchmark needs TRL: pip install -e '.[trl]'", file=sys.stderr)
        return 2

    from trainer.experiments.trl_runs import load_checked

    base, code = load_checked(a.config, a.rules, ROOT)
    if base is None:
        return code
    command = "python benchmarks/trl_chain4.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    seeds = list(range(a.seeds))
    print(f"$ {command.strip()}")
    print(
        f"config: {a.config} (env {base.env}, env_args {base.env_args})  steps: {a.steps}  groups x G: "
        f"{base.tasks_per_iteration} x {base.num_generations}  seeds: {seeds}  jobs: {a.jobs}  "
        f"rules: {a.rules or base.rules}",
        flush=True,
    )
    todo = [(m, s) for s in seeds for m in a.methods]
    results: dict[str, dict[int, dict]] = {m: {} for m in a.methods}
    t0 = time.perf_counter()
    try:
        with ProcessPoolExecutor(max_workers=a.jobs, mp_context=get_context("spawn")) as pool:
            futures = {
                pool.submit(_run, m, base.replace(seed=s), a.steps, str(Path(a.out) / m / f"seed{s}"), a.rules): (m, s)
                for m, s in todo
            }
            for k, fut in enumerate(as_completed(futures), 1):
                m, s = futures[fut]
                results[m][s] = fut.result()
                summ = results[m][s]["summary"]
                print(
                    f"[{k}/{len(todo)}] {m} seed {s}: final success {summ['final_success']:.2f}, "
                    f"{summ['s_per_step']:.2f} s/step ({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    wall = time.perf_counter() - t0

    pct = int(round(base.success_threshold * 100))
    lines = [
        "",
        f"| trainer | episodes to {pct} % | dead groups | final success | s/step | rlvp ms/step | rlvp % of a step |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in a.methods:
        runs = [results[m][s]["summary"] for s in seeds]
        is_rlvp = METHODS[m][0] == "rlvp"
        lines.append(
            f"| {METHODS[m][1]} | {_stat([r['episodes_to_threshold'] for r in runs])} | "
            f"{_stat([r['frac_dead_groups'] for r in runs], 0, 100, ' %')} | "
            f"{_stat([r['final_success'] for r in runs], 2)} | {_stat([r['s_per_step'] for r in runs], 2)} | "
            + (
                f"{_stat([r['rlvp_s_per_step'] for r in runs], 1, 1000)} | {_stat([r['rlvp_pct'] for r in runs], 2)} |"
                if is_rlvp
                else "- | - |"
            )
        )
    lines += ["", "per seed (episodes to 50 %, dead groups, final success):", ""]
    for m in a.methods:
        cells = []
        for s in seeds:
            r = results[m][s]["summary"]
            e = "never" if r["episodes_to_threshold"] is None else f"{r['episodes_to_threshold']:.0f}"
            cells.append(f"seed {s}: {e}, {100 * r['frac_dead_groups']:.0f} %, {r['final_success']:.2f}")
        lines.append(f"  {m:15s} " + "; ".join(cells))
    for m in a.methods:
        if METHODS[m][0] != "rlvp":
            continue
        runs = [results[m][s]["summary"] for s in seeds]
        rlvp_s = sum(r["rlvp_s_per_step"] for r in runs) / len(runs)
        step_s = sum(r["s_per_step"] for r in runs) / len(runs)
        ratio = 100 * rlvp_s / step_s
        verdict = "under" if ratio < OVERHEAD_BAR else "OVER"
        lines.append(
            f"\n{m}: rlvp's own time {1000 * rlvp_s:.1f} ms per step / TRL step {step_s:.2f} s = "
            f"{ratio:.2f} % ({verdict} the {OVERHEAD_BAR:.0f} % bar); unmatched call spans "
            f"{sum(r['unmatched_spans'] for r in runs)}, marker spans differing from the rollout's "
            f"{sum(r['span_mismatches'] for r in runs)}"
        )
    lines.append(f"\nwall time: {wall:.0f} s ({len(todo)} runs, {a.jobs} in parallel)")
    text = "\n".join(lines)
    print(text)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tables.md").write_text(f"$ {command.strip()}\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
