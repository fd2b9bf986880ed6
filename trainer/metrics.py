"""Per-iteration metrics (JSONL, optional TensorBoard) and run summaries.

Metric names are namespaced:

| name | meaning |
| --- | --- |
| ``rollout/success_rate`` | mean outcome of the iteration's first round of episodes |
| ``rollout/frac_dead_groups`` | groups whose per-token advantages are all zero (``dapo``: over every group generated, dropped ones dead) |
| ``rollout/dead_iteration`` | 1 when every group is dead (no policy gradient) |
| ``rollout/episodes_generated`` | cumulative episodes generated, resampling included |
| ``rollout/rounds`` | generation rounds this iteration (``dapo``: up to ``dapo_max_rounds``; else 1) |
| ``rollout/episode_calls`` | tool calls per episode |
| ``process/violations_per_episode`` | negative credits per episode |
| ``process/discharges_per_episode`` | obligation discharges (and progress credits) per episode |
| ``process/credit_per_episode`` | summed process credit per episode (before the weight) |
| ``process/flagged_credits`` | credit values the source gave as None, NaN or infinite, calls whose credits sum past a float, and episodes whose weighted credit is no float32 advantage, this iteration (each episode scored once); they got no credit |
| ``process/amplified_groups`` | ``scalar_fold``: groups with equal outcomes whose process credit's differences the group std scaled up to unit-size advantages (`rlvp_dsl.advantages.amplified_groups`) |
| ``process/weight`` | the (annealed) process weight used this iteration |
| ``loss/policy``, ``loss/kl``, ``loss/clip_frac`` | the update's diagnostics |
| ``loss/grad_norm`` | total gradient norm of the first update pass, before clipping (0 without a step) |
| ``policy/entropy`` | mean token entropy of the policy on action tokens |
| ``perf/tokens_per_s``, ``perf/iteration_s`` | throughput |
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

FILENAME = "metrics.jsonl"


class MetricsLogger:
    """Append one JSON object per iteration to ``out_dir/metrics.jsonl``.

    Args:
        out_dir: folder (created).
        tensorboard: also write TensorBoard scalars when ``torch.utils.tensorboard``
            is importable (silently skipped otherwise, with a note in ``self.note``).
        append: keep existing lines (resume) instead of truncating.
        keep_below: with ``append``, first drop the rows of iterations ``>= keep_below`` (rows a
            killed run logged after its last checkpoint: the resumed run logs them again).
    """

    def __init__(
        self, out_dir: str | os.PathLike, tensorboard: bool = False, append: bool = False, keep_below: int | None = None
    ):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / FILENAME
        self.note = ""
        if append and keep_below is not None and self.path.exists():
            notes: list[str] = []
            kept = [r for r in read_metrics(self.path, notes=notes) if int(r["iteration"]) < keep_below]
            self.note = "; ".join(notes)
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept), encoding="utf-8")
            os.replace(tmp, self.path)
        self._fh = open(self.path, "a" if append else "w", encoding="utf-8")
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

                self.tb = SummaryWriter(str(self.dir / "tb"))
            except Exception as exc:  # pragma: no cover - depends on installs
                self.note = f"tensorboard not available ({exc.__class__.__name__}); JSONL only"

    def log(self, row: dict[str, Any]) -> None:
        """Append `row` as one line (flushed).

        Raises:
            OSError: the line cannot be written (a full disk); ``filename`` is the metrics file.
        """
        try:
            self._fh.write(json.dumps(row, sort_keys=True) + "\n")
            self._fh.flush()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(self.path)) from None
        if self.tb is not None:
            step = int(row.get("iteration", 0))
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and "/" in key:
                    self.tb.add_scalar(key, value, step)

    def close(self) -> None:
        self._fh.close()
        if self.tb is not None:
            self.tb.close()


class MetricsFileError(ValueError):
    """A metrics.jsonl line is not a JSON object with an ``iteration``; names the file and line."""


def read_metrics(path: str | os.PathLike, *, notes: list[str] | None = None) -> list[dict]:
    """The rows of a ``metrics.jsonl`` (a run folder means its metrics.jsonl), in file order.

    A last line cut off mid-write (no newline, not JSON: the run was killed while logging) is
    dropped when `notes` is given, with a warning appended to it (``--resume`` then logs that
    iteration again); without `notes` it is an error that says so.

    Raises:
        FileNotFoundError: no such file (the message names it).
        MetricsFileError: a line that is not a JSON object with an ``iteration`` (``file:line``,
            and how to recover).
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics file (a run folder holds {FILENAME})")
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if n == len(lines) and not line.endswith("\n"):  # cut off mid-write
                if notes is not None:
                    notes.append(
                        f"warning: {path}:{n}: dropped the last line, cut off mid-write ({len(line)} characters)"
                    )
                    break
                raise MetricsFileError(
                    f"{path}:{n}: the last line is cut off mid-write (the run was stopped "
                    f"while logging): delete that line, or continue the run with --resume, "
                    f"which drops it"
                ) from None
            raise MetricsFileError(
                f"{path}:{n}:{exc.colno}: not a JSON line ({exc.msg} column {exc.colno}); is this a metrics.jsonl "
                f"written by rlvp-train? Delete or repair that line (or start the run over: rlvp-train --overwrite)"
            ) from None
        if not isinstance(row, dict) or "iteration" not in row:
            raise MetricsFileError(f"{path}:{n}: not a metrics row (a JSON object with 'iteration')")
        rows.append(row)
    return rows


