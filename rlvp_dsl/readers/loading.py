"""Reading files and folders: format detection, dispatch, and the report of skipped files.

Detection (``format=None``), first match wins:

1. extension ``.traj``  -> ``swe_agent``; ``.jsonl`` or ``.ndjson`` -> ``openai`` (one episode
   per line); a file of any other name whose text is not one JSON document but whose first
   line is a JSON object or array is JSONL too (read by content, not only by name);
2. an object with a ``simulations`` list -> ``tau2``;
3. an object with ``trajectory`` or ``history`` (a list) -> ``swe_agent``;
4. a list whose first entry has ``traj`` -> ``tau_bench_v1``;
5. an object with ``messages``, a list of such objects, or a list of ``{role, ...}``
   messages -> ``openai``;
6. (checked first) an object with ``schema_version`` ``ATIF-...`` and ``steps``, or a list whose
   first entry is one -> ``atif``.

Anything else is not a trajectory: :func:`read_episodes` raises :class:`ReaderError`,
:func:`read_report` (and so :func:`read_paths`) skips the file and says why.

A format the caller gives (``format=``, ``--format``) overrides detection; where detection sees
another format (or none) and reading as the given one fails or finds no event at all, the
:class:`ReaderError` says so: ``...; the content looks like 'tau2', not 'swe_agent'``.

The path ``-`` is standard input (named ``<stdin>`` in ids and messages), read once.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from rlvp_dsl.events import Episode
from rlvp_dsl.gcpause import collector_paused

from .errors import ReaderError, json_kind
from .file_content import JSONL_SUFFIXES as JSONL_SUFFIXES  # (re-exported: their home before file_content.py)
from .file_content import STDIN as STDIN, STDIN_NAME as STDIN_NAME, load, shown as _shown
from .error_signals import (
    DEFAULT_ERROR_SIGNALS,
    ErrorSignal,
    error_signal as resolve_signal,
)
from .json_text import MAX_DEPTH, nested_too_deep
from .depth import depth_guarded

FORMATS = ("tau2", "tau_bench_v1", "openai", "swe_agent", "atif")
#: File name endings read when walking a folder.
FOLDER_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")

#: Each format's reader, ``(module of this package, function)``: imported on first use, so that a
#: process reading one format (rlvp-score on tau2 results) imports no other format's reader.
_READERS: dict[str, tuple[str, str]] = {
    "tau2": ("tau2", "read_tau2"),
    "tau_bench_v1": ("tau_bench_v1", "read_tau_bench_v1"),
    "openai": ("openai_chat", "read_openai_json"),
    "swe_agent": ("swe_agent", "read_swe_agent"),
    "atif": ("atif", "read_atif"),
}


def _reader(fmt: str) -> Callable[..., list[Episode]]:
    """The reader function of `fmt` (a key of `_READERS`, or ``openai_jsonl``), its module imported now."""
    module, name = _READERS[fmt] if fmt != "openai_jsonl" else ("openai_chat", "read_openai_jsonl")
    reader: Callable[..., list[Episode]] = getattr(importlib.import_module(f".{module}", __package__), name)
    return reader


def is_atif(data: Any) -> bool:
    """Whether parsed JSON looks like an ATIF trajectory (``schema_version`` ``ATIF-...`` and a ``steps`` list)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("schema_version"), str)
        and data["schema_version"].startswith("ATIF-")
        and isinstance(data.get("steps"), list)
    )


#: Formats read with another format's default error signal: ATIF results with the chat default
#: (``error``/``is_error`` true in a result's ``extra``, or text starting ``Error``).
_SIGNAL_OF = {"atif": "openai"}


@attrs.frozen
class SkippedFile:
    """A file :func:`read_report` did not read, and why (``not a trajectory: ...``)."""

    path: str
    reason: str


# `tuple` as attrs converters the type checker can follow (it cannot solve a generic converter).
def _episodes(items: Iterable[Episode]) -> tuple[Episode, ...]:
    return tuple(items)


