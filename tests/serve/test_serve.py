"""`rlvp serve` as a user runs it: one server process with a token and two rule sets, called over HTTP.

/score answers equal in-process scoring byte for byte on the real episodes the repository ships (and
the tau2 corpus in ../shared/data where present), and agree field by field with ``rlvp-score --json``;
/get_reward answers OpenRLHF's contract on a chat-templated transcript with the credit the same
episode gets read as chat messages; bad input is a 422 naming record and field; the token guards
every route but /healthz and shows in no log and no metric.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DATA  # tests/conftest.py: ../shared/data, absent on a user's clone

from .server import REPO, TOKEN, httpx, serve_for_module

from rlvp_dsl.attach import completion_credits
from rlvp_dsl.cli.score import main as score_main
from rlvp_dsl.readers import episode_from_messages, read_episodes
from rlvp_dsl.serve.rulesets import check_rule_files, compile_sets, rule_names
from rlvp_dsl.serve.scoring import render, score_answer

RULES = ["rules/tau2_airline.rlvp", "rules/swe.rlvp"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_BODY = 64 * 1024 * 1024

#: (rule set, file): the real episodes of every format the readers take.
CASES = [
    ("tau2_airline", "examples/episodes/airline_chat.jsonl"),  # OpenAI chat JSONL
    ("tau2_airline", "examples/episodes/airline_tau2_results.json"),  # tau2 Results
    (
        "tau2_airline",
        "examples/data/tau2_simulations/sierra_tau2-bench_prs/pr103_azure-airline-full_gpt-4o.sample.json",
    ),
    ("tau2_airline", "examples/data/tau_bench_v1/gpt-4o-airline.sample.json"),  # tau-bench v1
    ("swe", "examples/data/swe_agent/demonstrations__function_calling_simple.traj"),  # SWE-agent
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_for_module(
        tmp_path_factory, [*RULES, "--max-body", str(MAX_BODY)], env={"RLVP_SERVE_TOKEN": TOKEN}
    )


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def in_process():
    """The same rule sets, checked and compiled here (paths relative to the repository, as the server's)."""
    cwd = Path.cwd()
    try:
        os.chdir(REPO)
        return compile_sets(check_rule_files(rule_names(RULES)), 1).by_name
    finally:
        os.chdir(cwd)


def _score(client, path: str, rules: str, **params) -> httpx.Response:
    return client.post(
        "/score", params={"rules": rules, "name": Path(path).name, **params}, content=(REPO / path).read_bytes()
    )


# ---- who may call --------------------------------------------------------------------------------


def test_healthz_needs_no_token_and_names_the_hashes(server, in_process):
    answer = httpx.get(server.url + "/healthz", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "rules": {n: s.hash for n, s in in_process.items()}, "generation": 1}


@pytest.mark.parametrize(
    "route,method",
    [("/score", "POST"), ("/get_reward", "POST"), ("/rules", "GET"), ("/metrics", "GET"), ("/nowhere", "GET")],
)
@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"])
def test_every_other_route_needs_the_token(server, route, method, header):
    headers = {"Authorization": header} if header else {}
    answer = httpx.request(method, server.url + route, headers=headers, content=b"{}", timeout=10)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert answer.json()["error"] == "unauthorized"
    assert TOKEN not in answer.text


def test_the_token_in_any_case_of_bearer(server):
    answer = httpx.get(server.url + "/rules", headers={"Authorization": f"bearer {TOKEN}"}, timeout=10)
    assert answer.status_code == 200


# ---- /score ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rules,path", CASES, ids=[Path(p).name for _, p in CASES])
def test_score_equals_in_process_scoring_byte_for_byte(client, in_process, rules, path, monkeypatch):
    """The body is read as the file it is: the answer's bytes are in-process scoring's, and the hash
    the one of the rules here."""
    monkeypatch.chdir(REPO)
    answer = _score(client, path, rules)
    assert answer.status_code == 200, answer.text
    served = in_process[rules]
    episodes = read_episodes(path)
    assert answer.content == render(score_answer(served, episodes, Path(path).name))
    assert answer.headers["x-rlvp-rules-hash"] == served.hash
    document = answer.json()
    assert document["rules_hash"] == served.hash and document["count"] == len(episodes) > 0
    assert any(entry["credits"] for entry in document["episodes"])


@pytest.mark.parametrize("rules,path", CASES[:2] + CASES[4:], ids=["chat", "tau2", "swe"])
def test_score_agrees_with_rlvp_score_json(client, rules, path, monkeypatch, capsys):
    """Per episode, every field ``rlvp-score --json`` writes (but the source) is the same JSON."""
    monkeypatch.chdir(REPO)
    assert score_main([f"rules/{rules}.rlvp", path, "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["episodes"]
    got = _score(client, path, rules).json()["episodes"]
    assert [e["id"] for e in got] == [e["id"] for e in expected]
    for mine, theirs in zip(got, expected):
        for key in theirs.keys() - {"source"}:
            assert json.dumps(mine[key]) == json.dumps(theirs[key]), key
        calls = {c["event_index"] for c in mine["call_credits"]}
        on_turns = sum(c["value"] for c in mine["credits"] if c["event_index"] not in calls)
        assert sum(c["value"] for c in mine["call_credits"]) + on_turns == pytest.approx(mine["total"], abs=1e-9)


@pytest.mark.skipif(not (DATA / "tau2_simulations").is_dir(), reason=f"shared data not found at {DATA}")
def test_score_a_real_tau2_run_from_the_corpus(client, in_process):
    path = (
        DATA
        / "tau2_simulations/blakeelias_fork/2025-10-05T22-50-14.083933_airline_llm_agent_grok-3_user_simulator_grok-3.json"
    )
    answer = client.post("/score", params={"rules": "tau2_airline", "name": path.name}, content=path.read_bytes())
    assert answer.status_code == 200, answer.text
    served = in_process["tau2_airline"]
    assert answer.content == render(score_answer(served, read_episodes(path), path.name))


def test_a_batch_of_10000_episodes(client, in_process, monkeypatch):
    """10,000 real chat episodes in one JSONL body: every one scored, each as its line alone is."""
    monkeypatch.chdir(REPO)
    lines = (REPO / "examples/episodes/airline_chat.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    body = "".join(
        json.dumps({**records[k % len(records)], "id": f"{records[k % len(records)]['id']}-{k}"}) + "\n"
        for k in range(10_000)
    ).encode()
    answer = client.post("/score", params={"rules": "tau2_airline", "name": "batch.jsonl"}, content=body)
    assert answer.status_code == 200, answer.text[:500]
    document = answer.json()
    assert document["count"] == len(document["episodes"]) == 10_000
    served = in_process["tau2_airline"]
    alone = {e.id: e for e in read_episodes("examples/episodes/airline_chat.jsonl")}
    totals = {i: sum(c.value for c in served.program.score(e)) for i, e in alone.items()}
    for k, entry in enumerate(document["episodes"]):
        base = records[k % len(records)]["id"]
        assert entry["id"] == f"{base}-{k}" and entry["total"] == totals[base]
    assert document["total"] == pytest.approx(2500 * sum(totals.values()), abs=1e-6)


def _bad(answer: httpx.Response) -> dict:
    assert answer.status_code == 422, answer.text
    document = answer.json()
    assert document["error"] in ("bad_input", "unknown_rules")
    assert "Traceback" not in answer.text
    return document


def test_a_malformed_record_names_record_and_field(client, in_process):
    body = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]}'
    document = _bad(client.post("/score", params={"rules": "tau2_airline", "name": "run.json"}, content=body))
    assert document["record"] == "messages[1]" and document["field"] == "role"
    assert (
        document["detail"]
        == "run.json: messages[1]: field 'role': expected one of assistant/user/tool/system, got 'robot'"
    )
    assert document["rules_hash"] == in_process["tau2_airline"].hash


def test_invalid_json_names_line_and_column(client):
    document = _bad(
        client.post("/score", params={"rules": "tau2_airline"}, content=b'{"messages": [\n  {"role": "user",, }]}')
    )
    assert document["detail"].startswith("request.json:2:19: invalid JSON:")


def test_a_bad_line_of_a_jsonl_body_is_named_and_the_others_scored(client):
    body = b'{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [{"role": "user", "content": 5}]}\n'
    answer = client.post("/score", params={"rules": "tau2_airline", "name": "runs.jsonl"}, content=body)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert [e["id"] for e in document["episodes"]] == ["runs.jsonl:1"]
    assert document["errors"] == [
        {
            "record": "line 2: messages[0]",
            "field": "content",
            "message": "runs.jsonl: line 2: messages[0]: field 'content': expected text, a list of content parts or null, got 5",
        }
    ]


@pytest.mark.parametrize(
    "params,body,says",
    [
        ({"rules": "tau2_airline"}, b"", "request.json: the body is empty"),
        ({"rules": "tau2_airline"}, b"null", "not a trajectory: JSON null"),
        ({"rules": "tau2_airline"}, b"\xff\xfe\x00", "not UTF-8"),
        ({"rules": "tau2_airline"}, b"[" * 5000 + b"]" * 5000, "nested more than 200 levels"),
        ({"rules": "tau2_airline", "format": "tau3"}, b"{}", "?format= must be one of"),
        ({"rules": "tau2_airline", "format": "tau2"}, b'{"messages": []}', "looks like 'openai'"),
        ({"rules": "tau2_airline", "error_signal": "tlr"}, b'{"messages": []}', "did you mean 'trl'"),
        ({"rules": "tau2_airline", "name": "../etc/passwd"}, b"{}", "plain file name"),
        ({"rules": "nope"}, b"{}", "no rule set named 'nope'"),
        ({}, b"{}", "several rule sets (tau2_airline, swe)"),
    ],
    ids=["empty", "null", "binary", "deep", "format", "wrong-format", "signal", "name", "rules", "no-rules"],
)
def test_bad_requests_are_422_never_500(client, params, body, says):
    document = _bad(client.post("/score", params=params, content=body))
    assert says in document["detail"]


def test_the_server_lives_after_bad_input(client):
    assert client.get("/rules").status_code == 200


# ---- /get_reward ----------------------------------------------------------------------------------


def _chatml(messages: list[dict]) -> str:
    """Messages rendered as Qwen 2.5's chat template renders them: calls as <tool_call> JSON, results
    as <tool_response> blocks in a user turn."""
    out = []
    k = 0
    while k < len(messages):
        m = messages[k]
        if m["role"] == "tool":
            blocks = []
            while k < len(messages) and messages[k]["role"] == "tool":
                blocks.append(f"<tool_response>\n{messages[k]['content']}\n</tool_response>")
                k += 1
            out.append("<|im_start|>user\n" + "\n".join(blocks) + "<|im_end|>\n")
            continue
        text = m.get("content") or ""
        for call in m.get("tool_calls") or []:  # arguments as the model wrote them (cut ones too)
            text += '\n<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (
                call["function"]["name"],
                call["function"]["arguments"],
            )
        out.append(f"<|im_start|>{m['role']}\n{text}<|im_end|>\n")
        k += 1
    return "".join(out)