def trailing_mean(values: Sequence[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at each position (shorter at the start)."""
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def episodes_to_success(rows: Sequence[dict], threshold: float = 0.5, window: int = 3) -> float | None:
    """Episodes generated (cumulative, resampling included) when the trailing-``window``
    mean success rate first reaches ``threshold``; None if never."""
    succ = trailing_mean([float(r["rollout/success_rate"]) for r in rows], window)
    for i, (row, s) in enumerate(zip(rows, succ, strict=True)):
        if i >= window - 1 and s >= threshold:  # full windows only: one lucky early batch does not count
            return float(row["rollout/episodes_generated"])
    return None


#: A run *collapsed* when its trailing success reached `COLLAPSE_PEAK` and its final success
#: (the last ``final_k`` iterations) ended below `COLLAPSE_FINAL` (`summarise_run`).
COLLAPSE_PEAK, COLLAPSE_FINAL = 0.8, 0.5


def summarise_run(rows: Sequence[dict], threshold: float = 0.5, window: int = 3, final_k: int = 5) -> dict[str, Any]:
    """One run's summary: episodes to threshold, dead iterations, final success, ...

    ``peak_success`` is the highest trailing-``window`` mean success (full windows only; the
    best iteration when the run is shorter than ``window``); ``collapsed`` is 1 when it reached
    `COLLAPSE_PEAK` (0.8) and ``final_success`` (mean of the last ``final_k`` iterations) ended
    below `COLLAPSE_FINAL` (0.5): a solved policy lost, not one that never learned.

    Raises:
        ValueError: no rows.
    """
    if not rows:
        raise ValueError("no metrics rows to summarise")
    last = rows[-final_k:]
    success = [float(r["rollout/success_rate"]) for r in rows]
    trailing = trailing_mean(success, window)[window - 1 :] or [max(success)]
    final = sum(success[-final_k:]) / len(last)
    peak = max(trailing)
    return {
        "iterations": len(rows),
        "episodes_to_threshold": episodes_to_success(rows, threshold, window),
        "dead_iterations": int(sum(int(r["rollout/dead_iteration"]) for r in rows)),
        "frac_dead_groups": sum(float(r["rollout/frac_dead_groups"]) for r in rows) / len(rows),
        "final_success": final,
        "peak_success": peak,
        "collapsed": int(peak >= COLLAPSE_PEAK and final < COLLAPSE_FINAL),
        "violations_per_episode": sum(float(r["process/violations_per_episode"]) for r in last) / len(last),
        "episodes_generated": int(rows[-1]["rollout/episodes_generated"]),
        "wall_s": sum(float(r.get("perf/iteration_s", 0.0)) for r in rows),
    }


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """(mean, population std, n) over the non-None values; (None, None, 0) when none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None, 0
    m = sum(vals) / len(vals)
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals)), len(vals)


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence (the mean of the two middle values for an even count).

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("the median of no values")
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def seed_stats(values: Iterable[float | None], none_is_never: bool = False) -> dict[str, Any]:
    """Mean, population std, median and range of one summary column over seeds.

    Args:
        values: one value per seed; None for a seed without one (e.g. one that never
            reached the success threshold).
        none_is_never: None counts as +infinity in the median and the range (``never``):
            a median over every seed, not only the ones that got there.  Otherwise Nones
            are left out of everything.

    Returns:
        ``{"mean", "std", "n"}`` over the non-None values (`mean_std`; None, None, 0 when none),
        and ``"median"``, ``"min"``, ``"max"`` (None for +infinity, or when no value), and
        ``"seeds"``, the number of seeds given.  Median of an even count: the mean of the two
        middle values (+infinity when either is).
    """
    given = list(values)
    m, s, n = mean_std(given)
    finite = [float(v) for v in given if v is not None]
    ranked = finite + ([math.inf] * (len(given) - len(finite)) if none_is_never else [])
    out: dict[str, Any] = {"mean": m, "std": s, "n": n, "seeds": len(given)}
    if not ranked:
        return {**out, "median": None, "min": None, "max": None}
    med, lo, hi = median(ranked), min(ranked), max(ranked)
    return {**out, **{k: (None if math.isinf(v) else v) for k, v in (("median", med), ("min", lo), ("max", hi))}}


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class GridClock:
    """Iterations done over several runs (``--compare``: every method x seed) and the ETA of the rest.

    ``done`` may be a ``multiprocessing.Value`` shared by worker processes; times are wall-clock
    (``time.time``) so that every process measures from the same start.
    """

    def __init__(self, remaining: int, done: Any = None, start: float | None = None):
        self.remaining = remaining  # iterations still to run when the grid started
        self.done = done
        self._local = 0
        self.start = time.time() if start is None else start

    def tick(self) -> None:
        if self.done is None:
            self._local += 1
        else:
            with self.done.get_lock():
                self.done.value += 1

    def eta(self) -> str:
        done = self._local if self.done is None else self.done.value
        if not done:
            return f"all runs: 0/{self.remaining} iterations"
        left = max(0, self.remaining - done)
        per = (time.time() - self.start) / done
        return f"all runs: {done}/{self.remaining} iterations, ETA {_duration(left * per)}"


