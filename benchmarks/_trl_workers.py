"""The three runs `benchmarks/trainer_vs_trl.py` compares, one per worker process.

Each ``run_*`` trains chain-4 from ``examples/chain4.toml`` (seed, steps overridden) and returns,
per optimiser step: ``step_s`` (wall seconds), ``gen_s`` (sampling the episodes, tools
included), ``action_tokens`` (tokens the policy generated: completion mask / TRL's tool mask
1), ``seq_tokens`` (every token of the step's sequences: prompt, actions, tool output,
template), ``success`` (share of the step's episodes that solved the task); and
``peak_rss_gib`` (``ru_maxrss`` of the process).  With ``stop_at`` the run ends after the
first step whose trailing mean success over 3 steps reaches it.
"""

from __future__ import annotations

import contextlib
import io
import resource
import tempfile
import time
from typing import Any

CONFIG = "examples/chain4.toml"
WINDOW = 3


class _Stop(Exception):
    pass


def _reached(success: list[float], stop_at: float | None) -> bool:
    return stop_at is not None and len(success) >= WINDOW and sum(success[-WINDOW:]) / WINDOW >= stop_at


def _result(rec: dict[str, list], episodes_per_step: int) -> dict[str, Any]:
    return {**rec, "episodes_per_step": episodes_per_step, "peak_rss_gib": _peak_rss_gib()}


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _config(seed: int, steps: int, threads: int):
    from trainer.config import load_config

    return load_config(
        CONFIG,
        seed=seed,
        iterations=steps,
        threads=threads,
        out_dir=tempfile.mkdtemp(prefix="bench-"),
        checkpoint_every=0,
    )


def _empty() -> dict[str, list]:
    return {k: [] for k in ("step_s", "gen_s", "action_tokens", "seq_tokens", "success")}


def run_compact(seed: int, steps: int, threads: int = 1, stop_at: float | None = None) -> dict[str, Any]:
    """(a) the compact trainer (`trainer.loop.train` on the config's backend)."""
    import torch

    from trainer import loop
    from trainer.backend import build_backend

    cfg = _config(seed, steps, threads)
    torch.set_num_threads(threads)
    be = build_backend(cfg)
    rec = _empty()
    collect = be.collect_groups
    t_step = [time.perf_counter()]

    def timed_collect(tasks, n, seeds):
        t0 = time.perf_counter()
        groups = collect(tasks, n, seeds)
        rec["gen_s"].append(time.perf_counter() - t0)
        return groups

    def on_batch(it, groups, credits, weight):
        eps = [r for g in groups for r in g]
        rec["action_tokens"].append(sum(sum(r.completion_mask) for r in eps))
        rec["seq_tokens"].append(sum(len(r.prompt_ids) + len(r.completion_ids) for r in eps))

    def on_row(row):
        now = time.perf_counter()
        rec["step_s"].append(now - t_step[0])
        t_step[0] = now
        rec["success"].append(float(row["rollout/success_rate"]))
        if _reached(rec["success"], stop_at):
            raise _Stop

    if collect is None:
        raise SystemExit("bench: the compact backend has no batched collect_groups")
    be.collect_groups = timed_collect
    real_log = loop._iteration

    def iteration(run, it, say, cb):
        row = real_log(run, it, say, cb)
        on_row(row)
        return row

    loop._iteration = iteration
    try:
        t_step[0] = time.perf_counter()
        loop.train(cfg, backend=be, progress=False, log=lambda s: None, on_batch=on_batch)
    except _Stop:
        pass
    finally:
        loop._iteration = real_log
    return _result(rec, cfg.tasks_per_iteration * cfg.num_generations)


def _trl_clock(trainer: Any, rec: dict[str, list], stop_at: float | None, outcomes) -> None:
    """Time TRL's `_generate` and each optimiser step; count tokens and success per step."""
    from transformers import TrainerCallback

    generate = trainer._generate

    def timed_generate(prompts):
        t0 = time.perf_counter()
        out = generate(prompts)
        rec["gen_s"].append(time.perf_counter() - t0)
        prompt_ids, completion_ids, tool_mask = out[0], out[1], out[2]
        mask = tool_mask if tool_mask is not None else [[1] * len(c) for c in completion_ids]
        rec["action_tokens"].append(sum(sum(m) for m in mask))
        rec["seq_tokens"].append(sum(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids)))
        rec["success"].append(outcomes(out))
        return out

    trainer._generate = timed_generate

    class Clock(TrainerCallback):
        t = 0.0

        def on_train_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            rec["step_s"].append(now - self.t)
            self.t = now
            if _reached(rec["success"], stop_at):
                control.should_training_stop = True

    trainer.add_callback(Clock())


def run_rollout_func(seed: int, steps: int, threads: int = 1, stop_at: float | None = None) -> dict[str, Any]:
    """(b) TRL's `RlvpGRPOTrainer` with our ``rollout_func`` (`trl_runs.build_trl_run`)."""
    from trainer.experiments.trl_runs import build_trl_run, quiet_libraries

    quiet_libraries()
    cfg = _config(seed, steps, threads)
    run = build_trl_run("rlvp", cfg, steps=steps, out_dir=cfg.out_dir, threads=threads)
    rec = _empty()
    _trl_clock(run.trainer, rec, stop_at, lambda out: run.rollout.history[-1]["rollout/success_rate"])
    with contextlib.redirect_stdout(io.StringIO()):
        run.trainer.train()
    return _result(rec, cfg.tasks_per_iteration * cfg.num_generations)


def run_env_factory(seed: int, steps: int, threads: int = 1, stop_at: float | None = None) -> dict[str, Any]:
    """(c) TRL's ``environment_factory`` loop (`trl_env_factory.build_env_factory_trainer`)."""
    from trainer.experiments.trl_env_factory import build_env_factory_trainer
    from trainer.experiments.trl_runs import quiet_libraries

    quiet_libraries()
    cfg = _config(seed, steps, threads)
    trainer, _ = build_env_factory_trainer(cfg, steps=steps, out_dir=cfg.out_dir, threads=threads)
    rec = _empty()

    def outcomes(out):
        envs = trainer.environments or []
        return sum(e.get_reward() for e in envs) / max(1, len(envs))

    _trl_clock(trainer, rec, stop_at, outcomes)
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return _result(rec, cfg.tasks_per_iteration * cfg.num_generations)


RUNS = {"compact": run_compact, "trl_rollout_func": run_rollout_func, "trl_env_factory": run_env_factory}
