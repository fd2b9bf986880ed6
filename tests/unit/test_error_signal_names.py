"""Error-signal names: one resolver for every API, exactly the names docs/readers.md lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlvp_dsl import episode_from_messages, read_paths
from rlvp_dsl.readers import DEFAULT_ERROR_SIGNALS, ERROR_SIGNALS, ErrorSignal, error_signal, read_episodes, read_report

REPO = Path(__file__).resolve().parents[2]


def _documented_names() -> list[str]:
    """The signal names in docs/readers.md's table (its first column, in backquotes)."""
    text = (REPO / "docs" / "readers.md").read_text(encoding="utf-8")
    table = text[text.index("| signal | flags |") :]
    table = table[: table.index("\n\n")]
    return [m.group(1) for m in re.finditer(r"^\| `([a-z0-9_]+)`", table, re.M)]


DOCUMENTED = _documented_names()
MESSAGES = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "get", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "1", "content": "Error: not found", "error": True},
]


def test_the_table_is_the_documented_names():
    """ERROR_SIGNALS holds exactly the documented names; each format's default is its entry of it."""
    assert sorted(DOCUMENTED) == sorted(ERROR_SIGNALS) and len(DOCUMENTED) == 7
    for fmt, signal in DEFAULT_ERROR_SIGNALS.items():
        assert signal is ERROR_SIGNALS[fmt]


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_documented_name_works_in_every_api(tmp_path, name):
    """read_paths / read_episodes / read_report and episode_from_messages take each name and use its signal."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(MESSAGES), encoding="utf-8")
    expected = "error" if ERROR_SIGNALS[name].is_error("Error: not found", MESSAGES[2]) else "ok"
    assert [c.status for c in read_paths([path], error_signal=name)[0].calls] == [expected]
    assert [c.status for c in read_episodes(path, error_signal=name)[0].calls] == [expected]
    assert [c.status for c in read_report(path, error_signal=name).episodes[0].calls] == [expected]
    assert [c.status for c in episode_from_messages(MESSAGES, error_signal=name).calls] == [expected]
    assert error_signal(name) is ERROR_SIGNALS[name]


def test_signals_differ_by_name_where_the_docs_say_so(tmp_path):
    """A flag alone is an error for tau2 but not for swe_agent's markers: the name is really used."""
    flagged = [MESSAGES[1], {"role": "tool", "tool_call_id": "1", "content": "done", "error": True}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(flagged), encoding="utf-8")
    assert read_paths([path], error_signal="tau2")[0].calls[0].status == "error"
    assert read_paths([path], error_signal="swe_agent")[0].calls[0].status == "ok"
    assert read_paths([path], error_signal=ErrorSignal(prefixes=("done",)))[0].calls[0].status == "error"


@pytest.mark.parametrize("api", ["read_paths", "episode_from_messages", "resolver"])
def test_an_unknown_name_is_a_value_error_with_did_you_mean(tmp_path, api):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(MESSAGES), encoding="utf-8")
    call = {
        "read_paths": lambda n: read_paths([path], error_signal=n),
        "episode_from_messages": lambda n: episode_from_messages(MESSAGES, error_signal=n),
        "resolver": error_signal,
    }[api]
    with pytest.raises(ValueError, match=r"unknown error signal 'opanai' \(did you mean 'openai'\?\).*tau_bench_v1"):
        call("opanai")
    with pytest.raises(ValueError, match=r"unknown error signal 'nothing-like-it': expected"):
        call("nothing-like-it")
    with pytest.raises(TypeError, match="error_signal must be an ErrorSignal or one of"):
        call(5)
