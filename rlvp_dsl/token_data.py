"""Token data of one episode -- the sampled completion's ids and where its calls are -- and the
per-token credit on those ids.

One implementation for every consumer that brings token ids instead of tensors: ``POST /score``
(`rlvp_dsl.serve.scoring`) and ATIF trajectories whose agent steps carry
``metrics.completion_token_ids`` (`rlvp_dsl.readers.atif` keeps them in
``episode.meta["completion_token_ids"]``; no retokenising).  The numbers are those of
`rlvp_dsl.attach` in process::

    found   = find_call_spans(ids, open_ids, close_ids, mask, reasoning=...)   # or the given call spans
    aligned = align_call_spans(episode, found)
    credits = call_credits(aligned.episode, program.score(aligned.episode))
    values  = episode_token_credits(credits, aligned.spans, len(ids), mask)      # [T]

i.e. each call's whole credit on every token of its span, the answers' credit (no spans) on every
sampled token, 0 where the mask is 0.  Credit is not cut at a prompt: every event of the episode
is the completion's (send the completion's events, or use `rlvp_dsl.attach.completion_credits`).

Pure Python (no torch).
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from rlvp_dsl.attach import CallCredits, RuleProgram, call_credits, episode_token_credits
from rlvp_dsl.call_spans import TokenSpan, align_call_spans, find_call_spans
from rlvp_dsl.events import Episode

__all__ = ["TokenData", "TokenDataError", "EpisodeTokenCredits", "token_data_from_json", "score_tokens", "step_ids"]

#: The fields a token-data object may have (JSON).
FIELDS = ("token_ids", "mask", "call_markers", "reasoning_markers", "call_spans")


class TokenDataError(ValueError):
    """Token data that does not fit its episode or is not token data.

    Attributes:
        field: the offending field (``token_ids``, ``mask``, ``call_markers`` ...), or ``""``.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@attrs.frozen
class TokenData:
    """The sampled completion of one episode as token ids.

    Attributes:
        token_ids: ``[T]`` the completion's ids.
        mask: ``[T]`` 1 where the policy sampled the token (0: tool output, padding), or None (all 1).
        call_markers: ``(open_ids, close_ids)``: the ids that open and close a call; or None when
            `call_spans` are given.
        reasoning_markers: ``(open_ids, close_ids)`` of the thought markers (a marked block inside
            a thought is no call), or None.
        call_spans: half-open ``(start, end)`` per call of the episode, in order; or None when
            `call_markers` are given.
        segments: ``(message, start, end)`` per ATIF step whose ids were joined into `token_ids`
            (`step_ids`); empty otherwise.
    """

    token_ids: tuple[int, ...]
    mask: tuple[int, ...] | None = None
    call_markers: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    reasoning_markers: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    call_spans: tuple[TokenSpan, ...] | None = None
    segments: tuple[tuple[int, int, int], ...] = ()


@attrs.frozen
class EpisodeTokenCredits:
    """The per-token credit of one episode.

    Attributes:
        values: ``[T]`` floats aligned with `TokenData.token_ids`.
        spans: one ``(start, end)`` per call of `episode` (``(0, 0)``: no tokens here).
        credits: the per-call credit of `episode`.
        episode: the episode the credit is of: the input one, with a malformed call inserted for
            each marked span that matched no call (`rlvp_dsl.call_spans.align_call_spans`).
        inserted: how many such calls were inserted.
        without_span: how many calls of the input episode have no span.
    """

    values: list[float]
    spans: tuple[TokenSpan, ...]
    credits: CallCredits
    episode: Episode
    inserted: int = 0
    without_span: int = 0


def step_ids(episode: Episode) -> tuple[list[int], tuple[tuple[int, int, int], ...]] | None:
    """The ids of an ATIF episode's agent steps (``meta["completion_token_ids"]``) joined in step
    order, and ``(message, start, end)`` per step; None when the episode carries none."""
    steps = episode.meta.get("completion_token_ids")
    if not steps:
        return None
    ids: list[int] = []
    segments = []
    for step in steps:
        start = len(ids)
        ids.extend(int(t) for t in step["token_ids"])
        segments.append((int(step["message"]), start, len(ids)))
    return ids, tuple(segments)


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ids(value: Any, field: str, what: str = "a list of token ids (ints)") -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise TokenDataError(f"field {field!r}: expected {what}, got {_got(value)}", field)
    return tuple(value)


