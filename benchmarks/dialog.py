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
from pathlib import Path

from _common import collapsed, median_range, run, seed_stats


def medians_table(folder: str | Path) -> str:
    """The medians table of a `--compare` folder (``METHOD/seedN/metrics.jsonl``), as Markdown."""
    lines = [
        "| method | episodes to 30 % | episodes to 50 % | final success | live groups | dead iters | violations/ep "
        "| collapsed | per seed: episodes to 50 % / final |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for method, st in seed_stats(folder).items():
        n = len(st["final"])
        seeds = ", ".join(f"{int(e) if e is not None else 'never'} / {f:.2f}" for e, f in zip(st["e50"], st["final"]))
        lines.append(
            f"| {method} | {median_range(st['e30'], 0)} | {median_range(st['e50'], 0)} | {median_range(st['final'])} "
            f"| {median_range(st['live'])} | {median_range(st['dead'], 0)} | {median_range(st['viol'])} "
            f"| {collapsed(st)}/{n} | {seeds} |"
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
