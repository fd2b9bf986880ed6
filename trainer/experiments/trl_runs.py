"""TRL runs on our environments: one of our training configs -> a TRL `GRPOTrainer` (stock
advantages) or `RlvpGRPOTrainer` (rlvp token credit) playing real episodes through
`trainer.experiments.trl_rollout.EnvRollout`.  Shared by ``examples/trl_grpo.py`` and
``benchmarks/trl_chain4.py``.

    from trainer.config import load_config
    from trainer.experiments.trl_runs import build_trl_run
    run = build_trl_run("rlvp", load_config("examples/chain4.toml"), steps=60, out_dir="runs/trl")
    run.trainer.train()
    run.summary()   # episodes to 50 %, dead groups, final success, s/step, rlvp's share of a step

What carries over from the config, and what cannot (TRL's own choices):

1. Batch: ``tasks_per_iteration`` groups of ``num_generations`` per optimiser step
   (``per_device_train_batch_size`` = their product, no accumulation); lr constant, AdamW,
   ``max_grad_norm``, ``epsilon``, ``beta``, ``scale_rewards``, temperature, seed.
2. ``loss_type`` ``token_mean`` / ``seq_mean`` / ``constant`` -> TRL's ``dapo`` / ``grpo`` /
   ``dr_grpo``.
3. ``constrained_logprobs`` -> `trainer.experiments.trl_rollout.ConstrainedLogprobsMixin` on both trainers.
4. LoRA: no adapter on ``lm_head`` (TRL's fused log-prob head reads ``lm_head.weight`` and
   refuses one); the final norm is trained instead (`tiny_policy`).
5. rlvp: the stock `RlvpReward` in token mode with ``process_weight`` and the method ``rlvp``
   annealing schedule (`process_schedule`); it reads the environment's signals and errors
   from the messages `EnvRollout` writes (`trainer.experiments.trl_rollout`), and each call's
   tags from the environment's manifest (`EnvTagsMixin`: messages carry none).
6. Unlike the compact trainer, TRL makes an optimiser step on a dead batch too.

Importing this module imports neither torch nor trl (`build_trl_run` imports both).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from trainer.envs.base import ToolEnv
from trainer.sampling.generation import GenConfig
from trainer.sampling.rollout import prompt_words
from trainer.experiments.trl_rollout import (
    CALL_MARKERS,
    ConstrainedLogprobsMixin,
    EnvRollout,
    EnvTagsMixin,
    outcome_reward,
)

#: The compact trainer's ``loss_type`` -> TRL's.
TRL_LOSS_TYPES = {"token_mean": "dapo", "seq_mean": "grpo", "constant": "dr_grpo"}
METHODS = ("grpo", "rlvp")


def tiny_policy(cfg: Any, env_factory: Callable[[], ToolEnv], markers: tuple[str, str] = CALL_MARKERS):
    """``(peft model, tokenizer)``: `trainer.model.build_policy`'s tiny model and LoRA adapter,
    with the call markers in the vocabulary.  The LoRA init is seeded with ``cfg.seed``.

    TRL computes log-probs from ``lm_head.weight`` directly (a fused head) and refuses an
    adapter there, so ``lm_head`` is dropped from the targets; the final norm is trained
    instead (peft ``modules_to_save``), which lets the logits outgrow the frozen random
    tied embeddings (docs/results.md, "LoRA only on attention could not learn").
    """
    import torch
    from peft import LoraConfig, get_peft_model

    from trainer.model import LoraSettings, TinyModelConfig, build_tiny_model
    from trainer.sampling.tokenizer import build_tiny_tokenizer

    if cfg.model != "tiny":
        raise ValueError(f"the TRL runs build the embedded tiny model; the config asks for model = {cfg.model!r}")
    words = prompt_words(env_factory(), ("plain", "json")) | set(markers)
    tokenizer = build_tiny_tokenizer(words)
    args = {"seed": int(cfg.seed), **dict(cfg.model_args or {})}
    model = build_tiny_model(tokenizer, TinyModelConfig(**args))
    targets = [m for m in (cfg.lora_target_modules or LoraSettings().target_modules) if m != "lm_head"]
    torch.manual_seed(cfg.seed)  # LoRA init, as trainer.backend does
    config = LoraConfig(
        r=int(cfg.lora_rank),
        lora_alpha=float(cfg.lora_alpha),
        lora_dropout=float(cfg.lora_dropout),
        target_modules=targets,
        modules_to_save=["norm"],
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config), tokenizer


def grpo_config(cfg: Any, *, steps: int, out_dir: str, **overrides: Any):
    """TRL's `GRPOConfig` for one of our `TrainConfig` s: the same batch (``tasks_per_iteration``
    groups of ``num_generations``, one optimiser step per batch), learning rate (constant),
    loss aggregation, reward scaling, clip range, beta, gradient clipping, temperature and seed.

    Raises:
        ValueError: a ``loss_type`` TRL has no counterpart for.
    """
    from trl import GRPOConfig

    if cfg.loss_type not in TRL_LOSS_TYPES:
        raise ValueError(f"'loss_type' {cfg.loss_type!r} has no TRL counterpart; use one of {sorted(TRL_LOSS_TYPES)}")
    args = dict(
        output_dir=out_dir,
        use_cpu=True,
        bf16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        gradient_checkpointing=False,
        seed=int(cfg.seed),
        max_steps=int(steps),
        per_device_train_batch_size=cfg.tasks_per_iteration * cfg.num_generations,
        num_generations=cfg.num_generations,
        gradient_accumulation_steps=1,
        num_iterations=cfg.updates_per_batch,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        loss_type=TRL_LOSS_TYPES[cfg.loss_type],
        scale_rewards=cfg.scale_rewards,
        epsilon=cfg.epsilon,
        beta=cfg.beta,
        temperature=cfg.temperature,
        max_completion_length=1024,
        dataloader_num_workers=0,
    )
    if cfg.epsilon_high is not None:
        args["epsilon_high"] = cfg.epsilon_high
    args.update(overrides)
    return GRPOConfig(**args)


def process_schedule(cfg: Any):
    """The process-weight schedule of the compact trainer's method ``rlvp`` for `cfg`."""
    from rlvp_dsl.advantages import ProcessWeightSchedule

    return ProcessWeightSchedule(
        cfg.process_weight,
        enabled=cfg.anneal,
        threshold=cfg.anneal_threshold,
        patience=cfg.anneal_patience,
        start=cfg.anneal_start,
        decay_iterations=cfg.anneal_iterations,
        floor=cfg.anneal_floor,
    )


