"""`rlvp-score` on trajectories with data problems an audit found (2026-12-02): each problem is said
on stderr with the file, the record and the field, exactly, and the rest is scored -- an error flag
that is not a boolean, a JSONL line that is not UTF-8, a call with no tool name, a record of the
wrong JSON kind (said in JSON's words), an episode with no events -- and the rule file read from
standard input (``-``).  Subprocesses forked from one that has done the imports (forked_cli.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .forked_cli import CliServer

SERVER = CliServer(["rlvp_dsl.cli.score"])

#: One read tool, and a violation on every failed call (the audit's `e.rlvp`).
RULES = "tool get : read target id\nviolation errored (-0.1) { on call error }\n"


@pytest.fixture(scope="module", autouse=True)
def _stop_the_server():
    yield
    SERVER.close()


def score(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """`rlvp-score ARGS` in `cwd`; its output as text."""
    done = SERVER.run("rlvp_dsl.cli.score", list(args), cwd, stdin, 120)
    out, err = (b.decode("utf-8", "replace") for b in (done.stdout, done.stderr))
    assert "Traceback" not in err + out, err
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def chat(episode_id: str, result: dict, name: object = "get") -> str:
    """One JSONL line: a call of `name` answered by the tool message `result` (its content and flags)."""
    function = {"arguments": '{"id": "A"}'} if name is None else {"name": name, "arguments": '{"id": "A"}'}
    messages = [
        {"role": "user", "content": "get A"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": function}]},
        {"role": "tool", "tool_call_id": "c1", "content": "not found", **result},
    ]
    return json.dumps({"id": episode_id, "messages": messages, "reward": 0})


def tau2(*tool_messages: dict) -> dict:
    """A tau2 Results object: one simulation per tool message, each a `get` call it answers."""
    sims = []
    for k, tool in enumerate(tool_messages):
        messages = [
            {"role": "user", "content": "get A"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "name": "get", "arguments": {"id": "A"}}],
            },
            {"role": "tool", "id": "c1", "content": "not found", **tool},
        ]
        sims.append({"id": f"s{k}", "task_id": "t", "messages": messages, "reward_info": {"reward": 1.0}})
    return {"info": {"environment_info": {"domain_name": "airline"}}, "simulations": sims}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "e.rlvp").write_text(RULES)
    return tmp_path


def test_an_error_flag_that_is_not_a_boolean_is_named_and_not_read_as_an_error(folder):
    """`"error": true` fails the call; `"error": "true"` and `"error": 1` are no flag (only true is):
    scored by their text, and a warning names the file, the record and the field of the first."""
    lines = [chat("flag_true", {"error": True}), chat("flag_str", {"error": "true"}), chat("flag_one", {"error": 1})]
    (folder / "errstr.jsonl").write_text("\n".join(lines) + "\n")
    done = score(folder, "e.rlvp", "errstr.jsonl", "--csv", "-")
    assert done.returncode == 0
    assert done.stderr == (
        "rlvp-score: warning: 2 tool results have an error flag that is not true or false (only true marks an "
        "error; its result is judged by its text alone): errstr.jsonl: line 2: messages[2]: field 'error': expected true "
        "or false, got 'true' (not read as an error) (and 1 more)\n"
    )
    rows = [row.split(",") for row in done.stdout.splitlines()[1:]]
    assert [(row[0], row[-1]) for row in rows] == [("flag_true", "-0.1"), ("flag_str", "0"), ("flag_one", "0")]


def test_a_tau2_error_flag_that_is_not_a_boolean_is_named(folder):
    """tau2: `"error": "yes"` on simulations[1].messages[2] is not an error and is named; a clean
    `false` and a real `true` are read as before."""
    (folder / "run.json").write_text(json.dumps(tau2({"error": False}, {"error": "yes"}, {"error": True})))
    done = score(folder, "e.rlvp", "run.json", "--csv", "-")
    assert done.returncode == 0
    assert done.stderr == (
        "rlvp-score: warning: 1 tool result has an error flag that is not true or false (only true marks an "
        "error; its result is judged by its text alone): run.json: simulations[1].messages[2]: field 'error': expected "
        "true or false, got 'yes' (not read as an error)\n"
    )
    totals = [row.split(",")[-1] for row in done.stdout.splitlines()[1:]]
    assert totals == ["0", "0", "-0.1"]


def test_a_jsonl_line_that_is_not_utf8_loses_that_line_only(folder):
    """Line 2 holds byte 0xe9 (Latin-1 `é`): that line is a record error at line:column, as an
    invalid JSON line is; line 1 is scored (exit 1: a record did not read).  The same from a file
    not named .jsonl and from standard input."""
    good = chat("good", {}).encode()
    bad = b'{"id": "bad", "messages": [{"role": "user", "content": "caf\xe9"}]}'
    (folder / "latin1.jsonl").write_bytes(good + b"\n" + bad + b"\n")
    (folder / "latin1.json").write_bytes(good + b"\n" + bad + b"\n")
    for name, args, stdin in (
        ("latin1.jsonl", ["latin1.jsonl"], None),
        ("latin1.json", ["latin1.json"], None),
        ("<stdin>", ["-"], good + b"\n" + bad + b"\n"),
    ):
        done = score(folder, "e.rlvp", *args, "--csv", "-", stdin=stdin)
        assert done.returncode == 1
        assert done.stderr == f"rlvp-score: error: {name}:2:60: not UTF-8 text (byte 0xe9)\n"
        assert [row.split(",")[0] for row in done.stdout.splitlines()[1:]] == ["good"]


def test_a_json_document_that_is_not_utf8_is_still_one_error(folder):
    """One JSON document (not JSONL) with a byte that is not UTF-8: the file is one error, as before."""
    (folder / "doc.json").write_bytes(b'{"messages": [\n{"role": "user", "content": "caf\xe9"}]}\n')
    done = score(folder, "e.rlvp", "doc.json")
    assert done.returncode == 1
    assert done.stderr == (
        "rlvp-score: error: doc.json: not UTF-8 text: line 2, column 33 (byte 0xe9)\n"
        "rlvp-score: error: no episodes could be read from doc.json (the errors above)\n"
    )


def test_a_call_with_no_tool_name_is_noted_and_explained_without_none(folder):
    """A tool call with no `function.name`: a note names the episode and the event, and --explain
    says `call without a tool name`, never a call to `None`."""
    (folder / "nofn.jsonl").write_text(chat("nofn", {"content": "Error: nope"}, name=None) + "\n")
    done = score(folder, "e.rlvp", "nofn.jsonl", "--explain")
    assert done.returncode == 0
    assert done.stderr == (
        "rlvp-score: note: 1 call had no tool name (scored as malformed; --explain shows it): "
        "nofn.jsonl: episode nofn, event 1\n"
    )
    assert "-0.10 errored (e.rlvp:2:1): call without a tool name at event 1 matches the violation" in done.stdout
    assert "None" not in done.stdout


def test_a_tau2_call_with_no_name_is_noted(folder):
    """tau2: a call without `name` in simulations[0] is noted with its episode and event."""
    data = tau2({})
    del data["simulations"][0]["messages"][1]["tool_calls"][0]["name"]
    (folder / "run.json").write_text(json.dumps(data))
    done = score(folder, "e.rlvp", "run.json", "--explain")
    assert done.stderr == (
        "rlvp-score: note: 1 call had no tool name (scored as malformed; --explain shows it): "
        "run.json: episode run.json#simulations[0], event 1\n"
    )
    assert "call without a tool name at event 1 matches the violation" in done.stdout


def test_records_of_the_wrong_kind_are_said_in_json_words_and_empty_episodes_are_noted(folder):
    """JSONL lines `42`, `[]`, `null`, `{"messages": []}` among good ones: the bad lines are errors
    saying `got null` (JSON's word, not Python's None); the empty ones are episodes without events,
    noted with file and line."""
    good = chat("g", {})
    (folder / "mixed.jsonl").write_text("\n".join([good, "42", "[]", "null", '{"messages": [], "reward": 1}', good]))
    done = score(folder, "e.rlvp", "mixed.jsonl", "--csv", "-")
    assert done.returncode == 1
    assert done.stderr == (
        'rlvp-score: error: mixed.jsonl: line 2: expected an episode object {"messages": [...]}, got 42\n'
        'rlvp-score: error: mixed.jsonl: line 4: expected an episode object {"messages": [...]}, got null\n'
        "rlvp-score: note: 2 episodes have no events (no messages; scored 0 and counted in the means): "
        "mixed.jsonl: line 3 (and 1 more)\n"
    )
    assert [row.split(",")[:5] for row in done.stdout.splitlines()[1:]] == [
        ["g", "mixed.jsonl", "", "0", "2"],
        ["mixed.jsonl:3", "mixed.jsonl", "", "", "0"],
        ["mixed.jsonl:5", "mixed.jsonl", "", "1", "0"],
        ["g", "mixed.jsonl", "", "0", "2"],
    ]


def test_a_null_simulation_is_said_in_json_words(folder):
    """tau2 `simulations[1]: null`: `got null`, the other simulation scored."""
    data = tau2({})
    data["simulations"].append(None)
    (folder / "run.json").write_text(json.dumps(data))
    done = score(folder, "e.rlvp", "run.json", "--csv", "-")
    assert done.returncode == 1
    assert done.stderr == "rlvp-score: error: run.json: simulations[1]: expected a simulation object, got null\n"


def test_the_rule_file_from_standard_input(folder):
    """`cat e.rlvp | rlvp-score - run.jsonl` scores as the file does, the rules named `<stdin>`; a
    trajectory `-` with it is refused (standard input is read once), as are rules that are not UTF-8
    or that have errors (their diagnostics named `<stdin>`)."""
    (folder / "run.jsonl").write_text(chat("t", {"error": True}) + "\n")
    from_file = score(folder, "e.rlvp", "run.jsonl")
    piped = score(folder, "-", "run.jsonl", stdin=RULES.encode())
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout == from_file.stdout.replace("rules: e.rlvp", "rules: <stdin>")
    assert "rules: <stdin> (1 rule)" in piped.stdout
    as_json = json.loads(score(folder, "-", "run.jsonl", "--json", stdin=RULES.encode()).stdout)
    assert as_json["rules"] == "<stdin>"

    both = score(folder, "-", "-", stdin=RULES.encode())
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == (
        "rlvp-score: error: standard input (-) can be read once: the rule file and a trajectory cannot "
        "both be -; give one of them as a file\n"
    )
    latin = score(folder, "-", "run.jsonl", stdin=b"tool caf\xe9 : read\n")
    assert (latin.returncode, latin.stderr) == (
        2,
        "rlvp-score: error: standard input is not UTF-8 text: line 1, column 9 (byte 0xe9)\n",
    )
    broken = score(folder, "-", "run.jsonl", stdin=b"tool get :\n")
    assert broken.returncode == 1 and broken.stderr.startswith("<stdin>:2:1: error[RV101]:")
    ray = score(folder, "-", "run.jsonl", "--ray", stdin=RULES.encode())
    assert (ray.returncode, ray.stderr) == (
        2,
        "rlvp-score: error: --ray reads the rule file from a file (every worker loads it), not standard input\n",
    )
