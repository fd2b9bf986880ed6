"""The readers on data problems an audit found (2026-12-02), through the Python API: error flags that
are not booleans (`ErrorSignal.odd_flags`, ``meta["bad_error_flags"]``), JSONL lines that
are not UTF-8 (a record error of that line), reader errors in JSON's words (`shown_value`), and
episodes without events (``meta["empty_record"]``).  rlvp-score's wording of each is in
tests/e2e/test_score_data_notes.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from rlvp_dsl.readers import DEFAULT_ERROR_SIGNALS, ERROR_SIGNALS, ReaderError, read_episodes, read_report
from rlvp_dsl.readers.tau2 import read_tau2
from rlvp_dsl.readers.errors import expected_got, shown_value

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
)


@pytest.mark.parametrize(
    "value, shown",
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (5, "5"),
        (1.5, "1.5"),
        ("robot", "'robot'"),
        ("None", "'None'"),  # text stays text
        ({"a": 1}, "a JSON object"),
        ([1], "a JSON array"),
        ("x" * 100, "'" + "x" * 56 + "..."),
    ],
)
def test_values_are_shown_in_json_words(value, shown):
    assert shown_value(value) == shown
    assert expected_got("a thing", value) == f"expected a thing, got {shown}"


@given(JSON_VALUES)
def test_a_flag_is_an_error_only_when_true_and_any_other_value_is_named(value):
    """For every JSON value of an `error` flag: the result is an error iff the value is `true`
    (the text "not found" matches no prefix), and `odd_flags` names the field iff the value is not
    true, false or null; the tau2 reader puts exactly those words, at the message, in the
    episode's ``meta["bad_error_flags"]``."""
    message = {"role": "tool", "content": "not found", "error": value}
    for name in ("tau2", "openai", "trl"):
        signal = ERROR_SIGNALS[name]
        assert signal.is_error("not found", message) is (value is True)
        odd = signal.odd_flags(message)
        if value is None or value is True or value is False:
            assert odd == []
        else:
            assert odd == [f"field 'error': expected true or false, got {shown_value(value)} (not read as an error)"]
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "get", "arguments": {}}]}
    simulation = {"messages": [call, {**message, "id": "c"}], "reward_info": {"reward": 1.0}}
    (episode,) = read_tau2({"simulations": [simulation]}, "f.json", "f.json", ERROR_SIGNALS["tau2"])
    expected = [f"simulations[0].messages[1]: {p}" for p in ERROR_SIGNALS["tau2"].odd_flags(message)]
    assert episode.meta.get("bad_error_flags", []) == expected
    assert episode.events[-1].status == ("error" if value is True else "ok")


def test_a_flag_inside_an_mcp_result_is_named_as_content():
    """A non-boolean `isError` in the MCP result inside the tool message is `content.isError`."""
    signal = DEFAULT_ERROR_SIGNALS["openai"]
    assert signal.odd_flags({"role": "tool"}, {"content": [], "isError": "false"}) == [
        "field 'content.isError': expected true or false, got 'false' (not read as an error)"
    ]
    assert ERROR_SIGNALS["swe_agent"].odd_flags({"error": "yes"}) == []  # a signal without flags reads none


def _write(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _tool_turns(tool: dict) -> list[dict]:
    return [
        {"role": "user", "content": "get A"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "get", "arguments": {"id": "A"}}]},
        {"role": "tool", "id": "c1", "tool_call_id": "c1", "content": "not found", **tool},
    ]


def test_chat_and_tau2_episodes_list_their_odd_flags(tmp_path):
    """`meta["bad_error_flags"]` names record and field in each format; a clean episode has no such key."""
    chat = _write(tmp_path, "c.jsonl", "\n".join(json.dumps({"messages": _tool_turns(t)}) for t in ({}, {"error": 1})))
    clean, odd = read_episodes(chat)
    assert "bad_error_flags" not in clean.meta
    assert odd.meta["bad_error_flags"] == [
        "line 2: messages[2]: field 'error': expected true or false, got 1 (not read as an error)"
    ]
    assert odd.calls[0].status == "ok"
    sims = [{"messages": _tool_turns(t), "reward_info": {"reward": 1}} for t in ({"error": False}, {"error": "yes"})]
    tau2 = _write(tmp_path, "r.json", {"simulations": sims})
    clean, odd = read_episodes(tau2)
    assert "bad_error_flags" not in clean.meta
    assert odd.meta["bad_error_flags"] == [
        "simulations[1].messages[2]: field 'error': expected true or false, got 'yes' (not read as an error)"
    ]
    assert [e.calls[0].status for e in (clean, odd)] == ["ok", "ok"]


def test_a_jsonl_line_that_is_not_utf8_is_a_record_error(tmp_path):
    """keep_going: the bad line is an error at line:column, the others are read; strict: it raises
    that error; a compressed file stays one error for the file."""
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    path = _write(tmp_path, "l.jsonl", good + b"\n" + b'{"messages": "\xe9\xe9"}\n' + good + b"\n")
    report = read_report(path, keep_going=True)
    assert [e.id for e in report.episodes] == ["l.jsonl:1", "l.jsonl:3"]
    assert [str(e) for e in report.errors] == [f"{path}:2:15: not UTF-8 text (byte 0xe9)"]
    with pytest.raises(ReaderError, match=r"l\.jsonl:2:15: not UTF-8 text \(byte 0xe9\)$"):
        read_episodes(path)
    packed = _write(tmp_path, "p.jsonl", b"\x1f\x8b\x08\x00\xff")
    with pytest.raises(ReaderError, match=r"not UTF-8 text: line 1, column 2 .* gzip-compressed"):
        read_episodes(packed)


def test_an_episode_without_events_keeps_its_record(tmp_path):
    """`[]` and `{"messages": []}` lines are episodes with no events whose meta names the line."""
    path = _write(tmp_path, "e.jsonl", '[]\n{"messages": [], "reward": 1, "id": "x"}\n')
    first, second = read_episodes(path)
    assert (first.events, first.meta["empty_record"]) == ((), "line 1")
    assert (second.id, second.outcome, second.meta["empty_record"]) == ("x", 1.0, "line 2")
