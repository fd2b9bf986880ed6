"""Learning curves as PNG (matplotlib, Agg backend: no display needed).

`plot_curves(runs, path)` draws, per method (mean over seeds, light lines per seed):

1. success rate (trailing mean) against episodes generated -- the efficiency view,
   resampling included;
2. fraction of dead groups against iteration;
3. violations per episode and the process weight against iteration.

`load_runs(paths)` reads what ``rlvp-train plot`` is given: run folders, ``metrics.jsonl``
files, or a ``--compare`` folder (its ``METHOD/seedK`` runs), as `plot_curves` takes them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from trainer.metrics import trailing_mean

COLORS = {
    "grpo": "#d62728",
    "dapo": "#ff7f0e",
    "scalar_fold": "#9467bd",
    "rlvp": "#2ca02c",
    "rlvp_auto": "#17becf",
    "rlvp_noanneal": "#8c564b",
}


def load_runs(paths: Sequence[str | os.PathLike]) -> dict[str, list[list[dict]]]:
    """Label -> per-run metric rows, from run folders, metrics.jsonl files or comparison folders.

    A run's label is its method; runs of the same method and seed from different folders
    are labelled ``method (folder)`` so that they do not pass for seeds of one method.

    Raises:
        FileNotFoundError: a path that is neither a metrics file nor a folder holding runs.
        trainer.metrics.MetricsFileError: a malformed line (``file:line``); a file with no rows.
    """
    from trainer.run_folder import nested_runs
    from trainer.metrics import FILENAME, MetricsFileError, read_metrics

    found: list[tuple[Path, list[dict]]] = []
    for given in paths:
        path = Path(given)
        if path.is_file() and path.suffix not in (".jsonl", ".json", ""):
            raise FileNotFoundError(
                f"{path}: a {path.suffix} file, not a run: give a run folder, its {FILENAME} or a --compare folder"
            )
        runs = [path] if path.is_file() or (path / FILENAME).is_file() else nested_runs(path)
        if not runs:
            what = "no such file or folder" if not path.exists() else f"no {FILENAME} and no runs of a comparison in it"
            raise FileNotFoundError(f"{path}: {what}")
        for run in runs:
            rows = read_metrics(run)
            if not rows:
                raise MetricsFileError(f"{run}: no metrics rows yet")
            found.append((run if run.is_dir() else run.parent, rows))
    keys = [(rows[0].get("method", "run"), rows[0].get("seed")) for _, rows in found]
    out: dict[str, list[list[dict]]] = {}
    for (folder, rows), key in zip(found, keys, strict=True):
        label = key[0] if keys.count(key) == 1 else f"{key[0]} ({folder})"
        out.setdefault(label, []).append(rows)
    return out


def plot_curves(
    runs: Mapping[str, Sequence[Sequence[dict]]],
    path: str | os.PathLike,
    *,
    window: int = 3,
    title: str = "",
    threshold: float | None = 0.5,
) -> Path:
    """Write the learning curves of ``runs`` (method -> list of per-seed metric rows) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax_s, ax_d, ax_v = axes
    for k, (method, seeds) in enumerate(runs.items()):
        color = COLORS.get(method, f"C{k % 10}")
        for j, rows in enumerate(seeds):
            if not rows:
                continue
            eps = [r["rollout/episodes_generated"] for r in rows]
            succ = trailing_mean([r["rollout/success_rate"] for r in rows], window)
            its = [r["iteration"] for r in rows]
            label = method if j == 0 else None
            ax_s.plot(eps, succ, color=color, alpha=0.85, lw=1.4, label=label)
            ax_d.plot(
                its,
                trailing_mean([r["rollout/frac_dead_groups"] for r in rows], window),
                color=color,
                alpha=0.85,
                lw=1.2,
                label=label,
            )
            ax_v.plot(
                its,
                trailing_mean([r["process/violations_per_episode"] for r in rows], window),
                color=color,
                alpha=0.85,
                lw=1.2,
                label=label,
            )
            if any(r["process/weight"] for r in rows):
                ax_v.plot(its, [r["process/weight"] for r in rows], color=color, ls=":", lw=1.0)
    if threshold is not None:
        ax_s.axhline(threshold, color="grey", lw=0.8, ls="--")
    ax_s.set_xlabel("episodes generated (resampling included)")
    ax_s.set_ylabel(f"success rate (trailing mean of {window})")
    ax_s.set_ylim(-0.02, 1.02)
    ax_d.set_xlabel("iteration")
    ax_d.set_ylabel("fraction of dead groups")
    ax_d.set_ylim(-0.02, 1.02)
    ax_v.set_xlabel("iteration")
    ax_v.set_ylabel("violations / episode (solid), process weight (dotted)")
    for ax in axes:
        ax.grid(alpha=0.3)
    ax_s.legend(loc="best", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
