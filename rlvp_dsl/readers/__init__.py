"""Trajectory readers: turn the formats people already have into :class:`~rlvp_dsl.events.Episode`.

Formats (``format=``): ``tau2`` (tau2-bench ``Results`` JSON), ``tau_bench_v1`` (tau-bench v1
results list), ``openai`` (chat transcripts, JSON or JSONL; MCP ``tools/call`` results
understood), ``swe_agent`` (``.traj``), ``atif`` (Harbor's ATIF v1.7 trajectories; `atif.write_atif` writes
them back with credits).  ``None`` detects the format from the extension and
content (see :mod:`rlvp_dsl.readers.loading`).

    from rlvp_dsl.readers import read_episodes, read_report, ErrorSignal
    episodes = read_episodes("run.json")                          # one file
    report = read_report(["runs/", "extra.jsonl"])                # files and folders
    report.episodes, report.skipped                               # skipped: not trajectories
    read_episodes("run.jsonl", error_signal=ErrorSignal(prefixes=("ERROR",)))

Module map: ``openai_chat``, ``tau2``, ``tau_bench_v1``, ``swe_agent`` (one reader each),
``loading`` (detection, files, folders), ``messages`` (chat messages in memory:
`episode_from_messages`, for TRL and verl), ``builder`` (:class:`EpisodeBuilder`: events
numbered, results paired with calls), ``error_signals`` (where a tool error -- TRL, tau2,
MCP, ... -- is recognised: :class:`ErrorSignal` and the one table of named signals),
``errors`` (:class:`ReaderError`), ``arguments`` (a call's arguments and a message's text
decoded), ``call_markers`` (calls written as ``<tool_call>`` text), ``json_text`` (JSON
parsing, orjson when installed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lazy names below, for type checkers (at run time they load on first use)
    from .arguments import message_text, parse_arguments
    from .builder import EpisodeBuilder
    from .call_markers import HERMES_MARKERS, THINK_MARKERS, checked_markers, marked_calls, reasoning_spans
    from .error_signals import DEFAULT_ERROR_SIGNALS, ERROR_SIGNALS, SWE_AGENT_MARKERS, ErrorSignal, error_signal
    from .errors import ReaderError, expected_got
    from .loading import (
        FORMATS,
        ReadReport,
        SkippedFile,
        detect_trajectory_format,
        read_episodes,
        read_paths,
        read_report,
    )
    from .messages import episode_from_messages, episode_from_text

#: Where each public name lives: imported on first use (PEP 562), so that importing one module of
#: this package (``rlvp_dsl.readers.json_text`` for the manifests) or reading one format does not
#: import every reader and the chat-message helpers.
_LAZY = {
    "ReaderError": "errors",
    "expected_got": "errors",
    "message_text": "arguments",
    "parse_arguments": "arguments",
    "EpisodeBuilder": "builder",
    "DEFAULT_ERROR_SIGNALS": "error_signals",
    "ERROR_SIGNALS": "error_signals",
    "SWE_AGENT_MARKERS": "error_signals",
    "ErrorSignal": "error_signals",
    "error_signal": "error_signals",
    "HERMES_MARKERS": "call_markers",
    "THINK_MARKERS": "call_markers",
    "checked_markers": "call_markers",
    "marked_calls": "call_markers",
    "reasoning_spans": "call_markers",
    "episode_from_messages": "messages",
    "episode_from_text": "messages",
    "FORMATS": "loading",
    "ReadReport": "loading",
    "SkippedFile": "loading",
    "detect_trajectory_format": "loading",
    "read_episodes": "loading",
    "read_paths": "loading",
    "read_report": "loading",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_ERROR_SIGNALS",
    "ERROR_SIGNALS",
    "EpisodeBuilder",
    "HERMES_MARKERS",
    "FORMATS",
    "ErrorSignal",
    "ReadReport",
    "ReaderError",
    "SWE_AGENT_MARKERS",
    "SkippedFile",
    "THINK_MARKERS",
    "checked_markers",
    "detect_trajectory_format",
    "episode_from_messages",
    "episode_from_text",
    "error_signal",
    "expected_got",
    "marked_calls",
    "message_text",
    "parse_arguments",
    "reasoning_spans",
    "read_episodes",
    "read_paths",
    "read_report",
]
