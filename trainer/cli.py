"""``rlvp-train``: train one run, compare methods x seeds, or run the paired mode.

    rlvp-train CONFIG [--method M] [--iterations N] [--seed S] [--out DIR] [--resume]
    rlvp-train CONFIG --compare grpo,rlvp [--seeds 0,1,2] [--jobs 2] [--out DIR]
    rlvp-train CONFIG --paired grpo,rlvp            # first method drives the batches

Exit codes, those of `rlvp_dsl.cli`: 0 ok, 1 the config (or a rule file) has errors,
2 usage or I/O error, 130 interrupted (Ctrl-C).  Progress bars only on a TTY.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, version_text
from trainer.config import ConfigError, TrainConfig, load_config

# Known, harmless library warnings that would otherwise bury the run's output:
# peft on LoRA over the tied lm_head (the adapter is never merged here), and a
# transformers deprecation inside its own code.
warnings.filterwarnings("ignore", message=r".*tie_word_embeddings.*", category=UserWarning)
warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)


def _load(config: str, **overrides) -> TrainConfig:
    return load_config(config, **overrides)


def _split(text: str, flag: str = "--compare") -> list[str]:
    items = [x.strip() for x in text.split(",")]
    if any(not x for x in items):
        raise click.BadParameter(f"'{flag}' has an empty item (got {text!r}): separate names with single commas")
    return items


def _seeds(text: str | None) -> list[int]:
    if not text:
        return [0]
    try:
        seeds = [int(x) for x in _split(text, "--seeds")]
    except ValueError:
        raise click.BadParameter(f"'--seeds' must be comma-separated integers (got {text!r})") from None
    if not seeds:
        raise click.BadParameter(f"'--seeds' names no seed (got {text!r})")
    return seeds


def run_compare(config: str, methods: str, seeds: str | None, iterations: int | None, out: str | None,
                jobs: int = 1) -> int:
    from trainer.compare import compare
    from trainer.methods import get_method

    names = _split(methods)
    for m in names:
        get_method(m)
    cfg = _load(config, iterations=iterations)
    out_dir = out or str(Path(cfg.out_dir) / "compare")
    table, _ = compare(cfg, names, _seeds(seeds), out_dir, jobs=jobs)
    click.echo(table)
    click.echo(f"\nwrote {out_dir}/summary.json, {out_dir}/summary.md, {out_dir}/curves.png")
    return EXIT_OK


def run_paired(config: str, methods: str, iterations: int | None, seeds: str | None, out: str | None) -> int:
    from trainer.compare import paired, paired_table

    names = _split(methods)
    if len(names) < 2:
        raise click.BadParameter("'--paired' needs at least two methods, the first drives the batches")
    cfg = _load(config, iterations=iterations)
    out_dir = out or str(Path(cfg.out_dir) / "paired")
    for s in _seeds(seeds):
        res = paired(cfg.replace(seed=s), names[0], names, Path(out_dir) / f"seed{s}")
        click.echo(f"seed {s}: " + paired_table(res))
    return EXIT_OK


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(message=version_text("rlvp-train"), package_name="rlvp", prog_name="rlvp-train")
@click.argument("config", type=click.Path(dir_okay=False, exists=True))
@click.option("--method", help="grpo | dapo | scalar_fold | rlvp | rlvp_auto | rlvp_noanneal (overrides the config)")
@click.option("--iterations", type=int, help="number of iterations (overrides the config)")
@click.option("--seed", type=int, help="seed (overrides the config)")
@click.option("--out", "out_dir", help="output folder (overrides out_dir)")
@click.option("--resume", is_flag=True, help="continue from OUT/checkpoint.pt up to --iterations")
@click.option("--compare", "compare_methods", help="comma-separated methods: run methods x seeds, print the table")
@click.option("--paired", "paired_methods", help="comma-separated methods: identical batches from the first")
@click.option("--seeds", help="comma-separated seeds for --compare / --paired (default 0)")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="parallel runs for --compare")
def main(config, method, iterations, seed, out_dir, resume, compare_methods, paired_methods, seeds, jobs):
    """Train a policy on a tool environment with GRPO and verifiable process rewards."""
    if seeds and not (compare_methods or paired_methods):
        raise click.UsageError("--seeds goes with --compare or --paired (one run takes --seed)")
    if compare_methods and paired_methods:
        raise click.UsageError("--compare and --paired are two different runs: give one of them")
    try:
        if compare_methods:
            code = run_compare(config, compare_methods, seeds, iterations, out_dir, jobs)
        elif paired_methods:
            code = run_paired(config, paired_methods, iterations, seeds, out_dir)
        else:
            from trainer.loop import train
            from trainer.metrics import summarise_run

            cfg = _load(config, method=method, iterations=iterations, seed=seed, out_dir=out_dir)
            rows = train(cfg, resume=resume)
            s = summarise_run(rows, cfg.success_threshold, cfg.success_window) if rows else None
            if s:
                eps = s["episodes_to_threshold"]
                click.echo(
                    f"{cfg.method} seed {cfg.seed}: {s['iterations']} iterations, final success "
                    f"{s['final_success']:.2f}, dead iterations {s['dead_iterations']}, episodes generated "
                    f"{s['episodes_generated']}, episodes to {cfg.success_threshold:.0%}: "
                    f"{'never' if eps is None else int(eps)}"
                )
            click.echo(f"metrics: {Path(cfg.out_dir) / 'metrics.jsonl'}")
            code = EXIT_OK
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        code = EXIT_INPUT_ERRORS
    except FileNotFoundError as exc:
        click.echo(f"error: {exc}", err=True)
        code = EXIT_USAGE
    except ValueError as exc:  # bad rule file (RuleError), bad knob, bad manifest: the input's fault
        click.echo(f"error: {exc}", err=True)
        code = EXIT_INPUT_ERRORS
    except OSError as exc:  # an output folder that cannot be created or written
        click.echo(f"error: cannot write {exc.filename or ''}: {exc.strerror or exc}", err=True)
        code = EXIT_USAGE
    except KeyboardInterrupt:  # the last checkpoint stays; --resume continues from it
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
