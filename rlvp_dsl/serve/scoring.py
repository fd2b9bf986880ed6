"""``POST /score``: a request body read as the trajectory file it is, and its episodes scored.

The body is what ``rlvp-score`` would read from a file: a tau2 ``Results`` document, a tau-bench v1
list, OpenAI chat JSON or JSONL (MCP results understood, TRL's messages included), a SWE-agent
``.traj``.  It is read by the readers' own `read_episodes`, under the file name the request gives
(``?name=run.jsonl``, default ``request.json``), so a body and the file it came from give the same
episodes, the same ids and the same error messages.  (The readers read files: the body is written
to a file in a private folder of the server's and removed once read.)  Nothing in a body is executed:
calls and their arguments are data.

An answer (`score_answer`) holds, per episode, the fields of ``rlvp-score --json``'s episodes
(docs/scoring.md) -- id, source, domain, outcome, counts, ``total``, ``rule_totals`` (every rule,
in file order), ``credits`` (rule, value, reason, location and source span) -- then
``call_credits``: each tool call's summed credit, as the trainers see it
(`rlvp_dsl.attach.call_credits`); and over the batch ``rule_totals`` and ``total``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from rlvp_dsl.attach import call_credits
from rlvp_dsl.cli import json_text
from rlvp_dsl.cli.score_output import episode_json
from rlvp_dsl.events import Credit, Episode
from rlvp_dsl.readers import FORMATS, ReaderError, read_episodes

from .rulesets import ServedRules

#: The file name a body is read under when the request gives none (detection by content).
DEFAULT_NAME = "request.json"
#: The longest file name a request may give.
MAX_NAME = 200


class BadInput(ValueError):
    """A request that cannot be scored (answered 422): its message names the record and field.

    Attributes:
        record: where in the body (``simulations[3].messages[5]``, ``line 7``), or ``""``.
        field: the offending field, or ``""``.
    """

    def __init__(self, message: str, record: str = "", field: str = "") -> None:
        super().__init__(message)
        self.record = record
        self.field = field


def checked_name(name: str | None) -> str:
    """The file name a body is read under: `name`, or `DEFAULT_NAME` when None.

    Raises:
        BadInput: not a plain file name (empty, a path, ``.`` or ``..``, a NUL, longer than `MAX_NAME`).
    """
    if name is None:
        return DEFAULT_NAME
    if (
        not name.strip()
        or name in (".", "..")
        or any(c in name for c in "/\\\0")
        or len(name) > MAX_NAME
        or name != name.strip()
    ):
        raise BadInput(
            f"?name= must be a plain file name such as run.jsonl (no folders, at most {MAX_NAME} "
            f"characters); got {name[:60]!r}",
            field="name",
        )
    return name


def read_body(body: bytes, *, name: str, format: str | None, error_signal: str | None, workdir: str) -> list[Episode]:
    """The episodes of a request body, read as the file `name` (see the module docstring).

    Args:
        body: the request body, as received.
        name: the file name (`checked_name`): its extension selects JSONL (``.jsonl``) or SWE-agent
            (``.traj``), as for files; episode ids are made from it.
        format: one of `rlvp_dsl.readers.FORMATS`, or None to detect it.
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS`, or None for the format's default.
        workdir: a private folder no other request uses meanwhile (the server gives each thread
            its own): the body is written there as `name`, read, and removed.

    Raises:
        BadInput: the body is not a trajectory, or has a malformed record (the reader's message,
            naming record and field, with `name` for the file); an unknown format or error signal.
    """
    if format is not None and format not in FORMATS:
        raise BadInput(f"?format= must be one of {', '.join(FORMATS)} (got {format!r})", field="format")
    path = os.path.join(workdir, name)
    try:
        with open(path, "wb") as handle:
            handle.write(body)
        return read_episodes(path, format=format, error_signal=error_signal)
    except ReaderError as exc:
        raise BadInput(str(exc).replace(path, name), record=exc.record, field=exc.field) from None
    except ValueError as exc:  # an unknown error-signal name (the message lists the known ones)
        raise BadInput(str(exc).replace(path, name), field="error_signal") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def episode_answer(served: ServedRules, episode: Episode, credits: Sequence[Credit], source: str) -> dict[str, Any]:
    """One episode's entry (the module docstring lists its fields): rlvp-score --json's entry
    (`score_output.episode_json`), the request's file name as ``source``, and each call's summed credit."""
    per_call = call_credits(episode, credits, source=served.name)
    return {
        **episode_json(served.program, episode, credits),
        "source": source,
        "call_credits": [
            {"event_index": call.index, "tool": call.tool, "status": call.status, "value": value}
            for call, value in zip(episode.calls, per_call.values)
        ],
    }


def score_answer(served: ServedRules, episodes: Sequence[Episode], source: str) -> dict[str, Any]:
    """``/score``'s answer for `episodes` scored with `served`.

    Returns:
        ``{"rules", "rules_hash", "count", "total", "rule_totals", "episodes": [...]}``; totals in
        reward units, summed in episode order.
    """
    entries = [episode_answer(served, episode, served.program.score(episode), source) for episode in episodes]
    totals = {rule.name: 0.0 for rule in served.program.rules}
    for entry in entries:
        for rule, value in entry["rule_totals"].items():
            totals[rule] = totals.get(rule, 0.0) + value
    return {
        "rules": served.name,
        "rules_hash": served.hash,
        "count": len(entries),
        "total": sum(entry["total"] for entry in entries),
        "rule_totals": totals,
        "episodes": entries,
    }


def score_body(
    served: ServedRules, body: bytes, *, name: str, format: str | None, error_signal: str | None, workdir: str
) -> tuple[bytes, int]:
    """A request body read (`read_body`), scored (`score_answer`) and rendered (`render`): the answer's
    bytes and the number of episodes.

    Raises:
        BadInput: as `read_body`.
    """
    episodes = read_body(body, name=name, format=format, error_signal=error_signal, workdir=workdir)
    return render(score_answer(served, episodes, name)), len(episodes)


def render(answer: Any) -> bytes:
    """An answer as UTF-8 JSON bytes (a non-finite number as ``null``): what the server sends."""
    return json_text(answer, ensure_ascii=False).encode("utf-8")
