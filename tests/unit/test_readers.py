"""Tests of the trajectory readers (rlvp_dsl.readers): real data, acceptance cases, errors."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rlvp_dsl.readers import (
    DEFAULT_ERROR_SIGNALS,
    ErrorSignal,
    ReaderError,
    detect_trajectory_format,
    read_episodes,
    read_paths,
    read_report,
)
from rlvp_dsl.readers.swe_agent import command_call

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
EXAMPLES = REPO / "examples" / "episodes"

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not present (../shared/data)")


def _files(sub: str, pattern: str) -> list[Path]:
    """The files of `sub` in the samples the repository ships, then in ../shared/data when present."""
    shipped = sorted((REPO / "examples" / "data" / sub).rglob(pattern))
    return shipped + (sorted((DATA / sub).rglob(pattern)) if DATA.is_dir() else [])


def _tally(episodes) -> Counter:
    """Counts of calls by requestor and status over ``episodes``."""
    c: Counter = Counter()
    for episode in episodes:
        for event in episode.calls:
            c[f"{event.requestor}_calls"] += 1
            c[event.status] += 1
    return c


def _write(tmp_path: Path, name: str, value) -> Path:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def _oa_call(cid, name, arguments):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- real data ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    _files("tau2_simulations", "*.json") + _files("tau_bench_v1", "*.json") + _files("swe_agent", "*.traj"),
    ids=lambda p: f"{p.parent.name}/{p.name[:60]}",
)
def test_every_real_trajectory_file_reads(path):
    """Every real trajectory file (the shipped samples; the shared corpus when present) reads with
    auto-detection, with dense event indices."""
    episodes = read_episodes(path)
    assert episodes
    for episode in episodes:
        assert [e.index for e in episode.events] == list(range(len(episode.events)))
        assert episode.source == str(path)


@needs_data
@pytest.mark.parametrize(
    "name, episodes, agent_calls, user_calls, errors",
    [
        ("pr448_whissle_airline_run1.json", 33, 173, 0, 8),
        ("pr103_azure-airline-full_gpt-4o.json", 33, 201, 0, 10),
        ("pr17_telecom_gpt-4o.json", 13, 59, 73, 0),
    ],
)
def test_tau2_pr_files_match_data_readme(name, episodes, agent_calls, user_calls, errors):
    """Per-file counts equal the data README table (trajectories, agent/user calls, errored results)."""
    path = DATA / "tau2_simulations" / "sierra_tau2-bench_prs" / name
    read = read_episodes(path, format="tau2")
    tally = _tally(read)
    assert len(read) == episodes
    assert (tally["assistant_calls"], tally["user_calls"], tally["error"]) == (agent_calls, user_calls, errors)
    assert tally["malformed"] == tally["no_result"] == 0
    raw = json.loads(path.read_text())["simulations"]
    for i, (episode, sim) in enumerate(zip(read, raw)):
        assert episode.id == f"{name}#simulations[{i}]"
        assert episode.outcome == sim["reward_info"]["reward"]
        assert episode.meta["task_id"] == sim["task_id"] and episode.meta["trial"] == sim["trial"]
        assert episode.meta["termination_reason"] == sim["termination_reason"]
    assert read[0].meta["domain"] in ("airline", "telecom") and read[0].meta["agent_llm"]


@pytest.mark.parametrize(
    "name,domain",
    [("pr103_azure-airline-full_gpt-4o.sample.json", "airline"), ("pr17_telecom_gpt-4o.sample.json", "telecom")],
)
def test_tau2_samples_read_their_records(name, domain):
    """The shipped tau2 samples: one episode per simulation, in order, with its reward, task, trial,
    termination reason and domain; every message is an event or a result."""
    path = REPO / "examples" / "data" / "tau2_simulations" / "sierra_tau2-bench_prs" / name
    raw = json.loads(path.read_text())["simulations"]
    read = read_episodes(path)
    assert len(read) == len(raw) > 0
    for i, (episode, sim) in enumerate(zip(read, raw)):
        assert episode.id == f"{name}#simulations[{i}]"
        assert episode.outcome == sim["reward_info"]["reward"]
        assert episode.meta["task_id"] == sim["task_id"] and episode.meta["trial"] == sim["trial"]
        assert episode.meta["termination_reason"] == sim["termination_reason"]
        assert episode.meta["domain"] == domain
        raw_calls = [c["name"] for m in sim["messages"] for c in (m.get("tool_calls") or [])]
        assert [c.tool for c in episode.calls] == raw_calls
        assert sum(m["role"] == "tool" for m in sim["messages"]) == sum(
            c.status in ("ok", "error") for c in episode.calls
        )


def test_tau_bench_v1_sample_reads_its_entries():
    """The shipped tau-bench v1 sample: one episode per entry with its reward, the policy in meta,
    the tool calls of its messages in order."""
    path = REPO / "examples" / "data" / "tau_bench_v1" / "gpt-4o-airline.sample.json"
    raw = json.loads(path.read_text())
    episodes = read_episodes(path)
    assert [e.id for e in episodes] == [f"gpt-4o-airline.sample.json#[{i}]" for i in range(len(raw))]
    assert [e.outcome for e in episodes] == [entry["reward"] for entry in raw]
    for episode, entry in zip(episodes, raw):
        assert "policy" in episode.meta and episode.events[0].kind == "user"
        raw_calls = [c["function"]["name"] for m in entry["traj"] for c in (m.get("tool_calls") or [])]
        assert [c.tool for c in episode.calls] == raw_calls
        assert episode.meta["domain"] == "airline"


def test_swe_agent_function_calling_sample():
    """The shipped function-calling demonstration (history only): its five calls, ids, open file path."""
    report = read_report(REPO / "examples" / "data" / "swe_agent")
    by_name = {Path(e.source).name: e for e in report.episodes}
    assert len(report.episodes) == 2 and all(e.outcome is None for e in report.episodes)
    simple = by_name["demonstrations__function_calling_simple.traj"]
    assert [c.tool for c in simple.calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert all(c.call_id and c.status == "ok" for c in simple.calls)
    assert simple.calls[2].arguments["path"] == "tests/missing_colon.py"


@needs_data
def test_tau2_blakeelias_totals_and_error_texts():
    """The fork's 16 files give 237 episodes, 1140 agent and 173 user calls, 7 errors, all 'Error: ...'."""
    report = read_report(DATA / "tau2_simulations" / "blakeelias_fork")
    tally = _tally(report.episodes)
    assert (len(report.files), len(report.episodes)) == (16, 237)
    assert (tally["assistant_calls"], tally["user_calls"], tally["error"]) == (1140, 173, 7)
    errors = [e for ep in report.episodes for e in ep.calls if e.status == "error"]
    assert all(e.error_text.startswith("Error") for e in errors)