class ProgressBar:
    """A run's progress: a tqdm bar on a terminal; off a terminal (CI, nohup, a pipe) one line
    every ``every`` iterations, at least one a ``min_interval_s``, and on the last iteration
    (``say=None``: neither).

    A line: ``rlvp seed 0: iteration 10/60, success 0.41, loss -0.0123, dead groups 0.25,
    elapsed 34 s, ETA 2 min 50 s`` (+ the grid's ETA under ``--compare``).
    """

    def __init__(
        self,
        total: int,
        initial: int,
        name: str,
        *,
        bar: bool,
        say: Callable[[str], None] | None,
        every: int = 5,
        clock: GridClock | None = None,
        min_interval_s: float = 60.0,
    ):
        self.total, self.initial, self.name = total, initial, name
        self.say, self.every, self.clock, self.min_interval_s = say, every, clock, min_interval_s
        self.t0 = self._last = time.perf_counter()
        self.bar = None
        if bar:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=name, dynamic_ncols=True)

    def update(self, row: dict) -> None:
        """Report one finished iteration (its metrics row)."""
        if self.clock is not None:
            self.clock.tick()
        it = int(row["iteration"]) + 1  # iterations finished
        if self.bar is not None:
            post = {
                "succ": f"{row['rollout/success_rate']:.2f}",
                "dead": f"{row['rollout/frac_dead_groups']:.2f}",
                "w": f"{row['process/weight']:.2f}",
            }
            if self.clock is not None:
                post["all"] = self.clock.eta().removeprefix("all runs: ")
            self.bar.set_postfix(post)
            self.bar.update(1)
            return
        if self.say is None:
            return
        now = time.perf_counter()
        due = (self.every and (it - self.initial) % self.every == 0) or it == self.total
        if not (due or now - self._last >= self.min_interval_s):
            return
        self._last = now
        elapsed = now - self.t0
        left = (self.total - it) * elapsed / max(1, it - self.initial)
        line = (
            f"{self.name}: iteration {it}/{self.total}, success {row['rollout/success_rate']:.2f}, "
            f"loss {row['loss/policy']:.4f}, dead groups {row['rollout/frac_dead_groups']:.2f}, "
            f"elapsed {_duration(elapsed)}, ETA {_duration(left)}"
        )
        if self.clock is not None:
            line += f"; {self.clock.eta()}"
        self.say(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
