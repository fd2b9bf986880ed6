"""``POST /verify`` and ``GET /reverify_mode``: NeMo Gym 0.7's verifier contract, on a server process.

The requests are NeMo Gym 0.7.0's own fixture rollouts (tests/serve/data/README.md) and hand-made
variants of them; the answers are checked against the fields of the package's
``BaseMultiRewardVerifyResponse`` (nemo-gym needs Python >= 3.13, so its models are mirrored here
from its source, ``nemo_gym/base_resources_server.py``) and, by value, against in-process scoring.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from .server import httpx, serve_for_module

from rlvp_dsl.serve.nemo_gym import VerifyRequest, read_rollout
from rlvp_dsl.serve.rulesets import check_rule_files, compile_sets

FIXTURE = Path(__file__).parent / "data" / "nemo_gym_0.7.0_example_tool_call_multireward_rollouts.jsonl"
RULES = (
    "tool get_weather : read target city\n"
    "violation weather_error (-0.5) { on call get_weather error }\n"
    "violation any_weather (-0.25) { on call get_weather }\n"
)


class MultiRewardVerifyResponse(BaseModel):
    """nemo-gym 0.7.0's ``BaseMultiRewardVerifyResponse``: its required fields and their types."""

    responses_create_params: dict
    response: dict
    reward: float
    mask_sample: bool = False
    failure_kind: str | None = None
    failure_reason: str | None = None
    reward_components: dict[str, float]


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "weather.rlvp"
    path.write_text(RULES, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory, rules_file):
    yield from serve_for_module(tmp_path_factory, [rules_file])


@pytest.fixture(scope="module")
def served(rules_file):
    return compile_sets(check_rule_files({"weather": str(rules_file)}), 1).by_name["weather"]


def _rollouts() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_reverify_mode_is_stateless(server):
    answer = httpx.get(server.url + "/reverify_mode", timeout=10)
    assert answer.status_code == 200 and answer.json() == "stateless"


def test_nemo_gym_fixture_rollouts_verify(server, served):
    rollouts = _rollouts()
    assert len(rollouts) == 5
    for rollout in rollouts:
        answer = httpx.post(server.url + "/verify", json=rollout, timeout=30)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        MultiRewardVerifyResponse.model_validate(body)
        # one get_weather call, answered without error: any_weather fires once, weather_error never
        assert body["reward_components"] == {"weather_error": 0.0, "any_weather": -0.25}
        assert body["reward"] == -0.25
        assert body["notes"] == []  # every call goes to a tool the rules declare
        assert body["rules_hash"] == served.hash == answer.headers["X-RLVP-Rules-Hash"]
        # the request is echoed (NeMo Gym's verify responses extend the request), its extra fields too
        assert body["responses_create_params"] == rollout["responses_create_params"]
        assert body["response"] == rollout["response"]
        assert body["_ng_task_index"] == rollout["_ng_task_index"]
        episode, first = read_rollout(VerifyRequest.model_validate(rollout))
        assert first == 1  # the user turn (the developer message is the policy)
        assert [e.kind for e in episode.events] == ["user", "call", "assistant"]
        assert episode.calls[0].arguments == json.loads(rollout["response"]["output"][1]["arguments"])
        assert episode.meta["policy"].startswith("You are a helpful assistant.")


def test_an_error_result_and_a_prompt_call(server):
    rollout = _rollouts()[0]
    failed = copy.deepcopy(rollout)
    failed["response"]["output"][2]["output"] = "Error: no weather service for New York"
    body = httpx.post(server.url + "/verify", json=failed, timeout=30).json()
    assert body["reward_components"] == {"weather_error": -0.5, "any_weather": -0.25}
    assert body["reward"] == -0.75

    # the same call moved into the prompt (input): its credit is not the response's
    prompted = copy.deepcopy(failed)
    prompted["responses_create_params"]["input"] += prompted["response"]["output"][1:3]
    prompted["response"]["output"] = [prompted["response"]["output"][3]]
    body = httpx.post(server.url + "/verify", json=prompted, timeout=30).json()
    assert body["reward_components"] == {"weather_error": 0.0, "any_weather": 0.0} and body["reward"] == 0.0

    # a plain-string input is the user's turn
    plain = copy.deepcopy(rollout)
    plain["responses_create_params"]["input"] = "how hot is it in New York today?"
    assert httpx.post(server.url + "/verify", json=plain, timeout=30).json()["reward"] == -0.25


def test_bad_verify_requests_are_422_naming_the_field(server):
    rollout = _rollouts()[0]
    missing = copy.deepcopy(rollout)
    del missing["response"]["output"]
    answer = httpx.post(server.url + "/verify", json=missing, timeout=30)
    assert answer.status_code == 422
    assert answer.json()["field"] == "response.output" and "Field required" in answer.json()["detail"]
    answer = httpx.post(server.url + "/verify", content=b"[1, 2]", timeout=30)
    assert answer.status_code == 422
    assert answer.json()["detail"] == "the body must be a JSON object (a verify request), got a JSON array"
    answer = httpx.post(server.url + "/verify", content=b"{not json", timeout=30)
    assert answer.status_code == 422
    assert answer.json() == {
        "error": "bad_input",
        "detail": "request.json:1:2: invalid JSON: Expecting property name enclosed in double quotes",
        "record": "",
        "field": "",
        "rules_hash": answer.headers["X-RLVP-Rules-Hash"],
    }
    answer = httpx.post(server.url + "/verify", params={"error_signal": "nope"}, json=rollout, timeout=30)
    assert answer.status_code == 422 and answer.json()["field"] == "error_signal"
    assert "Traceback" not in server.text()
