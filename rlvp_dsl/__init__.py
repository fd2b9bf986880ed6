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

from .compile import Program, Scorer, compile_ruleset
from .diagnostics import Diagnostic, RuleError, has_errors
from .events import Credit, Episode, Event
from .pipeline import check_file, check_text, load_program, loads

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


from .readers._base import ReaderError  # noqa: E402  (a malformed trajectory file: names record and field)


def read_paths(paths, **kwargs):
    """Read episodes from trajectory files or folders (see `rlvp_dsl.readers`)."""
    from .readers import read_paths as _read_paths

    return _read_paths(paths, **kwargs)


def episode_from_messages(messages, **kwargs):
    """An episode from OpenAI/TRL/verl chat messages in memory (see `rlvp_dsl.readers.messages`)."""
    from .readers.messages import episode_from_messages as _episode_from_messages

    return _episode_from_messages(messages, **kwargs)