@needs_data
def test_tau_bench_v1_counts():
    """133 episodes, 797 calls, 46 results starting with 'Error' (data README section 3)."""
    episodes = read_episodes(DATA / "tau_bench_v1" / "gpt-4o-airline.json")
    tally = _tally(episodes)
    assert len(episodes) == 133
    assert (tally["assistant_calls"], tally["error"], tally["ok"]) == (797, 46, 751)
    assert {e.outcome for e in episodes} <= {0.0, 1.0}
    assert "policy" in episodes[0].meta and episodes[0].events[0].kind == "user"
    assert episodes[5].id == "gpt-4o-airline.json#[5]"


@needs_data
def test_swe_agent_counts_and_paths():
    """15 episodes and 158 steps; 5 observations carry a default error marker.

    The data README's rough regex counts 24 "error-like" observations: it also matches
    ``error``/``invalid`` inside file listings that the plain markers do not.
    """
    report = read_report(DATA / "swe_agent")
    tally = _tally(report.episodes)
    assert len(report.episodes) == 15
    assert (tally["assistant_calls"], tally["error"], tally["no_result"]) == (158, 5, 0)
    assert all(e.outcome is None for e in report.episodes)
    by_name = {Path(e.source).name: e for e in report.episodes}
    fix = next(e for n, e in by_name.items() if "humanevalfix" in n)
    assert [(c.tool, c.arguments.get("path")) for c in fix.calls] == [
        ("ls", None),
        ("open", "main.py"),
        ("edit", "main.py"),
        ("python", "main.py"),
        ("submit", None),
    ]
    assert fix.meta["exit_status"] == "submitted"
    simple = by_name["demonstrations__function_calling_simple.traj"]  # history only
    assert [c.tool for c in simple.calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert all(c.call_id and c.status == "ok" for c in simple.calls)
    assert simple.calls[2].arguments["path"] == "tests/missing_colon.py"


@needs_data
def test_whole_data_folder_skips_non_trajectories():
    """The data folder yields 464 episodes; manifests, task lists and PROVENANCE are skipped with a reason."""
    report = read_report(DATA)
    assert len(report.episodes) == 464
    skipped = {Path(s.path).name for s in report.skipped}
    assert {"PROVENANCE.json", "tools_manifest.json", "tasks.json"} <= skipped
    assert all(s.reason.startswith("not a trajectory") for s in report.skipped)
    assert len(read_paths([DATA / "tau_bench_v1", DATA / "swe_agent"])) == 148


# --- acceptance cases -----------------------------------------------------------------------


def test_truncated_arguments_mid_json_is_malformed_only_for_that_call(tmp_path):
    """Second call has arguments truncated mid-JSON: no exception, that call is malformed, the others read normally."""
    messages = [
        {"role": "user", "content": "cancel AB12CD"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _oa_call("c1", "get_user_details", '{"user_id": "u1"}'),
                _oa_call("c2", "get_reservation_details", '{"reservation_id": "AB'),
                _oa_call("c3", "get_user_details", '{"user_id": "u2"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: bad arguments"},
        {"role": "tool", "tool_call_id": "c3", "content": "{}"},
    ]
    (episode,) = read_episodes(_write(tmp_path, "t.json", {"messages": messages}))
    first, second, third = episode.calls
    assert (first.status, third.status) == ("ok", "ok")
    assert first.arguments == {"user_id": "u1"} and third.arguments == {"user_id": "u2"}
    assert second.status == "malformed" and second.arguments == {}
    assert second.raw_arguments == '{"reservation_id": "AB'
    assert "not valid JSON" in second.error_text


def test_tau2_string_arguments_truncated_and_length_cut(tmp_path):
    """tau2: JSON-text arguments cut mid-JSON, and finish_reason 'length', make only the affected call malformed."""
    sim = {
        "id": "s",
        "task_id": "1",
        "trial": 0,
        "termination_reason": "max_steps",
        "reward_info": {"reward": 0.0},
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "name": "get_reservation_details",
                        "arguments": '{"reservation_id": "AB',
                        "requestor": "assistant",
                    },
                    {"id": "b", "name": "get_user_details", "arguments": {"user_id": "u"}, "requestor": "assistant"},
                ],
            },
            {"role": "tool", "id": "b", "content": "{}", "error": False},
            {"role": "tool", "id": "a", "content": "Error: x", "error": True},
            {
                "role": "assistant",
                "content": "",
                "raw_data": {"finish_reason": "length"},
                "tool_calls": [
                    {"id": "c", "name": "get_user_details", "arguments": {"user_id": "u"}, "requestor": "assistant"},
                    {
                        "id": "d",
                        "name": "cancel_reservation",
                        "arguments": {"reservation_id": "AB"},
                        "requestor": "assistant",
                    },
                ],
            },
        ],
    }
    (episode,) = read_episodes(_write(tmp_path, "r.json", {"simulations": [sim]}))
    assert [c.status for c in episode.calls] == ["malformed", "ok", "no_result", "malformed"]
    assert "length" in episode.calls[3].error_text
    assert episode.calls[0].result == "Error: x"  # a malformed call keeps its status when answered


