"""The GRPO loop with token-attached rlvp credit -- one readable function, `train`.

Per iteration: sample tasks -> G rollouts per task -> score the episodes (each
once) with the compiled rules -> advantages (outcome + process) -> clipped
policy-gradient update of the LoRA adapter -> metrics.

Where this departs from GRPO as published (Shao et al. 2024, DeepSeekMath):

1. Process credit: per-call credits from compiled rules are added to the
   advantage of exactly the tokens that produced each call (``rlvp``), or summed
   into the reward before the group normalisation (``scalar_fold``).  The process
   weight is annealed to zero once compliance saturates (rlvp_dsl/advantages/schedule.py).
2. A group whose rewards are all equal gets advantage exactly 0, detected on the
   raw rewards with a relative tolerance, not through a small std.
3. Multi-turn episodes: tool-output tokens are part of the sequence but masked
   out of the loss (``completion_mask``).
4. ``beta = 0`` by default (no reference model, as in DAPO / Dr. GRPO); when
   ``beta > 0`` the reference is the base model with the LoRA adapter disabled,
   and the k3 KL continues linearly past ``kl_clip`` so it stays finite.
5. One optimiser pass per batch by default (``updates_per_batch = 1``), so the
   "old" log-probs are the current ones detached (ratio 1) -- on-policy.  With more
   passes they are recomputed once before the first, under the call mask and
   temperature the sampler used (`Rollout.allowed_ids`); sampled log-probs are not kept.
6. Loss aggregation is selectable (``loss_type``), token-mean by default.
7. An iteration whose advantages are all zero (dead) makes no optimiser step
   when ``beta = 0``: Adam's momentum would otherwise move the weights with no
   gradient, and "no gradient" would not mean "no update".
8. ``dapo`` resamples zero-variance groups (capped), and every generated episode
   counts in ``rollout/episodes_generated``; success rate is measured on each
   iteration's first round, the same unbiased sample for every method.  Each
   episode of the first round and of the batch is scored by the rules once.

Bad values never stop a run and never spread: a credit source (compiled rules or
``fn(episode) -> list[float]``) that gives None, NaN or infinity for a call gives
that call no credit (`rlvp_dsl.attach`, one warning per source and rule), as does
a call whose credits sum past a float, or an episode whose weighted credit is no
float32 advantage (`rlvp_dsl.advantages`); the loop counts them in
``process/flagged_credits``.  Nothing else non-finite can come in
silently: a non-finite outcome, a non-finite loss or gradient norm (from the model)
raises a ValueError naming what and where, before any optimiser step.

Beside it, one job each: `trainer.backend` (model, rollout collection, rule scorer),
`trainer.batch` (padded batch tensors), `trainer.logprobs` (completion log-probs),
`trainer.loss`, `trainer.methods` (the methods, dynamic sampling), `trainer.metrics`,
`trainer.checkpoint`; the credit maths in `rlvp_dsl.advantages`.
"""

from __future__ import annotations

import functools
import math
import random
import sys
import time
from pathlib import Path
from typing import Callable

import torch

from rlvp_dsl.attach import CallCredits, score_calls
from trainer import checkpoint as ckpt
from trainer import token_page
from rlvp_dsl.advantages import ProcessWeightSchedule, compute_advantages
from trainer.backend import Backend, build_backend
from trainer.batch import device_of, micro_batches, pad_batch
from trainer.config import TrainConfig
from trainer.logprobs import completion_logprobs
from trainer.loss import action_len, normaliser, policy_loss
from trainer.methods import SamplingResult, dynamic_sampling, get_method
from trainer.metrics import GridClock, MetricsLogger, Progress
from trainer.types import Rollout


