"""chain-4, embedded tiny model: all six methods x seeds, plus the paired dead-update count.

    python benchmarks/chain4.py --seeds 3 [--iterations 60] [--jobs 2] [--out runs/bench_chain4]
    python benchmarks/chain4.py --config examples/chain4_calibrated.toml --methods grpo,rlvp,rlvp_noanneal

Prints the summary table (episodes to 50 % success, dead iterations, final success,
violations/episode, episodes generated) and the paired table (identical batches
from a grpo policy: % dead updates under grpo and under rlvp).  Long: about
20-40 minutes on 2 cores for 3 seeds; not part of the test suite.
"""

import argparse

from _common import run

METHODS = ["grpo", "dapo", "scalar_fold", "rlvp", "rlvp_auto", "rlvp_noanneal"]

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", default="runs/bench_chain4")
    ap.add_argument("--config", default="examples/chain4.toml")
    a = ap.parse_args()
    run(a.config, a.methods.split(","), list(range(a.seeds)), a.out, a.jobs, a.iterations, paired=True)
