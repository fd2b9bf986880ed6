"""``POST /verify`` and ``GET /reverify_mode``: NeMo Gym 0.7's resources-server verifier contract.

Checked against ``nemo-gym==0.7.0``'s own source (``nemo_gym/base_resources_server.py``; the
package needs Python >= 3.13, so it is read, not imported):

* the request is a ``BaseVerifyRequest``: ``responses_create_params`` (the OpenAI Responses-API
  create parameters: ``input`` is a string or a list of items) and ``response`` (a Responses-API
  response: ``output`` is a list of items), plus whatever fields the environment adds (ignored);
* the answer is a ``BaseMultiRewardVerifyResponse``: the request's fields echoed, ``reward``,
  ``reward_components`` (objective -> float, the same keys for every task), ``mask_sample``
  (False), ``failure_kind`` and ``failure_reason`` (None); here also ``rules`` and ``rules_hash``;
* ``GET /reverify_mode`` answers the JSON string of its ``ReverifyMode``: ``"stateless"`` (rules are
  a pure function of the rollout: re-verifying a stored rollout gives the same reward).

Items read, in order, from ``input`` then ``output``: ``message`` (role ``user``/``developer``/
``system``/``assistant``; content a string or ``input_text``/``output_text`` parts), ``function_call``
(``name``, ``arguments`` JSON text, ``call_id``), ``function_call_output`` (``call_id``, ``output``);
other items (``reasoning``) are not events.  A ``developer``/``system`` message is the policy
(``meta["policy"]``), as the chat reader keeps it.

The reward is the response's credit: the events of ``input`` are the prompt's, their credit is not
the response's (`rlvp_dsl.attach.completion_credits`).  ``reward_components`` holds every rule of
the set by name (0.0 when it did not fire); ``reward`` is their sum.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rlvp_dsl.attach import completion_credits
from rlvp_dsl.events import ASSISTANT, USER, Episode
from rlvp_dsl.readers import EpisodeBuilder, error_signal as resolve_signal, message_text
from rlvp_dsl.readers.openai_chat import tool_result

from rlvp_dsl.cli.score_notes import data_notes

from .bodies import BadInput, checked_signal, json_kind, parse_json
from .models import validation_message
from .rulesets import ServedRules
from .scoring import render

#: ``GET /reverify_mode``'s answer (NeMo Gym's ``ReverifyMode.STATELESS``).
REVERIFY_MODE = "stateless"


class ResponsesResponse(BaseModel):
    """The part of a Responses-API response read here: its ``output`` items."""

    model_config = ConfigDict(extra="allow")

    output: list[dict[str, Any]]


class ResponsesCreateParams(BaseModel):
    """The part of the Responses-API create parameters read here: ``input``."""

    model_config = ConfigDict(extra="allow")

    input: str | list[dict[str, Any]]


class VerifyRequest(BaseModel):
    """NeMo Gym's ``BaseVerifyRequest`` as far as rules read it; other fields are kept and echoed."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: ResponsesCreateParams
    response: ResponsesResponse


def _add_item(builder: EpisodeBuilder, item: dict[str, Any], where: str, meta: dict[str, Any]) -> None:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        builder.begin_message()
        role, text = item.get("role"), message_text(item.get("content"))
        if role in ("developer", "system"):
            meta.setdefault("policy", text)
        elif role == "assistant":
            builder.message(ASSISTANT, text)
        else:
            builder.message(USER, text)
    elif kind == "function_call":
        builder.begin_message()
        builder.call(item.get("name"), item.get("arguments"), call_id=item.get("call_id"), where=where)
    elif kind == "function_call_output":
        text, records = tool_result(item.get("output"))
        builder.result(text, call_id=item.get("call_id"), records=records)


def read_rollout(request: VerifyRequest, *, error_signal: str | None = None, id: str = "verify") -> tuple[Episode, int]:
    """The episode of a verify request and the index of the response's first event.

    Raises:
        ValueError: an unknown error-signal name.
    """
    builder = EpisodeBuilder(resolve_signal(error_signal))
    meta: dict[str, Any] = {}
    given = request.responses_create_params.input
    items = [{"type": "message", "role": "user", "content": given}] if isinstance(given, str) else given
    for k, item in enumerate(items):
        _add_item(builder, item, f"responses_create_params.input[{k}]", meta)
    first = len(builder.events())
    for k, item in enumerate(request.response.output):
        _add_item(builder, item, f"response.output[{k}]", meta)
    return builder.episode(id, outcome=None, source="", meta=meta), first


def verify(
    served: ServedRules, request: VerifyRequest, raw: dict[str, Any], error_signal: str | None = None
) -> dict[str, Any]:
    """The answer to one ``/verify`` request (see the module docstring).

    Args:
        served: the rule set to score with.
        request: the validated request.
        raw: the request body as parsed JSON (echoed, as NeMo Gym's responses echo their request).
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS`, or None (``openai``).

    Raises:
        BadInput: an unknown error signal.
    """
    episode, first = read_rollout(request, error_signal=checked_signal(error_signal))
    credits = completion_credits(served.program, episode, first_event=first, source=served.name)
    components = {rule.name: 0.0 for rule in served.program.rules}
    for credit in credits.credits:
        components[credit.rule] = components.get(credit.rule, 0.0) + credit.value
    return {
        **raw,
        "reward": sum(components.values()),
        "reward_components": components,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "rules": served.name,
        "rules_hash": served.hash,
        "notes": data_notes(served.program, [episode]),
    }


def verify_body(served: ServedRules, body: bytes, *, error_signal: str | None = None) -> tuple[bytes, int]:
    """A ``/verify`` body validated (`VerifyRequest`), answered (`verify`) and rendered: the answer's
    bytes and the number of episodes (1).

    Raises:
        BadInput: the body is not JSON (`rlvp_dsl.serve.bodies.parse_json`) or not a verify request
            (every problem, the first one's field: ``response.output: Field required``); an
            unknown error signal.
    """
    checked_signal(error_signal)
    raw = parse_json(body)
    if not isinstance(raw, dict):
        raise BadInput(f"the body must be a JSON object (a verify request), got {json_kind(raw)}")
    try:
        request = VerifyRequest.model_validate(raw)
    except ValidationError as exc:
        message, field = validation_message(exc)
        raise BadInput(message, field=field) from None
    return render(verify(served, request, raw, error_signal)), 1
