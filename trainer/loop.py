"""The GRPO loop with token-attached rlvp credit -- one readable function, `train`.

Per iteration: sample tasks -> G rollouts per task -> score the episodes (each
once) with the compiled rules -> advantages (outcome + process) -> clipped
policy-gradient update of the LoRA adapter -> metrics.

Where this departs from GRPO as published (Shao et al. 2024, DeepSeekMath):

1. Process credit: per-call credits from compiled rules are added to the
   advantage of exactly the tokens that produced each call (``rlvp``), or summed
   into the reward before the group normalisation (``scalar_fold``).  The process
   weight can be annealed to a floor once compliance saturates (``anneal``, off by default:
   rlvp_dsl/advantages/schedule.py, docs/trainer.md "Annealing").
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

Beside it, one job each: `trainer.backend` (model, rollout collection, credit source),
`trainer.methods` (the methods), `trainer.dapo` (dynamic sampling), the credit maths in
`rlvp_dsl.advantages`, `trainer.update` (the policy update: `trainer.batch`, `trainer.logprobs`,
`trainer.loss`), `trainer.metrics`, `trainer.checkpoint`, `trainer.token_page`.
"""

from __future__ import annotations

import functools
import math
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import attrs
import torch

from rlvp_dsl.advantages import ProcessWeightSchedule, compute_advantages
from rlvp_dsl.attach import CallCredits, score_calls
from trainer import checkpoint as ckpt
from trainer import token_page
from trainer.backend import Backend, build_backend
from trainer.batch import pad_batch
from trainer.config import TrainConfig
from trainer.dapo import Group, SamplingResult, dynamic_sampling
from trainer.methods import Method, get_method
from trainer.metrics import FILENAME as METRICS_FILE
from trainer.metrics import GridClock, MetricsLogger, ProgressBar
from trainer.types import Rollout
from trainer.update import Learner, UpdateStats, update_policy

#: The last part of the seed that draws a round's tasks, ``(seed, iteration, round, 17)``; the round's
#: groups are seeded ``(seed, iteration, round, j)`` for j = 0, 1, ...  (A round of more than 17
#: groups seeds its group 17 like its tasks; changing the slot would change every run's tasks.)
TASKS_SEED_SLOT = 17


@attrs.define
class _Run:
    """One call of `train`: the parts set up once, and the counters the iterations move on.

    Attributes:
        start: the first iteration this call trains (> 0 when resumed).
        episodes_generated: every episode generated so far, resampling included (resumed runs' too).
        warned_amplified: whether scalar_fold's amplified groups were said (once per run).
    """

    cfg: TrainConfig
    be: Backend
    method: Method
    learner: Learner
    schedule: ProcessWeightSchedule
    start: int = 0
    episodes_generated: int = 0
    warned_amplified: bool = False

    def capture(self, done: int) -> dict[str, Any]:
        """The state after ``done`` finished iterations: what a checkpoint holds (`trainer.checkpoint`)."""
        return ckpt.capture(
            model=self.learner.model,
            optimizer=self.learner.optimizer,
            schedule_state=self.schedule.state_dict(),
            counters={"iteration": done, "episodes_generated": self.episodes_generated},
            config=self.cfg.to_dict(),
        )


@attrs.frozen
class _Credit:
    """The rules' credits of an iteration, each episode scored once.

    Attributes:
        batch: ``[n_groups][G]`` the credits of the groups trained on.
        flagged: values the source gave as None, NaN or infinite (their calls got no credit).
        violations, discharges, total: per episode of round 0 (the metrics' sample).
    """

    batch: list[list[CallCredits]]
    flagged: int
    violations: float
    discharges: float
    total: float


