"""``POST /score``: a request body read as the trajectory file it is, and its episodes scored.

The body is what ``rlvp-score`` would read from a file: a tau2 ``Results`` document, a tau-bench v1
list, OpenAI chat JSON or JSONL (MCP results understood, TRL's messages included), a SWE-agent
``.traj``.  It is read by the readers' own `read_episodes`, under the file name the request gives
(``?name=run.jsonl``, default ``request.json``), so a body and the file it came from give the same
episodes, the same ids and the same error messages.  (The readers read files: the body is written
to a file in a private folder of the server's and removed once read.)  Nothing in a body is executed:
calls and their arguments are data.

**Bad records.**  A body of many records (JSONL lines, tau2 simulations, list entries) is read as
``rlvp-score`` reads files: a record the reader refuses is left out, the others are scored, and
the answer's ``errors`` lists each refused record (``record``, ``field``, ``message``: the
reader's), in body order; the scored episodes keep their ids, so a trainer sees which rollout
failed.  A body none of whose records could be read is a 422 (the first problem, and ``errors``).
(A token envelope whose ``tokens`` is a list is read strictly: one bad record is a 422, since its
entries pair with the episodes by position.)

An answer (`score_answer`) holds, per episode, the fields of ``rlvp-score --json``'s episodes
(docs/scoring.md) -- id, source, domain, outcome, counts, ``total``, ``rule_totals`` (every rule,
in file order), ``credits`` (rule, value, reason, location and source span) -- then
``call_credits``: each tool call's summed credit, as the trainers see it
(`rlvp_dsl.attach.call_credits`); and over the batch ``rule_totals``, ``total``, ``notes`` (what
``rlvp-score`` notes on the data: calls to tools the rules do not declare -- the wrong rule set?
--, malformed arguments, tool names that are not text; `rlvp_dsl.cli.score_notes.data_notes`) and
``errors`` (above).

**Token ids** (`rlvp_dsl.serve.envelope`).  A body may instead be an envelope
``{"trajectory": ..., "tokens": ...}`` (exactly these two keys): ``trajectory`` is the file (its
JSON, or its text for JSONL), ``tokens`` the token data of its episodes (`rlvp_dsl.token_data`):
one object per episode (null: none) or one object for every episode (ATIF's
``completion_token_ids`` then give the ids).  Each episode with token data
then also has ``token_credits`` (`token_answer`): the per-token credit on those ids, the numbers of
`rlvp_dsl.attach.episode_token_credits` in process.  Bad token data is a 422 naming ``tokens[i]``
(the episode's index) and the field.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from rlvp_dsl.attach import call_credits
from rlvp_dsl.cli import json_text
from rlvp_dsl.cli.score_notes import data_notes
from rlvp_dsl.cli.score_output import episode_json
from rlvp_dsl.events import Credit, Episode
from rlvp_dsl.readers import FORMATS, ReaderError, read_report
from rlvp_dsl.token_data import TokenData, score_tokens

from .bodies import DEFAULT_NAME, BadInput, checked_signal, problem_json, reader_problem
from .envelope import envelope_mistake, episode_tokens, split_envelope, token_answer
from .rulesets import ServedRules

__all__ = ["DEFAULT_NAME", "BadInput", "checked_name", "read_body", "score_answer", "score_body", "render"]

#: The longest file name a request may give.
MAX_NAME = 200


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


def read_body(
    body: bytes,
    *,
    name: str,
    format: str | None,
    error_signal: str | None,
    workdir: str,
    strict: bool = False,
    inside: str = "",
) -> tuple[list[Episode], list[BadInput]]:
    """The episodes of a request body, read as the file `name` (see the module docstring), and the
    problems of the records left out.

    Args:
        body: the request body, as received.
        name: the file name (`checked_name`): its extension selects JSONL (``.jsonl``) or SWE-agent
            (``.traj``), as for files; episode ids are made from it.
        format: one of `rlvp_dsl.readers.FORMATS`, or None to detect it.
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS`, or None for the format's default.
        workdir: a private folder no other request uses meanwhile (the server gives each thread
            its own): the body is written there as `name`, read, and removed.
        strict: refuse the whole body for one bad record (a 422), instead of leaving it out.
        inside: the envelope key the file came from, named in messages (`bodies.reader_problem`).

    Returns:
        ``(episodes, problems)``: the episodes read, in body order, and one `BadInput` per record
        left out (its record, field and message), in body order.

    Raises:
        BadInput: the body is not a trajectory, cannot be read at all, or no record of it could
            be read (the first problem, all of them in ``errors``); an unknown format or error
            signal.
    """
    if format is not None and format not in FORMATS:
        raise BadInput(f"?format= must be one of {', '.join(FORMATS)} (got {format!r})", field="format")
    signal = checked_signal(error_signal)
    if not body or body.isspace():  # (said as every route says it: `bodies.parse_json`)
        where = f"{name}: {inside}" if inside else name
        raise BadInput(f"{where}: the body is empty (expected a trajectory: JSON or JSONL)", record=inside)
    path = os.path.join(workdir, name)
    try:
        with open(path, "wb") as handle:
            handle.write(body)
        report = read_report([path], format=format, error_signal=signal, keep_going=not strict)
    except ReaderError as exc:
        raise reader_problem(exc, path, name, inside=inside) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    problems = [reader_problem(error, path, name, inside=inside) for error in report.errors]
    if report.skipped:  # one file: it is no trajectory
        mistake = None if inside else envelope_mistake(body, name)
        if mistake is not None:
            raise mistake
        reason = report.skipped[0].reason
        where = f"{name}: {inside}" if inside else name
        raise BadInput(f"{where}: {reason}; pass ?format= one of {', '.join(FORMATS)}", record=inside)
    if problems and not report.episodes:
        first = problems[0]
        more = f" (and {len(problems) - 1} more records could not be read: see errors)" if len(problems) > 1 else ""
        raise BadInput(f"{first}{more}", first.record, first.field, [problem_json(p) for p in problems] if more else ())
    return list(report.episodes), problems


def data_notes_of(served: ServedRules, episodes: Sequence[Episode], path: str = "", name: str = "") -> list[str]:
    """``rlvp-score``'s notes on the episodes' data (`rlvp_dsl.cli.score_notes.data_notes`), with the
    server's private `path` shown as the request's file `name`."""
    notes = data_notes(served.program, episodes)
    return [note.replace(path, name) for note in notes] if path else notes


def episode_answer(
    served: ServedRules, episode: Episode, credits: Sequence[Credit], source: str, tokens: TokenData | None = None
) -> dict[str, Any]:
    """One episode's entry (the module docstring lists its fields): rlvp-score --json's entry
    (`score_output.episode_json`), the request's file name as ``source``, each call's summed credit,
    and with `tokens` the per-token credit (`token_answer`).

    Where a marked token span matched no call of the episode, the token credit is of the episode
    with a malformed call inserted there (`rlvp_dsl.call_spans`, ``inserted_calls``); then every
    field is of that episode -- totals, rule totals, ``malformed_calls``, ``call_credits`` -- so the
    entry adds up to what the tokens carry."""
    per_call = call_credits(episode, credits, source=served.name)
    scored = None
    if tokens is not None:
        scored = score_tokens(served.program, episode, tokens, source=served.name, credits=per_call)
        if scored.inserted:
            episode, credits, per_call = scored.episode, served.program.score(scored.episode), scored.credits
    entry = {
        **episode_json(served.program, episode, credits),
        "source": source,
        "call_credits": [
            {"event_index": call.index, "tool": call.tool, "status": call.status, "value": value}
            for call, value in zip(episode.calls, per_call.values)
        ],
    }
    if scored is not None and tokens is not None:
        entry["token_credits"] = token_answer(scored, tokens)
    return entry


def score_answer(
    served: ServedRules,
    episodes: Sequence[Episode],
    source: str,
    tokens: Sequence[TokenData | None] | None = None,
    *,
    notes: Sequence[str] | None = None,
    errors: Sequence[BadInput] = (),
) -> dict[str, Any]:
    """``/score``'s answer for `episodes` scored with `served` (`tokens`: per episode, its token data or None).

    Args:
        served: the rule set.
        episodes: the episodes read.
        source: the request's file name (each entry's ``source``).
        tokens: per episode, its token data or None; None: no token data.
        notes: the notes on the data; None: `data_notes_of` the episodes.
        errors: the records left out (`read_body`).

    Returns:
        ``{"rules", "rules_hash", "count", "total", "rule_totals", "notes", "errors", "episodes":
        [...]}``; totals in reward units, summed in episode order; ``errors`` entries are
        ``{"record", "field", "message"}``.
    """
    per_episode = list(tokens) if tokens is not None else [None] * len(episodes)
    entries = [
        episode_answer(served, episode, served.program.score(episode), source, data)
        for episode, data in zip(episodes, per_episode)
    ]
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
        "notes": list(notes) if notes is not None else data_notes_of(served, episodes),
        "errors": [problem_json(problem) for problem in errors],
        "episodes": entries,
    }


def score_body(
    served: ServedRules, body: bytes, *, name: str, format: str | None, error_signal: str | None, workdir: str
) -> tuple[bytes, int]:
    """A request body (a trajectory file, or a token envelope: `split_envelope`) read (`read_body`),
    scored (`score_answer`) and rendered (`render`): the answer's bytes and the number of episodes.

    Raises:
        BadInput: as `read_body` and `episode_tokens`.
    """
    envelope = split_envelope(body)
    episodes, problems = read_body(
        envelope.trajectory,
        name=name,
        format=format,
        error_signal=error_signal,
        workdir=workdir,
        strict=isinstance(envelope.tokens, list),  # its entries pair with the episodes by position
        inside="trajectory" if envelope.is_envelope else "",
    )
    per_episode = None if envelope.tokens is None else episode_tokens(envelope.tokens, episodes)
    notes = data_notes_of(served, episodes, os.path.join(workdir, name), name)
    answer = score_answer(served, episodes, name, per_episode, notes=notes, errors=problems)
    return render(answer), len(episodes)


def render(answer: Any) -> bytes:
    """An answer as UTF-8 JSON bytes (a non-finite number as ``null``): what the server sends."""
    return json_text(answer, ensure_ascii=False).encode("utf-8")
