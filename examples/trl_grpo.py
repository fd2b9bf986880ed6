"""TRL's GRPOTrainer vs RlvpGRPOTrainer on chain-4: real multi-turn episodes, embedded tiny model, CPU.

    python examples/trl_grpo.py                  # 60 steps each (examples/chain4.toml), a few minutes on CPU
    python examples/trl_grpo.py --quick          # 10 steps each: checks the setup in under a minute
    python examples/trl_grpo.py --steps 80 --seed 1 --config examples/chain4_calibrated.toml

Both runs are TRL's `GRPOTrainer` in ``rollout_func`` mode with the same model (the embedded
tiny Llama with a LoRA adapter), seed, tasks and batch (4 tasks x 8 episodes per step).  The
rollout function (`trainer.experiments.trl_rollout.EnvRollout`) plays every episode with the model being
trained: each turn is sampled under the call mask, the environment answers, the tool output
goes in with ``env_mask`` 0, and each call is written ``<tool_call> fetch k0 </tool_call>``.

* stock:  ``GRPOTrainer(reward_funcs=[outcome_reward])`` -- the chain's 0/1 outcome only;
* rlvp:   ``RlvpGRPOTrainer(reward_funcs=[outcome_reward, RlvpReward(rules, mode="token",
  call_markers=CALL_MARKERS)])`` -- each call's rule credit on exactly that call's tokens
  (rules: the config's ``rules``).  The stock reward reads the environment's signals
  (``stages_remaining``) from the messages and a failed call from ``"error": true`` on its
  tool message, both written by the rollout.

Both use `trainer.experiments.trl_rollout.ConstrainedLogprobsMixin` (log-probs renormalised over the call
mask, the config's ``constrained_logprobs``, as the compact trainer does).  Printed: dead groups
(stock: TRL's ``frac_reward_zero_std``; rlvp: ``1 - rlvp/live_groups``), success over the last
5 steps, episodes generated until the trailing success first reached 50 %, episodes generated,
seconds per step, and the success of every step.  Exit codes: 0 ok, 1 a config or rule file
with errors, 2 usage error or missing TRL.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlvp_dsl.cli import whole_number  # noqa: E402

LABELS = {"grpo": "GRPOTrainer (outcome only)", "rlvp": "RlvpGRPOTrainer (token credit)"}
QUICK_STEPS = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python examples/trl_grpo.py", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--steps", type=whole_number(1), help="optimiser steps per trainer (default: the config's iterations)"
    )
    ap.add_argument(
        "--seed", type=whole_number(0), default=0, help="seed of the model, the tasks and the sampling (default 0)"
    )
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps each (unless --steps is given)")
    ap.add_argument("--config", default="examples/chain4.toml", help="training config (default examples/chain4.toml)")
    ap.add_argument("--rules", help="rule file for rlvp (default: the config's rules)")
    ap.add_argument("--out", default="runs/trl_grpo", help="TRL's output_dir (nothing is saved there by default)")
    return ap.parse_args(argv)


def fmt_episodes(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f}"


def table(summaries: dict[str, dict], threshold: float) -> str:
    pct = int(round(threshold * 100))
    last = min(5, *(s["iterations"] for s in summaries.values()))  # `summarise_run`'s final_k, or fewer steps
    steps = "the last step" if last == 1 else f"last {last} steps"
    lines = [
        f"| trainer | dead groups | success ({steps}) | episodes to {pct} % | episodes generated | s/step |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for method, s in summaries.items():
        lines.append(
            f"| {LABELS[method]} | {100 * s['frac_dead_groups']:.0f} % | {s['final_success']:.2f} | "
            f"{fmt_episodes(s['episodes_to_threshold'])} | {s['episodes_generated']} | {s['s_per_step']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import trl  # noqa: F401
    except ImportError:
        print("error: this example needs TRL: pip install -e '.[trl]'", file=sys.stderr)
        return 2
    from rlvp_dsl.diagnostics import RuleError
    from trainer.experiments.trl_runs import build_trl_run, load_checked, quiet_libraries

    quiet_libraries()

    cfg, code = load_checked(args.config, args.rules, ROOT, seed=args.seed)
    if cfg is None:
        return code
    steps = args.steps or (QUICK_STEPS if args.quick else cfg.iterations)
    batch = f"{cfg.tasks_per_iteration} tasks x {cfg.num_generations} episodes"
    print(
        f"{cfg.env} ({args.config}, env_args {cfg.env_args}), embedded tiny model + LoRA, {batch} per step, "
        f"{steps} steps, seed {args.seed}; rlvp rules: {args.rules or cfg.rules}",
        flush=True,
    )
    summaries, runs = {}, {}
    t_all = time.perf_counter()
    for method in ("grpo", "rlvp"):
        t0 = time.perf_counter()
        try:
            run = build_trl_run(method, cfg, steps=steps, out_dir=str(Path(args.out) / method), rules=args.rules)
        except (ValueError, RuleError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"  {LABELS[method]}: training ...", end="", flush=True)
        with contextlib.redirect_stdout(io.StringIO()):  # TRL's own progress lines
            run.trainer.train()
        summaries[method] = run.summary(cfg.success_threshold, cfg.success_window)
        runs[method] = run
        print(f" {steps} steps, {time.perf_counter() - t0:.0f} s", flush=True)
    print()
    print(table(summaries, cfg.success_threshold))
    print()
    for method, run in runs.items():
        curve = " ".join(f"{r['rollout/success_rate']:.2f}" for r in run.rows())
        print(f"success per step, {method}: {curve}")
    r = summaries["rlvp"]
    print(
        f"\nrlvp: unmatched call spans {r['unmatched_spans']}, rows whose marker spans differ from the rollout's "
        f"call spans {r['span_mismatches']}; time inside rlvp {1000 * r['rlvp_s_per_step']:.1f} ms per step "
        f"({r['rlvp_pct']:.2f} % of a step)"
    )
    print(f"wall time: {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