def _files(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


def _skipped(items: Iterable[SkippedFile]) -> tuple[SkippedFile, ...]:
    return tuple(items)


def _errors(items: Iterable[ReaderError]) -> tuple[ReaderError, ...]:
    return tuple(items)


@attrs.frozen
class ReadReport:
    """What :func:`read_report` read.

    Attributes:
        episodes: the episodes, files in sorted path order, records in file order.
        files: the files episodes came from.
        skipped: files that are not trajectories (manifests, task lists, provenance).
        errors: with ``keep_going=True``, the files that could not be read (their episodes
            are left out; every other file is read), and the bad records of files that hold
            many (a JSONL line, a tau2 simulation, a list entry: the rest of their file is read).
    """

    episodes: tuple[Episode, ...] = attrs.field(converter=_episodes)
    files: tuple[str, ...] = attrs.field(converter=_files)
    skipped: tuple[SkippedFile, ...] = attrs.field(converter=_skipped)
    errors: tuple[ReaderError, ...] = attrs.field(default=(), converter=_errors)


def detect_trajectory_format(data: Any, path: str = "") -> tuple[str | None, str]:
    """Guess the format of parsed file content (see the module docstring for the order).

    Args:
        data: the parsed JSON (ignored for ``.traj`` / ``.jsonl`` paths).
        path: the file name, for its extension.

    Returns:
        ``(format, "")`` or ``(None, reason)`` when the content is not a trajectory.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".traj":
        return "swe_agent", ""
    if suffix in JSONL_SUFFIXES:
        return "openai", ""
    if is_atif(data) or (isinstance(data, list) and bool(data) and is_atif(data[0])):
        return "atif", ""
    if isinstance(data, dict):
        if isinstance(data.get("simulations"), list):
            return "tau2", ""
        if isinstance(data.get("trajectory"), list) or isinstance(data.get("history"), list):
            return "swe_agent", ""
        if isinstance(data.get("messages"), list):
            return "openai", ""
        if not data:
            return None, "not a trajectory: an empty JSON object"
        keys = ", ".join(sorted(map(str, data))[:6])
        return None, f"not a trajectory: a JSON object without simulations/messages/trajectory/history (keys: {keys})"
    if isinstance(data, list):
        if not data:
            return None, "not a trajectory: an empty JSON list"
        first = data[0]
        if isinstance(first, dict) and "traj" in first:
            return "tau_bench_v1", ""
        if isinstance(first, dict) and ("messages" in first or "role" in first):
            return "openai", ""
        return None, "not a trajectory: a JSON list whose entries have no traj/messages/role"
    return None, f"not a trajectory: {json_kind(data)}"


def _read_loaded(
    path: Path,
    file: str,
    text: str,
    data: Any,
    fmt: str,
    signal: ErrorSignal | None,
    record_errors: list[ReaderError] | None = None,
    jsonl: bool = False,
    undecodable: bool = False,
    shallow: set[int] | None = None,
) -> list[Episode]:
    """The episodes of a loaded file as format `fmt`; a tau2 reader adds to `shallow` the ids of
    the episodes whose depth it checked itself (`_shallow` skips them)."""
    signal = signal if signal is not None else DEFAULT_ERROR_SIGNALS[_SIGNAL_OF.get(fmt, fmt)]
    shown, name = _shown(file), (STDIN_NAME if file == STDIN else path.name)
    if jsonl:
        if fmt != "openai":
            raise ReaderError(
                shown, detail=f"JSONL (one JSON document per line) is read as 'openai' chat episodes, not {fmt!r}"
            )
        return _reader("openai_jsonl")(text, shown, name, signal, record_errors=record_errors, undecodable=undecodable)
    if fmt == "tau2" and shallow is not None:  # `data` was parsed for this read: handed over
        return _reader(fmt)(data, shown, name, signal, record_errors=record_errors, shallow=shallow, owned=True)
    return _reader(fmt)(data, shown, name, signal, record_errors=record_errors)


def _read_given(
    path: Path,
    file: str,
    text: str,
    data: Any,
    fmt: str,
    signal: ErrorSignal | None,
    record_errors: list[ReaderError] | None = None,
    jsonl: bool = False,
    undecodable: bool = False,
    shallow: set[int] | None = None,
) -> list[Episode]:
    """`_read_loaded` with a format the caller gave: where detection sees another format (or
    none) and reading as `fmt` fails or finds no event, the error says what the content looks like
    -- one error for the file, its records not read one by one (read as another format, every
    record would fail alike)."""
    if jsonl:
        return _read_loaded(path, file, text, data, fmt, signal, record_errors, jsonl, undecodable)
    detected, reason = detect_trajectory_format(data, file)
    if detected == fmt:
        return _read_loaded(path, file, text, data, fmt, signal, record_errors, jsonl, shallow=shallow)
    looks = (
        f"the content looks like {detected!r}, not {fmt!r} (leave the format out to detect it, or give {detected!r})"
        if detected
        else f"the content is not a trajectory of any format ({reason.removeprefix('not a trajectory: ')})"
    )
    try:
        episodes = _read_loaded(path, file, text, data, fmt, signal, None, jsonl, shallow=shallow)
    except ReaderError as exc:
        raise ReaderError(exc.file, exc.record, exc.field, f"{exc.detail}; {looks}" if exc.detail else looks) from None
    if not any(episode.events for episode in episodes):
        raise ReaderError(_shown(file), detail=f"read as {fmt!r} it holds no events; {looks}")
    return episodes


def _too_deep(file: str, data: Any) -> ReaderError:
    """The error for a file whose values nest so deeply that reading them ran out of stack
    (RecursionError), naming where when the parsed JSON is at hand."""
    where = nested_too_deep(data) if data is not None else None
    return ReaderError(
        _shown(file),
        record=where or "",
        detail=f'arrays and objects nested more than {MAX_DEPTH} levels deep (docs/readers.md, "Limits")',
    )


def _check_format(format: str | None) -> None:
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)} or None (got {format!r})")


def _signal(signal: ErrorSignal | str | None) -> ErrorSignal | None:
    """The caller's error signal resolved before any file is read (None: each format's default)."""
    return None if signal is None else resolve_signal(signal)


def read_episodes(
    path: str | os.PathLike[str], *, format: str | None = None, error_signal: ErrorSignal | str | None = None
) -> list[Episode]:
    """Read the episodes of one trajectory file.

    Args:
        path: a ``.json``, ``.jsonl`` or ``.traj`` file.
        format: ``tau2``, ``tau_bench_v1``, ``openai``, ``swe_agent``, ``atif``, or ``None`` to detect it.
        error_signal: how tool errors are recognised: an `ErrorSignal` or a name of
            :data:`~rlvp_dsl.readers.ERROR_SIGNALS` (``trl``, ``mcp`` ...); ``None`` uses the
            format's entry of :data:`DEFAULT_ERROR_SIGNALS` (a given signal replaces it).

    Returns:
        The episodes in file order.

    Raises:
        ReaderError: the file cannot be read, is not valid JSON (``file:line:col``), is
            not a trajectory, or has a malformed record (names record and field).
        ValueError: ``format`` is not one of :data:`FORMATS`, or an unknown error-signal name.
    """
    _check_format(format)
    error_signal = _signal(error_signal)
    file = os.fspath(path)
    real = Path(file)
    data = None
    with collector_paused():  # JSON values and episodes are acyclic: see rlvp_dsl.gcpause
        try:
            loaded = load(real, file)
            text, data, jsonl, bad = loaded.text, loaded.data, loaded.jsonl, loaded.undecodable
            checked: set[int] = set()
            if format is not None:
                read = _read_given(
                    real, file, text, data, format, error_signal, jsonl=jsonl, undecodable=bad, shallow=checked
                )
                return depth_guarded(read, file, checked)
            fmt, reason = ("openai", "") if jsonl else detect_trajectory_format(data, file)
            if fmt is None:
                raise ReaderError(_shown(file), detail=f"{reason}; pass format= one of {', '.join(FORMATS)}")
            episodes = _read_loaded(
                real, file, text, data, fmt, error_signal, jsonl=jsonl, undecodable=bad, shallow=checked
            )
            return depth_guarded(episodes, file, checked)
        except RecursionError:
            raise _too_deep(file, data) from None


def _walk(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files to read: named files as given, folders walked in sorted order; a file named twice
    (``runs/ runs/``, ``runs/a.json runs/``) is read once, where it first comes."""
    out: list[Path] = []
    for item in paths:
        if os.fspath(item) == STDIN:
            if Path(STDIN) not in out:  # standard input can be read once
                out.append(Path(STDIN))
            continue
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FOLDER_SUFFIXES)
            out.extend(found)
        elif path.exists():
            out.append(path)
        else:
            raise ReaderError(os.fspath(item), detail="no such file or folder")
    seen: set[str] = set()
    unique = []
    for path in out:
        key = STDIN if os.fspath(path) == STDIN else os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def read_report(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    format: str | None = None,
    error_signal: ErrorSignal | str | None = None,
    keep_going: bool = False,
) -> ReadReport:
    """Read files and folders (folders recursively: ``*.json``, ``*.jsonl``, ``*.ndjson``, ``*.traj``;
    ``-`` is standard input); a file named twice, directly or inside a named folder, is read once.

    Files whose content is not a trajectory (``tools_manifest.json``, ``tasks.json``,
    ``PROVENANCE.json`` ...) are skipped and listed in :attr:`ReadReport.skipped`; with an
    explicit ``format`` nothing is skipped.

    With ``keep_going=True`` a file that cannot be read -- or one bad record of a file that holds
    many (a JSONL line, a tau2 simulation, a list entry) -- is listed in :attr:`ReadReport.errors`
    and the rest is still read.

    Raises:
        ReaderError: a path does not exist, or (without ``keep_going``) a file is unreadable,
            invalid JSON, or a trajectory with a malformed record.
        ValueError: ``format`` is not one of :data:`FORMATS`, or an unknown error-signal name
            (`error_signal` as in :func:`read_episodes`).
    """
    _check_format(format)
    error_signal = _signal(error_signal)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths) if isinstance(paths, Iterable) and not isinstance(paths, bytes) else None
    wrong = "" if paths is not None else "paths"
    if paths is not None:
        wrong = next((f"paths[{k}]" for k, p in enumerate(paths) if not isinstance(p, (str, os.PathLike))), "")
    if wrong:
        raise TypeError(
            f"read_paths/read_report take a path or a list of paths (str or os.PathLike); {wrong} is not one"
        )
    episodes: list[Episode] = []
    files: list[str] = []
    skipped: list[SkippedFile] = []
    errors: list[ReaderError] = []
    # one pause for the whole read (JSON values and episodes are acyclic: see rlvp_dsl.gcpause); each
    # file's parsed JSON dies with `_read_file`'s frame, so the collector, resumed, never walks it
    with collector_paused():
        for path in _walk(paths):
            file = os.fspath(path)
            try:
                found = _read_file(path, file, format, error_signal, errors if keep_going else None)
            except ReaderError as exc:
                if not keep_going:
                    raise
                errors.append(exc)
                continue
            if isinstance(found, SkippedFile):
                skipped.append(found)
                continue
            episodes.extend(found)
            files.append(_shown(file))
    return ReadReport(episodes=episodes, files=files, skipped=skipped, errors=errors)


def _read_file(
    path: Path, file: str, format: str | None, error_signal: ErrorSignal | None, record_errors: list[ReaderError] | None
) -> list[Episode] | SkippedFile:
    """One file of `read_report`: its episodes, or why it is skipped (not a trajectory)."""
    data = None
    loaded = load(path, file)
    text, data, jsonl = loaded.text, loaded.data, loaded.jsonl
    fmt = format
    if fmt is None:
        fmt, reason = ("openai", "") if jsonl else detect_trajectory_format(data, file)
        if fmt is None:
            return SkippedFile(_shown(file), reason)
    read = _read_given if format is not None else _read_loaded
    checked: set[int] = set()
    try:
        episodes = read(
            path,
            file,
            text,
            data,
            fmt,
            error_signal,
            record_errors=record_errors,
            jsonl=jsonl,
            undecodable=loaded.undecodable,
            shallow=checked,
        )
        return depth_guarded(episodes, file, checked)
    except RecursionError:
        raise _too_deep(file, data) from None


def read_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], **kw: Any) -> list[Episode]:
    """The episodes of :func:`read_report` (same arguments); use that to see skipped files."""
    return list(read_report(paths, **kw).episodes)
