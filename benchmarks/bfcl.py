"""BFCL v4 multi-turn (trainer/envs/bfcl), embedded tiny model: grpo, scalar_fold, rlvp, rlvp_auto x seeds.

    python benchmarks/bfcl.py --seeds 5 [--iterations 30] [--jobs 2] [--methods grpo,scalar_fold,rlvp,rlvp_auto]
    python benchmarks/bfcl.py --table runs/bench_bfcl        # only the medians table of a finished run
    python benchmarks/bfcl.py --tasks multi_turn_base_42 --methods grpo,rlvp --iterations 100   # one task of the subset

Runs `examples/bfcl.toml` (the calibrated subset: the untrained policy passes ~5 % of episodes,
docs/calibration.md) through the project's comparison machinery (`trainer.experiments.compare`,
as `rlvp-train --compare`): every method and seed generates the same number of episodes
(iterations x tasks_per_iteration x num_generations).  "success" is BFCL's own checker verdict on
the episode (`BfclEnv.outcome`).  Prints per method the median [min-max] over seeds of: episodes
generated until the trailing 3-iteration pass rate first reaches 30 % and 50 % (``k/n``: only k
seeds did), the final pass rate (mean of the last 5 iterations), the effective sample utilisation
(the share of groups with a non-zero advantage: live groups, over all iterations), dead
iterations, violations per episode (last 5 iterations; rules/bfcl.rlvp for every method, so
grpo's are counted too) and collapses; the table is also written to OUT/medians.md.
Without bfcl-eval it prints the install line and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import ROOT, collapsed, median_range, run, seed_stats

METHODS = "grpo,scalar_fold,rlvp,rlvp_auto"


def medians_table(folder: str | Path) -> str:
    """The medians table of a `--compare` folder (``METHOD/seedN/metrics.jsonl``), as Markdown."""
    lines = [
        "| method | seeds | episodes/run | BFCL pass rate (final) | episodes to 30 % | episodes to 50 % "
        "| live groups (ESU) | dead iters | violations/ep | collapsed | per seed: episodes to 30 % / final |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for method, st in seed_stats(folder).items():
        n = len(st["final"])
        seeds = ", ".join(f"{int(e) if e is not None else 'never'} / {f:.2f}" for e, f in zip(st["e30"], st["final"]))
        lines.append(
            f"| {method} | {n} | {st['episodes'][0] if n else 0} | {median_range(st['final'])} "
            f"| {median_range(st['e30'], 0)} | {median_range(st['e50'], 0)} | {median_range(st['live'])} "
            f"| {median_range(st['dead'], 0)} | {median_range(st['viol'])} | {collapsed(st)}/{n} | {seeds} |"
        )
    return "\n".join(lines)


def bfcl_config(task_ids: list[str] | None = None, iterations: int | None = None):
    """`examples/bfcl.toml`, its subset narrowed to `task_ids` when given (BFCL ids of the subset)."""
    from trainer.config import load_config

    cfg = load_config(ROOT / "examples" / "bfcl.toml", iterations=iterations)
    return cfg.replace(env_args={**cfg.env_args, "task_ids": list(task_ids)}) if task_ids else cfg


def evaluate(
    folder: str | Path, episodes: int = 16, temperature: float = 1.0, task_ids: list[str] | None = None
) -> dict[str, dict[int, list[float]]]:
    """Each run's final policy (``METHOD/seedN/checkpoint.pt``) and the untrained one (``untrained``)
    on every task of the subset: `episodes` episodes per task, BFCL's checker verdict; returns
    method -> seed -> per-task pass rates (tasks in subset order).  The same sampling seeds for
    every method (a paired evaluation); the per-iteration success of training depends on which 4
    of the subset's tasks an iteration drew, this does not."""
    import torch

    from trainer import checkpoint, envs
    from trainer.envs.base import Task
    from trainer.model import build_policy
    from trainer.sampling.generation import GenConfig
    from trainer.sampling.rollout import collect_group

    torch.set_num_threads(1)
    base = bfcl_config(task_ids)
    factory = envs.env_factory(base.env, **base.env_args)
    tasks = factory().tasks
    gen = GenConfig(temperature=temperature)
    runs = sorted(p for p in Path(folder).glob("*/seed*/checkpoint.pt"))
    seeds = sorted({int(p.parent.name.removeprefix("seed")) for p in runs})
    out: dict[str, dict[int, list[float]]] = {}
    for method, seed, path in [("untrained", s, None) for s in seeds] + [
        (p.parent.parent.name, int(p.parent.name.removeprefix("seed")), p) for p in runs
    ]:
        policy, tokenizer = build_policy(base.replace(seed=seed), factory)
        if path is not None:
            checkpoint.restore_model(policy, checkpoint.load_checkpoint(path)["trainable"])
        policy.eval()
        rates = []
        for k, task in enumerate(tasks):
            group = collect_group(policy, tokenizer, factory, Task(task.id, 0), episodes, gen, seed=90_000 + k)
            rates.append(sum(r.outcome for r in group) / episodes)
        out.setdefault(method, {})[seed] = rates
    return out