def test_episode_ending_on_a_call_gives_no_result(tmp_path):
    """Episode ends on a tool call with no tool result: last call status no_result."""
    path = EXAMPLES / "airline_chat.jsonl"
    episodes = {e.id: e for e in read_episodes(path)}
    last = episodes["ends_on_call"].events[-1]
    assert (last.kind, last.tool, last.status, last.result) == ("call", "cancel_reservation", "no_result", "")
    assert all(c.status == "ok" for c in episodes["ends_on_call"].calls[:-1])


def test_example_episodes_read_as_documented():
    """The shipped examples give the statuses their README promises."""
    report = read_report(EXAMPLES)
    assert report.skipped == ()
    by_id = {e.id: e for e in report.episodes}
    status = {k: [(c.tool, c.status) for c in e.calls] for k, e in by_id.items()}
    assert status["cancel_confirmed"] == [("get_reservation_details", "ok"), ("cancel_reservation", "ok")]
    assert [s for _, s in status["repeated_error"]] == ["error", "error", "ok", "ok"]
    assert status["truncated_arguments"][:2] == [("get_user_details", "ok"), ("get_reservation_details", "malformed")]
    assert status["airline_tau2_results.json#simulations[1]"][0] == ("cancel_reservation", "error")
    assert [by_id[k].outcome for k in ("cancel_confirmed", "airline_tau2_results.json#simulations[0]")] == [1.0, 1.0]
    kinds = [e.kind for e in by_id["cancel_confirmed"].events]
    assert kinds == ["user", "assistant", "call", "assistant", "user", "call", "assistant", "user"]


