"""Checkpoint and resume with identical continuation.

A checkpoint (``out_dir/checkpoint.pt``, one torch file) holds:

* the trainable parameters (the LoRA adapter; the frozen base is rebuilt from
  the config and its seed, or reloaded from its path);
* the optimiser state;
* the RNG states: torch CPU (and CUDA when present), Python ``random``, NumPy;
* the annealing state and the loop counters (next iteration, episodes generated);
* the config it was trained with (a resumed run must use the same one).

Rollouts are seeded from (seed, iteration, group, round), so together with the
RNG states a resumed run repeats exactly what the uninterrupted run would have
done; tests/unit/test_train_smoke.py proves it.
"""

from __future__ import annotations

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


def save_checkpoint(out_dir: str | os.PathLike, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    schedule_state: dict, counters: dict, config: dict) -> Path:
    """Write ``out_dir/checkpoint.pt`` atomically (temp file + rename); returns its path."""
    path = Path(out_dir) / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "trainable": trainable_state(model),
        "optimizer": optimizer.state_dict(),
        "rng": rng_state(),
        "schedule": schedule_state,
        "counters": counters,
        "config": config,
    }
    tmp = path.with_suffix(".pt.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint file (a folder means its checkpoint.pt).

    Raises:
        FileNotFoundError: no checkpoint there (names the path).
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    return torch.load(path, map_location="cpu", weights_only=False)


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
