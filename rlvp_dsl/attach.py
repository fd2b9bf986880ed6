"""Token attachment: from rule credits to per-call credits to per-token credits.

Pure Python (no torch): the trainer turns the lists returned here into tensors.

Pipeline for one episode::

    program.score(episode) -> list[Credit]            # the compiled rules
    call_credits(episode, credits)   -> CallCredits   # one float per tool call
    token_credits(values, spans, n)  -> list[float]   # one float per completion token
    episode_token_credits(...)       -> list[float]   # the calls' and the assistant turns' credit

Choices (documented in docs/trainer.md):

1. A credit lands on the tool call of its ``event_index``.  Credits on message
   events (assistant turns, a conversation's answers) are summed per event into
   ``CallCredits.turn_values`` (and, all together, ``CallCredits.unattached``).
   Where the trainer knows the tokens of an answer (the compact trainer's
   `Rollout.turn_spans`: the policy sampled them), that answer's credit lands on
   them as a call's does; the rest -- an answer the rollout forced, TRL's and
   verl's turns, which come without spans -- is added, as one scalar, to every
   action token of the episode (`episode_token_credits`).  Never dropped.
2. Every token of a call's span carries the call's *whole* credit ``c``, not
   ``c / len(span)``.  A call is one decision emitted by all of its tokens:
   ``sum_t c * grad log p(token_t) = c * grad log p(call)``, the REINFORCE
   gradient for that call's credit.  Dividing by the span length would pay a
   long call (a long argument) less per decision than a short one.
3. An empty span (``start == end``) gives its credit to no token (never to a
   neighbour, never to the last token).
4. Nothing is broadcast: a credit source that returns the wrong number of values
   for an episode raises `CreditCountError` naming the source, the expected and
   the actual count.
5. A bad value is isolated to its call, never spread and never fatal: a credit that
   is None, NaN or infinite (or names an event the episode does not have, or a user
   message) gives that call nothing; it is listed in `CallCredits.flagged` and
   logged once per source and rule (logger ``rlvp_dsl.attach``), and everything
   else of the episode keeps its credit.  The same holds for sums: finite credits
   whose sum on one call overflows (two weights of -1e308) give that call nothing,
   and calls whose sum over the episode overflows are dropped, largest first, until
   the episode's total is finite (each listed in ``flagged``).  Nothing non-finite
   reaches a trainer: every value, `CallCredits.total` included, is finite.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Mapping, Protocol, Sequence

import attrs

from rlvp_dsl.call_spans import TokenSpan
from rlvp_dsl.events import Credit, Episode

__all__ = [
    "CallCredits",
    "CreditCountError",
    "call_credits",
    "completion_calls",
    "completion_credits",
    "episode_token_credits",
    "overflowing_sums",
    "per_call_values",
    "token_credits",
    "score_calls",
    "RuleProgram",
]

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()


def _flag(source: str, rule: str, message: str) -> str:
    """Log `message` once per (source, rule); returns it for `CallCredits.flagged`."""
    if (source, rule) not in _warned:
        _warned.add((source, rule))
        log.warning("%s (this call gets no credit; further ones from this rule are counted, not logged)", message)
    return message


class CreditCountError(ValueError):
    """A credit source returned a number of credits that does not match the episode."""

    def __init__(self, source: str, episode_id: str, expected: int, actual: int, unit: str = "call"):
        self.source = source
        self.episode_id = episode_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"credit source {source!r} returned {actual} credits for episode {episode_id!r}, "
            f"expected {expected} (one per {unit}); credits are never broadcast -- "
            f"return exactly one value per {unit}"
        )


@attrs.frozen
class CallCredits:
    """The process credit of one episode, per tool call.

    Attributes:
        values: summed credit per call, in call order (``len == len(episode.calls)``).
        violations: per call, the number of negative credits it received.
        discharges: per call, the number of obligation discharges it received.
        unattached: summed credit on non-call events (assistant turns).
        turn_values: ``(event index, summed credit)`` per non-call event that got credit, in
            event order; the values sum to ``unattached`` (`episode_token_credits` puts each
            on its answer's tokens where they are known).
        credits: the credits kept (every finite credit on a call or an assistant turn).
        flagged: one sentence per value that was dropped (non-finite, missing, or on an
            event that cannot take credit), naming the source, the rule and the event.
    """

    values: tuple[float, ...]
    violations: tuple[int, ...]
    discharges: tuple[int, ...]
    unattached: float = 0.0
    credits: tuple[Credit, ...] = ()
    flagged: tuple[str, ...] = ()
    turn_values: tuple[tuple[int, float], ...] = ()

    @property
    def total(self) -> float:
        """All process credit of the episode: attached plus unattached."""
        return float(sum(self.values)) + self.unattached

    @property
    def n_violations(self) -> int:
        return int(sum(self.violations))

    @property
    def n_discharges(self) -> int:
        return int(sum(self.discharges))


def _is_discharge(credit: Credit) -> bool:
    return credit.trigger == "discharge" or (credit.kind == "progress" and credit.value > 0)


def call_credits(episode: Episode, credits: Iterable[Credit], source: str = "rules") -> CallCredits:
    """Sum rule credits per tool call of ``episode``.

    Args:
        episode: the scored episode.
        credits: what ``program.score(episode)`` returned.
        source: a name for error messages (the rule file).

    Returns:
        `CallCredits` with one value per call (``episode.calls`` order); a credit that is
        not a finite number, names an index outside the episode, or lands on a user
        message is dropped and listed in ``flagged`` (never raised: one bad value must
        not stop a training run); so are the credits of a call whose sum is not finite
        (choice 5 of the module docstring).

    Raises:
        TypeError: an item of `credits` is not a `Credit` (a caller's mistake, not a bad value).
    """
    position = {e.index: k for k, e in enumerate(episode.calls)}
    n_calls = len(position)
    values = [0.0] * n_calls
    violations = [0] * n_calls
    discharges = [0] * n_calls
    unattached = 0.0
    turns: dict[int, float] = {}
    kept = []
    flagged = []
    for credit in credits:
        if not isinstance(credit, Credit):
            raise TypeError(
                f"{source}: call_credits takes the Credit objects Program.score returns "
                f"(got a {type(credit).__name__}); for plain numbers use per_call_values"
            )
        idx = credit.event_index
        where = f"{source}: rule {credit.rule!r} ({credit.location})"
        value = _number(credit.value)
        if value is None:
            flagged.append(
                _flag(
                    source,
                    credit.rule,
                    f"{where} gave {credit.value!r}, not a finite number, to event {idx} of episode {episode.id!r}",
                )
            )
            continue
        if not 0 <= idx < len(episode.events):
            flagged.append(
                _flag(
                    source,
                    credit.rule,
                    f"{where} credited event {idx}, but episode {episode.id!r} has {len(episode.events)} events",
                )
            )
            continue
        k = position.get(idx)
        if k is None and episode.events[idx].kind == "user":
            flagged.append(
                _flag(
                    source,
                    credit.rule,
                    f"{where} credited user event {idx} of episode "
                    f"{episode.id!r}; credit lands only on calls and assistant turns",
                )
            )
            continue
        kept.append(credit)
        if k is None:
            unattached += value
            turns[idx] = turns.get(idx, 0.0) + value
            continue
        values[k] += value
        if value < 0:
            violations[k] += 1
        if _is_discharge(credit):
            discharges[k] += 1
    dropped = overflowing_sums(values, unattached, f"{source}: episode {episode.id!r}", source, flagged)
    if dropped:
        for k in dropped:
            if k is not None:
                values[k], violations[k], discharges[k] = 0.0, 0, 0
        if None in dropped:
            unattached = 0.0
            turns = {}
        kept = [c for c in kept if position.get(c.event_index) not in dropped]
    return CallCredits(
        tuple(values),
        tuple(violations),
        tuple(discharges),
        unattached,
        tuple(kept),
        tuple(flagged),
        tuple(sorted(turns.items())),
    )


def overflowing_sums(
    values: Sequence[float], unattached: float, where: str, source: str, flagged: list[str]
) -> set[int | None]:
    """The calls (their positions; None: the assistant turns) whose credit must be dropped so that
    every per-call sum and the episode's total are finite; a sentence for each is added to `flagged`
    (and logged once per source).

    Args:
        values: summed credit per call (may be infinite where finite credits overflowed).
        unattached: summed credit on the other events.
        where: names the episode in the sentences; source: the credit source.

    A call whose own sum is not finite goes first; then, while the total still overflows, the call
    (or the turns) of largest magnitude -- the fewest calls dropped, the same ones in every order.
    """
    parts: dict[int | None, float] = dict(enumerate(values))
    parts[None] = unattached
    dropped: set[int | None] = set()
    for k, v in parts.items():
        if not math.isfinite(v):
            dropped.add(k)
            flagged.append(
                _flag(source, "(sum)", f"{where}: the credits of {_part(k)} sum to {v} (they overflow a float)")
            )
    while not math.isfinite(sum(v for k, v in parts.items() if k not in dropped)):
        k = max((k for k in parts if k not in dropped), key=lambda j: abs(parts[j]))
        dropped.add(k)
        flagged.append(
            _flag(
                source,
                "(sum)",
                f"{where}: the credit of {_part(k)}, {parts[k]:g}, makes the episode's total overflow a float",
            )
        )
    return dropped


def _part(k: int | None) -> str:
    return "the assistant turns" if k is None else f"call {k}"


def _number(value: Any) -> float | None:
    """`value` as a finite float, or None (None, NaN, infinities, non-numbers, booleans)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def per_call_values(source: str, episode: Episode, values: Sequence[Any]) -> CallCredits:
    """Check and wrap a plain per-call credit list (the `fn(episode) -> list[float]` contract).

    A value that is None, NaN, infinite or not a number gives its call nothing and is
    listed in ``flagged`` (logged once per source); so do the largest values whose sum
    would overflow the episode's total.

    Raises:
        CreditCountError: ``len(values) != len(episode.calls)`` (nothing is broadcast).
    """
    n_calls = len(episode.calls)
    if isinstance(values, (int, float)) or not hasattr(values, "__len__"):
        raise CreditCountError(source, episode.id, n_calls, 1)
    if len(values) != n_calls:
        raise CreditCountError(source, episode.id, n_calls, len(values))
    out: list[float] = []
    flagged: list[str] = []
    for k, v in enumerate(values):
        f = _number(v)
        if f is None:
            flagged.append(
                _flag(
                    source,
                    "",
                    f"credit source {source!r}: value {k} for episode {episode.id!r} is {v!r}, not a finite number",
                )
            )
            f = 0.0
        out.append(f)
    for j in overflowing_sums(out, 0.0, f"credit source {source!r}: episode {episode.id!r}", source, flagged):
        if j is not None:
            out[j] = 0.0
    return CallCredits(
        tuple(out),
        tuple(int(v < 0) for v in out),
        tuple(0 for _ in out),
        flagged=tuple(flagged),
    )


def score_calls(credit_source: Any, episode: Episode, source: str | None = None) -> CallCredits:
    """Per-call credits of ``episode`` from a compiled program or a plain function.

    ``credit_source`` is either an object with ``score(episode) -> list[Credit]`` (a
    compiled rule program) or a callable ``fn(episode) -> list[float]`` returning one
    value per call.  ``source`` names it in errors (defaults to its ``name``/``path``).

    Raises:
        CreditCountError: a callable returned the wrong number of values.
    """
    name = source or str(
        getattr(credit_source, "path", None)
        or getattr(credit_source, "name", None)
        or getattr(credit_source, "__name__", None)
        or type(credit_source).__name__
    )
    if hasattr(credit_source, "score"):
        return call_credits(episode, credit_source.score(episode), source=name)
    if callable(credit_source):
        return per_call_values(name, episode, credit_source(episode))
    raise TypeError(f"credit source {name!r} has no score(episode) and is not callable")


class RuleProgram(Protocol):
    """What `completion_credits` needs of a compiled rule program (`rlvp_dsl.compile.Program`)."""

    def score(self, episode: Episode) -> Iterable[Credit]: ...


def completion_credits(program: RuleProgram, episode: Episode, *, first_event: int, source: str) -> CallCredits:
    """Per-call credit of the completion of an episode whose first events are the prompt's.

    The rules see the whole episode, prompt history included (a rule may look at what the
    user said); credit on an event before `first_event` (the prompt's) is dropped: the
    completion did not earn it, and the same history would otherwise add the same credit
    to every rollout of a group.  The prompt's calls keep their place in
    ``CallCredits.values`` with no credit (`completion_calls` counts the others).  Used by
    the TRL and verl integrations.

    Args:
        program: the compiled rules.
        episode: the prompt's events, then the completion's.
        first_event: index of the completion's first event.
        source: names the rules in flagged values (`call_credits`).
    """
    kept = [c for c in program.score(episode) if c.event_index >= first_event]
    return call_credits(episode, kept, source=source)


def completion_calls(episode: Episode, first_event: int) -> int:
    """The calls of the completion: ``episode``'s calls, those before `first_event` (in the
    prompt) not counted (see `completion_credits`)."""
    prompt_calls = sum(1 for e in episode.events[:first_event] if e.kind == "call")
    return len(episode.calls) - prompt_calls


def token_credits(
    values: Sequence[float], spans: Sequence[TokenSpan], n_tokens: int, mask: Sequence[float] | None = None
) -> list[float]:
    """Spread per-call credit onto the completion tokens that produced each call.

    Args:
        values: credit per call, ``[n_calls]``.
        spans: half-open ``(start, end)`` token span per call into the completion.
        n_tokens: completion length.
        mask: optional completion mask; a token with mask 0 (tool output) never
            gets credit even if a span covers it.

    Returns:
        ``[n_tokens]`` floats: the call's whole credit on every token of its span
        (overlapping spans add), 0 elsewhere; empty spans give nothing.

    Raises:
        CreditCountError: ``len(values) != len(spans)``.
        ValueError: a span lies outside ``[0, n_tokens]``.
    """
    if len(values) != len(spans):
        raise CreditCountError("call credits", "?", len(spans), len(values), unit="call span")
    out = [0.0] * n_tokens
    for k, ((start, end), value) in enumerate(zip(spans, values)):
        if not 0 <= start <= end <= n_tokens:
            raise ValueError(f"call span {k} = {(start, end)} lies outside the completion [0, {n_tokens}]")
        if value == 0.0:
            continue
        for t in range(start, end):
            if mask is None or mask[t]:
                out[t] += value
    return out


def episode_token_credits(
    credits: CallCredits,
    spans: Sequence[TokenSpan],
    n_tokens: int,
    mask: Sequence[float],
    weight: float = 1.0,
    turn_spans: Mapping[int, TokenSpan] | None = None,
) -> list[float]:
    """An episode's per-token process credit: each call's credit on every token of its span, each
    answer's credit on its tokens where `turn_spans` knows them, and the remaining unattached
    credit (choice 1) on every action token::

        P[t] = sum_k w * c_k * [t in span_k] * [mask[t] != 0]
             + sum_j w * a_j * [t in turn_span_j] * [mask[t] != 0]  +  (w * u') * mask[t]

    with ``a_j`` the credit of answer j (``credits.turn_values``) and ``u'`` the unattached credit
    of the answers with no (or an empty) span.

    Args:
        credits: the episode's per-call credit (``c_k``) and unattached credit.
        spans: half-open ``(start, end)`` token span per call, ``[n_calls]``.
        n_tokens: completion length T.
        mask: ``[T]`` completion mask (1 = action token; 0 = tool output, padding).
        weight: multiplies each credit before it lands (the compact trainer's
            ``w / divisor``; 1 for the unweighted credit verl's agent loop writes), so that
            overlapping credits are each weighted before they add.
        turn_spans: event index of an answer (``assistant`` event) -> the half-open span of
            the tokens the policy sampled for it (`Rollout.turn_spans`); None: no answer's
            tokens are known (TRL, verl).

    Returns:
        ``[T]`` floats.

    Raises:
        CreditCountError, ValueError: as `token_credits` (a turn span outside ``[0, T]`` too).
    """
    out = token_credits([weight * v for v in credits.values], spans, n_tokens, mask)
    for index, (start, end) in (turn_spans or {}).items():
        if not 0 <= start <= end <= n_tokens:
            raise ValueError(
                f"the answer span of event {index} = {(start, end)} lies outside the completion [0, {n_tokens}]"
            )
    spread = credits.unattached
    landed = [(turn_spans[i], v) for i, v in credits.turn_values if turn_spans and _tokens(turn_spans.get(i))]
    if landed:
        on_turns = token_credits([weight * v for _, v in landed], [s for s, _ in landed], n_tokens, mask)
        out = [p + q for p, q in zip(out, on_turns)]
        spread = math.fsum(v for i, v in credits.turn_values if not (turn_spans and _tokens(turn_spans.get(i))))
    if spread:
        u = weight * spread
        out = [p + u * m for p, m in zip(out, mask)]
    return out


def _tokens(span: TokenSpan | None) -> bool:
    """`span` covers at least one token."""
    return span is not None and span[0] < span[1]