@attrs.frozen
class _Trained:
    """What the advantage and the update of an iteration gave the metrics.

    Attributes:
        frac_dead: dead groups among those trained on (1.0 for an empty batch).
        overflowed: episodes whose weighted process credit was no float32 advantage (dropped).
        amplified: scalar_fold's groups scaled up from process credit alone.
    """

    stats: UpdateStats
    dead_iteration: bool = True
    frac_dead: float = 1.0
    overflowed: int = 0
    amplified: int = 0


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
    on_batch: Callable[[int, list[Group], list[list[CallCredits]], float], None] | None = None,
    clock: GridClock | None = None,
) -> list[dict[str, Any]]:
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
        trainer.checkpoint.MetricsGap: ``resume`` of a run whose metrics.jsonl lacks rows of the
            iterations its checkpoint holds.
    """
    say = log or _to_stderr
    run = _set_up(cfg, backend, resume)
    before = _FolderBefore.of(cfg.out_dir)
    logger = MetricsLogger(cfg.out_dir, tensorboard=cfg.tensorboard, append=resume, keep_below=run.start)
    if logger.note:
        say(logger.note)
    bar = _progress_bar(cfg, run.start, progress, say, clock)
    saved: dict[str, Any] | None = None  # the state after the last finished iteration: what Ctrl-C writes
    dirty = False  # `saved` is newer than checkpoint.pt
    rows: list[dict[str, Any]] = []
    try:
        saved = run.capture(run.start)
        for it in range(run.start, cfg.iterations):
            row = _iteration(run, it, say, on_batch)
            rows.append(row)
            logger.log(row)
            saved, dirty = run.capture(it + 1), True
            bar.update(row)
            if it == cfg.iterations - 1 or (cfg.checkpoint_every and (it + 1) % cfg.checkpoint_every == 0):
                ckpt.write(cfg.out_dir, saved)
                dirty = False
    except KeyboardInterrupt:
        bar.close()
        logger.close()
        if saved is None:  # interrupted while setting up: nothing trained yet
            raise
        path = Path(cfg.out_dir) / ckpt.FILENAME
        if dirty or not path.is_file():
            path = ckpt.write(cfg.out_dir, saved)
        raise ckpt.Interrupted(path, int(saved["counters"]["iteration"]), cfg.out_dir) from None
    except Exception:
        bar.close()
        logger.close()
        if not rows and not resume:  # a failed start: leave nothing that would block the retry
            before.forget_new(cfg.out_dir)
        raise
    bar.close()
    logger.close()
    return rows


@attrs.frozen
class _FolderBefore:
    """What a fresh run's folder held before `train` wrote to it, so that a run that fails before
    its first iteration is logged can remove what it wrote (an empty metrics.jsonl, a token page,
    the folder itself) and a retry is not refused as "already holds a run"."""

    existed: bool
    new_subfolders: tuple[str, ...]

    @classmethod
    def of(cls, out_dir: str) -> "_FolderBefore":
        subs = (token_page.FOLDER, "tb")  # the token pages, TensorBoard's events
        return cls(Path(out_dir).exists(), tuple(s for s in subs if not (Path(out_dir) / s).exists()))

    def forget_new(self, out_dir: str) -> None:
        """Remove the empty metrics file, and the sub-folders and the folder this run created."""
        folder = Path(out_dir)
        metrics = folder / METRICS_FILE
        if metrics.is_file() and metrics.stat().st_size == 0:
            metrics.unlink()
        for sub in self.new_subfolders:
            if (folder / sub).is_dir():
                shutil.rmtree(folder / sub, ignore_errors=True)
        if not self.existed:
            try:
                folder.rmdir()
            except OSError:  # not empty: something else is there
                pass


def _iteration(
    run: _Run,
    it: int,
    say: Callable[[str], None],
    on_batch: Callable[[int, list[Group], list[list[CallCredits]], float], None] | None,
) -> dict[str, Any]:
    """Iteration ``it``: rollout -> process credit -> advantage -> update; returns its metrics row."""
    t0 = time.perf_counter()
    # --- rollout ---
    sampled = _sample(run, it)
    if sampled.message:
        say(f"iteration {it}: {sampled.message}")
    run.episodes_generated += sampled.episodes_generated
    gen_tokens = sum(sum(r.completion_mask) for round_groups in sampled.generated for g in round_groups for r in g)
    t_roll = time.perf_counter() - t0

    # --- process credit (scored for every method: metrics; used by scalar_fold / rlvp) ---
    credit = _score(run.be, sampled)
    run.schedule.observe(it, credit.violations)
    weight = run.schedule.weight(it) if run.method.credit_mode != "none" else 0.0
    if on_batch is not None:
        on_batch(it, sampled.groups, credit.batch, weight)

    # --- advantage, update ---
    trained = _advantage_and_update(run, it, sampled.groups, credit.batch, weight, say)

    # --- metrics ---
    first = sampled.first_round
    n_eps = sum(len(g) for g in first)
    return {
        "iteration": it,
        "method": run.cfg.method,
        "seed": run.cfg.seed,
        "rollout/success_rate": sum(r.outcome for g in first for r in g) / max(1, n_eps),
        "rollout/frac_dead_groups": _frac_dead(trained.frac_dead, sampled),
        "rollout/dead_iteration": int(trained.dead_iteration),
        "rollout/episodes_generated": run.episodes_generated,
        "rollout/rounds": sampled.rounds,
        "rollout/episode_calls": sum(len(r.call_spans) for g in first for r in g) / max(1, n_eps),
        "process/violations_per_episode": credit.violations,
        "process/discharges_per_episode": credit.discharges,
        "process/credit_per_episode": credit.total,
        "process/flagged_credits": credit.flagged + trained.overflowed,
        "process/amplified_groups": trained.amplified,
        "process/weight": weight,
        "process/anneal_started": int(run.schedule.started),
        "loss/policy": trained.stats.policy,
        "loss/kl": trained.stats.kl,
        "loss/clip_frac": trained.stats.clip_frac,
        "loss/grad_norm": trained.stats.grad_norm,
        "policy/entropy": trained.stats.entropy,
        "perf/tokens_per_s": gen_tokens / max(t_roll, 1e-9),
        "perf/iteration_s": time.perf_counter() - t0,
    }


# ----------------------------------------------------------------------------
# set-up
# ----------------------------------------------------------------------------
def _set_up(cfg: TrainConfig, backend: Backend | None, resume: bool) -> _Run:
    """Seed, build the backend (unless given), the optimiser and the process-weight schedule; on
    ``resume``, restore them and the RNG states from the checkpoint (after the seeding)."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    method = get_method(cfg.method)
    be = backend or build_backend(cfg)
    learner = Learner.adamw(be.model, cfg, pad_id=be.pad_id, ref_context=be.ref_context)
    schedule = ProcessWeightSchedule(
        cfg.process_weight,
        enabled=cfg.anneal and method.anneal,
        threshold=cfg.anneal_threshold,
        patience=cfg.anneal_patience,
        start=cfg.anneal_start,
        decay_iterations=cfg.anneal_iterations,
        floor=cfg.anneal_floor,
    )
    run = _Run(cfg, be, method, learner, schedule)
    if resume:
        state = ckpt.load_checkpoint(cfg.out_dir)
        ckpt.check_resumable(state["config"], cfg.to_dict(), f"{cfg.out_dir}/{ckpt.FILENAME}")
        ckpt.restore_model(learner.model, state["trainable"])
        learner.optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        run.start = int(state["counters"]["iteration"])
        ckpt.check_metrics_cover(cfg.out_dir, run.start)
        run.episodes_generated = int(state["counters"]["episodes_generated"])
        ckpt.set_rng_state(state["rng"])
    return run


