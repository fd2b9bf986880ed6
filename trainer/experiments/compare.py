"""Comparing methods: methods x seeds -> summary table (Markdown, JSON) and learning curves
(PNG); and the paired mode (identical rollout batches, advantages under several methods).

The front door is `rlvp-train` (`trainer.cli.train_command`), which calls `compare` and `paired`:

    rlvp-train examples/chain4.toml --compare grpo,rlvp --seeds 0,1 --out runs/compare
    rlvp-train examples/chain4.toml --paired grpo,rlvp

Summary columns (one row per method; the median over seeds and, in brackets, the range
``[min–max]``; the value alone when one seed gave it or all seeds agree; ``summary.json``
also holds the mean and population std):

* ``episodes to X %`` -- episodes generated (resampling included) when the trailing
  mean success (``success_window`` iterations) first reaches ``success_threshold``;
  ``(k/n)`` when only k of n seeds got there (a seed that never got there counts as
  ``never`` in the median and the range, so the median is over every seed);
* ``dead iters`` -- iterations with no policy gradient at all;
* ``final success`` -- mean success of the last 5 iterations;
* ``collapsed`` -- seeds whose trailing success reached 0.8 and whose final success ended
  below 0.5 (`trainer.metrics.summarise_run`);
* ``violations/ep`` -- over the last 5 iterations;
* ``episodes generated`` -- in total.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

from trainer import checkpoint as ckpt
from rlvp_dsl.advantages import compute_advantages
from trainer.batch import pad_batch
from trainer.config import TrainConfig
from trainer.loop import train
from trainer.methods import get_method
from trainer.metrics import GridClock, read_metrics, seed_stats, summarise_run
from trainer.experiments.plots import plot_curves


class GridInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``--compare``: finished runs are kept, each interrupted run wrote its checkpoint.

    Attributes: ``out_dir``, ``finished`` (``[(method, seed)]``), ``interrupted`` (`ckpt.Interrupted` of each run).
    """

    def __init__(self, out_dir: str, finished: list, interrupted: list):
        super().__init__(f"--compare interrupted: {len(finished)} runs finished")
        self.out_dir, self.finished, self.interrupted = out_dir, finished, interrupted


_WORKER_CLOCK: GridClock | None = None  # the grid's clock in a --compare worker process
_WORKER_STOP = None  # set by the parent on Ctrl-C: runs not yet started are skipped


def _init_worker(done, remaining: int, start: float, stop) -> None:
    """Worker set-up: share the grid's iteration counter and stop flag; ignore Ctrl-C while idle
    (a run handles it)."""
    global _WORKER_CLOCK, _WORKER_STOP
    _WORKER_CLOCK, _WORKER_STOP = GridClock(remaining, done, start), stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupt_once(signum, frame):  # the first Ctrl-C interrupts the run; a second must not cut its checkpoint
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _run_one(
    cfg: TrainConfig,
    resume: bool = False,
    progress: bool | str | None = None,
    clock: GridClock | None = None,
    worker: bool = False,
) -> list[dict] | None:
    """One run of the grid; returns the whole run's metric rows (read back from its metrics.jsonl),
    or None when a worker finds the grid stopped before the run started."""
    if worker:
        if _WORKER_STOP is not None and _WORKER_STOP.is_set():
            return None
        clock = _WORKER_CLOCK
        signal.signal(signal.SIGINT, _interrupt_once)
    resume = resume and (Path(cfg.out_dir) / ckpt.FILENAME).is_file()  # a run never started starts now
    try:
        if not (resume and ckpt.check_resume(cfg.out_dir, cfg.to_dict()) >= cfg.iterations):
            train(
                cfg,
                resume=resume,
                progress=progress,
                clock=clock,
                log=lambda s: print(f"[{cfg.method} s{cfg.seed}] {s}", file=sys.stderr),
            )
    finally:
        if worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    return read_metrics(cfg.out_dir)


