"""What every ``rlvp-train`` command shares: its error line (``rlvp-train: error: ...``), flag
types whose bad values are usage errors naming the flag, and a click command that prints them
argparse-style (exit 2).  The checks before a run (its folder, its config): `trainer.cli.checks`.
"""

from __future__ import annotations

import difflib
import sys

import click

from rlvp_dsl.cli import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, whole_number
from trainer.config import SEED_MAX, SEED_MIN, seed_problem
from trainer.methods import METHODS

PROG = "rlvp-train"


class Failure(Exception):
    """An error for the user: one ``rlvp-train: error:`` line and an exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def error(message: str) -> None:
    click.echo(f"{PROG}: error: {message}", err=True)


# ----------------------------------------------------------------------------
# flag types: a bad value is a usage error naming the flag
# ----------------------------------------------------------------------------
class WholeNumber(click.ParamType):
    """A whole number of at least ``minimum``: `rlvp_dsl.cli.whole_number`'s check and messages,
    as a click type."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int | None = None):
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value, param, ctx):
        import argparse

        try:
            return whole_number(self.minimum, self.maximum)(str(value).strip())
        except argparse.ArgumentTypeError as exc:
            self.fail(str(exc), param, ctx)


class Seed(WholeNumber):
    """A seed: the range `trainer.config.seed_problem` checks (as the config's ``seed`` is)."""

    def __init__(self):
        super().__init__(SEED_MIN, SEED_MAX)


class Method(click.Choice):
    """One method name (``--method``): click's choice, with the closest name when it is mistyped
    (as ``--compare`` and the config's ``method`` say it)."""

    def __init__(self) -> None:
        super().__init__(list(METHODS))

    def convert(self, value, param, ctx):
        if value not in METHODS:
            self.fail(_unknown_method(str(value)), param, ctx)
        return value


def _unknown_method(name: str) -> str:
    """``unknown method 'rvlp'; did you mean 'rlvp'? (expected one of ...)``."""
    close = difflib.get_close_matches(name, list(METHODS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown method {name!r}{hint} (expected one of {', '.join(METHODS)})"


class CommaList(click.ParamType):
    """Comma-separated items: method names (checked) or seeds (whole numbers >= 0)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.name = "methods" if kind == "method" else "seeds"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        items = [x.strip() for x in str(value).split(",")]
        if any(not x for x in items):
            self.fail(f"has an empty item (got {value!r}): separate the {self.name} with single commas", param, ctx)
        if self.kind == "method":
            for m in items:
                if m not in METHODS:
                    self.fail(_unknown_method(m), param, ctx)
            if len(set(items)) < len(items):
                self.fail(f"names a method twice (got {value!r})", param, ctx)
            return items
        seeds = []
        for x in items:
            if not x.lstrip("-").isdigit():
                self.fail(f"seed {x!r} is not a whole number (got {value!r})", param, ctx)
            if (problem := seed_problem(int(x))) is not None:
                self.fail(f"seed {x} {problem.replace(f' (got {int(x)})', '')} (got {value!r})", param, ctx)
            seeds.append(int(x))
        if len(set(seeds)) < len(seeds):
            self.fail(f"names a seed twice (got {value!r})", param, ctx)
        return seeds


def usage_message(exc: click.UsageError) -> str:
    """``--iterations: must be at least 1 (got -1)``: the flag first, as argparse does."""
    if isinstance(exc, click.BadParameter) and exc.param is not None and not isinstance(exc, click.MissingParameter):
        opts = getattr(exc.param, "opts", None) or [exc.param.name]
        name = opts[0] if opts[0].startswith("-") else exc.param.human_readable_name
        return f"{name}: {exc.message}"
    if isinstance(exc, click.BadParameter) and isinstance(exc.param_hint, str):
        return f"{exc.param_hint.strip(chr(39))}: {exc.message}"
    return exc.format_message()


class Command(click.Command):
    """A click command whose errors are one ``rlvp-train: error:`` line (argparse style), exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(args, prog_name=prog_name or PROG, standalone_mode=False, **extra)
        except click.UsageError as exc:
            if exc.ctx is not None:
                click.echo(exc.ctx.get_usage(), err=True)
            error(usage_message(exc))
            code = EXIT_USAGE
        except click.Abort:  # Ctrl-C while click itself prompts or parses
            error("interrupted")
            code = EXIT_INTERRUPTED
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else EXIT_OK)
