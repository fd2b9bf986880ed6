"""gated (hidden precondition), embedded tiny model: grpo, dapo, rlvp x seeds.

    python benchmarks/gated.py --seeds 3 [--iterations 60] [--jobs 2] [--out runs/bench_gated]

The seed's honest limit: the precondition (`unlock` before stage 3) is revealed
neither by the error messages nor by the rules, so clean RLVP is expected to stay
at (or near) 0 success, like outcome-only GRPO and DAPO.
"""

import argparse

from _common import run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default="grpo,dapo,rlvp")
    ap.add_argument("--out", default="runs/bench_gated")
    a = ap.parse_args()
    run("examples/gated.toml", a.methods.split(","), list(range(a.seeds)), a.out, a.jobs, a.iterations)
