"""``/score``'s token envelope: ``{"trajectory": ..., "tokens": ...}`` (docs/integrations.md, "Token ids").

* `split_envelope` -- the trajectory file and the token data of an envelope (exactly these two
  keys); any other body is the trajectory file itself.
* `envelope_mistake` -- for a body that is no trajectory but was meant as an envelope (a key
  ``token``, ``tokens`` missing): the 422 saying what an envelope needs and naming the stray key.
* `episode_tokens` -- each episode's `rlvp_dsl.token_data.TokenData` from ``tokens``.
* `token_answer` -- an episode's ``token_credits`` in the answer.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

import attrs

from rlvp_dsl.events import Episode
from rlvp_dsl.readers.json_text import loads
from rlvp_dsl.token_data import EpisodeTokenCredits, TokenData, TokenDataError, token_data_from_json

from .bodies import BadInput, json_kind

#: The keys of an envelope, exactly.
ENVELOPE_KEYS = ("trajectory", "tokens")


@attrs.frozen
class Envelope:
    """A body split (`split_envelope`): `trajectory`, the file's bytes; `tokens`, the token data
    (None: none); `is_envelope`, whether the body was an envelope (errors in the file then name
    ``trajectory``)."""

    trajectory: bytes
    tokens: Any = None
    is_envelope: bool = False


def split_envelope(body: bytes) -> Envelope:
    """The trajectory file and token data of a token envelope (module docstring); for any other
    body (a trajectory file) the body itself, read as it is."""
    if not body.lstrip()[:1] == b"{" or b'"tokens"' not in body:
        return Envelope(body)
    try:
        data = loads(body)
    except ValueError:  # the reader names what is wrong with it
        return Envelope(body)
    if not isinstance(data, dict) or set(data) != set(ENVELOPE_KEYS):
        return Envelope(body)
    trajectory = data["trajectory"]
    if isinstance(trajectory, str):
        return Envelope(trajectory.encode("utf-8"), data["tokens"], True)
    return Envelope(json.dumps(trajectory, ensure_ascii=False).encode("utf-8"), data["tokens"], True)


def envelope_mistake(body: bytes, name: str) -> BadInput | None:
    """The 422 for a body that is not a trajectory but looks meant as an envelope: a JSON object
    with a key ``trajectory`` (not a list: that is a SWE-agent file) or a key close to one of
    `ENVELOPE_KEYS`; None for any other body."""
    try:
        data = loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    keys = [str(k) for k in data]
    close = {k: difflib.get_close_matches(k, ENVELOPE_KEYS, n=1, cutoff=0.75) for k in keys}
    if not any(close.values()):
        return None
    stray = [k for k in keys if k not in ENVELOPE_KEYS]
    missing = [k for k in ENVELOPE_KEYS if k not in data]
    problems = [
        f"{k!r} is not one" + (f" (did you mean {close[k][0]!r}?)" if close[k] and close[k][0] in missing else "")
        for k in stray
    ]
    meant = {close[k][0] for k in stray if close[k]}
    problems += [
        f"{k!r} is missing" + (" (null: no token data)" if k == "tokens" else "") for k in missing if k not in meant
    ]
    field = stray[0] if stray else missing[0] if missing else ""
    return BadInput(
        f"{name}: a token envelope is a JSON object with exactly the keys 'trajectory' and 'tokens' "
        f"(got: {', '.join(sorted(keys))}): {'; '.join(problems)}",
        field=field,
    )


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
            f"'tokens' must be an object or a list of them (one per episode), got {json_kind(tokens)}",
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