def test_results_match_by_id_then_by_order(tmp_path):
    """Results go to the call with their id; without ids, to the oldest unanswered call."""
    with_ids = [
        {"role": "assistant", "content": None, "tool_calls": [_oa_call("x", "a", "{}"), _oa_call("y", "b", "{}")]},
        {"role": "tool", "tool_call_id": "y", "content": "for b"},
        {"role": "tool", "tool_call_id": "x", "content": "Error: for a"},
    ]
    (episode,) = read_episodes(_write(tmp_path, "ids.json", with_ids))
    assert [(c.tool, c.result, c.status) for c in episode.calls] == [
        ("a", "Error: for a", "error"),
        ("b", "for b", "ok"),
    ]
    no_ids = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"function": {"name": "a", "arguments": "{}"}},
                {"function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "content": "first"},
        {"role": "tool", "content": "second"},
    ]
    (episode,) = read_episodes(_write(tmp_path, "noids.json", no_ids))
    assert [c.result for c in episode.calls] == ["first", "second"]


def test_message_turns_and_nameless_call(tmp_path):
    """Assistant text precedes its calls, system text goes to meta, a call without a name is malformed."""
    messages = [
        {"role": "system", "content": "policy text"},
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [_oa_call("1", "", "{}"), _oa_call("2", "ok_tool", "{}")],
        },
        {"role": "tool", "tool_call_id": "2", "content": "fine"},
    ]
    (episode,) = read_episodes(_write(tmp_path, "m.json", messages))
    assert [(e.kind, e.text) for e in episode.events[:2]] == [("user", "hello"), ("assistant", "checking")]
    assert episode.meta["policy"] == "policy text"
    nameless = episode.events[2]
    assert (nameless.tool, nameless.status, nameless.error_text) == (None, "malformed", "call has no tool name")
    assert episode.events[3].status == "ok"


def _numeric_name_call(tmp_path, fmt):
    if fmt == "openai":
        messages = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [_oa_call("1", "ok", "{}"), _oa_call("2", 5, "{}")]},
        ]
        return _write(
            tmp_path, "chat.jsonl", json.dumps({"messages": messages}) + "\n"
        ), "line 1: messages[1].tool_calls[1]: field 'function.name'"
    if fmt == "tau2":
        sim = {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "1", "name": "ok", "arguments": {}}, {"id": "2", "name": 5, "arguments": {}}],
                },
            ]
        }
        return _write(
            tmp_path, "r.json", {"simulations": [sim]}
        ), "simulations[0].messages[1].tool_calls[1]: field 'name'"
    history = [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "1", "function": {"name": "ok", "arguments": "{}"}},
                {"id": "2", "function": {"name": 5, "arguments": "{}"}},
            ],
        },
    ]
    return _write(
        tmp_path, "x.traj", {"history": history, "trajectory": []}
    ), "history[1].tool_calls[1]: field 'function.name'"


@pytest.mark.parametrize("fmt", ["openai", "tau2", "swe_agent"])
def test_a_numeric_tool_name_is_a_malformed_call_naming_record_and_field(tmp_path, fmt):
    """`"name": 5` does not silently become a nameless call: the call is malformed (its neighbours are
    kept), its problem names the record and the field, and the episode's meta lists it."""
    path, where = _numeric_name_call(tmp_path, fmt)
    (episode,) = read_episodes(path)
    good, bad = episode.calls
    assert (good.tool, good.status) == ("ok", "no_result")
    assert (bad.tool, bad.status) == (None, "malformed")
    assert bad.error_text == f"{where}: expected a tool name (text), got 5"
    assert episode.meta["bad_tool_names"] == [bad.error_text]


