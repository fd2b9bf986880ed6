"""ATIF v1.7 in and out (rlvp_dsl/readers/atif.py, rlvp-score --atif-out): the reader by value on
hand-made trajectories, bad input named by record and field, the writer validated against the
`atif` package's v1.7 models, read -> write -> read lossless, and credits equal to the OpenAI-chat
reading of the same episodes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rlvp_dsl.cli.score import main as score_main
from rlvp_dsl.compile import compile_ruleset
from rlvp_dsl.events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, OK, USER
from rlvp_dsl.pipeline import check_file
from rlvp_dsl.readers import ReaderError, detect_trajectory_format, read_episodes, read_paths
from rlvp_dsl.readers.atif import trajectory_from_episode, write_atif

REPO = Path(__file__).resolve().parents[2]

CHAT = REPO / "examples" / "episodes" / "airline_chat.jsonl"
RULES = REPO / "rules" / "tau2_airline.rlvp"


def _trajectory() -> dict[str, Any]:
    """A hand-made ATIF v1.7 trajectory: results out of call order, an error flag, an unanswered
    call, a result for no call, completion token ids."""
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": "run-7",
        "trajectory_id": "traj-1",
        "agent": {"name": "terminus", "version": "2.0", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "system", "message": "Be careful."},
            {"step_id": 2, "source": "user", "message": "Cancel VAAOXJ."},
            {
                "step_id": 3,
                "source": "agent",
                "message": "Looking it up.",
                "tool_calls": [
                    {
                        "tool_call_id": "a",
                        "function_name": "get_reservation_details",
                        "arguments": {"reservation_id": "X"},
                    },
                    {"tool_call_id": "b", "function_name": "get_user_details", "arguments": {"user_id": "u1"}},
                ],
                "observation": {
                    "results": [
                        {"source_call_id": "b", "content": "user u1"},
                        {"source_call_id": "a", "content": "not found", "extra": {"is_error": True}},
                        {"source_call_id": None, "content": "terminal output"},
                    ]
                },
                "metrics": {"completion_token_ids": [11, 12, 13]},
            },
            {
                "step_id": 4,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {
                        "tool_call_id": "c",
                        "function_name": "get_reservation_details",
                        "arguments": {"reservation_id": "Y"},
                    },
                    {"tool_call_id": "d", "function_name": "cancel_reservation", "arguments": {"reservation_id": "Y"}},
                ],
                "observation": {
                    "results": [{"source_call_id": "c", "content": [{"type": "text", "text": "Error: gone"}]}]
                },
            },
        ],
        "extra": {"reward": 0.5},
    }


def _write(tmp_path: Path, data: Any, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _view(episodes: Any) -> list[Any]:
    """Everything of the episodes, meta included (an Episode's equality leaves meta out)."""
    return [(e.id, e.outcome, e.events, dict(e.meta)) for e in episodes]


def test_reader_by_value(tmp_path: Path) -> None:
    path = _write(tmp_path, _trajectory())
    assert detect_trajectory_format(json.loads(path.read_text()), str(path)) == ("atif", "")
    [episode] = read_episodes(path)
    assert (episode.id, episode.outcome) == ("traj-1", 0.5)
    got = [
        (e.index, e.kind, e.tool, dict(e.arguments), e.status, e.result, e.call_id, e.message) for e in episode.events
    ]
    assert got == [
        (0, USER, None, {}, OK, "", None, 0),
        (1, ASSISTANT, None, {}, OK, "", None, 1),
        (2, CALL, "get_reservation_details", {"reservation_id": "X"}, ERROR, "not found", "a", 1),
        (3, CALL, "get_user_details", {"user_id": "u1"}, OK, "user u1", "b", 1),
        (4, CALL, "get_reservation_details", {"reservation_id": "Y"}, ERROR, "Error: gone", "c", 2),
        (5, CALL, "cancel_reservation", {"reservation_id": "Y"}, NO_RESULT, "", "d", 2),
    ]
    assert [e.text for e in episode.events[:2]] == ["Cancel VAAOXJ.", "Looking it up."]
    assert episode.events[2].error_text == "not found"
    assert episode.meta["policy"] == "Be careful."
    assert episode.meta["completion_token_ids"] == [{"message": 1, "token_ids": [11, 12, 13]}]
    assert episode.meta["atif_unpaired_results"] == 1
    assert episode.meta["atif_agent"]["name"] == "terminus"


def test_the_hand_made_trajectory_is_valid_atif_v1_7() -> None:
    _validate(_trajectory())


def test_a_list_of_trajectories_and_the_session_id(tmp_path: Path) -> None:
    second = _trajectory()
    del second["trajectory_id"]
    second["extra"] = None
    episodes = read_episodes(_write(tmp_path, [_trajectory(), second]))
    assert [(e.id, e.outcome, len(e.events)) for e in episodes] == [("traj-1", 0.5, 6), ("run-7", None, 6)]


def _set(path: str, value: Any) -> Any:
    def mutate(data: Any) -> Any:
        *parents, last = path.split("/")
        target = data
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
        return data

    return mutate


BAD = [
    (_set("schema_version", "v1.7"), "", "schema_version", "expected an ATIF version"),
    (_set("steps/1/source", "bot"), "steps[1]", "source", "one of system/user/agent"),
    (_set("steps/1/message", 5), "steps[1]", "message", "text or a list"),
    (_set("steps/2/tool_calls", {"a": 1}), "steps[2]", "tool_calls", "a list of tool calls"),
    (_set("steps/2/tool_calls/0", "get"), "steps[2].tool_calls[0]", "", "a tool call object"),
    (_set("steps/2/observation", {"result": []}), "steps[2]", "observation", '{"results": [...]}'),
    (_set("steps/2/observation/results/0/source_call_id", 5), "steps[2].observation.results[0]", "source_call_id", ""),
    (_set("steps/2/observation/results/1/content", 3), "steps[2].observation.results[1]", "content", ""),
    (_set("steps/2/metrics/completion_token_ids", ["a"]), "steps[2]", "metrics.completion_token_ids", ""),
    (_set("extra/reward", "high"), "", "extra.reward", "a finite number"),
    (_set("steps/0", []), "steps[0]", "", "a step object"),
    (
        _set("steps/2/tool_calls/1/extra", {"rlvp_event": {"status": 3}}),
        "steps[2].tool_calls[1]",
        "extra.rlvp_event.status",
        "expected str",
    ),
    (
        _set("steps/2/tool_calls/1/extra", {"rlvp_event": {"status": "fine"}}),
        "steps[2].tool_calls[1]",
        "extra.rlvp_event",
        "status",
    ),
]


@pytest.mark.parametrize(("mutate", "record", "field", "words"), BAD, ids=[f"{r}:{f}" for _, r, f, _ in BAD])
def test_bad_input_names_record_and_field(tmp_path: Path, mutate: Any, record: str, field: str, words: str) -> None:
    path = _write(tmp_path, mutate(_trajectory()))
    with pytest.raises(ReaderError) as info:
        read_episodes(path, format="atif")
    assert (info.value.record, info.value.field) == (record, field)
    assert words in str(info.value)
    assert str(info.value).startswith(
        f"{path}: {record + ': ' if record else ''}{'field ' + repr(field) if field else ''}"
    )


def test_bad_record_in_a_list_is_named_with_its_position(tmp_path: Path) -> None:
    second = _set("steps/1/source", "bot")(_trajectory())
    with pytest.raises(ReaderError) as info:
        read_episodes(_write(tmp_path, [_trajectory(), second]))
    assert (info.value.record, info.value.field) == ("[1].steps[1]", "source")


def test_a_malformed_call_is_a_malformed_event_not_an_error(tmp_path: Path) -> None:
    data = _set("steps/2/tool_calls/0/arguments", "{not json")(_trajectory())
    data = _set("steps/2/tool_calls/1/function_name", 7)(data)
    [episode] = read_episodes(_write(tmp_path, data))
    assert [e.status for e in episode.events[2:4]] == [MALFORMED, MALFORMED]
    assert episode.events[2].raw_arguments == "{not json"
    assert "function_name" in episode.events[3].error_text


def _validate(document: dict[str, Any]) -> None:
    atif = pytest.importorskip("atif", reason="the atif extra (pip install 'atif==1.7.*') validates written files")
    atif.Trajectory.model_validate(document)


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    first = read_episodes(_write(tmp_path, _trajectory()))
    written = write_atif(tmp_path / "out", [(e, []) for e in first])
    second = read_paths(written)
    assert _view(second) == _view(first)
    _validate(json.loads(written[0].read_text()))
    assert json.loads(written[0].read_text())["steps"][2]["metrics"] == {"completion_token_ids": [11, 12, 13]}


def _program() -> Any:
    result = check_file(str(RULES))
    assert result.ok and result.ruleset is not None
    return compile_ruleset(result.ruleset)


def test_credits_equal_the_openai_chat_reading(tmp_path: Path) -> None:
    program = _program()
    chat = read_paths(CHAT)
    written = write_atif(tmp_path, [(e, program.score(e)) for e in chat], rule_names=[r.name for r in program.rules])
    assert [p.name for p in written] == [f"{e.id}.json" for e in chat]
    from_atif = read_paths(written)
    assert [e.id for e in from_atif] == [e.id for e in chat]
    # the events are the chat reading's but for message numbering (tool messages are no ATIF steps)
    assert [[(v.kind, v.tool, v.status, v.result, v.text) for v in e.events] for e in from_atif] == [
        [(v.kind, v.tool, v.status, v.result, v.text) for v in e.events] for e in chat
    ]
    totals = []
    for atif_episode, chat_episode, path in zip(from_atif, chat, written):
        credits = program.score(atif_episode)
        assert credits == program.score(chat_episode)
        document = json.loads(path.read_text())
        _validate(document)
        stored = [c for step in document["steps"] for c in step.get("extra", {}).get("rlvp", [])]
        assert sorted(stored, key=json.dumps) == sorted((c.to_json() for c in credits), key=json.dumps)
        totals.append(round(document["final_metrics"]["extra"]["rlvp"]["total"], 9))
        # and written again from the ATIF reading: the same file
        again = trajectory_from_episode(atif_episode, credits, rule_names=[r.name for r in program.rules])
        assert again == document
    assert totals == [-0.41, -1.4, 0.08, -0.51]  # one_call_at_a_time: calls sent with text
    # read -> write -> read of the chat-derived files is lossless too
    assert _view(read_paths(write_atif(tmp_path / "again", [(e, []) for e in from_atif]))) == _view(from_atif)


def test_statuses_survive_the_round_trip() -> None:
    chat = read_paths(CHAT)
    statuses = sorted({v.status for e in chat for v in e.events if v.kind == CALL})
    assert statuses == [ERROR, MALFORMED, NO_RESULT, OK]  # the examples hold every status
    for episode in chat:
        document = trajectory_from_episode(episode)
        from rlvp_dsl.readers.atif import read_atif
        from rlvp_dsl.readers.error_signals import DEFAULT_ERROR_SIGNALS

        [back] = read_atif(copy.deepcopy(document), "x.json", "x", DEFAULT_ERROR_SIGNALS["openai"])
        calls = [(v.status, v.error_text, v.raw_arguments, dict(v.arguments)) for v in back.events if v.kind == CALL]
        assert calls == [
            (v.status, v.error_text, v.raw_arguments, dict(v.arguments)) for v in episode.events if v.kind == CALL
        ]


def test_rlvp_score_atif_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "atif"
    assert score_main([str(RULES), str(CHAT), "--atif-out", str(out), "--json"]) == 0
    chat_doc = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{e['id']}.json" for e in chat_doc["episodes"])
    assert score_main([str(RULES), str(out), "--json"]) == 0
    atif_doc = json.loads(capsys.readouterr().out)
    by_id = {e["id"]: (e["total"], e["rule_totals"]) for e in atif_doc["episodes"]}
    assert by_id == {e["id"]: (e["total"], e["rule_totals"]) for e in chat_doc["episodes"]}


def test_rlvp_score_atif_out_unwritable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert score_main([str(RULES), str(CHAT), "--atif-out", str(blocker / "sub")]) == 2
    assert "cannot write --atif-out" in capsys.readouterr().err


def test_rlvp_score_atif_out_never_writes_over_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    [path] = write_atif(runs, [(read_paths(CHAT)[0], [])])
    before = path.read_text()
    assert score_main([str(RULES), str(runs), "--atif-out", str(runs)]) == 2
    assert f"({path}): it would write over the input file" in capsys.readouterr().err
    assert path.read_text() == before


def test_completion_token_ids_give_per_token_credit_without_retokenising(tmp_path: Path) -> None:
    """ATIF steps' ``completion_token_ids`` are the ids the credit lands on (joined in step order):
    each call's credit on its marked ids, the answers' credit on every id -- `rlvp_dsl.attach` by hand."""
    from rlvp_dsl.attach import call_credits
    from rlvp_dsl.pipeline import load_program
    from rlvp_dsl.token_data import score_tokens, token_data_from_json

    o, c = 900, 901
    data = _trajectory()
    data["steps"][2]["metrics"]["completion_token_ids"] = [11, o, 12, c, o, 13, 14, c]
    data["steps"][3]["metrics"] = {"completion_token_ids": [o, 15, c, o, 16, c]}
    [episode] = read_episodes(_write(tmp_path, data))
    program = load_program(str(RULES))
    token_data = token_data_from_json({"call_markers": [[o], [c]]}, episode)
    assert token_data.token_ids == (11, o, 12, c, o, 13, 14, c, o, 15, c, o, 16, c)
    assert token_data.segments == ((1, 0, 8), (2, 8, 14))
    got = score_tokens(program, episode, token_data)
    per_call = call_credits(episode, program.score(episode))
    v, u = per_call.values, per_call.unattached
    assert any(v)  # real credit on the calls (the answers get none here: u == 0)
    expected = [u] + [v[0] + u] * 3 + [v[1] + u] * 4 + [v[2] + u] * 3 + [v[3] + u] * 3
    assert got.values == pytest.approx(expected, abs=1e-12)
    assert got.spans == ((1, 4), (4, 8), (8, 11), (11, 14)) and got.inserted == 0
