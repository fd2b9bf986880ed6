"""The ``rlvp-train`` console script: the trainer's CLI, or one line naming the install
command when the ``train`` extra is missing (a core-only install has no click or torch)."""

from __future__ import annotations

import sys

from rlvp_dsl.cli import EXIT_USAGE

INSTALL = "pip install torch==2.13.0 && pip install -e '.[train]'   (torch first: see the README)"


def run() -> None:
    """Console-script entry point."""
    try:
        from trainer.cli import main
    except ModuleNotFoundError as exc:
        print(f"rlvp-train: error: the trainer needs the train extra ({exc.name} is not installed): {INSTALL}",
              file=sys.stderr)
        sys.exit(EXIT_USAGE)
    main()