def test_tau2_user_requestor_calls(tmp_path):
    """Calls in a tau2 user message (telecom phone tools) are call events with requestor 'user'."""
    sim = {
        "task_id": "t",
        "trial": 0,
        "reward_info": {"reward": 1},
        "messages": [
            {
                "role": "user",
                "content": "let me check",
                "tool_calls": [{"id": "u1", "name": "check_status_bar", "arguments": {}, "requestor": "user"}],
            },
            {"role": "tool", "id": "u1", "content": "ok", "requestor": "user", "error": False},
        ],
    }
    (episode,) = read_episodes(_write(tmp_path, "tel.json", {"simulations": [sim]}))
    assert [(e.kind, e.requestor) for e in episode.events] == [("user", "assistant"), ("call", "user")]
    assert episode.outcome == 1.0


def test_mcp_results_use_is_error(tmp_path):
    """MCP tools/call results (object or JSON text) are understood, isError marks an error."""
    lines = [
        {
            "id": "e1",
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_oa_call("1", "read", "{}"), _oa_call("2", "read", "{}")],
                },
                {
                    "role": "tool",
                    "tool_call_id": "1",
                    "content": {"content": [{"type": "text", "text": "boom"}], "isError": True},
                },
                {
                    "role": "tool",
                    "tool_call_id": "2",
                    "content": json.dumps({"content": [{"type": "text", "text": "fine"}], "isError": False}),
                },
            ],
        },
    ]
    path = _write(tmp_path, "mcp.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    (episode,) = read_episodes(path)
    assert [(c.status, c.result) for c in episode.calls] == [("error", "boom"), ("ok", "fine")]
    assert episode.id == "e1"


def test_swe_agent_command_parsing_tracks_open_file():
    """Window commands act on the file of the last open/create; file commands name their path."""
    tool, args, current = command_call('open "src/a.py" 10', None)
    assert (tool, args["path"], args["args"], current) == ("open", "src/a.py", '"src/a.py" 10', "src/a.py")
    tool, args, current = command_call("edit 3:4\n    x = 1\nend_of_edit", current)
    assert (tool, args["path"], args["args"], current) == ("edit", "src/a.py", "3:4", "src/a.py")
    assert args["command"].endswith("end_of_edit")
    assert command_call("create b.py", current)[2] == "b.py"
    assert "path" not in command_call("python -m pytest", current)[1]
    assert command_call("decompile --function_name main rock", None)[1]["path"] == "rock"
    assert command_call("insert 'unbalanced quote", "f.py")[1]["path"] == "f.py"
    assert command_call("   ", None)[0] is None


# --- malformed files -------------------------------------------------------------------------


def test_bad_role_names_record_and_field(tmp_path):
    """A malformed record gives file: record: field: expected vs got."""
    sims = [{"messages": []}, {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]}]
    path = _write(tmp_path, "pr103.json", {"simulations": sims})
    with pytest.raises(ReaderError) as info:
        read_episodes(path)
    assert str(info.value) == (
        f"{path}: simulations[1].messages[1]: field 'role': expected one of assistant/user/tool/system, got 'robot'"
    )
    assert (info.value.record, info.value.field) == ("simulations[1].messages[1]", "role")
    # an absent role is "missing"; a JSON null is shown as None (tau2 and OpenAI chat alike)
    absent = _write(tmp_path, "absent.json", {"simulations": [{"messages": [{"content": "x"}]}]})
    with pytest.raises(ReaderError, match=r"messages\[0\]: field 'role': missing, expected one of assistant/"):
        read_episodes(absent)
    null = _write(tmp_path, "null.json", {"simulations": [{"messages": [{"role": None, "content": "x"}]}]})
    with pytest.raises(ReaderError, match=r"field 'role': expected one of assistant/user/tool/system, got null$"):
        read_episodes(null)
    chat = _write(tmp_path, "chat.json", {"messages": [{"content": "x"}]})
    with pytest.raises(ReaderError, match=r"messages\[0\]: field 'role': missing, expected one of"):
        read_episodes(chat)


