"""dialog (scripted user turns, trainer/envs/dialog.py), embedded tiny model: grpo, rlvp, rlvp_auto x seeds.

    python benchmarks/dialog.py --seeds 5 [--turns 3] [--iterations 80] [--jobs 2] [--out runs/bench_dialog]
    python benchmarks/dialog.py --table runs/bench_dialog        # only the medians table of a finished run

Runs `examples/dialog.toml` (``--turns 3``: the ``dialog3`` environment) through `--compare`, then
prints per method the median [min-max] over seeds of: episodes generated until the trailing
3-iteration success first reaches 30 % and 50 % (``k/n``: only k seeds did), the final success
(mean of the last 5 iterations), the share of live groups (groups with a non-zero advantage,
over all iterations), dead iterations, violations per episode (last 5 iterations), and how many
seeds *collapsed* (reached 50 % and ended below it); then per seed "episodes to 50 % / final".
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import run


def _fmt(values: list[float | None], digits: int = 2) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"never (0/{len(values)})"
    text = f"{statistics.median(got):.{digits}f} [{min(got):.{digits}f}-{max(got):.{digits}f}]"
    return text + (f" ({len(got)}/{len(values)})" if len(got) < len(values) else "")


def medians_table(folder: str | Path) -> str:
    """The medians table of a `--compare` folder (``METHOD/seedN/metrics.jsonl``), as Markdown."""
    from trainer.metrics import episodes_to_success, read_metrics, trailing_mean

    lines = [
        "| method | episodes to 30 % | episodes to 50 % | final success | live groups | dead iters | violations/ep "
        "| collapsed | per seed: episodes to 50 % / final |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mdir in sorted(p for p in Path(folder).iterdir() if p.is_dir() and list(p.glob("seed*/metrics.jsonl"))):
        runs = [read_metrics(p) for p in sorted(mdir.glob("seed*/metrics.jsonl"))]
        success = [[r["rollout/success_rate"] for r in rows] for rows in runs]
        e30 = [episodes_to_success(rows, 0.3, 3) for rows in runs]
        e50 = [episodes_to_success(rows, 0.5, 3) for rows in runs]
        final = [statistics.mean(s[-5:]) for s in success]
        live = [statistics.mean(1 - r["rollout/frac_dead_groups"] for r in rows) for rows in runs]
        dead = [float(sum(r["rollout/dead_iteration"] for r in rows)) for rows in runs]
        viol = [statistics.mean(r["process/violations_per_episode"] for r in rows[-5:]) for rows in runs]
        best = [max(trailing_mean(s, 3)[2:]) for s in success]
        collapsed = sum(1 for b, f in zip(best, final) if b >= 0.5 and f < 0.5)
        seeds = ", ".join(f"{int(e) if e is not None else 'never'} / {f:.2f}" for e, f in zip(e50, final))
        lines.append(
            f"| {mdir.name} | {_fmt(e30, 0)} | {_fmt(e50, 0)} | {_fmt(final)} | {_fmt(live)} | {_fmt(dead, 0)} "
            f"| {_fmt(viol)} | {collapsed}/{len(runs)} | {seeds} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--turns", type=int, default=2, choices=(2, 3))
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default="grpo,rlvp,rlvp_auto")
    ap.add_argument("--out", default="runs/bench_dialog")
    ap.add_argument("--table", metavar="FOLDER", help="print the medians table of a finished run and exit")
    a = ap.parse_args()
    if a.table:
        print(medians_table(a.table))
        raise SystemExit(0)
    env = {"env": f"dialog{a.turns}"}
    run("examples/dialog.toml", a.methods.split(","), list(range(a.seeds)), a.out, a.jobs, a.iterations, **env)
    table = medians_table(a.out)
    print("\n" + table)
    Path(a.out, "medians.md").write_text(table + "\n")
