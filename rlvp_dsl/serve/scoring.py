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

**Token ids.**  A body may instead be an envelope ``{"trajectory": ..., "tokens": ...}`` (exactly
these two keys): ``trajectory`` is the file (its JSON, or its text for JSONL), ``tokens`` the token
data of its episodes (`rlvp_dsl.token_data`): one object per episode (null: none) or one object for
every episode (ATIF's ``completion_token_ids`` then give the ids).  Each episode with token data
then also has ``token_credits`` (`token_answer`): the per-token credit on those ids, the numbers of
`rlvp_dsl.attach.episode_token_credits` in process.  Bad token data is a 422 naming ``tokens[i]``
(the episode's index) and the field.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any

from rlvp_dsl.attach import call_credits
from rlvp_dsl.cli import json_text
from rlvp_dsl.cli.score_output import episode_json
from rlvp_dsl.events import Credit, Episode
from rlvp_dsl.readers import FORMATS, ReaderError, read_episodes
from rlvp_dsl.token_data import EpisodeTokenCredits, TokenData, TokenDataError, score_tokens, token_data_from_json

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


def split_envelope(body: bytes) -> tuple[bytes, Any]:
    """``(trajectory file bytes, tokens)`` of a token envelope (module docstring); ``(body, None)``
    for any other body (a trajectory file, read as it is)."""
    if not body.lstrip()[:1] == b"{" or b'"tokens"' not in body:
        return body, None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # the reader names what is wrong with it
        return body, None
    if not isinstance(data, dict) or set(data) != {"trajectory", "tokens"}:
        return body, None
    trajectory = data["trajectory"]
    if isinstance(trajectory, str):
        return trajectory.encode("utf-8"), data["tokens"]
    return json.dumps(trajectory, ensure_ascii=False).encode("utf-8"), data["tokens"]


def episode_tokens(tokens: Any, episodes: Sequence[Episode]) -> list[TokenData | None]:
    """The token data of each episode from an envelope's ``tokens`` (one object for all, or a list
    of one object or null per episode).

    Raises:
        BadInput: a list of another length, or bad token data: record ``tokens[i]`` (``tokens`` when
            one object serves all; the message names episode i and its id), field as
            `rlvp_dsl.token_data.token_data_from_json`.
    """
    if isinstance(tokens, dict):
        entries: list[Any] = [tokens] * len(episodes)
        record = "tokens"
    elif isinstance(tokens, list):
        if len(tokens) != len(episodes):
            raise BadInput(
                f"'tokens' has {len(tokens)} entries for the {len(episodes)} episodes of the trajectory "
                "(one per episode, null for none; or one object for all)",
                record="tokens",
                field="tokens",
            )
        entries, record = tokens, ""
    else:
        raise BadInput(
            f"'tokens' must be an object or a list of them (one per episode), got {type(tokens).__name__}",
            record="tokens",
            field="tokens",
        )
    out: list[TokenData | None] = []
    for i, (entry, episode) in enumerate(zip(entries, episodes)):
        where = record or f"tokens[{i}]"
        if entry is None:
            out.append(None)
            continue
        try:
            out.append(token_data_from_json(entry, episode))
        except TokenDataError as exc:
            raise BadInput(f"{where} (episode {i}, {episode.id!r}): {exc}", record=where, field=exc.field) from None
    return out


def token_answer(scored: EpisodeTokenCredits, data: TokenData) -> dict[str, Any]:
    """An episode's ``token_credits``: ``n_tokens``; ``values`` (``[n_tokens]``, aligned with the
    ids); ``call_spans`` (``[start, end)`` per call, ``[0, 0]``: no tokens) and ``call_values`` (each
    call's credit) of the episode the credit is of -- the input episode with a malformed call per
    marked span that matched no call (``inserted_calls`` of them; ``calls_without_span``);
    ``unattached``, the answers' credit, on every sampled token; and for
    ids joined from ATIF steps, ``segments``: ``{"message", "start", "end"}`` per step."""
    answer: dict[str, Any] = {
        "n_tokens": len(scored.values),
        "values": scored.values,
        "call_spans": [list(span) for span in scored.spans],
        "call_values": list(scored.credits.values),
        "unattached": scored.credits.unattached,
        "inserted_calls": scored.inserted,
        "calls_without_span": scored.without_span,
    }
    if data.segments:
        answer["segments"] = [{"message": m, "start": a, "end": b} for m, a, b in data.segments]
    return answer


def episode_answer(
    served: ServedRules, episode: Episode, credits: Sequence[Credit], source: str, tokens: TokenData | None = None
) -> dict[str, Any]:
    """One episode's entry (the module docstring lists its fields): rlvp-score --json's entry
    (`score_output.episode_json`), the request's file name as ``source``, each call's summed credit,
    and with `tokens` the per-token credit (`token_answer`)."""
    per_call = call_credits(episode, credits, source=served.name)
    entry = {
        **episode_json(served.program, episode, credits),
        "source": source,
        "call_credits": [
            {"event_index": call.index, "tool": call.tool, "status": call.status, "value": value}
            for call, value in zip(episode.calls, per_call.values)
        ],
    }
    if tokens is not None:
        scored = score_tokens(served.program, episode, tokens, source=served.name, credits=per_call)
        entry["token_credits"] = token_answer(scored, tokens)
    return entry


def score_answer(
    served: ServedRules, episodes: Sequence[Episode], source: str, tokens: Sequence[TokenData | None] | None = None
) -> dict[str, Any]:
    """``/score``'s answer for `episodes` scored with `served` (`tokens`: per episode, its token data or None).

    Returns:
        ``{"rules", "rules_hash", "count", "total", "rule_totals", "episodes": [...]}``; totals in
        reward units, summed in episode order.
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
    trajectory, tokens = split_envelope(body)
    episodes = read_body(trajectory, name=name, format=format, error_signal=error_signal, workdir=workdir)
    per_episode = None if tokens is None else episode_tokens(tokens, episodes)
    return render(score_answer(served, episodes, name, per_episode)), len(episodes)


def render(answer: Any) -> bytes:
    """An answer as UTF-8 JSON bytes (a non-finite number as ``null``): what the server sends."""
    return json_text(answer, ensure_ascii=False).encode("utf-8")
