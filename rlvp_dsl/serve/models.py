"""The shapes of requests and answers (pydantic): what is validated, and what the OpenAPI schema shows.

``/get_reward``'s body is validated here (`GetRewardRequest`); a body that does not fit is a 422
naming the field (``query[3]: Input should be a valid string``).  ``/score``'s body is a trajectory
file, read by the readers (`rlvp_dsl.serve.scoring`); its answer is rendered directly (the same
bytes as in-process scoring), the models below describe it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class GetRewardRequest(BaseModel):
    """OpenRLHF's request: the decoded prompt-and-response texts, and optionally the prompts and
    labels (one per query: `rlvp_dsl.serve.openrlhf.reward_body` checks the lengths).  Other keys
    are ignored."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(description="prompt and response, decoded with special tokens")
    prompts: list[str] | None = Field(default=None, description="the prompts, one per query")
    labels: list[Any] | None = Field(default=None, description="the labels (not used by rules)")


class GetRewardAnswer(BaseModel):
    """OpenRLHF's answer: ``rewards`` and ``scores`` one per query, ``extra_logs`` lists one per query."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    rules: str
    rules_hash: str
    notes: list[str] = Field(description="rlvp-score's notes on the queries' data (calls to undeclared tools ...)")


class RecordError(BaseModel):
    """A record of the body that could not be read: where, which field, and the reader's message."""

    record: str
    field: str
    message: str


class ScoreAnswer(BaseModel):
    """``/score``'s answer (rlvp_dsl.serve.scoring): per episode the ``rlvp-score --json`` fields
    and ``call_credits`` (and ``token_credits`` when token data was sent); over the batch
    ``rule_totals``, ``total``, rlvp-score's ``notes`` on the data, and the records left out
    (``errors``)."""

    rules: str
    rules_hash: str
    count: int
    total: float
    rule_totals: dict[str, float]
    notes: list[str] = Field(description="rlvp-score's notes on the data (calls to tools the rules do not declare ...)")
    errors: list[RecordError] = Field(description="the records that could not be read (left out), in body order")
    episodes: list[dict[str, Any]]


class ErrorAnswer(BaseModel):
    """Every error answer: ``error`` (``bad_input``, ``too_large``, ``unauthorized``, ``unknown_rules``,
    ``not_found``, ``internal``) and ``detail``, one sentence; a 422 has ``record`` and ``field``
    (``""`` where none applies) and, when no record of a many-record body could be read,
    ``errors`` (each record's problem)."""

    error: str
    detail: str
    record: str = ""
    field: str = ""
    errors: list[RecordError] = []
    rules_hash: str | None = None


#: The most problems a 422 for a body that does not fit its model lists.
MAX_PROBLEMS = 5


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """``(message, field)`` for a body that does not fit its model: every problem (up to
    `MAX_PROBLEMS`, then how many more), each where it is (``query[3]: Input should be a valid
    string``), joined by ``; ``; the field is the first problem's."""
    errors = exc.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic always lists at least one
        return str(exc), ""
    parts = []
    for error in errors[:MAX_PROBLEMS]:
        where = _where(error.get("loc", ()))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    more = f" (and {len(errors) - MAX_PROBLEMS} more problems)" if len(errors) > MAX_PROBLEMS else ""
    return "; ".join(parts) + more, _where(errors[0].get("loc", ()))


def _where(loc: Any) -> str:
    """``query[3]``, ``response.output``: a pydantic location as a path."""
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where
