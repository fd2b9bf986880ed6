"""What a run folder holds, and ``--overwrite``.

`existing_outputs` lists what earlier trainer runs left in a folder: a run's metrics,
checkpoint, curves, TensorBoard events and token pages; a comparison's summary and its
``METHOD/seedK`` runs; a paired run's ``seedK/paired.json``.  `clear_outputs` removes exactly
those files and the folders they leave empty, never a user's file (``rlvp-train --overwrite``;
`trainer.cli.checks` refuses a folder that holds a run unless ``--resume`` or ``--overwrite``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainer.checkpoint import FILENAME

#: Files the trainer writes into one run's folder (``tb/`` holds TensorBoard events).
RUN_FILES = ("metrics.jsonl", "metrics.jsonl.tmp", FILENAME, FILENAME + ".tmp", "curves.png")
#: Files ``--compare`` and ``--paired`` write beside their runs.
GRID_FILES = ("summary.json", "summary.md", "curves.png", "paired.json")
#: Sub-folders of a run and the files the trainer writes there: TensorBoard events, token pages.
RUN_SUBFOLDERS = {
    "tb": re.compile(r"events\.out\.tfevents\..*"),
    "token_pages": re.compile(r"iter_\d+\.html|index\.html"),
}
_MARKERS = ("metrics.jsonl", FILENAME, "summary.json", "summary.md", "paired.json")


def _is_run(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _MARKERS)


def nested_runs(folder: Path) -> list[Path]:
    """The run folders a comparison (``METHOD/seedK``) or a paired run (``seedK/driver_METHOD``) put under ``folder``."""
    from trainer.methods import METHODS

    seed = re.compile(r"seed-?\d+")
    found = []
    if not folder.is_dir():
        return found
    for child in sorted(folder.iterdir()):
        if not child.is_dir():
            continue
        if child.name in METHODS:
            found += [g for g in sorted(child.iterdir()) if g.is_dir() and seed.fullmatch(g.name) and _is_run(g)]
        elif seed.fullmatch(child.name):
            found += [g for g in sorted(child.iterdir()) if g.is_dir() and g.name.startswith("driver_") and _is_run(g)]
    return found


def _paired_files(folder: Path) -> list[Path]:
    """``seedK/paired.json`` of a paired run under ``folder``."""
    if not folder.is_dir():
        return []
    return sorted(f for f in folder.glob("seed*/paired.json") if re.fullmatch(r"seed-?\d+", f.parent.name))


def existing_outputs(out_dir: str | os.PathLike) -> list[Path]:
    """What earlier trainer runs left in ``out_dir`` (empty: the folder is new or holds none):
    a run's files, a comparison's or paired run's files, and their nested run folders."""
    folder = Path(out_dir)
    if not folder.is_dir():
        return []
    found = [folder / n for n in dict.fromkeys(_MARKERS + RUN_FILES + GRID_FILES) if (folder / n).is_file()]
    found += _paired_files(folder)
    for sub, written in RUN_SUBFOLDERS.items():
        if (folder / sub).is_dir() and any(written.fullmatch(f.name) for f in (folder / sub).iterdir()):
            found.append(folder / sub)
    return found + nested_runs(folder)


def clear_outputs(out_dir: str | os.PathLike) -> list[Path]:
    """Remove what `existing_outputs` lists -- only files the trainer writes, then the folders they
    leave empty; any other file stays.  Returns the files removed."""
    folder = Path(out_dir)
    removed: list[Path] = []

    def clear_run(run: Path, names: tuple[str, ...]) -> None:
        for name in names:
            if (run / name).is_file():
                (run / name).unlink()
                removed.append(run / name)
        for sub, written in RUN_SUBFOLDERS.items():
            if (run / sub).is_dir():
                for f in (run / sub).iterdir():
                    if f.is_file() and written.fullmatch(f.name):
                        f.unlink()
                        removed.append(f)
                _rmdir_if_empty(run / sub)

    nested = nested_runs(folder)
    parents = sorted({run.parent for run in nested} | {f.parent for f in _paired_files(folder)})
    for run in nested:
        clear_run(run, RUN_FILES)
        _rmdir_if_empty(run)
    for f in _paired_files(folder):
        f.unlink()
        removed.append(f)
    for run in parents:
        _rmdir_if_empty(run)  # the method and seed folders those runs leave empty
    if folder.is_dir():
        clear_run(folder, tuple(dict.fromkeys(RUN_FILES + GRID_FILES)))
    return removed


def _rmdir_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (a user's file), or already gone
        pass