def _sample_round(be: Backend, cfg: TrainConfig, it: int, rounds: list, rnd: int, n: int) -> list[list[Rollout]]:
    """Round ``rnd`` of iteration ``it``: ``n`` new tasks, one group of ``num_generations``
    rollouts each, seeded from (seed, it, rnd, group); the groups are also appended to ``rounds``."""
    tasks = be.make_tasks(n, _seed_of(cfg.seed, it, rnd, 17))
    seeds = [_seed_of(cfg.seed, it, rnd, j) for j in range(len(tasks))]
    if be.collect_groups is not None:  # all groups in one batch (the same rollouts as one at a time)
        groups = be.collect_groups(tasks, cfg.num_generations, seeds)
    else:
        groups = [be.collect(task, cfg.num_generations, s) for task, s in zip(tasks, seeds, strict=True)]
    rounds.append(groups)
    return groups


def _seed_of(*parts: int) -> int:
    """A deterministic seed from (seed, iteration, round, group): rollouts replay exactly on resume."""
    h = 0
    for p in parts:
        h = (h * 1_000_003 + int(p)) % (2**31 - 1)
    return h


# ----------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------
def train(
    cfg: TrainConfig,
    *,
    backend: Backend | None = None,
    resume: bool = False,
    progress: bool | str | None = None,
    log: Callable[[str], None] | None = None,
    on_batch: Callable[[int, list, list, float], None] | None = None,
    clock: GridClock | None = None,
) -> list[dict]:
    """Train ``cfg.iterations`` iterations; returns the metric rows of this call (the whole run,
    resumed parts included, is in ``out_dir/metrics.jsonl``: `trainer.metrics.read_metrics`).

    Args:
        cfg: the run's config.
        backend: model/rollout/scoring (default: `build_backend(cfg)`).
        resume: continue from ``out_dir/checkpoint.pt`` (same config) up to ``cfg.iterations``.
        progress: ``"bar"`` (or True) a tqdm bar; ``"lines"`` a progress line to ``log`` every
            ``cfg.log_every`` iterations and at least one a minute; False none; None (default):
            the bar when stderr is a TTY, else the lines.
        log: where one-line messages go (default: stderr).
        on_batch: called as ``on_batch(iteration, groups, credits, weight)`` with the
            batch about to be trained on (the paired mode uses it).
        clock: the ``--compare`` grid's clock (its ETA goes on each progress line).

    Raises:
        trainer.checkpoint.Interrupted: on Ctrl-C, after writing the checkpoint of the last
            finished iteration (it is a KeyboardInterrupt).
        trainer.checkpoint.CheckpointMismatch: ``resume`` with a config that changes the run.
    """
    run: dict = {}  # the state after the last finished iteration ("saved"), and what to close
    try:
        return _train(cfg, backend, resume, progress, log, on_batch, clock, run)
    except KeyboardInterrupt:
        for close in run.get("close", []):
            close()
        if "saved" not in run:  # interrupted while setting up: nothing trained yet
            raise
        saved, path = run["saved"], Path(cfg.out_dir) / ckpt.FILENAME
        if run["dirty"] or not path.is_file():
            path = ckpt.write(cfg.out_dir, saved)
        raise ckpt.Interrupted(path, int(saved["counters"]["iteration"]), cfg.out_dir) from None


