"""``rlvp-train plot RUN_DIR... [-o PNG]``: the learning curves of finished or running runs.

RUNS are run folders, ``metrics.jsonl`` files or ``--compare`` folders; several overlay.  The
PNG goes to ``-o``, else ``RUN_DIR/curves.png`` for one run and ``./curves.png`` for several;
an existing image is replaced and a note says so.  Errors are `trainer.cli.train_command`'s: one
``rlvp-train: error:`` line, exit 2 for usage and I/O, 1 for a bad metrics file.
"""

from __future__ import annotations

from pathlib import Path

import click

from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE
from trainer.cli.checks import check_writable
from trainer.cli.common import PROG, Command, Failure, WholeNumber, error


def _image_formats() -> list[str]:
    """The file extensions matplotlib can write (png, pdf, svg, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def _check_plot_out(out: str, runs: tuple[str, ...]) -> None:
    """``plot -o``: an image file matplotlib can write, and never one of the inputs (a usage error)."""
    from trainer.metrics import FILENAME

    formats = _image_formats()
    ext = Path(out).suffix.lstrip(".").lower()
    if ext not in formats:
        got = f"'.{ext}'" if ext else "no extension"
        raise click.BadParameter(
            f"must be an image file ending in one of {', '.join('.' + f for f in formats)} (got {got})",
            param_hint="'-o'",
        )
    target = Path(out).resolve()
    inputs = {Path(r).resolve() for r in runs} | {(Path(r) / FILENAME).resolve() for r in runs}
    if target in inputs or target.name == FILENAME:
        raise click.BadParameter(f"{out} is an input of the plot: give another file", param_hint="'-o'")


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("runs", nargs=-1, required=True, type=click.Path())
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    help="PNG to write (default: RUN_DIR/curves.png for one run, ./curves.png for several)",
)
@click.option(
    "--window",
    type=WholeNumber(1),
    default=3,
    show_default=True,
    help="trailing window (iterations) of the success curve",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="success level drawn as a dashed line",
)
@click.option("--title", default="", help="figure title (default: the runs' labels)")
def plot(runs, out, window, threshold, title):
    """Write the learning curves of RUNS (run folders, metrics.jsonl files or --compare folders;
    several overlay) as a PNG and print its path."""
    from trainer.metrics import MetricsFileError
    from trainer.experiments.plots import load_runs, plot_curves

    if out is not None:
        _check_plot_out(out, runs)
        try:
            check_writable(str(Path(out).parent))
        except Failure as exc:
            error(str(exc))
            return exc.code
    try:
        curves = load_runs(runs)
        if out is None:
            first = Path(runs[0])
            out = str((first if first.is_dir() else first.parent) / "curves.png") if len(runs) == 1 else "curves.png"
        replaced = Path(out).is_file()
        path = plot_curves(curves, out, window=window, threshold=threshold, title=title or ", ".join(curves))
    except FileNotFoundError as exc:
        error(str(exc))
        return EXIT_USAGE
    except MetricsFileError as exc:
        error(str(exc))
        return EXIT_INPUT_ERRORS
    except (KeyError, TypeError) as exc:  # a JSON line without the curves' metrics
        error(f"{runs[0] if len(runs) == 1 else 'a run'}: a metrics row lacks {exc}: not written by rlvp-train?")
        return EXIT_INPUT_ERRORS
    except OSError as exc:
        error(f"cannot write {exc.filename or out}: {exc.strerror or exc}")
        return EXIT_USAGE
    click.echo(path)
    if replaced:
        click.echo(f"{PROG}: note: {path} existed and was replaced", err=True)
    return EXIT_OK