def test_invalid_json_and_bad_jsonl_line(tmp_path):
    """Invalid JSON names line:col; a bad JSONL line names its line number."""
    with pytest.raises(ReaderError, match=r"broken\.json:2:\d+: invalid JSON"):
        read_episodes(_write(tmp_path, "broken.json", '{"messages": [\n  {"role": "user",, }]}'))
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(ReaderError, match=r"chat\.jsonl:3:\d+: invalid JSON"):
        read_episodes(_write(tmp_path, "chat.jsonl", f"{good}\n{good}\n{{oops\n"))
    bad_record = json.dumps({"messages": [{"role": "user", "content": 5}]})
    with pytest.raises(ReaderError, match=r"line 2: messages\[0\]: field 'content'"):
        read_episodes(_write(tmp_path, "c2.jsonl", f"{good}\n{bad_record}\n"))
    with pytest.raises(ReaderError, match=r"\[0\]\.traj\[1\]: field 'role'"):
        read_episodes(
            _write(tmp_path, "v1.json", [{"task_id": 1, "traj": [{"role": "user", "content": ""}, {"role": 3}]}])
        )


def test_detection_and_not_a_trajectory(tmp_path):
    """Formats are detected from content and extension; other JSON is refused by read_episodes and skipped by read_report."""
    assert detect_trajectory_format({"simulations": []})[0] == "tau2"
    assert detect_trajectory_format([{"task_id": 0, "traj": []}])[0] == "tau_bench_v1"
    assert detect_trajectory_format({"messages": []})[0] == "openai"
    assert detect_trajectory_format([{"role": "user", "content": "x"}])[0] == "openai"
    assert detect_trajectory_format({"trajectory": [], "info": {}})[0] == "swe_agent"
    assert detect_trajectory_format(None, "x.traj")[0] == "swe_agent"
    assert detect_trajectory_format(None, "x.jsonl")[0] == "openai"
    manifest = _write(tmp_path, "tools_manifest.json", {"domain": "airline", "toolkits": {}})
    with pytest.raises(ReaderError, match="not a trajectory"):
        read_episodes(manifest)
    _write(tmp_path, "chat.json", {"messages": [{"role": "user", "content": "hi"}], "reward": 0.5})
    report = read_report(tmp_path)
    assert [Path(s.path).name for s in report.skipped] == ["tools_manifest.json"]
    assert [e.outcome for e in report.episodes] == [0.5]
    with pytest.raises(ValueError, match="format must be one of"):
        read_episodes(manifest, format="csv")
    with pytest.raises(ReaderError, match="no such file"):
        read_paths([tmp_path / "missing"])


SAMPLES = REPO / "examples" / "data"
SAMPLE_FILES = {
    "tau2": SAMPLES / "tau2_simulations" / "sierra_tau2-bench_prs" / "pr17_telecom_gpt-4o.sample.json",
    "tau_bench_v1": SAMPLES / "tau_bench_v1" / "gpt-4o-airline.sample.json",
    "swe_agent": SAMPLES / "swe_agent" / "demonstrations__function_calling_simple.traj",
    "openai": EXAMPLES / "airline_chat.jsonl",
}
WRONG_FORMATS = [(real, given) for real in SAMPLE_FILES for given in SAMPLE_FILES if given != real]


@pytest.mark.parametrize("real,given", WRONG_FORMATS, ids=[f"{r}-as-{g}" for r, g in WRONG_FORMATS])
def test_a_wrong_format_is_an_error_saying_what_the_content_looks_like(real, given):
    """`format=` that does not fit the content: a ReaderError naming the file and the format it
    looks like -- never an empty episode or zero episodes (read_episodes and read_report alike)."""
    path = SAMPLE_FILES[real]
    with pytest.raises(ReaderError) as caught:
        read_episodes(path, format=given)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert f"'{real}'" in message, message
    report = read_report([path], format=given, keep_going=True)
    assert report.episodes == () and len(report.errors) == 1


def test_a_given_format_that_fits_still_reads():
    """The right format= reads what detection reads."""
    for fmt, path in SAMPLE_FILES.items():
        assert [e.id for e in read_episodes(path, format=fmt)] == [e.id for e in read_episodes(path)]


