"""``POST /score`` with token ids (the token envelope of rlvp_dsl/serve/scoring.py), over a real server
process: per-token credit equal by value to `rlvp_dsl.attach` in process (marker ids, given call spans,
an unmatched marked span, ATIF ``completion_token_ids``); bad token data is a 422 naming ``tokens[i]``
and the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .server import REPO, httpx, serve_for_module

from rlvp_dsl.attach import call_credits, episode_token_credits
from rlvp_dsl.call_spans import align_call_spans, find_call_spans
from rlvp_dsl.events import CALL, USER, Episode
from rlvp_dsl.pipeline import load_program
from rlvp_dsl.readers import read_episodes

CHAT = REPO / "examples" / "episodes" / "airline_chat.jsonl"
RULES = REPO / "rules" / "tau2_airline.rlvp"
OPEN, CLOSE = [900, 901], [902]  # a two-id opener, as a template's marker may be


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    for server in serve_for_module(tmp_path_factory, ["rules/tau2_airline.rlvp"]):
        with httpx.Client(base_url=server.url, timeout=120) as c:
            yield c


@pytest.fixture(scope="module")
def program():
    return load_program(str(RULES))


def _tokens(episode: Episode, extra_span: bool = False) -> tuple[list[int], list[int]]:
    """Token ids and mask standing for `episode`'s completion: a user message and a tool result are
    context (mask 0), an answer 3 sampled ids, a call its marked ids; `extra_span`: one marked span
    more, at the end (a call the episode does not have)."""
    ids: list[int] = []
    mask: list[int] = []
    for event in episode.events:
        if event.kind == USER:
            ids += [5, 6]
            mask += [0, 0]
        elif event.kind == CALL:
            ids += [*OPEN, 40 + event.index, 41, *CLOSE, 7]  # the call, then its result (not sampled)
            mask += [1, 1, 1, 1, 1, 0]
        else:
            ids += [30, 31, 32]
            mask += [1, 1, 1]
    if extra_span:
        ids += [*OPEN, 99, *CLOSE]
        mask += [1, 1, 1, 1]
    return ids, mask


def _in_process(program, episode: Episode, ids: list[int], mask: list[int]) -> tuple[list[float], Any]:
    """`rlvp_dsl.attach`'s per-token credit, step by step."""
    aligned = align_call_spans(episode, find_call_spans(ids, OPEN, CLOSE, mask))
    credits = call_credits(aligned.episode, program.score(aligned.episode), source="tau2_airline")
    return episode_token_credits(credits, aligned.spans, len(ids), mask), aligned


def _post(client, body: Any, name: str = "run.jsonl") -> httpx.Response:
    return client.post("/score", params={"name": name}, content=json.dumps(body).encode())


def test_marker_ids_give_the_in_process_token_credit(client, program):
    episodes = read_episodes(CHAT)
    rows = [_tokens(e, extra_span=(k == 1)) for k, e in enumerate(episodes)]
    tokens = [
        {"token_ids": ids, "mask": mask, "call_markers": [OPEN, CLOSE]} if k != 2 else None
        for k, (ids, mask) in enumerate(rows)
    ]
    answer = _post(client, {"trajectory": CHAT.read_text(), "tokens": tokens})
    assert answer.status_code == 200, answer.text
    got = answer.json()["episodes"]
    plain = client.post("/score", params={"name": "run.jsonl"}, content=CHAT.read_bytes()).json()["episodes"]
    for k, (episode, (ids, mask)) in enumerate(zip(episodes, rows)):
        if k != 1:  # the rest unchanged
            assert {key: v for key, v in got[k].items() if key != "token_credits"} == plain[k]
        if k == 2:
            assert "token_credits" not in got[k]
            continue
        expected, aligned = _in_process(program, episode, ids, mask)
        answer_k = got[k]["token_credits"]
        assert answer_k["n_tokens"] == len(ids)
        assert answer_k["values"] == pytest.approx(expected, abs=1e-12)
        assert answer_k["call_spans"] == [list(s) for s in aligned.spans]
        assert answer_k["inserted_calls"] == (1 if k == 1 else 0)
        if k == 1:  # the entry is of the episode with the malformed call inserted: it adds up to the tokens
            credits = program.score(aligned.episode)
            assert got[k]["total"] == pytest.approx(sum(c.value for c in credits), abs=1e-12)
            assert got[k]["malformed_calls"] == plain[k]["malformed_calls"] + 1
            assert [c["value"] for c in got[k]["call_credits"]] == pytest.approx(answer_k["call_values"], abs=1e-12)
            assert len(got[k]["call_credits"]) == len(plain[k]["call_credits"]) + 1
        assert any(v != 0 for v in answer_k["values"])  # real credit landed
        assert all(v == 0 for v, m in zip(answer_k["values"], mask) if not m)  # never on context
    # episode 0 by hand: calls at events 2 and 5 credited (0.0, -0.2), answers -0.2 on every sampled token
    ids0, mask0 = rows[0]
    values0 = got[0]["token_credits"]["values"]
    call5 = got[0]["token_credits"]["call_spans"][1]
    assert values0[call5[0] : call5[1]] == pytest.approx([-0.2 - 0.2] * 5)  # opener (2 ids), 2 ids, closer
    assert values0[2:5] == pytest.approx([-0.2] * 3)  # the first answer's ids


