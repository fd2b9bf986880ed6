"""The commands' argument parser: argparse's, with a mistyped option named first and matched.

argparse reports a missing positional argument before an unknown option:
``rlvp-score rules.rlvp --explian runs/`` said "the following arguments are required:
trajectories", never naming the mistyped option.  `ArgumentParser` looks at the command line
first: an option no argument of the command has is the error, with the closest real option
(``did you mean --explain?``; Python 3.14's argparse suggests only among a choice's values).
Everything else is argparse's own behaviour and messages (usage line, exit code 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose first error for a command line holding an unknown option
    (``--explian``, ``--out=x`` of a command without ``--out``) is that option, with a did-you-mean
    among the parser's own options; prefixes argparse accepts (``--expl``) are not unknown."""

    _argv: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        import sys

        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "  # argparse's words, kept
        if message.startswith(prefix):
            command = self._command()
            if command is not None:  # a sub-command's leftover (`rlvp serve --prot 1`): its usage, its options
                command.error(message)
            words = message.removeprefix(prefix).split()
            option = next((w.split("=", 1)[0] for w in words if w.startswith("--")), None)
            if option is not None:
                message += _suggestion(option, self._known_options())
        else:
            unknown = self._unknown_option()
            if unknown is not None:
                message = prefix + unknown + _suggestion(unknown, self._known_options())
        super().error(message)

    def _known_options(self) -> list[str]:
        """This parser's long options."""
        return [s for s in self._option_string_actions if s.startswith("--")]

    def _command(self) -> argparse.ArgumentParser | None:
        """The sub-command parser the command line chose (its first word naming one), or None."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return next((action.choices[w] for w in self._argv or [] if w in action.choices), None)
        return None

    def _unknown_option(self) -> str | None:
        """The first option-like word of the command line that names no option of this parser
        (words after ``--`` are values; with sub-commands, so is everything after the command)."""
        argv = self._argv or []
        # with sub-commands (``rlvp serve ...``), the words after the command are its own
        commands = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        for word in argv:
            if word == "--":
                return None
            if not word.startswith("-") or word == "-" or _is_number(word):
                if commands and word != "-":
                    return None
                continue
            name = word.split("=", 1)[0]
            if name in self._option_string_actions:
                continue
            if name.startswith("--") and self.allow_abbrev:
                matches = [s for s in self._option_string_actions if s.startswith(name)]
                if matches:  # argparse takes a unique prefix, and says itself when one is ambiguous
                    continue
            if not name.startswith("--") and len(name) > 2 and name[:2] in self._option_string_actions:
                continue  # a short option with its value attached (-n5)
            return name
        return None


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _suggestion(unknown: str, options: list[str]) -> str:
    import difflib  # only on an error: not in every run's import time

    close = difflib.get_close_matches(unknown, options, n=1, cutoff=0.75)  # --bogus is not --host
    return f" (did you mean {close[0]}?)" if close else ""
