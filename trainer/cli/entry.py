"""The ``rlvp-train`` console script: the trainer's CLI, or one line naming the install
command when the ``train`` extra is missing (a core-only install has no click or torch).

Only the standard library and `rlvp_dsl.cli` (which loads nothing) are imported before `run`
starts, so Ctrl-C while the command loads (click, the trainer's modules) exits 130 quietly, and the
command's standard streams are guarded as the other two CLIs' are (`rlvp_dsl.cli.console`: a full
disk is an error, not exit 0).  Torch is loaded once a run starts; that it is installed is checked
first, without loading it.
"""

from __future__ import annotations

import importlib.util
import sys

from rlvp_dsl.cli import EXIT_INTERRUPTED, EXIT_USAGE, console

PROG = "rlvp-train"
INSTALL = "pip install torch==2.13.0 && pip install -e '.[train]'   (torch first: see the README)"


def run() -> None:
    """Console-script entry point."""
    try:
        from trainer.cli.train_command import main

        _require("torch")
    except ModuleNotFoundError as exc:
        print(
            f"{PROG}: error: the trainer needs the train extra ({exc.name} is not installed): {INSTALL}",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    console(lambda: main.main(standalone_mode=False), PROG)


def _require(name: str) -> None:
    """Raise ModuleNotFoundError when the package ``name`` is not installed (without importing it)."""
    try:
        found = importlib.util.find_spec(name) is not None
    except ValueError:  # sys.modules[name] is None: blocked
        found = False
    if not found:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
