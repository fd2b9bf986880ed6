"""Bodies on every route, on a server process: one way to read them, one message per mistake.

A batch with a bad record is scored but for that record, which ``errors`` names (as rlvp-score
does); a body none of whose records reads is a 422. The same mistake (invalid JSON, an empty body,
a BOM, a deep body, an unknown ``error_signal``) gets the same answer on /score, /get_reward and
/verify, and every 422 has ``record`` and ``field``. Trajectories of another environment get
rlvp-score's notes; a mistyped token envelope is named as one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .server import REPO, httpx, serve_for_module

from rlvp_dsl.cli.score_notes import data_notes
from rlvp_dsl.readers import read_episodes
from rlvp_dsl.serve.rulesets import check_rule_files, compile_sets
from rlvp_dsl.serve.scoring import render, score_answer

RULES = "rules/tau2_airline.rlvp"
CHAT = REPO / "examples/episodes/airline_chat.jsonl"
TAU2 = REPO / "examples/episodes/airline_tau2_results.json"
TRAJ = REPO / "examples/data/swe_agent/demonstrations__function_calling_simple.traj"
ROBOT = "expected one of assistant/user/tool/system, got 'robot'"
#: A NeMo Gym rollout: one user turn, nothing else.
ROLLOUT = {"responses_create_params": {"input": "hi"}, "response": {"output": []}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_for_module(tmp_path_factory, [RULES, "--no-access-log"])


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def served():
    cwd = Path.cwd()
    try:
        os.chdir(REPO)
        return compile_sets(check_rule_files({"tau2_airline": RULES}), 1).by_name["tau2_airline"]
    finally:
        os.chdir(cwd)


def _error(answer: httpx.Response) -> dict:
    """A 422's body, less its rules hash (checked against the header)."""
    assert answer.status_code == 422, answer.text
    document = answer.json()
    assert document.pop("rules_hash") == answer.headers["x-rlvp-rules-hash"]
    return document


def _bad(detail: str, record: str = "", field: str = "", **more) -> dict:
    return {"error": "bad_input", "detail": detail, "record": record, "field": field, **more}


# ---- a bad record loses itself, not the batch ------------------------------------------------------


def test_a_bad_jsonl_line_is_listed_and_the_others_scored(client, served, monkeypatch):
    monkeypatch.chdir(REPO)
    lines = CHAT.read_text(encoding="utf-8").splitlines()
    body = "\n".join([lines[0], '{"id": "bad", "messages": [{"role": "robot"}]}', *lines[1:], "{oops"]) + "\n"
    answer = client.post("/score", params={"name": "runs.jsonl"}, content=body.encode())
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["errors"] == [
        {
            "record": "line 2: messages[0]",
            "field": "role",
            "message": f"runs.jsonl: line 2: messages[0]: field 'role': {ROBOT}",
        },
        {
            "record": "line 6",
            "field": "",
            "message": "runs.jsonl:6:2: invalid JSON: Expecting property name enclosed in double quotes",
        },
    ]
    # the good episodes, in body order, each as in-process scoring gives it
    expected = json.loads(render(score_answer(served, read_episodes(CHAT), "runs.jsonl")))
    assert document["episodes"] == expected["episodes"] and document["count"] == 4
    assert [e["id"] for e in document["episodes"]] == [json.loads(x)["id"] for x in lines]
    assert document["total"] == expected["total"]


def test_a_bad_tau2_simulation_is_listed_and_the_others_scored(client, served, tmp_path):
    results = json.loads(TAU2.read_text(encoding="utf-8"))
    good = tmp_path / "run.json"
    good.write_text(json.dumps({**results, "simulations": results["simulations"][:1]}), encoding="utf-8")
    results["simulations"][1]["messages"][1]["role"] = "robot"
    answer = client.post("/score", params={"name": "run.json"}, content=json.dumps(results).encode())
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["errors"] == [
        {
            "record": "simulations[1].messages[1]",
            "field": "role",
            "message": f"run.json: simulations[1].messages[1]: field 'role': {ROBOT}",
        }
    ]
    expected = json.loads(render(score_answer(served, read_episodes(good), "run.json")))
    assert document["episodes"] == expected["episodes"]
    assert [e["id"] for e in document["episodes"]] == ["run.json#simulations[0]"]  # its place in the body


