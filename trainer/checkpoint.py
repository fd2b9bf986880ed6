"""Checkpoint and resume with identical continuation.

A checkpoint (``out_dir/checkpoint.pt``, one torch file) holds:

* the trainable parameters (the LoRA adapter; the frozen base is rebuilt from
  the config and its seed, or reloaded from its path);
* the optimiser state;
* the RNG states: torch CPU (and CUDA when present), Python ``random``, NumPy;
* the annealing state and the loop counters (next iteration, episodes generated);
* the config it was trained with (a resumed run must use the same one).

Rollouts are seeded from (seed, iteration, round, group), so together with the
RNG states a resumed run repeats exactly what the uninterrupted run would have
done; tests/unit/test_train_smoke.py proves it.

The loop keeps an in-memory `capture` of the state after each finished iteration;
Ctrl-C writes that capture (the last finished iteration, never a half-updated one)
and raises `Interrupted`.  Periodic checkpoints (``checkpoint_every``) write it too.

What else a run folder holds, and ``--overwrite``: `trainer.run_folder`.
"""

from __future__ import annotations

import copy
import io
import os
import random
from pathlib import Path
from typing import Any

import torch

FILENAME = "checkpoint.pt"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # pragma: no cover
        pass
    if torch.cuda.is_available():  # pragma: no cover - GPU only
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():  # pragma: no cover
        torch.cuda.set_rng_state_all(state["cuda"])


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that train (LoRA), by name, detached copies."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during training, after the checkpoint of the last finished iteration was written.

    Attributes: ``checkpoint`` (its path, None when nothing was written), ``iterations``
    (iterations finished and saved), ``out_dir``.
    """

    def __init__(self, checkpoint: Path | None, iterations: int, out_dir: str):
        super().__init__(f"interrupted after {iterations} iterations")
        self.checkpoint, self.iterations, self.out_dir = checkpoint, iterations, out_dir

    def __reduce__(self):  # picklable: a --compare worker sends it back to the parent
        return (type(self), (self.checkpoint, self.iterations, self.out_dir))


def capture(
    *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, schedule_state: dict, counters: dict, config: dict
) -> dict[str, Any]:
    """The training state now, as copies (later steps do not change it): what `write` saves."""
    return {
        "trainable": trainable_state(model),
        "optimizer": copied(optimizer.state_dict()),
        "rng": rng_state(),
        "schedule": copy.deepcopy(schedule_state),
        "counters": dict(counters),
        "config": config,
    }


def copied(state: Any) -> Any:
    """A copy of `state` (nested dicts, lists and tuples of tensors and plain values, e.g.
    `torch.optim.Optimizer.state_dict`) that later in-place updates of its tensors do not change:
    tensors are detached clones, containers are rebuilt, anything else goes through `copy.deepcopy`.

    The same values as ``copy.deepcopy(state)`` (tensor storage shared between two entries is not
    kept shared; an optimiser's state never shares it) at a fraction of the cost: `capture` runs after
    every iteration, and ``Tensor.__deepcopy__`` costs ~20 us a tensor in Python (AdamW keeps three
    per trainable parameter).
    """
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {k: copied(v) for k, v in state.items()}
    if isinstance(state, list):
        return [copied(v) for v in state]
    if isinstance(state, tuple):
        return tuple(copied(v) for v in state)
    return copy.deepcopy(state)


class CheckpointWriteError(OSError):
    """The checkpoint could not be written (a full disk, a folder gone): the previous
    ``checkpoint.pt``, if any, is kept as it was.  ``filename`` is the checkpoint's path;
    ``str()`` is one line that says what happened and what is kept."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class CheckpointReadError(ValueError):
    """``checkpoint.pt`` cannot be read back (cut short, overwritten, not a checkpoint): the
    message names the file and how to recover (``--overwrite`` starts over)."""


def _write_file(path: Path, data: bytes | memoryview) -> None:
    """Write `data` to a new file `path` and flush it to the disk (what `write` renames into place)."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write(out_dir: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write a `capture` to ``out_dir/checkpoint.pt`` atomically: serialised in memory, written to
    ``checkpoint.pt.tmp`` in the same folder, flushed, then renamed over the old one
    (`os.replace`), so a crash or a full disk never leaves a half-written checkpoint; returns its path.

    Raises:
        CheckpointWriteError: (an OSError) the file could not be written; the temporary file is
            removed and the previous checkpoint is untouched.
    """
    path = Path(out_dir) / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".pt.tmp")
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    try:
        _write_file(tmp, buffer.getbuffer())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        kept = (
            f"the previous checkpoint, of iteration {_iterations_in(path)}, is kept"
            if path.is_file()
            else "no checkpoint was written"
        )
        raise CheckpointWriteError(
            exc.errno, f"cannot write the checkpoint {path}: {exc.strerror or exc}; {kept}", str(path)
        ) from None
    return path