def _progress_bar(
    cfg: TrainConfig,
    start: int,
    progress: bool | str | None,
    say: Callable[[str], None],
    clock: GridClock | None,
) -> ProgressBar:
    """`train`'s ``progress``: None is the bar on a terminal, else the lines."""
    if progress is None:
        progress = "bar" if sys.stderr.isatty() else "lines"
    return ProgressBar(
        cfg.iterations,
        start,
        f"{cfg.method} seed {cfg.seed}",
        bar=progress in (True, "bar"),
        say=say if progress else None,
        every=cfg.log_every,
        clock=clock,
    )


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


# ----------------------------------------------------------------------------
# rollout
# ----------------------------------------------------------------------------
def _sample(run: _Run, it: int) -> SamplingResult:
    """The groups of iteration ``it``: one round of ``tasks_per_iteration`` groups, or (``dapo``)
    rounds until that many have differing outcomes (`trainer.dapo.dynamic_sampling`)."""
    cfg = run.cfg
    run.learner.model.eval()
    generate = functools.partial(_sample_round, run.be, cfg, it)  # generate(round, n) -> n groups
    with torch.no_grad():
        if run.method.dynamic_sampling:
            return dynamic_sampling(generate, cfg.tasks_per_iteration, cfg.dapo_max_rounds)
        return SamplingResult.one_round(generate(0, cfg.tasks_per_iteration))