def test_a_body_with_no_good_record_is_422_listing_each(client):
    body = b'{"messages": [{"role": "robot"}]}\n{"messages": [{"role": "user", "content": 5}]}\n'
    document = _error(client.post("/score", params={"name": "runs.jsonl"}, content=body))
    first = f"runs.jsonl: line 1: messages[0]: field 'role': {ROBOT}"
    second = "runs.jsonl: line 2: messages[0]: field 'content': expected text, a list of content parts or null, got 5"
    assert document == _bad(
        f"{first} (and 1 more records could not be read: see errors)",
        "line 1: messages[0]",
        "role",
        errors=[
            {"record": "line 1: messages[0]", "field": "role", "message": first},
            {"record": "line 2: messages[0]", "field": "content", "message": second},
        ],
    )


# ---- notes: the wrong environment's trajectories -------------------------------------------------------


def test_another_environments_calls_are_noted_on_every_route(client, served):
    note = (
        "note: 5 of 5 calls go to 5 tools the rules do not declare (bash, edit, find_file, open, submit); "
        "rules that name tools or tags never match them"
    )
    answer = client.post("/score", params={"name": TRAJ.name}, content=TRAJ.read_bytes())
    assert answer.status_code == 200 and answer.json()["notes"] == [note] == data_notes(
        served.program, read_episodes(TRAJ)
    )
    assert answer.json()["errors"] == []

    one = "note: 1 of 1 call goes to 1 tool the rules do not declare (bash); rules that name tools or tags never match them"
    query = (
        '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
    )
    assert client.post("/get_reward", json={"query": [query]}).json()["notes"] == [one]
    call = {"type": "function_call", "name": "bash", "arguments": '{"command": "ls"}', "call_id": "c1"}
    rollout = {**ROLLOUT, "response": {"output": [call]}}
    assert client.post("/verify", json=rollout).json()["notes"] == [one]
    assert client.post("/verify", json=ROLLOUT).json()["notes"] == []


# ---- one mistake, one message, on every route ---------------------------------------------------------

ROUTES = ["/score", "/get_reward", "/verify"]
#: A body each route answers 200.
GOOD = {
    "/score": CHAT.read_text(encoding="utf-8").splitlines()[0].encode(),
    "/get_reward": b'{"query": ["hello"]}',
    "/verify": json.dumps(ROLLOUT).encode(),
}
TRUNCATED = "request.json:1:3: invalid JSON: Expecting ',' delimiter -- the text ends early: is the file truncated?"


@pytest.mark.parametrize("route", ROUTES)
def test_invalid_json_is_one_message(client, route):
    assert _error(client.post(route, content=b"[1")) == _bad(TRUNCATED)


@pytest.mark.parametrize("route", ROUTES)
def test_a_bom_is_skipped_everywhere(client, route):
    answer = client.post(route, content=b"\xef\xbb\xbf" + GOOD[route])
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("route", ROUTES)
def test_an_unknown_error_signal_is_one_message(client, route):
    document = _error(client.post(route, params={"error_signal": "tlr"}, content=GOOD[route]))
    assert document == _bad(
        "?error_signal= must be one of the names tau2, tau_bench_v1, openai, swe_agent, trl, verl, mcp; "
        "got 'tlr' (did you mean 'trl'?)",
        field="error_signal",
    )


@pytest.mark.parametrize(
    "route,expected",
    [
        ("/score", "request.json: the body is empty (expected a trajectory: JSON or JSONL)"),
        ("/get_reward", "request.json: the body is empty (expected a JSON object)"),
        ("/verify", "request.json: the body is empty (expected a JSON object)"),
    ],
)
def test_an_empty_body(client, route, expected):
    assert _error(client.post(route, content=b" \n")) == _bad(expected)


