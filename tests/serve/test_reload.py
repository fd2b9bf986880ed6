"""SIGHUP reloads the rules of a running server atomically, and the body limit, on one server process.

A good new file is served from then on (new hash, new credits); a bad one is logged with its
diagnostics and the old rules stay; a request in flight while the rules change is answered whole
by the rules it started with.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from .server import httpx

from rlvp_dsl.serve.rulesets import check_rule_files, compile_sets

TOOLS = "tool lookup : read target order_id\ntool refund : write target order_id\n"
V1 = TOOLS + "violation failed_lookup (-0.5) { on call lookup error }\n"
V2 = TOOLS + "violation any_refund (-0.25) { on call refund }\n"
BAD = TOOLS + "violation broken (-0.5) { on call no_such_tool }\n"
MAX_BODY = 8_000_000

EPISODE = {
    "messages": [
        {"role": "user", "content": "Refund order 7."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "a", "function": {"name": "lookup", "arguments": '{"order_id": "7"}'}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "Error: no order 7"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "b", "function": {"name": "refund", "arguments": '{"order_id": "7"}'}}],
        },
        {"role": "tool", "tool_call_id": "b", "content": "refunded"},
    ]
}


def _hash(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return compile_sets(check_rule_files({"orders": str(path)}), 1).by_name["orders"].hash


def _healthz(server) -> dict:
    return httpx.get(server.url + "/healthz", timeout=10).json()


def _wait_generation(server, generation: int) -> dict:
    deadline = time.monotonic() + 30
    while (state := _healthz(server))["generation"] != generation:
        assert time.monotonic() < deadline, server.text()
        time.sleep(0.05)
    return state


def _score(server, body: bytes, name: str = "run.json") -> httpx.Response:
    return httpx.post(server.url + "/score", params={"name": name}, content=body, timeout=120)


@pytest.fixture
def rules(tmp_path):
    folder = tmp_path / "rules"
    folder.mkdir()
    return folder / "orders.rlvp"


def test_sighup_reloads_good_rules_and_keeps_old_ones_on_errors(start_server, rules):
    h1 = _hash(rules, V1)
    server = start_server([rules, "--max-body", MAX_BODY])
    body = json.dumps(EPISODE).encode()
    assert _healthz(server) == {"status": "ok", "rules": {"orders": h1}, "generation": 1}
    assert _score(server, body).json()["rule_totals"] == {"failed_lookup": -0.5}

    h2 = _hash(rules, V2)
    os.kill(server.pid, signal.SIGHUP)
    assert _wait_generation(server, 2)["rules"] == {"orders": h2}
    answer = _score(server, body)
    assert answer.json()["rule_totals"] == {"any_refund": -0.25}
    assert answer.headers["x-rlvp-rules-hash"] == h2 != h1

    rules.write_text(BAD, encoding="utf-8")
    os.kill(server.pid, signal.SIGHUP)
    server.wait_log("reload failed; still serving orders " + h2)
    log = server.text()
    assert (
        f"{rules}:3:35: error[RV201]: unknown tool" in log and "= help: declare it" in log
    )  # rlvp-compile's diagnostic
    assert _healthz(server) == {"status": "ok", "rules": {"orders": h2}, "generation": 2}
    assert _score(server, body).json()["rule_totals"] == {"any_refund": -0.25}

    assert _hash(rules, V1) == h1  # the same text at the same path: the same hash again
    os.kill(server.pid, signal.SIGHUP)
    assert _wait_generation(server, 3)["rules"] == {"orders": h1}
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert 'rlvp_serve_reloads_total{result="ok"} 2.0' in metrics
    assert 'rlvp_serve_reloads_total{result="failed"} 1.0' in metrics
    assert "Traceback" not in server.text()


def test_a_request_in_flight_is_answered_by_one_rule_set(start_server, rules):
    """The rules change while a request is in flight (its headers sent, its body held back until the
    reload is done): the answer is all old rules, named by the old hash; the next request gets the new."""
    h1 = _hash(rules, V1)
    server = start_server([rules, "--max-body", MAX_BODY])
    line = (json.dumps(EPISODE) + "\n").encode()
    headers_sent, reloaded = threading.Event(), threading.Event()

    def body():
        yield line
        headers_sent.set()
        assert reloaded.wait(60)
        for _ in range(1999):
            yield line

    answers: list[httpx.Response] = []
    request = threading.Thread(
        target=lambda: answers.append(
            httpx.post(server.url + "/score", params={"name": "batch.jsonl"}, content=body(), timeout=120)
        )
    )
    request.start()
    assert headers_sent.wait(30)
    time.sleep(0.5)  # the server has the headers: the request has chosen its rules
    h2 = _hash(rules, V2)
    os.kill(server.pid, signal.SIGHUP)
    server.wait_log("reloaded: now serving orders " + h2)
    reloaded.set()
    request.join(timeout=120)
    document = answers[0].json()
    assert document["rules_hash"] == h1 and answers[0].headers["x-rlvp-rules-hash"] == h1
    assert document["count"] == 2000
    assert {tuple(e["rule_totals"]) for e in document["episodes"]} == {("failed_lookup",)}
    assert _score(server, line).json()["rules_hash"] == h2


def test_a_body_over_the_limit_is_413(start_server, rules):
    _hash(rules, V1)
    server = start_server([rules, "--max-body", 1000])
    small = json.dumps(EPISODE).encode()
    assert len(small) < 1000
    assert _score(server, small).status_code == 200
    answer = _score(server, b" " * 1001)
    assert answer.status_code == 413
    assert answer.json()["error"] == "too_large" and "at most 1000 bytes" in answer.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(50):
            yield b" " * 100

    answer = httpx.post(server.url + "/score", content=chunks(), timeout=30)
    assert answer.status_code == 413
    answer = httpx.post(server.url + "/get_reward", content=b'{"query": ["' + b"x" * 2000 + b'"]}', timeout=30)
    assert answer.status_code == 413
    assert _score(server, small).status_code == 200  # and the server goes on