def _markers(value: Any, field: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not isinstance(value, list) or len(value) != 2:
        raise TokenDataError(
            f"field {field!r}: expected [open_ids, close_ids], two lists of token ids, got {_got(value)}", field
        )
    pair = (_ids(value[0], field), _ids(value[1], field))
    if not all(pair):
        raise TokenDataError(f"field {field!r}: a marker must have at least one token id", field)
    return pair


def token_data_from_json(data: Any, episode: Episode) -> TokenData:
    """`TokenData` for `episode` from a JSON object (the fields of `TokenData`, as lists).

    ``token_ids`` may be left out when the episode carries ATIF ``completion_token_ids``
    (`step_ids`); exactly one of ``call_markers`` and ``call_spans`` is required.

    Raises:
        TokenDataError: not an object, an unknown field, a field of the wrong type, a mask of
            another length than the ids or not 0/1, a span outside ``[0, T]``, a number of call
            spans other than the episode's calls (naming the field).
    """
    if not isinstance(data, Mapping):
        raise TokenDataError(f"expected an object with {', '.join(FIELDS)}, got {_got(data)}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise TokenDataError(f"unknown field {unknown[0]!r} (token data has {', '.join(FIELDS)})", unknown[0])
    segments: tuple[tuple[int, int, int], ...] = ()
    if data.get("token_ids") is not None:
        ids = _ids(data["token_ids"], "token_ids")
    else:
        joined = step_ids(episode)
        if joined is None:
            raise TokenDataError(
                "field 'token_ids' is missing, and the episode carries no completion_token_ids (ATIF)", "token_ids"
            )
        ids, segments = tuple(joined[0]), joined[1]
    n = len(ids)
    mask = None
    if data.get("mask") is not None:
        mask = _ids(data["mask"], "mask", "a list of 0/1, one per token id")
        if len(mask) != n or any(m not in (0, 1) for m in mask):
            raise TokenDataError(
                f"field 'mask': expected {n} entries of 0/1 (one per token id), got {_got(data['mask'])}", "mask"
            )
    markers = None if data.get("call_markers") is None else _markers(data["call_markers"], "call_markers")
    reasoning = (
        None if data.get("reasoning_markers") is None else _markers(data["reasoning_markers"], "reasoning_markers")
    )
    spans = None
    if data.get("call_spans") is not None:
        raw = data["call_spans"]
        if not isinstance(raw, list):
            raise TokenDataError(f"field 'call_spans': expected a list of [start, end], got {_got(raw)}", "call_spans")
        checked = []
        for k, span in enumerate(raw):
            pair = _ids(span, "call_spans", "[start, end] (ints)") if isinstance(span, list) else None
            if pair is None or len(pair) != 2 or not 0 <= pair[0] <= pair[1] <= n:
                raise TokenDataError(
                    f"field 'call_spans': span {k} = {_got(span)} is not [start, end] with 0 <= start <= end <= {n}",
                    "call_spans",
                )
            checked.append((pair[0], pair[1]))
        if len(checked) != len(episode.calls):
            raise TokenDataError(
                f"field 'call_spans': {len(checked)} spans for the episode's {len(episode.calls)} calls (one per call)",
                "call_spans",
            )
        spans = tuple(checked)
    if (markers is None) == (spans is None):
        raise TokenDataError(
            "give exactly one of 'call_markers' and 'call_spans' (where the calls' tokens are)", "call_markers"
        )
    return TokenData(ids, mask, markers, reasoning, spans, segments)


def score_tokens(
    program: RuleProgram,
    episode: Episode,
    data: TokenData,
    *,
    source: str = "rules",
    credits: CallCredits | None = None,
) -> EpisodeTokenCredits:
    """The per-token credit of `episode` on `data`'s ids (the module docstring's pipeline).

    Args:
        program: the compiled rules.
        episode: the episode the ids are of.
        data: its token data (`token_data_from_json`).
        source: names the rules in flagged values.
        credits: `episode`'s per-call credit when the caller has it (used unless an unmatched
            marked span inserts a malformed call, which changes the episode).

    Returns:
        `EpisodeTokenCredits`, ``values`` of length ``len(data.token_ids)``.
    """
    n = len(data.token_ids)
    mask = list(data.mask) if data.mask is not None else [1] * n
    if data.call_spans is not None:
        spans, aligned_episode, inserted, without = data.call_spans, episode, 0, 0
    else:
        assert data.call_markers is not None  # token_data_from_json gives one of the two
        found = find_call_spans(data.token_ids, *data.call_markers, mask, reasoning=data.reasoning_markers)
        aligned = align_call_spans(episode, found)
        spans, aligned_episode = aligned.spans, aligned.episode
        inserted, without = aligned.inserted, aligned.without_span
    if credits is None or inserted:
        credits = call_credits(aligned_episode, program.score(aligned_episode), source=source)
    values = episode_token_credits(credits, spans, n, mask)
    return EpisodeTokenCredits(values, tuple(spans), credits, aligned_episode, inserted, without)