def test_given_call_spans_and_one_object_for_all(client, program):
    [episode] = [e for e in read_episodes(CHAT) if e.id == "repeated_error"]
    ids, mask = _tokens(episode)
    spans = find_call_spans(ids, OPEN, CLOSE, mask)
    line = next(line for line in CHAT.read_text().splitlines() if "repeated_error" in line)
    body = {"trajectory": json.loads(line), "tokens": {"token_ids": ids, "mask": mask, "call_spans": spans}}
    answer = _post(client, body, name="one.json")
    assert answer.status_code == 200, answer.text
    expected, _ = _in_process(program, episode, ids, mask)
    assert answer.json()["episodes"][0]["token_credits"]["values"] == pytest.approx(expected, abs=1e-12)
    assert answer.json()["episodes"][0]["token_credits"]["call_values"] == pytest.approx([-0.1, -0.4, 0.0, -0.7])


def _atif(ids_3: list[int], ids_4: list[int]) -> dict[str, Any]:
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": "s",
        "trajectory_id": "t",
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Cancel reservation Y."},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Checking.",
                "tool_calls": [
                    {"tool_call_id": "c", "function_name": "get_reservation_details", "arguments": {}},
                ],
                "observation": {"results": [{"source_call_id": "c", "content": "Error: bad"}]},
                "metrics": {"completion_token_ids": ids_3},
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "d", "function_name": "get_reservation_details", "arguments": {}},
                ],
                "observation": {"results": [{"source_call_id": "d", "content": "Error: bad"}]},
                "metrics": {"completion_token_ids": ids_4},
            },
        ],
    }


def test_atif_completion_token_ids_need_no_token_ids(client, program, tmp_path):
    step3 = [30, 31, *OPEN, 50, *CLOSE]
    step4 = [*OPEN, 51, 52, *CLOSE]
    trajectory = _atif(step3, step4)
    answer = _post(client, {"trajectory": trajectory, "tokens": {"call_markers": [OPEN, CLOSE]}}, name="t.json")
    assert answer.status_code == 200, answer.text
    got = answer.json()["episodes"][0]["token_credits"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trajectory))
    [episode] = read_episodes(path)
    ids = step3 + step4
    expected, _ = _in_process(program, episode, ids, [1] * len(ids))
    assert got["values"] == pytest.approx(expected, abs=1e-12)
    assert got["segments"] == [{"message": 1, "start": 0, "end": 6}, {"message": 2, "start": 6, "end": 11}]
    assert got["call_spans"] == [[2, 6], [6, 11]]
    assert got["call_values"][1] < 0  # the repeated error is penalised on the second call's ids
    assert got["unattached"] < 0  # the answer's credit: on every id
    assert got["values"][:2] == pytest.approx([got["unattached"]] * 2)
    assert got["values"][6:] == pytest.approx([got["call_values"][1] + got["unattached"]] * 5)


@pytest.mark.parametrize(
    "tokens,record,field,says",
    [
        ([{"token_ids": [1, "x"], "call_markers": [OPEN, CLOSE]}, None, None, None], "tokens[0]", "token_ids", "ints"),
        (
            [None, {"token_ids": [1, 2], "mask": [1], "call_markers": [OPEN, CLOSE]}, None, None],
            "tokens[1]",
            "mask",
            "2 entries",
        ),
        (
            [None, None, {"token_ids": [1], "call_markers": [OPEN]}, None],
            "tokens[2]",
            "call_markers",
            "[open_ids, close_ids]",
        ),
        (
            [None, None, None, {"token_ids": [1, 2], "call_spans": [[0, 1]]}],
            "tokens[3]",
            "call_spans",
            "1 spans for the episode's 2 calls",
        ),
        (
            [None, None, None, {"token_ids": [1, 2], "call_spans": [[0, 1], [1, 3]]}],
            "tokens[3]",
            "call_spans",
            "span 1",
        ),
        ([None, {"token_ids": [1, 2]}, None, None], "tokens[1]", "call_markers", "exactly one of"),
        (
            [None, {"token_ids": [1], "call_markers": [OPEN, CLOSE], "ids": []}, None, None],
            "tokens[1]",
            "ids",
            "unknown field",
        ),
        ([{"call_markers": [OPEN, CLOSE]}, None, None, None], "tokens[0]", "token_ids", "no completion_token_ids"),
        ([None], "tokens", "tokens", "1 entries for the 4 episodes"),
        ("ids", "tokens", "tokens", "must be an object"),
    ],
    ids=[
        "not-ints",
        "mask-length",
        "markers",
        "span-count",
        "span-outside",
        "no-spans",
        "unknown",
        "no-ids",
        "count",
        "type",
    ],
)
def test_bad_token_data_is_422_naming_episode_and_field(client, tokens, record, field, says):
    answer = _post(client, {"trajectory": CHAT.read_text(), "tokens": tokens})
    assert answer.status_code == 422, answer.text
    document = answer.json()
    assert (document["record"], document["field"]) == (record, field)
    assert says in document["detail"]
    if record.startswith("tokens["):
        assert f"(episode {record[7]}, " in document["detail"]


def test_only_the_two_key_envelope_is_an_envelope(client):
    """A trajectory that mentions "tokens" is read as the file it is; a deep body is the reader's 422."""
    chat = {"messages": [{"role": "user", "content": "tokens"}], "tokens": 3}
    answer = _post(client, chat, name="chat.json")
    assert answer.status_code == 200 and answer.json()["count"] == 1, answer.text
    assert "token_credits" not in answer.json()["episodes"][0]
    deep = b'{"trajectory": 1, "tokens": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    answer = client.post("/score", params={"name": "deep.json"}, content=deep)
    assert answer.status_code == 422 and "nested more than 200 levels" in answer.json()["detail"], answer.text