def _iterations_in(path: Path) -> str:
    try:
        return str(int(load_checkpoint(path)["counters"]["iteration"]))
    except (OSError, ValueError, KeyError, TypeError):
        return "?"


#: What a checkpoint dict holds (`capture`); a file without these keys is not one.
KEYS = ("trainable", "optimizer", "rng", "schedule", "counters", "config")


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint file (a folder means its checkpoint.pt).

    Raises:
        FileNotFoundError: no checkpoint there (names the path).
        CheckpointReadError: (a ValueError) the file is cut short, corrupt or not a checkpoint;
            the message names it and says how to recover.
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    recover = "restore a copy of it, or give --overwrite to start the run over"
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except OSError as exc:
        raise CheckpointReadError(f"{path}: cannot read the checkpoint: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - torch/pickle/zipfile raise many kinds for a damaged file
        reason = _first_words(str(exc)) if str(exc).strip() else type(exc).__name__
        raise CheckpointReadError(
            f"{path}: not a readable checkpoint (corrupt or cut short: {reason}); {recover}"
        ) from None
    missing = [k for k in KEYS if not isinstance(state, dict) or k not in state]
    if missing or not isinstance(state.get("counters"), dict) or "iteration" not in state["counters"]:
        raise CheckpointReadError(
            f"{path}: not an rlvp-train checkpoint (missing {', '.join(missing) or 'counters'}); {recover}"
        )
    return state


def _first_words(text: str, limit: int = 200) -> str:
    """The first line of a library's error, cut at a word (with "...") when past ``limit`` characters,
    never mid-word or mid-sentence without saying so."""
    line = text.strip().splitlines()[0].strip()
    if len(line) <= limit:
        return line
    return line[:limit].rsplit(" ", 1)[0].rstrip(" ,;:(") + " ..."


def restore_model(model: torch.nn.Module, trainable: dict[str, torch.Tensor]) -> None:
    """Copy saved trainable parameters into ``model``.

    Raises:
        ValueError: the names differ (a different model or LoRA config).
    """
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if set(params) != set(trainable):
        missing = sorted(set(params) - set(trainable))[:3]
        extra = sorted(set(trainable) - set(params))[:3]
        raise ValueError(f"checkpoint does not match the model: missing {missing}, unexpected {extra}")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(trainable[n])


#: Config fields a resumed run may change: they do not change what the run computes.
RESUMABLE_CHANGES = frozenset(
    {
        "iterations",
        "out_dir",
        "checkpoint_every",
        "log_every",
        "tensorboard",
        "threads",
        "device",
        "success_threshold",
        "success_window",
        "token_page_every",
        "token_page_rollouts",
    }
)


class CheckpointMismatch(ValueError):
    """``--resume`` with a config that differs from the checkpoint's in a field that matters."""


def check_resumable(saved: dict[str, Any], now: dict[str, Any], where: str | os.PathLike) -> None:
    """Raise `CheckpointMismatch` when ``now`` (a config dict) differs from the checkpoint's ``saved``
    config outside `RESUMABLE_CHANGES` (rule files are compared by file name: a path may be
    relative to another folder).  Fields only one of them has (an older checkpoint) are skipped."""
    diffs = []
    for key in sorted(set(saved) & set(now) - RESUMABLE_CHANGES):
        a, b = saved[key], now[key]
        if key in ("rules", "auto_rules", "model") and isinstance(a, str) and isinstance(b, str):
            a, b = Path(a).name, Path(b).name
        if a != b:
            diffs.append(f"{key} = {saved[key]!r} there, {now[key]!r} now")
    if diffs:
        more = f" (and {len(diffs) - 2} more)" if len(diffs) > 2 else ""
        raise CheckpointMismatch(
            f"{where} was trained with another config: {'; '.join(diffs[:2])}{more}; resume "
            f"with the config it was trained with, or give --overwrite to start over"
        )


def check_resume(out_dir: str | os.PathLike, now: dict[str, Any]) -> int:
    """``--resume``: raise `CheckpointMismatch` when the checkpoint in ``out_dir`` was trained with
    another config (see `check_resumable`), `MetricsGap` when the run's metrics.jsonl lacks rows of
    iterations it holds (`check_metrics_cover`), else return the iterations it holds.  Run before
    anything else decides, e.g. that a finished run has nothing left to train."""
    state = load_checkpoint(out_dir)
    check_resumable(state["config"], now, Path(out_dir) / FILENAME)
    done = int(state["counters"]["iteration"])
    check_metrics_cover(out_dir, done)
    return done


class MetricsGap(ValueError):
    """``--resume`` of a run whose metrics.jsonl lacks rows of the iterations its checkpoint holds."""


def check_metrics_cover(out_dir: str | os.PathLike, done: int) -> None:
    """Refuse to resume a run whose ``metrics.jsonl`` is missing or lacks a row of an iteration
    ``0 .. done - 1`` the checkpoint holds: the resumed run would log only the iterations after
    them, and its summary, curves and ``--compare`` table would count a run that starts at
    iteration ``done`` (its first iterations' success and episodes lost without a trace).  The
    rows cannot be made again; the checkpoint is left as it is.

    Raises:
        MetricsGap: naming the file, the missing iterations and the ways on (restore the file, or
            ``--overwrite`` to start again).
    """
    from trainer.metrics import FILENAME as METRICS, read_metrics

    if done <= 0:
        return
    path = Path(out_dir) / METRICS
    recover = f"restore {METRICS} from a copy, or start the run again with --overwrite"
    if not path.is_file():
        raise MetricsGap(
            f"--resume: {Path(out_dir) / FILENAME} holds {done} iteration(s) but {path} is missing: the resumed "
            f"run's summary and curves would start at iteration {done}, without iterations {_span(range(done))}; "
            f"{recover}"
        )
    logged = {int(r["iteration"]) for r in read_metrics(path, notes=[])}
    missing = [i for i in range(done) if i not in logged]
    if missing:
        raise MetricsGap(
            f"--resume: {Path(out_dir) / FILENAME} holds {done} iteration(s) but {path} has no row of "
            f"iteration(s) {_span(missing)}: the resumed run's summary and curves would miss them; {recover}"
        )


def _span(iterations: Any) -> str:
    """``0-2`` for a run of consecutive iterations, else them listed (the first 5)."""
    its = list(iterations)
    if len(its) > 1 and its[-1] - its[0] == len(its) - 1:
        return f"{its[0]}-{its[-1]}"
    return ", ".join(map(str, its[:5])) + (" ..." if len(its) > 5 else "")


def iterations_done(out_dir: str | os.PathLike) -> int:
    """Iterations a run folder's checkpoint holds (0 when it has none).

    Raises:
        CheckpointReadError: the checkpoint cannot be read back (see `load_checkpoint`).
    """
    path = Path(out_dir) / FILENAME
    if not path.is_file():
        return 0
    return int(load_checkpoint(path)["counters"]["iteration"])