def _sample_round(be: Backend, cfg: TrainConfig, it: int, rnd: int, n: int) -> list[Group]:
    """Round ``rnd`` of iteration ``it``: ``n`` new tasks, one group of ``num_generations``
    rollouts each, seeded from (seed, it, rnd, group) (`TASKS_SEED_SLOT`)."""
    tasks = be.make_tasks(n, _seed_of(cfg.seed, it, rnd, TASKS_SEED_SLOT))
    seeds = [_seed_of(cfg.seed, it, rnd, j) for j in range(len(tasks))]
    if be.collect_groups is not None:  # all groups in one batch (the same rollouts as one at a time)
        return be.collect_groups(tasks, cfg.num_generations, seeds)
    return [be.collect(task, cfg.num_generations, s) for task, s in zip(tasks, seeds, strict=True)]


def _seed_of(*parts: int) -> int:
    """A deterministic seed from (seed, iteration, round, group): rollouts replay exactly on resume."""
    h = 0
    for p in parts:
        h = (h * 1_000_003 + int(p)) % (2**31 - 1)
    return h


# ----------------------------------------------------------------------------
# process credit
# ----------------------------------------------------------------------------
def _score(be: Backend, sampled: SamplingResult) -> _Credit:
    """Score round 0 (the metrics) and the batch (``dapo``: its kept groups) with the rules; an
    episode in both is scored once."""
    to_score = {id(g): g for g in sampled.first_round + sampled.groups}
    credits_of = {key: [score_calls(be.credit_source, r.episode) for r in g] for key, g in to_score.items()}
    first = [c for g in sampled.first_round for c in credits_of[id(g)]]
    n_first = max(1, len(first))
    return _Credit(
        batch=[credits_of[id(g)] for g in sampled.groups],
        flagged=sum(len(c.flagged) for cs in credits_of.values() for c in cs),
        violations=sum(c.n_violations for c in first) / n_first,
        discharges=sum(c.n_discharges for c in first) / n_first,
        total=sum(c.total for c in first) / n_first,
    )


# ----------------------------------------------------------------------------
# advantage and update
# ----------------------------------------------------------------------------
def _advantage_and_update(
    run: _Run,
    it: int,
    groups: list[Group],
    credits: list[list[CallCredits]],
    weight: float,
    say: Callable[[str], None],
) -> _Trained:
    """The batch's advantages (outcome + ``weight`` x process, `rlvp_dsl.advantages`), its token page
    when due, and the policy update (no optimiser step for a dead batch with ``beta = 0``)."""
    cfg = run.cfg
    batch = [r for g in groups for r in g]  # B = n_groups * G, group-major
    check_outcomes(batch)
    if not batch:
        return _Trained(UpdateStats())
    _, _, cmask = pad_batch(batch, run.be.pad_id)  # (B, T)
    adv = compute_advantages(
        [[r.outcome for r in g] for g in groups],
        credits,
        [[r.call_spans for r in g] for g in groups],
        cmask,
        credit_mode=run.method.credit_mode,
        process_weight=weight,
        scale_rewards=cfg.scale_rewards,
        process_norm=cfg.process_norm,
        eps=cfg.adv_eps,
        turn_spans=[[r.turn_spans for r in g] for g in groups],
    )
    amplified = int(adv.amplified_groups.sum())
    if amplified and not run.warned_amplified:
        run.warned_amplified = True
        say(
            f"iteration {it}: {amplified} group(s) with equal outcomes got unit-size advantages from "
            "process credit alone (scalar_fold z-scores its differences, however small; counted in "
            "process/amplified_groups); the rlvp method (token credit) keeps them at w x credit"
        )
    # the tokens coloured by the advantages and mask the update below receives (trainer/token_page.py)
    token_page.maybe_write(cfg, it, batch, credits, adv, cmask, weight, decode=run.be.decode, log=say)
    dead = adv.dead_iteration
    stats = update_policy(cfg, run.learner, batch, adv.advantages, cmask, step=not (dead and cfg.beta == 0))
    return _Trained(stats, dead, adv.frac_dead_groups, int(adv.overflowed.sum()), amplified)


def _frac_dead(frac_dead: float, sampled: SamplingResult) -> float:
    """Dead groups over all groups generated: ``dapo``'s dropped groups are dead too."""
    if not sampled.dropped_groups:
        return frac_dead
    kept = len(sampled.groups)
    return (frac_dead * kept + sampled.dropped_groups) / (kept + sampled.dropped_groups)


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
