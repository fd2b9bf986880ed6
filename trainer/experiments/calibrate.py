"""Calibrate an environment: how often does an untrained policy succeed?

    python -m trainer.experiments.calibrate --env chain4 --groups 50 --model tiny
    python -m trainer.experiments.calibrate --env gated --groups 50 --model smollm2

Plays `groups` groups of `num_generations` episodes (one task per group) with the
untrained policy under the call mask and prints, as Markdown: the success rate
(with a Wilson 95 % interval), the fraction of all-fail groups, calls per episode,
and the success rate of a uniform random valid-call policy on the same tasks
(simulated directly, 20x as many episodes).  The target (docs/calibration.md) is
a few percent success, so that most groups of 8 are all-fail.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time

from trainer.envs.base import all_calls


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def uniform_policy_success(env_factory, tasks, episodes_per_task: int, seed: int = 0) -> float:
    """Success rate of a policy that picks a valid call uniformly at random each turn."""
    rng = random.Random(seed)
    wins = total = 0
    for task in tasks:
        for _ in range(episodes_per_task):
            env = env_factory()
            env.reset(task)
            calls = [c for spec in env.schema() for c in all_calls(spec)]
            for _turn in range(env.max_turns):
                if env.step(rng.choice(calls)).done:
                    break
            wins += env.outcome() > 0
            total += 1
    return wins / max(1, total)


def calibrate(
    env: str,
    knobs: dict,
    model: str = "tiny",
    groups: int = 50,
    num_generations: int = 8,
    seed: int = 0,
    temperature: float = 1.0,
) -> dict:
    """Run the untrained `model` on `groups` tasks of `env`; returns the numbers as a dict.

    Raises:
        ValueError: ``groups`` or ``num_generations`` below 1 (nothing to measure), an unknown
            environment or knob.
    """
    import torch

    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"'groups' must be >= 1 (got {groups!r})")

    from trainer import envs
    from trainer.sampling.generation import GenConfig
    from trainer.model import TinyModelConfig, load_policy
    from trainer.sampling.rollout import collect_group, prompt_words

    factory = envs.env_factory(env, **knobs)
    policy, tokenizer = load_policy(model, prompt_words(factory(), ("plain", "json")), TinyModelConfig(seed=seed))
    tasks = envs.make_tasks(groups, seed=seed, prefix=f"{env}-")
    cfg = GenConfig(temperature=temperature)
    start = time.time()
    outcomes, calls, dead = [], [], 0
    for k, task in enumerate(tasks):
        group = collect_group(policy, tokenizer, factory, task, num_generations, cfg, seed=seed * 100_003 + k)
        results = [r.outcome for r in group]
        outcomes += results
        calls += [len(r.call_spans) for r in group]
        dead += len(set(results)) == 1
    elapsed = time.time() - start
    wins = int(sum(outcomes))
    low, high = wilson(wins, len(outcomes))
    return {
        "env": env,
        "knobs": knobs,
        "model": model,
        "seed": seed,
        "temperature": temperature,
        "episodes": len(outcomes),
        "success": wins / len(outcomes),
        "success_ci95": [low, high],
        "all_fail_groups": sum(
            1 for i in range(0, len(outcomes), num_generations) if not any(outcomes[i : i + num_generations])
        )
        / groups,
        "dead_groups": dead / groups,
        "calls_per_episode": sum(calls) / len(calls),
        "uniform_policy_success": uniform_policy_success(factory, tasks, 20 * num_generations, seed),
        "seconds": round(elapsed, 1),
        "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="chain4")
    parser.add_argument("--model", default="tiny", help="tiny | smollm2 | a local checkpoint path")
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="environment knob, e.g. --knob num_distractors=1 (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    knobs = {}
    for item in args.knob:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--knob expects NAME=VALUE (got {item!r})")
        try:
            knobs[name] = json.loads(value)
        except json.JSONDecodeError:
            parser.error(f"--knob {name}: value {value!r} is not JSON (use true/false, numbers)")
    import torch

    torch.set_num_threads(1)
    try:
        result = calibrate(args.env, knobs, args.model, args.groups, args.num_generations, args.seed, args.temperature)
    except (ValueError, ImportError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
        return 0
    low, high = result["success_ci95"]
    print("| env | model | episodes | success (95% CI) | all-fail groups | calls/ep | uniform random | s |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.env} {knobs or ''} | {args.model} | {result['episodes']} | {result['success']:.3f} "
        f"({low:.3f}-{high:.3f}) | {result['all_fail_groups']:.2f} | {result['calls_per_episode']:.1f} | "
        f"{result['uniform_policy_success']:.3f} | {result['seconds']} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
