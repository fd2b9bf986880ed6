"""``POST /get_reward``: OpenRLHF's remote reward contract (0.11, ``--reward.remote_url``).

OpenRLHF's single-turn executor (``openrlhf/utils/agent.py``) posts, per rollout,
``{"query": [text], "prompts": [prompt], "labels": [label]}`` -- the prompt and response decoded
with their special tokens, the prompt as given, the dataset's label -- and reads ``rewards``,
``scores`` (``rewards`` when absent) and ``extra_logs`` (each entry logged per sample) from the
answer; its own reward-model server (``openrlhf/cli/serve_rm.py``) answers the same three keys,
one value per query.

Here each query is read back into an episode (`rlvp_dsl.serve.transcript`), scored, and its
reward is the completion's rule credit: the credit of events in the prompt (when the query starts
with the prompt) is not the completion's (`rlvp_dsl.attach.completion_credits`).  ``scores`` equal
``rewards``.  ``extra_logs`` holds, per query: each rule's credit (``rlvp/rule/NAME``), the
completion's calls, malformed calls and penalised calls, and whether the prompt was found at the
start (``rlvp/prompt_found``, 1 or 0).  Labels are not used: rules do not grade answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from rlvp_dsl.attach import completion_calls, completion_credits

from rlvp_dsl.cli.score_notes import data_notes

from .bodies import BadInput, checked_signal, json_kind, parse_json
from .models import GetRewardRequest, validation_message
from .rulesets import ServedRules
from .scoring import render
from .transcript import read_transcript


def get_reward(
    served: ServedRules,
    queries: Sequence[str],
    prompts: Sequence[str] | None,
    *,
    template: str = "auto",
    error_signal: str | None = None,
) -> dict[str, Any]:
    """The answer to one ``/get_reward`` request.

    Args:
        served: the rule set to score with.
        queries: the decoded prompt-and-response texts.
        prompts: the prompts, one per query, or None (then every event is the completion's).
        template: the chat template (`rlvp_dsl.serve.transcript.TEMPLATE_NAMES`).
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS`, or None (``openai``).

    Returns:
        ``{"rewards": [float], "scores": [float], "extra_logs": {key: [number]}, "rules",
        "rules_hash", "notes"}``, one value per query in every list; ``notes``: what ``rlvp-score``
        notes on the data of all queries (`rlvp_dsl.cli.score_notes.data_notes`: calls to tools
        the rules do not declare ...).

    Raises:
        BadInput: an unknown template or error signal.
    """
    checked_signal(error_signal)
    episodes = []
    names = [rule.name for rule in served.program.rules]
    rewards: list[float] = []
    logs: dict[str, list[float]] = {f"rlvp/rule/{name}": [] for name in names}
    for key in ("rlvp/calls", "rlvp/malformed_calls", "rlvp/penalised_calls", "rlvp/prompt_found"):
        logs[key] = []
    for k, query in enumerate(queries):
        prompt = prompts[k] if prompts is not None else None
        try:
            transcript = read_transcript(
                query, prompt=prompt, template=template, error_signal=error_signal, id=f"query[{k}]"
            )
        except ValueError as exc:  # (the error signal is checked above)
            raise BadInput(str(exc), field="template") from None
        episode, first = transcript.episode, transcript.first_event
        episodes.append(episode)
        credits = completion_credits(served.program, episode, first_event=first, source=served.name)
        rewards.append(credits.total)
        per_rule = dict.fromkeys(names, 0.0)
        for credit in credits.credits:
            per_rule[credit.rule] = per_rule.get(credit.rule, 0.0) + credit.value
        for name in names:
            logs[f"rlvp/rule/{name}"].append(per_rule[name])
        completion = [call for call in episode.calls if call.index >= first]
        logs["rlvp/calls"].append(float(completion_calls(episode, first)))
        logs["rlvp/malformed_calls"].append(float(sum(call.status == "malformed" for call in completion)))
        logs["rlvp/penalised_calls"].append(float(sum(1 for v in credits.violations if v)))
        logs["rlvp/prompt_found"].append(1.0 if transcript.prompt_matched else 0.0)
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": logs,
        "rules": served.name,
        "rules_hash": served.hash,
        "notes": data_notes(served.program, episodes),
    }


def reward_body(
    served: ServedRules, body: bytes, *, template: str = "auto", error_signal: str | None = None
) -> tuple[bytes, int]:
    """A ``/get_reward`` body validated (`GetRewardRequest`), answered (`get_reward`) and rendered: the
    answer's bytes and the number of queries.

    Raises:
        BadInput: the body is not JSON (`rlvp_dsl.serve.bodies.parse_json`), or does not fit the
            request (every problem, the first one's field: ``query[3]: Input should be a valid
            string``); ``prompts`` or ``labels`` not one per query; an unknown template or error signal.
    """
    raw = parse_json(body)
    if not isinstance(raw, dict):
        raise BadInput(f"the body must be a JSON object (OpenRLHF's request), got {json_kind(raw)}")
    try:
        parsed = GetRewardRequest.model_validate(raw)
    except ValidationError as exc:
        message, field = validation_message(exc)
        raise BadInput(message, field=field) from None
    for name, values in (("prompts", parsed.prompts), ("labels", parsed.labels)):
        if values is not None and len(values) != len(parsed.query):
            raise BadInput(
                f"'{name}' has {len(values)} entries but 'query' has {len(parsed.query)}: one per query", field=name
            )
    answer = get_reward(served, parsed.query, parsed.prompts, template=template, error_signal=error_signal)
    return render(answer), len(parsed.query)