@attrs.define
class TrlRun:
    """One TRL run on one of our environments: the trainer, its rollout_func and the step clock.

    Attributes:
        method: ``grpo`` (stock `GRPOTrainer`, outcome only) or ``rlvp`` (`RlvpGRPOTrainer`).
        trainer: the TRL trainer.
        rollout: its `EnvRollout`.
        reward: the `RlvpReward` (``rlvp`` only).
        step_s: wall seconds of each optimiser step (generation included).
        rlvp_s: seconds of each call into rlvp (scoring, span finding, attachment).
    """

    method: str
    trainer: Any
    rollout: EnvRollout
    reward: Any = None
    step_s: list = attrs.Factory(list)
    rlvp_s: list = attrs.Factory(list)

    def rows(self) -> list[dict[str, Any]]:
        """One row per step, in `trainer.metrics` shape: ``rollout/success_rate``,
        ``rollout/episodes_generated``, ``rollout/frac_dead_groups`` (stock: TRL's
        ``frac_reward_zero_std``; rlvp: ``1 - rlvp/live_groups``), ``rollout/dead_iteration``,
        ``process/violations_per_episode`` (the rule file's, counted by the rollout for both
        methods; rlvp's log when the rollout counts none, else 0), ``rlvp/unmatched_spans`` and
        ``perf/iteration_s``."""
        logs = {int(e["step"]): e for e in self.trainer.state.log_history if "step" in e and "loss" in e}
        rows = []
        for k, h in enumerate(self.rollout.history):
            log = logs.get(h["step"] + 1, {})
            dead = (
                (1.0 - log["rlvp/live_groups"]) if "rlvp/live_groups" in log else log.get("frac_reward_zero_std", 1.0)
            )
            rows.append(
                {
                    **h,
                    "iteration": h["step"],
                    "rollout/frac_dead_groups": float(dead),
                    "rollout/dead_iteration": int(dead >= 1.0),
                    "process/violations_per_episode": float(
                        h.get("process/violations_per_episode", log.get("rlvp/violations_per_episode", 0.0))
                    ),
                    "rlvp/unmatched_spans": float(log.get("rlvp/unmatched_spans", 0.0)),
                    "perf/iteration_s": self.step_s[k] if k < len(self.step_s) else 0.0,
                }
            )
        return rows

    def summary(self, threshold: float = 0.5, window: int = 3) -> dict[str, Any]:
        """`trainer.metrics.summarise_run` of `rows` (episodes to `threshold`, final success, ...)
        plus ``s_per_step``, ``rlvp_s_per_step``, ``rlvp_pct`` (rlvp's share of a step, %),
        ``unmatched_spans`` and ``span_mismatches`` (totals)."""
        from trainer.metrics import summarise_run

        rows = self.rows()
        out = summarise_run(rows, threshold, window)
        steps = max(1, len(self.step_s))
        out["s_per_step"] = sum(self.step_s) / steps
        out["rlvp_s_per_step"] = sum(self.rlvp_s) / steps
        out["rlvp_pct"] = 100.0 * sum(self.rlvp_s) / max(1e-9, sum(self.step_s))
        out["unmatched_spans"] = int(sum(r["rlvp/unmatched_spans"] for r in rows))
        out["span_mismatches"] = int(self.rollout.span_mismatches)
        return out


