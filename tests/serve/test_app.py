"""The application in-process (Starlette's test client): what no real request can provoke -- a bug
while scoring is a JSON 500 and the application answers the next request -- and the holder's swap."""

from __future__ import annotations

import attrs

from .server import REPO  # noqa: F401  (skips without the serve extra)

from fastapi.testclient import TestClient

from rlvp_dsl.serve.app import ServeSettings, create_app
from rlvp_dsl.serve.rulesets import RuleHolder, RulesFailed, check_rule_files, compile_sets

RULES = str(REPO / "rules/swe.rlvp")


class _Broken:
    """A program whose scoring has a bug."""

    def __init__(self, program):
        self.rules = program.rules
        self.tools = program.tools
        self.locations = program.locations

    def score(self, episode):
        raise RuntimeError("a bug")


def _sets():
    return compile_sets(check_rule_files({"swe": RULES}), 1)


def test_a_bug_is_a_json_500_and_the_next_request_is_answered():
    sets = _sets()
    served = sets.by_name["swe"]
    broken = attrs.evolve(sets, by_name={"swe": attrs.evolve(served, program=_Broken(served.program))})
    app = create_app(RuleHolder(lambda old: old, broken), ServeSettings(reload_on_sighup=False))
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.post("/score", content=b'{"messages": [{"role": "user", "content": "hi"}]}')
        assert answer.status_code == 500
        assert answer.json() == {
            "error": "internal",
            "detail": "internal error (RuntimeError); the server log has the traceback",
        }
        assert client.get("/healthz").status_code == 200
        assert 'rlvp_serve_errors_total{kind="internal",route="/score"} 1.0' in client.get("/metrics").text


def test_the_holder_swaps_whole_sets_and_keeps_them_on_failure():
    first = _sets()
    calls = []

    def loader(old):
        calls.append(old.generation)
        if len(calls) == 2:
            raise RulesFailed("rules/swe.rlvp:1:1: error[RV201]: unknown tool 'x'")
        return compile_sets(check_rule_files({"swe": RULES}), old.generation + 1)

    holder = RuleHolder(loader, first)
    assert holder.current is first
    outcome = holder.reload()
    assert outcome.ok and holder.current.generation == 2 and holder.current is not first
    assert holder.current.by_name["swe"].hash == first.by_name["swe"].hash  # same file, same hash
    kept = holder.current
    outcome = holder.reload()
    assert not outcome.ok and holder.current is kept
    assert outcome.message.startswith("reload failed; still serving swe sha256:")
    assert outcome.message.endswith("error[RV201]: unknown tool 'x'")
