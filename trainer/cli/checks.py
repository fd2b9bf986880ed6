"""What ``rlvp-train`` checks before anything trains, so that a mistake costs no training and loses
no earlier work: the output folder (writable, not inside another run, free unless ``--resume`` or
``--overwrite``), the config's environment and rule files; and ``--overwrite``'s clearing, done
once those checks passed.

A folder problem is a `Failure` (exit 2); a config problem a `ConfigError` naming the file and the
line of its key (exit 1).
"""

from __future__ import annotations

from pathlib import Path

import click

from rlvp_dsl.cli import EXIT_USAGE
from trainer.cli.common import PROG, Failure
from trainer.config import ConfigError, TrainConfig
from trainer.config_text import key_location, table_key_line
from trainer.methods import METHODS


# ----------------------------------------------------------------------------
# the output folder
# ----------------------------------------------------------------------------
def check_writable(out_dir: str) -> None:
    """Refuse an output folder that cannot be created (``--out /proc/nope``, a file in the way): a
    probe creates the missing folders and removes them again, so a later mistake leaves nothing."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise Failure(f"cannot write {out_dir}: it is a file, not a folder", EXIT_USAGE)
    missing = [p for p in [path, *path.parents] if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Failure(f"cannot write {out_dir}: {exc.strerror or exc}", EXIT_USAGE) from None
    for folder in missing:  # deepest first
        folder.rmdir()


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


def inside_a_run(out_dir: str, itself: bool = True) -> Path | None:
    """The single run's folder that ``out_dir`` lies in (a ``--compare`` must not write there; nor a
    single run below another: ``itself=False``), if any."""
    from trainer.checkpoint import FILENAME
    from trainer.metrics import FILENAME as METRICS

    here = Path(out_dir).resolve()
    for folder in [here, *here.parents] if itself else here.parents:
        if (folder / METRICS).is_file() or (folder / FILENAME).is_file():
            return folder
    return None


def inside_a_grid(out_dir: str) -> Path | None:
    """The ``--compare`` or ``--paired`` folder that ``out_dir`` lies below, if any: a folder above it
    that holds the grid's runs (``METHOD/seedK``, ``seedK/driver_METHOD``) or its summary
    (``summary.json`` and ``summary.md``), so that ``--out cmp/rlvp`` does not write beside ``cmp/rlvp/seed0``."""
    from trainer.run_folder import nested_runs

    for folder in Path(out_dir).resolve().parents:
        if ((folder / "summary.json").is_file() and (folder / "summary.md").is_file()) or nested_runs(folder):
            return folder
    return None


def check_run_folder(cfg: TrainConfig, out_dir: str | None, resume: bool, overwrite: bool) -> None:
    """The run's folder: not inside another run, a checkpoint there for ``--resume``, writable, and
    no earlier run in it unless ``--resume`` or ``--overwrite``."""
    from trainer import checkpoint as ckpt
    from trainer.run_folder import nested_runs

    if (inside := inside_a_run(cfg.out_dir, itself=False)) is not None:
        flag = f"--out {cfg.out_dir}" if out_dir else f"out_dir = {cfg.out_dir!r}"
        raise Failure(f"{flag} lies inside the run folder {inside}: a run needs a folder of its own", EXIT_USAGE)
    if (grid := inside_a_grid(cfg.out_dir)) is not None:
        flag = f"--out {cfg.out_dir}" if out_dir else f"out_dir = {cfg.out_dir!r}"
        raise Failure(f"{flag} lies inside the comparison folder {grid}: a run needs a folder of its own", EXIT_USAGE)
    if resume and not (Path(cfg.out_dir) / ckpt.FILENAME).is_file():
        raise Failure(
            f"--resume: {cfg.out_dir} has no {ckpt.FILENAME} to continue from"
            + (" (it holds a comparison: give --compare ... --resume)" if nested_runs(Path(cfg.out_dir)) else ""),
            EXIT_USAGE,
        )
    check_writable(cfg.out_dir)
    check_out(cfg.out_dir, resume, overwrite)


def grid_out(cfg: TrainConfig, out: str | None, suffix: str) -> str:
    """``--out``, else ``<out_dir>_compare`` beside the config's run folder (never inside it)."""
    if out:
        inside = inside_a_run(out)
        if inside is not None:
            raise Failure(
                f"--out {out} lies inside the run folder {inside}: a comparison needs a folder of its own", EXIT_USAGE
            )
        if (grid := inside_a_grid(out)) is not None:
            raise Failure(
                f"--out {out} lies inside the comparison folder {grid}: a comparison needs a folder of its own",
                EXIT_USAGE,
            )
        return out
    return f"{cfg.out_dir.rstrip('/')}_{suffix}"