def run_grid(
    cfg: TrainConfig,
    methods: Sequence[str],
    seeds: Sequence[int],
    out_dir: str | os.PathLike,
    jobs: int = 1,
    say: Callable[[str], None] | None = None,
    resume: bool = False,
) -> dict[str, list[list[dict]]]:
    """Train every (method, seed); returns method -> per-seed metric rows (each the whole run).

    Each run writes to ``out_dir/<method>/seed<k>/``.  ``jobs > 1`` runs that many in
    parallel processes (each with ``cfg.threads`` torch threads).  ``resume``: a run with a
    checkpoint continues from it (a finished one is only read back), the others start.
    Progress: each run's bar on a terminal (``jobs = 1``), else its progress lines, which
    carry the ETA of the whole grid; one line per finished run.

    Raises:
        GridInterrupted: Ctrl-C (every running run wrote its checkpoint first).
    """
    say = say or (lambda s: print(s, file=sys.stderr))
    out = Path(out_dir)
    todo = [(m, s, cfg.replace(method=m, seed=s, out_dir=str(out / m / f"seed{s}"))) for m in methods for s in seeds]
    results: dict[str, list[list[dict]]] = {m: [[] for _ in seeds] for m in methods}
    remaining = sum(
        cfg.iterations - min(cfg.iterations, ckpt.iterations_done(c.out_dir) if resume else 0) for _, _, c in todo
    )
    t0 = time.perf_counter()
    finished: list[tuple[str, int]] = []

    def done(k: int, m: str, s: int, rows: list[dict]) -> None:
        results[m][list(seeds).index(s)] = rows
        finished.append((m, s))
        say(f"[{k}/{len(todo)}] {m} seed {s} done ({time.perf_counter() - t0:.0f} s)")

    if jobs <= 1:
        clock = GridClock(remaining)
        for k, (m, s, c) in enumerate(todo, 1):
            try:
                rows = _run_one(c, resume=resume, clock=clock)
            except ckpt.Interrupted as exc:
                raise GridInterrupted(str(out), finished, [exc]) from None
            done(k, m, s, rows)
        return results
    ctx = get_context("spawn")
    shared, stop = ctx.Value("i", 0), ctx.Event()
    pool = ProcessPoolExecutor(
        max_workers=jobs, mp_context=ctx, initializer=_init_worker, initargs=(shared, remaining, time.time(), stop)
    )
    futures = {pool.submit(_run_one, c, resume, "lines", None, True): (m, s) for m, s, c in todo}
    interrupted: list[ckpt.Interrupted] = []
    try:
        pending = set(futures)
        while pending:
            ready, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in ready:
                m, s = futures[fut]
                try:
                    rows = fut.result()
                except ckpt.Interrupted as exc:  # a worker was interrupted on its own
                    interrupted.append(exc)
                    continue
                done(len(finished) + 1, m, s, rows)
        if interrupted:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        stop.set()
        for fut in futures:
            fut.cancel()
        for proc in list(getattr(pool, "_processes", {}).values()):  # a run not reached by the terminal's Ctrl-C
            try:
                os.kill(proc.pid, signal.SIGINT)
            except (OSError, AttributeError):
                pass
        for fut, (m, s) in futures.items():
            if fut.cancelled():
                continue
            try:
                rows = fut.result()
            except ckpt.Interrupted as exc:
                if exc not in interrupted:
                    interrupted.append(exc)
            except (Exception, KeyboardInterrupt):  # noqa: BLE001 - died or set-up interrupted: its last checkpoint stays
                pass
            else:
                if rows is not None and (m, s) not in finished:
                    done(len(finished) + 1, m, s, rows)
        pool.shutdown(wait=True, cancel_futures=True)
        raise GridInterrupted(str(out), finished, interrupted) from None
    except BaseException:  # a run failed (a bad rule file, a missing package): stop the others
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def summarise(results: dict[str, list[list[dict]]], threshold: float = 0.5, window: int = 3) -> dict[str, Any]:
    """Per method: per-seed summaries (`trainer.metrics.summarise_run`) and, per column, their
    mean, std, median and range over seeds (`trainer.metrics.seed_stats`; a seed that never
    reached the threshold counts as never in the median of ``episodes_to_threshold``), and
    ``collapsed``, the number of seeds that collapsed."""
    out: dict[str, Any] = {}
    for method, seeds in results.items():
        runs = [summarise_run(rows, threshold, window) for rows in seeds if rows]
        agg: dict[str, Any] = {"seeds": runs, "n": len(runs)}
        for key in (
            "episodes_to_threshold",
            "dead_iterations",
            "final_success",
            "violations_per_episode",
            "episodes_generated",
            "frac_dead_groups",
            "wall_s",
        ):
            agg[key] = seed_stats((r[key] for r in runs), none_is_never=key == "episodes_to_threshold")
        agg["collapsed"] = sum(r["collapsed"] for r in runs)
        out[method] = agg
    return out


def _fmt(stat: dict, digits: int = 0, total: int | None = None) -> str:
    """``median [min–max]`` over seeds (the value alone for one seed or no spread); ``never`` for a
    median or bound past the threshold's reach; ``(k/n)`` when only k of n seeds reached it."""

    def num(v: float | None) -> str:
        return "never" if v is None else f"{v:.{digits}f}"

    if stat["n"] == 0:
        return "never" if total else "-"
    text = num(stat["median"])
    if stat["seeds"] > 1 and stat["min"] != stat["max"]:
        text += f" [{num(stat['min'])}–{num(stat['max'])}]"
    if total is not None and stat["n"] < total:
        text += f" ({stat['n']}/{total})"
    return text


#: The line under every comparison table: what holds from one machine to another.
MACHINE_NOTE = (
    "Median [min–max] over seeds. Runs repeat exactly on one machine, not across machines "
    "(float summation order differs with the CPU, the BLAS and the thread count): a single "
    "seed's numbers will differ on yours; the medians and the comparison between methods should hold."
)


#: The line under every comparison table that says what "collapsed" counts (and does not).
COLLAPSE_NOTE = (
    "collapsed: seeds whose trailing success reached 0.8 and whose final success ended below 0.5; "
    "a seed that never reached 0.8 is not counted, whatever its final success."
)