@pytest.mark.parametrize("route", ["/get_reward", "/verify"])
def test_a_deep_body_is_422_never_500(client, route, server):
    """900 levels (orjson parses them; the echo and the checks would recurse) and 5,000 (json would
    run out of stack): both the readers' limit of 200."""
    body = b'{"query": ["x"], "m": ' + b"[" * 900 + b"]" * 900 + b"}"
    where = "m[0][0][0]..."
    limit = 'arrays and objects nested more than 200 levels deep (docs/readers.md, "Limits")'
    assert _error(client.post(route, content=body)) == _bad(f"request.json: {where}: {limit}", where)
    deeper = b"[" * 5000 + b"]" * 5000
    document = _error(client.post(route, content=deeper))
    assert document == _bad("request.json:1:201: invalid JSON: arrays and objects nested more than 200 levels deep")
    assert document == _error(client.post("/score", content=deeper))  # the readers' own answer
    assert "Traceback" not in server.text()


def test_verify_names_every_problem(client):
    assert _error(client.post("/verify", content=b"{}")) == _bad(
        "responses_create_params: Field required; response: Field required", field="responses_create_params"
    )


def test_get_reward_counts_name_their_field(client):
    document = _error(client.post("/get_reward", json={"query": ["a"], "prompts": []}))
    assert document == _bad("'prompts' has 0 entries but 'query' has 1: one per query", field="prompts")


def test_not_a_trajectory_has_record_and_field(client):
    document = _error(client.post("/score", content=b"null"))
    assert document == _bad(
        "request.json: not a trajectory: JSON null; pass ?format= one of tau2, tau_bench_v1, openai, swe_agent, atif"
    )


# ---- the token envelope --------------------------------------------------------------------------------


def test_a_mistyped_envelope_says_what_an_envelope_needs(client):
    trajectory = json.loads(CHAT.read_text(encoding="utf-8").splitlines()[0])
    needs = "request.json: a token envelope is a JSON object with exactly the keys 'trajectory' and 'tokens'"
    document = _error(client.post("/score", json={"trajectory": trajectory, "token": [None]}))
    assert document == _bad(
        f"{needs} (got: token, trajectory): 'token' is not one (did you mean 'tokens'?)", field="token"
    )
    document = _error(client.post("/score", json={"trajectory": trajectory}))
    assert document == _bad(f"{needs} (got: trajectory): 'tokens' is missing (null: no token data)", field="tokens")
    # a chat file that has a "tokens" key of its own is no envelope: read as the file it is
    answer = client.post("/score", json={**trajectory, "tokens": 3})
    assert answer.status_code == 200 and answer.json()["count"] == 1


def test_the_envelopes_trajectory_is_named_in_its_errors(client):
    document = _error(client.post("/score", json={"trajectory": "not json {", "tokens": None}))
    assert document == _bad("request.json: trajectory:1:1: invalid JSON: Expecting value", "trajectory")
    bad = {"messages": [{"role": "robot"}]}
    document = _error(client.post("/score", json={"trajectory": bad, "tokens": None}))
    assert document == _bad(
        f"request.json: messages[0]: field 'role': {ROBOT}".replace("request.json", "request.json: trajectory", 1),
        "trajectory: messages[0]",
        "role",
    )


# ---- metrics -------------------------------------------------------------------------------------------


def test_verify_and_reverify_mode_have_their_own_metric_labels(client):
    client.get("/reverify_mode")
    client.post("/verify", json=ROLLOUT)
    text = client.get("/metrics").text
    assert 'rlvp_serve_requests_total{route="/verify",status="200"}' in text
    assert 'rlvp_serve_requests_total{route="/reverify_mode",status="200"}' in text
    assert 'route="other"' not in text