# ----------------------------------------------------------------------------
# the config
# ----------------------------------------------------------------------------
def check_env(config: str, cfg: TrainConfig) -> None:
    """An environment name or knob the config got wrong: a config error naming the file (exit 1)."""
    from trainer.envs import env_factory

    try:
        env_factory(cfg.env, **cfg.env_args)
    except ValueError as exc:
        knob = next((k for k in cfg.env_args if f"'{k}'" in str(exc) or "bad knob" in str(exc)), None)
        line = knob and _knob_line(config, knob)
        if line:  # the knob's own line in an env_args table
            raise ConfigError(f"{config}:{line}: {knob} = {_toml(cfg.env_args[knob])}: {exc}") from None
        key, value = ("env_args", cfg.env_args) if knob else ("env", cfg.env)
        raise ConfigError(f"{key_location(config, key)}: {key} = {_toml(value)}: {exc}") from None


def _knob_line(config: str, knob: str) -> int | None:
    try:
        return table_key_line(Path(config).read_text(encoding="utf-8"), "env_args", knob)
    except (OSError, UnicodeDecodeError):
        return None


def _toml(value) -> str:
    """A config value as TOML writes it (near enough for a message)."""
    import json

    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    return json.dumps(value)


def check_rule_files(config: str, cfg: TrainConfig, methods: list[str]) -> None:
    """A rule file the config names that does not exist or is a folder: a config error at its key's
    line (exit 1)."""
    for m in methods:
        key = METHODS[m].rules_field
        value = getattr(cfg, key)
        if value and Path(cfg.resolve(value)).is_dir():
            raise ConfigError(
                f"{key_location(config, key)}: {key} = {_toml(value)}: is a folder, not a rule file "
                f"(name the .rlvp file in it)"
            )
        if not Path(cfg.resolve(value)).is_file():
            raise ConfigError(
                f"{key_location(config, key)}: {key} = {_toml(value)}: no such rule file (a relative "
                f"path is looked up in the current folder, then the config file's folder, "
                f"then the repository root)"
            )


def warn_rules(cfg: TrainConfig, methods: list[str]) -> None:
    """Print the lint warnings (RV3xx) of the rule file each credit-using method trains with, once
    per file, one line each (``file:line:col: warning[CODE]: message``; ``rlvp-compile FILE``
    shows them in full), under a ``rlvp-train: warning:`` line that says the run goes on: an empty
    rule set (RV306, an rlvp run that is plain GRPO), an outsized weight (RV304), a duplicate rule
    (RV302).  Never fails: a file with errors is left to `check_rules` / the backend, which report
    them."""
    from rlvp_dsl.diagnostics import sort_and_cap
    from rlvp_dsl.pipeline import check_file

    users = [m for m in methods if METHODS[m].credit_mode != "none"]
    for path in dict.fromkeys(cfg.resolve(getattr(cfg, METHODS[m].rules_field)) for m in users):
        checked = check_file(path, lints=True, cache=True)
        warnings = [d for d in checked.diagnostics if d.severity == "warning"]
        if not checked.ok or not warnings:
            continue
        kept, dropped = sort_and_cap(warnings)
        trained = ", ".join(m for m in users if cfg.resolve(getattr(cfg, METHODS[m].rules_field)) == path)
        n = len(warnings)
        click.echo(
            f"{PROG}: warning: the rule file {path} has {n} lint warning{'s' if n != 1 else ''} "
            f"(in full: rlvp-compile {path}); {trained} trains with it as it is",
            err=True,
        )
        for d in kept:
            click.echo(f"  {d.span.location}: warning[{d.code}]: {d.message}", err=True)
        if dropped:
            click.echo(f"  ... and {dropped} more", err=True)


def check_rules(config: str, cfg: TrainConfig, methods: list[str]) -> None:
    """Load the rule file of each method now (a RuleError names it), before any run starts."""
    from rlvp_dsl import load_program

    check_rule_files(config, cfg, methods)
    for path in dict.fromkeys(cfg.resolve(getattr(cfg, METHODS[m].rules_field)) for m in methods):
        load_program(path)