def _train(
    cfg: TrainConfig,
    backend: Backend | None,
    resume: bool,
    progress: bool | str | None,
    log: Callable[[str], None] | None,
    on_batch: Callable[[int, list, list, float], None] | None,
    clock: GridClock | None,
    run: dict,
) -> list[dict]:
    say = log or (lambda s: print(s, file=sys.stderr))
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    method = get_method(cfg.method)
    be = backend or build_backend(cfg)
    model = be.model
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters (is the LoRA adapter attached?)")
    optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    schedule = ProcessWeightSchedule(
        cfg.process_weight,
        enabled=cfg.anneal and method.anneal,
        threshold=cfg.anneal_threshold,
        patience=cfg.anneal_patience,
        start=cfg.anneal_start,
        decay_iterations=cfg.anneal_iterations,
    )
    start_it, episodes_generated = 0, 0
    if resume:
        state = ckpt.load_checkpoint(cfg.out_dir)
        ckpt.check_resumable(state["config"], cfg.to_dict(), f"{cfg.out_dir}/{ckpt.FILENAME}")
        ckpt.restore_model(model, state["trainable"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        start_it = int(state["counters"]["iteration"])
        episodes_generated = int(state["counters"]["episodes_generated"])
        ckpt.set_rng_state(state["rng"])
    logger = MetricsLogger(cfg.out_dir, tensorboard=cfg.tensorboard, append=resume, keep_below=start_it)
    if logger.note:
        say(logger.note)
    if progress is None:
        progress = "bar" if sys.stderr.isatty() else "lines"
    bar = Progress(
        cfg.iterations,
        start_it,
        f"{cfg.method} seed {cfg.seed}",
        bar=progress in (True, "bar"),
        say=say if progress else None,
        every=cfg.log_every,
        clock=clock,
    )
    run["close"] = [bar.close, logger.close]

    def snapshot(done: int) -> dict:  # the state after `done` finished iterations: what Ctrl-C writes
        return ckpt.capture(
            model=model,
            optimizer=optimizer,
            schedule_state=schedule.state_dict(),
            counters={"iteration": done, "episodes_generated": episodes_generated},
            config=cfg.to_dict(),
        )

    run["saved"], run["dirty"] = snapshot(start_it), False
    rows: list[dict] = []
    warned_amplified = False  # scalar_fold's amplified groups: said once per run
    B_groups = cfg.tasks_per_iteration

    for it in range(start_it, cfg.iterations):
        t0 = time.perf_counter()
        # --- rollout ---
        model.eval()
        rounds: list[list[list[Rollout]]] = []  # [round][group][G]: every group generated this iteration
        generate = functools.partial(_sample_round, be, cfg, it, rounds)  # generate(round, n) -> n groups
        with torch.no_grad():
            if method.dynamic_sampling:
                sampled = dynamic_sampling(generate, B_groups, cfg.dapo_max_rounds)
            else:
                groups = generate(0, B_groups)
                sampled = SamplingResult(groups, 1, sum(len(g) for g in groups), 0)
        if sampled.message:
            say(f"iteration {it}: {sampled.message}")
        episodes_generated += sampled.episodes_generated
        first_round, groups = rounds[0], sampled.groups  # [n_groups][G]
        gen_tokens = sum(sum(r.completion_mask) for round_groups in rounds for g in round_groups for r in g)
        t_roll = time.perf_counter() - t0

        # --- process credit (scored for every method: metrics; used by scalar_fold / rlvp) ---
        # each episode once: the first round (metrics) and the batch (dapo: its kept groups) overlap
        to_score = {id(g): g for g in first_round + groups}
        credits_of = {key: [score_calls(be.scorer, r.episode) for r in g] for key, g in to_score.items()}
        # values the source gave as None/NaN/inf (their calls got no credit; logged once per rule)
        flagged = sum(len(c.flagged) for cs in credits_of.values() for c in cs)
        first_credits = [credits_of[id(g)] for g in first_round]
        flat_first = [c for g in first_credits for c in g]
        n_first = max(1, len(flat_first))
        viol = sum(c.n_violations for c in flat_first) / n_first
        disc = sum(c.n_discharges for c in flat_first) / n_first
        credit_sum = sum(c.total for c in flat_first) / n_first
        schedule.observe(it, viol)
        weight = schedule.weight(it) if method.credit_mode != "none" else 0.0
        credits: list[list[CallCredits]] = [credits_of[id(g)] for g in groups]

        if on_batch is not None:
            on_batch(it, groups, credits, weight)

        # --- advantage ---
        batch = [r for g in groups for r in g]  # B = n_groups * G, group-major
        check_outcomes(batch)
        stats: dict[str, float] = {"policy": 0.0, "kl": 0.0, "clip_frac": 0.0, "entropy": None, "grad_norm": 0.0}
        dead_iteration, frac_dead, amplified = True, 1.0, 0
        if batch:
            _, _, cmask = pad_batch(batch, be.pad_id)  # (B, T)
            adv = compute_advantages(
                [[r.outcome for r in g] for g in groups],
                credits,
                [[r.call_spans for r in g] for g in groups],
                cmask,
                credit_mode=method.credit_mode,
                process_weight=weight,
                scale_rewards=cfg.scale_rewards,
                process_norm=cfg.process_norm,
                eps=cfg.adv_eps,
            )
            dead_iteration, frac_dead = adv.dead_iteration, adv.frac_dead_groups
            flagged += int(adv.overflowed.sum())  # process credit past float32: dropped per episode
            amplified = int(adv.amplified_groups.sum())
            if amplified and not warned_amplified:
                warned_amplified = True
                say(
                    f"iteration {it}: {amplified} group(s) with equal outcomes got unit-size advantages from "
                    "process credit alone (scalar_fold z-scores its differences, however small; counted in "
                    "process/amplified_groups); the rlvp method (token credit) keeps them at w x credit"
                )
            # the tokens coloured by the advantages and mask the update below receives (trainer/token_page.py)
            token_page.maybe_write(cfg, it, batch, credits, adv, cmask, weight, decode=be.decode, log=say)
            # --- update ---
            stats = _update(
                cfg,
                be,
                model,
                optimizer,
                params,
                batch,
                adv.advantages,
                cmask,
                step=not (dead_iteration and cfg.beta == 0),
            )
        if not method.dynamic_sampling:
            frac_dead = frac_dead if batch else 1.0
        elif sampled.dropped_groups:
            # dropped groups are dead too: count them over all groups generated
            total = len(groups) + sampled.dropped_groups
            frac_dead = (frac_dead * len(groups) + sampled.dropped_groups) / total

        # --- metrics ---
        dt = time.perf_counter() - t0
        n_eps = sum(len(g) for g in first_round)
        row = {
            "iteration": it,
            "method": cfg.method,
            "seed": cfg.seed,
            "rollout/success_rate": sum(r.outcome for g in first_round for r in g) / max(1, n_eps),
            "rollout/frac_dead_groups": frac_dead,
            "rollout/dead_iteration": int(dead_iteration),
            "rollout/episodes_generated": episodes_generated,
            "rollout/rounds": sampled.rounds,
            "rollout/episode_calls": sum(len(r.call_spans) for g in first_round for r in g) / max(1, n_eps),
            "process/violations_per_episode": viol,
            "process/discharges_per_episode": disc,
            "process/credit_per_episode": credit_sum,
            "process/flagged_credits": flagged,
            "process/amplified_groups": amplified,
            "process/weight": weight if method.credit_mode != "none" else 0.0,
            "process/anneal_started": int(schedule.started),
            "loss/policy": stats["policy"],
            "loss/kl": stats["kl"],
            "loss/clip_frac": stats["clip_frac"],
            "loss/grad_norm": stats["grad_norm"],
            "policy/entropy": stats["entropy"],
            "perf/tokens_per_s": gen_tokens / max(t_roll, 1e-9),
            "perf/iteration_s": dt,
        }
        rows.append(row)
        logger.log(row)
        run["saved"], run["dirty"] = snapshot(it + 1), True
        bar.update(row)
        last = it == cfg.iterations - 1
        if last or (cfg.checkpoint_every and (it + 1) % cfg.checkpoint_every == 0):
            ckpt.write(cfg.out_dir, run["saved"])
            run["dirty"] = False
    bar.close()
    logger.close()
    return rows


def check_outcomes(batch: list[Rollout]) -> None:
    """Raise a ValueError naming the episode when an outcome is not a finite number.

    An outcome comes from the environment, not from a credit source, so a NaN there
    is a bug to report, not a value to drop: dropping it would change the group's baseline.
    """
    for r in batch:
        try:
            ok = math.isfinite(float(r.outcome))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(
                f"outcome of episode {r.episode.id!r} (task {r.task_id!r}) must be a finite number "
                f"(got {r.outcome!r}); the environment's reward is the outcome"
            )


def _update(
    cfg: TrainConfig,
    be: Backend,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    params: list,
    batch: list[Rollout],
    advantages: torch.Tensor,
    cmask: torch.Tensor,
    step: bool,
) -> dict[str, float]:
    """One batch update (``updates_per_batch`` passes of micro-batches); returns diagnostics (floats).

    Advantages and the mask move to the model's device; the loss is computed there.
    Raises ValueError (before any optimiser step) when a micro-batch's loss or the
    gradient norm is not finite: advantages are finite, so the model's log-probs are not.
    """
    model.train()
    dev = device_of(model)
    advantages, cmask = advantages.to(dev), cmask.to(dev)  # (B, T)
    B, T = cmask.shape
    mbs = micro_batches(batch, cfg.micro_batch, cfg.micro_batch_tokens)
    n_tok = float(cmask.sum().clamp(min=1))
    L = action_len(cmask)  # most action tokens of one episode: `constant`'s L, never tool output
    batch_norm = float(normaliser(cmask, cfg.loss_type, L))
    old: dict[int, torch.Tensor] = {}
    ref: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for k, idx in enumerate(mbs):
            rs = [batch[i] for i in idx]
            if cfg.updates_per_batch > 1:
                old[k], _ = completion_logprobs(
                    model, rs, be.pad_id, constrained=cfg.constrained_logprobs, temperature=cfg.temperature
                )
            if cfg.beta > 0:
                if be.ref_context is None:
                    raise ValueError("beta > 0 needs a reference model (the backend has no ref_context)")
                with be.ref_context():
                    ref[k], _ = completion_logprobs(
                        model, rs, be.pad_id, constrained=cfg.constrained_logprobs, temperature=cfg.temperature
                    )
    stats = {"policy": 0.0, "kl": 0.0, "clip_frac": 0.0, "entropy": 0.0, "grad_norm": 0.0}
    ent_sum = 0.0
    for epoch in range(cfg.updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        for k, idx in enumerate(mbs):
            rs = [batch[i] for i in idx]
            grad_ctx = torch.enable_grad() if step else torch.no_grad()
            with grad_ctx:
                logp, ent = completion_logprobs(
                    model,
                    rs,
                    be.pad_id,
                    with_entropy=epoch == 0,
                    constrained=cfg.constrained_logprobs,
                    temperature=cfg.temperature,
                )  # (b, t)
                t = logp.shape[1]
                m, A = cmask[idx, :t], advantages[idx, :t]  # (b, t)
                old_lp = old[k] if k in old else logp.detach()
                out = policy_loss(
                    logp,
                    old_lp,
                    A,
                    m,
                    epsilon=cfg.epsilon,
                    epsilon_high=cfg.epsilon_high,
                    beta=cfg.beta,
                    ref_logp=ref.get(k),
                    kl_clip=cfg.kl_clip,
                    loss_type=cfg.loss_type,
                    max_len=L,
                )
                if not torch.isfinite(out.loss):
                    raise ValueError(
                        f"the loss of micro-batch {k} (episodes {[r.episode.id for r in rs]}) is {float(out.loss.detach())} "
                        f"in update pass {epoch}: the advantages are finite, so the model's log-probs are not "
                        f'(overflow in {cfg.dtype}? try a lower learning_rate or dtype = "float32")'
                    )
                # micro-batch share of the batch-level normaliser
                share = float(normaliser(m, cfg.loss_type, L)) / batch_norm
                if step:
                    (out.loss * share).backward()
            if epoch == 0:
                stats["policy"] += out.policy * share
                stats["kl"] += out.kl * float(m.sum()) / n_tok
                stats["clip_frac"] += out.clip_frac * float(m.sum()) / n_tok
                ent_sum += float((ent * m).sum())
        if step:
            grads = [p.grad for p in params if p.grad is not None]
            norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0  # before clipping
            if not math.isfinite(norm):
                raise ValueError(
                    f"the gradient norm is {norm} in update pass {epoch} with a finite loss; "
                    f"this pass made no optimiser step (the last checkpoint is intact)"
                )
            if epoch == 0:
                stats["grad_norm"] = norm
            if cfg.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
    stats["entropy"] = ent_sum / n_tok
    model.eval()
    return stats
