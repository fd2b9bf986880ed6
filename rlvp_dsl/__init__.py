"""rlvp_dsl: the rlvp rule language.

The pipeline, one module per stage::

    source text --parser--> ast.RuleFile --check--> ir.RuleSet --compile--> Program
    trajectory files --readers--> events.Episode --Program.score--> [events.Credit]

Typical use::

    from rlvp_dsl import load_program, read_paths
    program = load_program("rules/tau2_airline.rlvp")     # raises RuleError with diagnostics
    for episode in read_paths(["trajectories/"]):
        credits = program.score(episode)
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazy names below, for type checkers (at run time they load on first use)
    from .compile import Program, compile_ruleset
    from .diagnostics import Diagnostic, RuleError, has_errors
    from .events import Credit, Episode, Event
    from .pipeline import check_file, check_text, load_program, loads
    from .readers.errors import ReaderError
    from .score import Scorer

#: Where each public name lives: imported on first use (PEP 562), so that ``import rlvp_dsl`` (which
#: every console script does first) loads nothing heavy, and Ctrl-C during a command's imports
#: reaches the command's own handler (`rlvp_dsl.cli.launch`).
_LAZY = {
    "Program": ".compile",
    "Scorer": ".score",
    "compile_ruleset": ".compile",
    "Diagnostic": ".diagnostics",
    "RuleError": ".diagnostics",
    "has_errors": ".diagnostics",
    "Credit": ".events",
    "Episode": ".events",
    "Event": ".events",
    "check_file": ".pipeline",
    "check_text": ".pipeline",
    "load_program": ".pipeline",
    "loads": ".pipeline",
    "ReaderError": ".readers.errors",  # a malformed trajectory file: names record and field
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Credit",
    "Diagnostic",
    "Episode",
    "Event",
    "Program",
    "RuleError",
    "Scorer",
    "check_file",
    "check_text",
    "compile_ruleset",
    "episode_from_messages",
    "has_errors",
    "load_program",
    "loads",
    "read_paths",
    "ReaderError",
]


def read_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], **kwargs: Any) -> list[Episode]:
    """Read episodes from trajectory files or folders (see `rlvp_dsl.readers`)."""
    from .readers import read_paths as _read_paths

    return _read_paths(paths, **kwargs)


def episode_from_messages(messages: list[Mapping[str, Any]], **kwargs: Any) -> Episode:
    """An episode from OpenAI/TRL/verl chat messages in memory (see `rlvp_dsl.readers.messages`)."""
    from .readers.messages import episode_from_messages as _episode_from_messages

    return _episode_from_messages(messages, **kwargs)