def trainer_classes(constrained: bool = True) -> tuple[type, type]:
    """``(grpo class, rlvp class)``: TRL's `GRPOTrainer` and `RlvpGRPOTrainer`, each with
    `ConstrainedLogprobsMixin` when `constrained` (the config's ``constrained_logprobs``)."""
    from trl import GRPOTrainer

    from rlvp_dsl.integrations.trl import RlvpGRPOTrainer

    if not constrained:
        return GRPOTrainer, RlvpGRPOTrainer
    return (
        type("ConstrainedGRPOTrainer", (ConstrainedLogprobsMixin, GRPOTrainer), {}),
        type("ConstrainedRlvpGRPOTrainer", (ConstrainedLogprobsMixin, RlvpGRPOTrainer), {}),
    )


def build_trl_run(
    method: str, cfg: Any, *, steps: int, out_dir: str, rules: str | None = None, threads: int | None = None
) -> TrlRun:
    """A TRL run of `cfg` (`trainer.config.TrainConfig`): the tiny policy with its LoRA adapter,
    `EnvRollout` on ``cfg.env`` with tasks drawn from ``cfg.seed``, and TRL's `GRPOTrainer`
    (``grpo``: reward = outcome) or `RlvpGRPOTrainer` (``rlvp``: outcome +
    `RlvpReward(rules, mode="token")`, default ``cfg.rules``, the schedule of
    `process_schedule`), with `ConstrainedLogprobsMixin` when ``cfg.constrained_logprobs``.
    The rollout counts the rule file's violations for both methods (`TrlRun.rows`).  Seconds spent inside rlvp (`RlvpReward.__call__`, `RlvpGRPOTrainer.rlvp_advantages`)
    are recorded in `TrlRun.rlvp_s`.

    Raises:
        ValueError: an unknown method, environment or loss type; ``gen_args.think_token_ids`` past
            the model's vocabulary.
        RuleError: the rule file has errors.
    """
    import torch
    from transformers.trainer_callback import PrinterCallback

    from rlvp_dsl.integrations.trl import RlvpReward
    from rlvp_dsl.pipeline import load_program
    from trainer import envs
    from trainer.config_args import token_ids_problem

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    torch.set_num_threads(int(threads or cfg.threads))
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    model, tokenizer = tiny_policy(cfg, factory)
    if (problem := token_ids_problem(cfg.gen_args, model.get_output_embeddings().weight.shape[0])) is not None:
        raise ValueError(f"config: {problem.detail}")
    tasks = envs.make_tasks(steps * cfg.tasks_per_iteration, cfg.seed, prefix=f"{cfg.env}-")
    gen_cfg = GenConfig(
        temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, max_turns=cfg.max_turns, **cfg.gen_args
    )
    program = load_program(rules or cfg.rules)  # RuleError before the model is built
    rollout = EnvRollout(factory, tasks, gen_cfg, seed=cfg.seed, program=program)
    common = dict(
        model=model,
        args=grpo_config(cfg, steps=steps, out_dir=out_dir),
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    grpo_cls, rlvp_cls = trainer_classes(cfg.constrained_logprobs)
    rlvp_s: list[float] = []
    reward = None
    if method == "grpo":
        trainer = grpo_cls(reward_funcs=[outcome_reward], **common)
    else:

        class TimedRlvpReward(EnvTagsMixin, RlvpReward):
            def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
                t0 = time.perf_counter()
                try:
                    return super().__call__(*args, **kwargs)
                finally:
                    rlvp_s.append(time.perf_counter() - t0)

        reward = TimedRlvpReward(
            program,
            mode="token",
            process_weight=cfg.process_weight,
            call_markers=CALL_MARKERS,
            tool_tags=rollout.tool_tags,
        )
        trainer = rlvp_cls(reward_funcs=[outcome_reward, reward], process_schedule=process_schedule(cfg), **common)
        advantages = trainer.rlvp_advantages

        def timed_advantages(out: dict[str, Any]):
            t0 = time.perf_counter()
            try:
                return advantages(out)
            finally:
                rlvp_s.append(time.perf_counter() - t0)

        trainer.rlvp_advantages = timed_advantages
    trainer.remove_callback(PrinterCallback)  # no dict of metrics printed per step
    run = TrlRun(method, trainer, rollout, reward, rlvp_s=rlvp_s)
    trainer.add_callback(_step_clock(run.step_s))
    return run


def load_checked(config: str, rules: str | None, root: Path, **overrides: Any) -> tuple[Any, int]:
    """The run config at `config` (relative paths also tried from `root`), its environment built
    once and its rule file compiled once, so a mistake is one ``error:`` line before any training
    (in the benchmark's worker processes it would be a traceback).

    Returns:
        (the `TrainConfig`, 0), or (None, exit code): 1 for a bad config, environment knob or rule
        file, 2 for a rule file that does not exist or a package the environment needs that is not
        installed (``env = "bfcl"`` without bfcl-eval: the line says how to install it).
    """
    from rlvp_dsl.diagnostics import RuleError
    from rlvp_dsl.pipeline import load_program
    from trainer import envs
    from trainer.config import ConfigError, load_config

    path = Path(config)
    if not path.is_absolute() and not path.exists() and (root / path).exists():
        path = root / path
    try:
        cfg = load_config(path, **overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 1
    try:
        envs.make_env(cfg.env, **dict(cfg.env_args))  # bfcl: its subset is cached for the run in this process
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 1
    if rules and not Path(rules).exists():
        print(f"error: rule file {rules!r} does not exist", file=sys.stderr)
        return None, 2
    try:
        load_program(rules or cfg.rules)  # rule errors now, not after the first run
    except RuleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 1
    return cfg, 0


def quiet_libraries() -> None:
    """Silence what TRL, transformers and peft print on every run of these scripts (the
    ``rollout_func`` experimental notice, deprecation warnings, the tied-embedding note)."""
    import os
    import warnings

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*tie_word_embeddings.*")
    import transformers

    transformers.logging.set_verbosity_error()


def train_and_summarise(
    method: str, cfg: Any, steps: int, out_dir: str, rules: str | None = None, threads: int | None = None
) -> dict[str, Any]:
    """Build (`build_trl_run`), train, and return ``{"method", "seed", "summary", "success"}``
    (`TrlRun.summary`, the success rate per step).  TRL's stdout is swallowed.  Picklable:
    the benchmark runs it in worker processes."""
    import contextlib
    import io

    quiet_libraries()
    run = build_trl_run(method, cfg, steps=steps, out_dir=out_dir, rules=rules, threads=threads)
    with contextlib.redirect_stdout(io.StringIO()):
        run.trainer.train()
    return {
        "method": method,
        "seed": cfg.seed,
        "summary": run.summary(cfg.success_threshold, cfg.success_window),
        "success": [r["rollout/success_rate"] for r in run.rows()],
    }


def _step_clock(out: list):
    """A `transformers.TrainerCallback` appending each optimiser step's wall time to `out`."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        t = 0.0

        def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            out.append(now - self.t)
            self.t = now

    return StepClock()