def markdown_table(summary: dict[str, Any], threshold: float = 0.5) -> str:
    """The summary as a Markdown table: per method, median [min–max] over seeds of each column
    (`_fmt`), the collapsed seeds (``k/n``: trailing success reached 0.8, final below 0.5;
    `trainer.metrics.summarise_run`), then `COLLAPSE_NOTE` and `MACHINE_NOTE`."""
    pct = int(round(threshold * 100))
    lines = [
        f"| method | seeds | episodes to {pct} % | dead iters | final success | collapsed "
        "| violations/ep | episodes generated |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for method, agg in summary.items():
        lines.append(
            f"| {method} | {agg['n']} | {_fmt(agg['episodes_to_threshold'], 0, agg['n'])} | "
            f"{_fmt(agg['dead_iterations'], 0)} | {_fmt(agg['final_success'], 2)} | "
            f"{agg.get('collapsed', 0)}/{agg['n']} | {_fmt(agg['violations_per_episode'], 2)} | "
            f"{_fmt(agg['episodes_generated'], 0)} |"
        )
    return "\n".join(lines) + "\n\n" + COLLAPSE_NOTE + "\n" + MACHINE_NOTE


def compare(
    cfg: TrainConfig,
    methods: Sequence[str],
    seeds: Sequence[int],
    out_dir: str | os.PathLike,
    jobs: int = 1,
    say: Callable[[str], None] | None = None,
    resume: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Run the grid (`run_grid`), write ``summary.json``, ``summary.md`` and ``curves.png`` into ``out_dir``.

    Returns:
        (markdown table, summary dict); the summary counts each whole run, resumed parts included.

    Raises:
        GridInterrupted: Ctrl-C (nothing summarised; ``resume=True`` continues).
    """
    out = Path(out_dir)
    results = run_grid(cfg, methods, seeds, out, jobs=jobs, say=say, resume=resume)
    summary = summarise(results, cfg.success_threshold, cfg.success_window)
    table = markdown_table(summary, cfg.success_threshold)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(
        json.dumps(
            {"config": cfg.to_dict(), "methods": list(methods), "seeds": list(seeds), "summary": summary}, indent=2
        )
        + "\n"
    )
    (out / "summary.md").write_text(table + "\n")
    plot_curves(
        results,
        out / "curves.png",
        window=cfg.success_window,
        threshold=cfg.success_threshold,
        title=f"{cfg.env}: {', '.join(methods)} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})",
    )
    return table, summary


# ----------------------------------------------------------------------------
# paired mode
# ----------------------------------------------------------------------------
def paired(cfg: TrainConfig, driver: str, methods: Sequence[str], out_dir: str | os.PathLike) -> dict[str, Any]:
    """Train with ``driver``; on every batch it generates, compute the advantages each of
    ``methods`` would use and count the updates that would be dead (all advantages 0).

    The process weight of the evaluated methods is ``cfg.process_weight`` (un-annealed).
    Returns ``{"driver", "iterations", "dead": {method: count}, "pct_dead": {method: %}}``
    and writes it to ``out_dir/paired.json``.
    """
    dead = {m: 0 for m in methods}
    dead_groups = {m: 0 for m in methods}
    n_groups = 0
    iters = 0

    def on_batch(it, groups, credits, weight):
        nonlocal n_groups, iters
        iters += 1
        if not groups:
            for m in methods:
                dead[m] += 1
            return
        _, _, cmask = pad_batch([r for g in groups for r in g])
        n_groups += len(groups)
        for m in methods:
            spec = get_method(m)
            adv = compute_advantages(
                [[r.outcome for r in g] for g in groups],
                credits,
                [[r.call_spans for r in g] for g in groups],
                cmask,
                credit_mode=spec.credit_mode,
                process_weight=cfg.process_weight,
                scale_rewards=cfg.scale_rewards,
                process_norm=cfg.process_norm,
                eps=cfg.adv_eps,
            )
            dead[m] += int(adv.dead_iteration)
            dead_groups[m] += int(adv.dead_groups.sum())

    c = cfg.replace(method=driver, out_dir=str(Path(out_dir) / f"driver_{driver}"))
    train(c, progress=None, on_batch=on_batch)
    result = {
        "driver": driver,
        "iterations": iters,
        "dead": dead,
        "pct_dead": {m: 100.0 * dead[m] / max(1, iters) for m in methods},
        "pct_dead_groups": {m: 100.0 * dead_groups[m] / max(1, n_groups) for m in methods},
    }
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "paired.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def paired_table(result: dict[str, Any]) -> str:
    """The paired result as one line and a Markdown table (dead updates and groups per method)."""
    lines = [
        f"identical batches from a `{result['driver']}` policy, {result['iterations']} iterations",
        "",
        "| method | dead updates | dead groups |",
        "| --- | --- | --- |",
    ]
    for m, pct in result["pct_dead"].items():
        lines.append(
            f"| {m} | {result['dead'][m]}/{result['iterations']} ({pct:.0f} %) | {result['pct_dead_groups'][m]:.0f} % |"
        )
    return "\n".join(lines)