def test_a_given_format_on_a_non_trajectory_says_it_is_none(tmp_path):
    """A tool manifest read as swe_agent: not an empty episode, but `not a trajectory of any format`."""
    path = _write(tmp_path, "tools.json", {"domain": "airline", "toolkits": {}})
    with pytest.raises(
        ReaderError,
        match=r"has a 'history' or a 'trajectory' list; this object has neither "
        r"\(keys: 'domain', 'toolkits'\); the content is not a "
        r"trajectory of any format \(a JSON object",
    ):
        read_episodes(path, format="swe_agent")


def test_a_file_named_twice_is_read_once(tmp_path):
    """`runs/ runs/` and `runs/a.json runs/`: each file once, where it first comes (no double counting)."""
    _write(tmp_path, "a.json", {"messages": [{"role": "user", "content": "a"}], "reward": 1})
    _write(tmp_path, "b.json", {"messages": [{"role": "user", "content": "b"}], "reward": 0})
    assert [e.id for e in read_paths([tmp_path, tmp_path])] == ["a.json", "b.json"]
    assert [e.id for e in read_paths([tmp_path / "b.json", tmp_path])] == ["b.json", "a.json"]
    assert read_report([tmp_path / "a.json", tmp_path / "." / "a.json"]).files == (str(tmp_path / "a.json"),)


@pytest.mark.parametrize("reward", ["NaN", "Infinity", "-Infinity", '"1"', "true"])
@pytest.mark.parametrize("fmt", ["openai", "tau2", "tau_bench_v1"])
def test_a_reward_that_is_not_a_finite_number_names_the_record_and_field(tmp_path, fmt, reward):
    """NaN (which JSON readers accept), infinities, text and booleans are not outcomes."""
    messages = '[{"role": "user", "content": "hi"}]'
    text, where = {
        "openai": (f'{{"reward": {reward}, "messages": {messages}}}', "field 'reward'"),
        "tau2": (
            f'{{"simulations": [{{"reward_info": {{"reward": {reward}}}, "messages": {messages}}}]}}',
            "simulations[0].reward_info: field 'reward'",
        ),
        "tau_bench_v1": (f'[{{"reward": {reward}, "traj": {messages}}}]', "[0]: field 'reward'"),
    }[fmt]
    path = _write(tmp_path, "r.json", text)
    with pytest.raises(ReaderError, match=re.escape(where) + ": expected a finite number or null"):
        read_episodes(path)


# --- error signals ----------------------------------------------------------------------------


def test_error_signal_defaults_and_override(tmp_path):
    """Defaults differ per format; a given ErrorSignal replaces the default, extended() adds to it."""
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [_oa_call(str(i), "t", "{}") for i in range(3)]},
        {"role": "tool", "tool_call_id": "0", "content": "Error: not found"},
        {"role": "tool", "tool_call_id": "1", "content": "FAILED: quota"},
        {"role": "tool", "tool_call_id": "2", "content": "done", "error": True},
    ]
    path = _write(tmp_path, "e.json", messages)
    statuses = lambda **kw: [c.status for c in read_episodes(path, **kw)[0].calls]  # noqa: E731
    assert statuses() == ["error", "ok", "error"]
    assert statuses(error_signal=ErrorSignal(prefixes=("FAILED",))) == ["ok", "error", "ok"]
    assert statuses(error_signal=DEFAULT_ERROR_SIGNALS["openai"].extended(prefixes=["FAILED"])) == ["error"] * 3
    assert statuses(error_signal=ErrorSignal(markers=("quota",))) == ["ok", "error", "ok"]
    assert statuses(error_signal=ErrorSignal(prefixes=("error",), case_sensitive=False)) == ["error", "ok", "ok"]
    assert statuses(format="openai", error_signal=ErrorSignal()) == ["ok", "ok", "ok"]
    assert ErrorSignal(prefixes="Error").prefixes == ("Error",)  # one string is one prefix
    assert DEFAULT_ERROR_SIGNALS["tau2"].flags == ("error",) and DEFAULT_ERROR_SIGNALS["tau2"].prefixes == ()
    assert "Traceback (most recent call last)" in DEFAULT_ERROR_SIGNALS["swe_agent"].markers