def eval_table(result: dict[str, dict[int, list[float]]], task_ids: list[str]) -> str:
    """The evaluation as Markdown: pass rate over the subset and tasks passed >= 50 %, median [min-max] over seeds."""
    import statistics

    short = [t.removeprefix("multi_turn_base_") for t in task_ids]
    lines = [
        "| policy | seeds | BFCL pass rate, all tasks | tasks passed >= 50 % | per task (median over seeds): "
        + ", ".join(short)
        + " |",
        "| --- | --- | --- | --- | --- |",
    ]
    for method, by_seed in result.items():
        rates = list(by_seed.values())
        overall = [statistics.mean(r) for r in rates]
        solved = [float(sum(x >= 0.5 for x in r)) for r in rates]
        per_task = ", ".join(f"{statistics.median(col):.2f}" for col in zip(*rates))
        lines.append(f"| {method} | {len(rates)} | {median_range(overall)} | {median_range(solved, 0)} | {per_task} |")
    return "\n".join(lines)


def _evaluate_and_print(folder: str, episodes: int, task_ids: list[str] | None = None) -> None:
    from trainer import envs

    base = bfcl_config(task_ids)
    ids = [t.id for t in envs.make_env(base.env, **base.env_args).tasks]
    table = eval_table(evaluate(folder, episodes, task_ids=task_ids), ids)
    print(f"\nfinal policies, {episodes} episodes per task at temperature 1.0 (BFCL's checker):\n\n" + table)
    Path(folder, "eval.md").write_text(table + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--iterations", type=int, help="iterations per run (default: examples/bfcl.toml's)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--out", default="runs/bench_bfcl")
    ap.add_argument("--table", metavar="FOLDER", help="print the medians table of a finished run and exit")
    ap.add_argument("--eval", metavar="FOLDER", help="evaluate the final policies of a finished run and exit")
    ap.add_argument("--eval-episodes", type=int, default=16, help="episodes per task in the evaluation")
    ap.add_argument("--tasks", help="comma-separated BFCL ids: play only these tasks of the subset (and --eval them)")
    ap.add_argument("--overwrite", action="store_true", help="replace the runs an earlier benchmark left in --out")
    a = ap.parse_args(argv)
    task_ids = a.tasks.split(",") if a.tasks else None
    for name in ("seeds", "jobs", "eval_episodes"):
        if getattr(a, name) < 1:
            return _usage(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(a, name)})")
    for name in ("table", "eval"):
        folder = getattr(a, name)
        if folder and not any(Path(folder).glob("*/seed*/metrics.jsonl")):
            return _usage(
                f"--{name} {folder}: no finished run there (METHOD/seedN/metrics.jsonl); run the benchmark first"
            )
    if a.table:
        print(medians_table(a.table))
        return 0
    from trainer.envs.bfcl.tasks import BfclNotInstalled, package_root

    try:
        package_root()
    except BfclNotInstalled as exc:
        print(f"benchmarks/bfcl.py: {exc}", file=sys.stderr)
        return 2
    if a.eval:
        _evaluate_and_print(a.eval, a.eval_episodes, task_ids)
        return 0
    from trainer.config import ConfigError
    from trainer.run_folder import clear_outputs, existing_outputs

    if (found := existing_outputs(a.out)) and not a.overwrite:
        names = ", ".join(str(p.relative_to(a.out)) for p in found[:3]) + (" ..." if len(found) > 3 else "")
        return _usage(f"{a.out} already holds a run ({names}): give --overwrite to replace it, or another --out")
    try:
        cfg = bfcl_config(task_ids, a.iterations)
        for method in a.methods.split(","):
            cfg.replace(method=method)
    except ConfigError as exc:
        return _usage(str(exc))
    if found:
        clear_outputs(a.out)
    overrides = {"env_args": bfcl_config(task_ids).env_args} if task_ids else {}
    if task_ids:
        from trainer import envs

        try:
            envs.make_env("bfcl", **overrides["env_args"])
        except ValueError as exc:
            return _usage(f"--tasks: {exc}")
    run("examples/bfcl.toml", a.methods.split(","), list(range(a.seeds)), a.out, a.jobs, a.iterations, **overrides)
    table = medians_table(a.out)
    print("\nsuccess = BFCL's checker pass rate; live groups = effective sample utilisation\n\n" + table)
    Path(a.out, "medians.md").write_text(table + "\n")
    _evaluate_and_print(a.out, a.eval_episodes, task_ids)
    return 0


def _usage(message: str) -> int:
    print(f"benchmarks/bfcl.py: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