def test_get_reward_reads_a_templated_transcript(client, in_process):
    """OpenRLHF's request on real episodes rendered with the chat template: each reward is the credit
    the completion earns when the same episode is read as chat messages."""
    served = in_process["tau2_airline"]
    records = [json.loads(x) for x in (REPO / "examples/episodes/airline_chat.jsonl").read_text().splitlines()]
    queries, prompts, expected = [], [], []
    for record in records:
        messages = record["messages"]
        prompt = _chatml(messages[:2]) + "<|im_start|>assistant\n"
        completion = _chatml(messages[2:])[len("<|im_start|>assistant\n") :]
        queries.append(prompt + completion + "<|endoftext|>")
        prompts.append(prompt)
        episode = episode_from_messages(messages)
        expected.append(completion_credits(served.program, episode, first_event=1, source="x"))
    answer = client.post(
        "/get_reward",
        params={"rules": "tau2_airline"},
        json={"query": queries, "prompts": prompts, "labels": [None] * 4},
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["rewards"] == [c.total for c in expected]
    assert document["scores"] == document["rewards"]
    assert document["rules_hash"] == served.hash
    logs = document["extra_logs"]
    assert all(len(v) == len(queries) for v in logs.values())
    assert logs["rlvp/prompt_found"] == [1.0] * 4
    assert logs["rlvp/calls"] == [float(sum(1 for e in episode_from_messages(r["messages"]).calls)) for r in records]
    for name in (r.name for r in served.program.rules):
        assert logs[f"rlvp/rule/{name}"] == pytest.approx(
            [sum(c.value for c in x.credits if c.rule == name) for x in expected], abs=1e-12
        )
    assert any(x.total != 0 for x in expected)


def test_get_reward_cuts_the_credit_of_the_prompt(client):
    """A call made in the prompt earns the completion nothing; without the prompt it is credited."""
    prompt = (
        "<|im_start|>user\nCancel reservation VAAOXJ.<|im_end|>\n<|im_start|>assistant\n"
        '<tool_call>\n{"name": "cancel_reservation", "arguments": {"reservation_id": "VAAOXJ"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nError: no such reservation\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    query = prompt + "I could not cancel it.<|im_end|>"
    with_prompt = client.post(
        "/get_reward", params={"rules": "tau2_airline"}, json={"query": [query], "prompts": [prompt]}
    )
    without = client.post("/get_reward", params={"rules": "tau2_airline"}, json={"query": [query]})
    assert with_prompt.json()["extra_logs"]["rlvp/calls"] == [0.0]
    assert without.json()["extra_logs"]["rlvp/calls"] == [1.0]
    assert without.json()["rewards"][0] < with_prompt.json()["rewards"][0]


@pytest.mark.parametrize(
    "body,says",
    [
        (b'{"query": [1]}', "query[0]: Input should be a valid string"),
        (b'{"query": "text"}', "query: Input should be a valid list"),
        (b'{"prompts": []}', "query: Field required"),
        (b'{"query": ["a"], "prompts": []}', "'prompts' has 0 entries but 'query' has 1"),
        (b'{"query": ', "request.json:1:11: invalid JSON: Expecting value -- the text ends early"),
    ],
)
def test_get_reward_bad_bodies_are_422(client, body, says):
    document = _bad(client.post("/get_reward", params={"rules": "swe"}, content=body))
    assert says in document["detail"]


def test_get_reward_unknown_template_is_422(client):
    document = _bad(client.post("/get_reward", params={"rules": "swe", "template": "mistral"}, json={"query": ["x"]}))
    assert "template must be one of" in document["detail"]


# ---- /rules, /metrics, the logs ------------------------------------------------------------------


def test_rules_summarises_each_rule_set(client, in_process):
    document = client.get("/rules").json()
    assert [s["name"] for s in document["rule_sets"]] == ["tau2_airline", "swe"]
    airline = document["rule_sets"][0]
    assert airline["hash"] == in_process["tau2_airline"].hash
    assert airline["rules"] == len(in_process["tau2_airline"].program.rules) == len(airline["rule_list"])
    assert airline["rule_list"][0]["location"].startswith("rules/tau2_airline.rlvp:")


def test_metrics_count_requests_latency_episodes_and_errors(client):
    before = client.get("/metrics").text
    client.post(
        "/score", params={"rules": "tau2_airline"}, content=(REPO / "examples/episodes/airline_chat.jsonl").read_bytes()
    )
    client.post("/score", params={"rules": "tau2_airline"}, content=b"null")
    text = client.get("/metrics").text

    def value(name: str, source: str) -> float:
        line = next((x for x in source.splitlines() if x.startswith(name + " ")), f"{name} 0")
        return float(line.rsplit(" ", 1)[1])

    assert value('rlvp_serve_requests_total{route="/score",status="200"}', text) >= 1 + value(
        'rlvp_serve_requests_total{route="/score",status="200"}', before
    )
    assert value('rlvp_serve_errors_total{kind="bad_input",route="/score"}', text) >= 1 + value(
        'rlvp_serve_errors_total{kind="bad_input",route="/score"}', before
    )
    assert value('rlvp_serve_episodes_total{route="/score"}', text) >= 4 + value(
        'rlvp_serve_episodes_total{route="/score"}', before
    )
    assert value('rlvp_serve_errors_total{kind="unauthorized",route="/rules"}', text) >= 1
    assert 'rlvp_serve_request_seconds_bucket{le="0.001",route="/score"}' in text
    assert "rlvp_serve_request_seconds_count" in text
    assert TOKEN not in text


def test_the_token_is_in_no_log(server, client):
    """Last in this module: every request above (the refused ones too) was logged; the token never."""
    client.get("/healthz")
    log = server.text()
    assert '"POST /score?rules=tau2_airline' in log and " 401" in log  # the access log ran
    assert TOKEN not in log
    assert "Traceback" not in log