def test_keep_going_skips_one_bad_jsonl_line(tmp_path):
    """With keep_going, a cut-off JSONL line is reported and the other lines are still read."""
    from rlvp_dsl.readers import read_report

    lines = (REPO / "examples" / "episodes" / "airline_chat.jsonl").read_text().splitlines()
    lines[1] = lines[1][:40]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = read_report([str(path)], keep_going=True)
    assert len(report.episodes) == len(lines) - 1
    assert len(report.errors) == 1 and "cut.jsonl:2:" in str(report.errors[0])
    with pytest.raises(ReaderError):
        read_report([str(path)])


def test_keep_going_loses_one_bad_tau2_simulation_not_its_file(tmp_path):
    """With keep_going, a tau2 simulation with a malformed message is reported (record and field)
    and the file's other simulations are read, with their own ids and values; strict reading still
    raises that error."""
    from rlvp_dsl.readers import read_report

    source = (
        REPO / "examples" / "data" / "tau2_simulations" / "sierra_tau2-bench_prs" / "pr17_telecom_gpt-4o.sample.json"
    )
    data = json.loads(source.read_text())
    good = data["simulations"][0]
    bad = json.loads(json.dumps(good))
    del bad["messages"][2]["role"]
    data["simulations"] = [good, bad, good]
    path = tmp_path / "onebad.json"
    path.write_text(json.dumps(data))
    report = read_report([str(path)], keep_going=True)
    alone = read_episodes(source)[0]
    assert [e.id for e in report.episodes] == ["onebad.json#simulations[0]", "onebad.json#simulations[2]"]
    assert all(e.events == alone.events and e.outcome == alone.outcome for e in report.episodes)
    assert [str(e) for e in report.errors] == [
        f"{path}: simulations[1].messages[2]: field 'role': missing, expected one of assistant/user/tool/system"
    ]
    with pytest.raises(ReaderError, match=r"simulations\[1\]\.messages\[2\]: field 'role'"):
        read_report([str(path)])


def _chat_list(path):
    """The episodes of examples/episodes/airline_chat.jsonl as one OpenAI chat JSON list."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(
    "source,as_list,bad_record,message",
    [
        (
            REPO / "examples" / "data" / "tau_bench_v1" / "gpt-4o-airline.sample.json",
            json.loads,
            lambda entry: entry.pop("traj"),
            "{path}: [1]: field 'traj': missing (expected a list of chat messages)",
        ),
        (
            EXAMPLES / "airline_chat.jsonl",
            _chat_list,
            lambda episode: episode["messages"][0].pop("role"),
            "{path}: [1].messages[0]: field 'role': missing, expected one of",
        ),
    ],
    ids=["tau_bench_v1", "openai-json-list"],
)
def test_keep_going_loses_one_bad_list_entry_not_its_file(tmp_path, source, as_list, bad_record, message):
    """The same for the other files of many records (`each_record`): a bad entry of a tau-bench v1
    list or of an OpenAI chat JSON list is reported, the entries around it are read."""
    from rlvp_dsl.readers import read_report

    entries = as_list(source) if as_list is _chat_list else as_list(source.read_text())
    entries = entries[:3]
    bad_record(entries[1])
    path = tmp_path / "list.json"
    path.write_text(json.dumps(entries))
    report = read_report([str(path)], keep_going=True)
    # tau-bench entries are named by position; chat episodes by their own ids where they have one
    named = [entries[k].get("id") or f"list.json#[{k}]" for k in (0, 2)]
    assert [e.id for e in report.episodes] == named
    assert len(report.errors) == 1 and str(report.errors[0]).startswith(message.format(path=path))
    with pytest.raises(ReaderError):
        read_report([str(path)])


def test_a_compressed_trajectory_says_so(tmp_path):
    """A gzip file (named .json or .json.gz): `not UTF-8 text ... it is gzip-compressed`."""
    import gzip

    path = tmp_path / "run.json"
    path.write_bytes(gzip.compress(b'{"messages": []}'))
    with pytest.raises(
        ReaderError,
        match=r"run.json: not UTF-8 text: line \d+, column \d+ \(byte 0x[0-9a-f]{2}[^)]*\) -- it is gzip-compressed: decompress",
    ):
        read_episodes(path)
