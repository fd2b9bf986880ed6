"""End-to-end runs of `rlvp-compile` and `rlvp-score` as subprocesses, on the repo's rule files,
the golden error cases, the real samples in examples/data and the larger corpus in ../shared/data
(those tests skip when it is missing)."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from .forked_cli import CliServer

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
GOLDEN_ERRORS = REPO / "tests" / "golden" / "diagnostics"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")


SERVER = CliServer(["rlvp_dsl.cli.compile", "rlvp_dsl.cli.score"])


@pytest.fixture(scope="module", autouse=True)
def _stop_the_server():
    yield
    SERVER.close()


def run(tool: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """`python -m rlvp_dsl.cli.TOOL ARGS` from the repository root, a child process forked from one
    that has done the imports (forked_cli.py); its output read as text, as ``text=True`` reads it."""
    done = SERVER.run(f"rlvp_dsl.cli.{tool}", list(args), REPO, None, timeout)
    out, err = (io.TextIOWrapper(io.BytesIO(b)).read() for b in (done.stdout, done.stderr))
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr


# ---- rlvp-compile ----------------------------------------------------------------


def test_compile_stock_rules():
    """Every stock rule file compiles clean: exit 0, one ok line each."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "rules").glob("*.rlvp"))
    assert "rules/tau2_airline.rlvp" in files
    done = run("compile", *files)
    assert done.returncode == 0, done.stderr
    for f in files:
        assert f"{f}: ok:" in done.stderr


@pytest.mark.parametrize("case", ["unknown_tool", "syntax_unclosed_block", "wrong_sign"])
def test_compile_golden_error_file(case):
    """A golden error file: exit 1, file:line:col, a caret line and a help line, no traceback."""
    path = f"tests/golden/diagnostics/{case}.rlvp"
    done = run("compile", path)
    assert done.returncode == 1
    no_traceback(done)
    assert re.search(rf"^{re.escape(path)}:\d+:\d+: error\[RV\d{{3}}\]: ", done.stderr, re.M), done.stderr
    assert re.search(r"^ +\| +\^+$", done.stderr, re.M)
    assert "= help: " in done.stderr


def test_compile_json_diagnostics():
    """--json prints diagnostics as JSON with code, location and help."""
    done = run("compile", "--json", "tests/golden/diagnostics/unknown_tag.rlvp")
    assert done.returncode == 1
    (doc,) = json.loads(done.stdout)
    assert doc["ok"] is False
    (diag,) = doc["diagnostics"]
    assert diag["code"] == "RV202"
    assert diag["location"] == "tests/golden/diagnostics/unknown_tag.rlvp:4:40"
    assert diag["help"] == "did you mean 'destructive'?"


def test_compile_json_ok_and_emit_program():
    """--json on a clean file says ok; --emit-program prints the canonical program."""
    done = run("compile", "--json", "rules/tau2_airline.rlvp")
    assert done.returncode == 0 and json.loads(done.stdout)[0]["ok"] is True
    done = run("compile", "--emit-program", "rules/tau2_airline.rlvp")
    assert done.returncode == 0
    program = json.loads(done.stdout)
    assert program["format"] == "rlvp-program/1"
    assert "write_unconfirmed" in {r["name"] for r in program["rules"]}


def test_compile_missing_file_is_usage_error():
    """A missing rule file: exit 2 and a one-line error."""
    done = run("compile", "does/not/exist.rlvp")
    assert done.returncode == 2
    assert "file not found: does/not/exist.rlvp" in done.stderr
    no_traceback(done)


def test_compile_no_arguments_is_usage_error():
    """No rule files at all: exit 2."""
    done = run("compile")
    assert done.returncode == 2
    no_traceback(done)


# ---- rlvp-score --------------------------------------------------------------------


@needs_data
def test_score_tau2_json_every_episode():
    """All 316 shared tau2 episodes are scored and the JSON parses."""
    done = run("score", "rules/tau2_airline.rlvp", DATA / "tau2_simulations", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert len(doc["episodes"]) == 316
    assert doc["skipped"] == []
    credits = [c for e in doc["episodes"] for c in e["credits"]]
    assert credits and {"write_unconfirmed", "report_change"} <= {c["rule"] for c in credits}
    for episode in doc["episodes"]:
        assert episode["total"] == pytest.approx(sum(c["value"] for c in episode["credits"]))
        assert all(0 <= c["event_index"] < episode["events"] for c in episode["credits"])


@needs_data
def test_score_tau_bench_v1_explain():
    """--explain on tau-bench v1 lists episodes, calls and credits with rule locations and reasons."""
    done = run("score", "rules/tau2_airline.rlvp", DATA / "tau_bench_v1", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("== gpt-4o-airline.json#[") == 133
    assert re.search(r"^ +[+-]\d\.\d\d \w+ \(rules/tau2_airline\.rlvp:\d+:\d+\): .+", done.stdout, re.M)
    assert "errored_call" in done.stdout


def test_score_tau_bench_v1_sample_explain():
    """--explain on the shipped tau-bench v1 sample: its 3 episodes, credits with rule locations and reasons."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/data/tau_bench_v1", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("== gpt-4o-airline.sample.json#[") == 3
    assert re.search(r"^ +[+-]\d\.\d\d \w+ \(rules/tau2_airline\.rlvp:\d+:\d+\): .+", done.stdout, re.M)


def test_score_swe_agent_sample_explain():
    """--explain on the shipped SWE-agent samples with rules/swe.rlvp: both episodes, no traceback."""
    done = run("score", "rules/swe.rlvp", "examples/data/swe_agent", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n== ") + done.stdout.startswith("== ") == 2
    assert "episodes: 2 " in done.stdout
    no_traceback(done)


@needs_data
def test_score_swe_agent_explain():
    """--explain on the SWE-agent trajectories with rules/swe.rlvp."""
    if not (REPO / "rules" / "swe.rlvp").exists():
        pytest.skip("rules/swe.rlvp not written yet")
    done = run("score", "rules/swe.rlvp", DATA / "swe_agent", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n== ") + done.stdout.startswith("== ") >= 10
    no_traceback(done)


def test_score_truncated_trajectory_file(tmp_path):
    """A trajectory file cut mid-JSON: exit 1, the file named, no traceback."""
    bad = tmp_path / "run.json"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assi', encoding="utf-8")
    done = run("score", "rules/tau2_airline.rlvp", bad)
    assert done.returncode == 1
    assert str(bad) in done.stderr and "invalid JSON" in done.stderr
    no_traceback(done)


def test_score_example_episodes_explain():
    """The repo's own example episodes score without the shared data."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes/airline_chat.jsonl", "--explain")
    assert done.returncode == 0, done.stderr
    assert "== " in done.stdout and "process total=" in done.stdout


def test_score_bad_rules_and_missing_trajectory(tmp_path):
    """Rules with errors exit 1 with diagnostics; a missing trajectory path exits 2."""
    done = run("score", "tests/golden/diagnostics/unknown_tool.rlvp", "examples/episodes/airline_chat.jsonl")
    assert done.returncode == 1 and "error[RV201]" in done.stderr
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "nothing_here.json")
    assert done.returncode == 2 and "no such file or folder" in done.stderr
    no_traceback(done)


def test_compile_json_missing_file_is_json_too():
    """--json reports an unreadable rule file as JSON too, with exit 2."""
    done = run("compile", "--json", "no/such/file.rlvp")
    assert done.returncode == 2
    (doc,) = json.loads(done.stdout)
    assert doc["ok"] is False and "not found" in doc["error"]


def test_test_and_check_together_run_both(tmp_path):
    """--test with --check runs the property checks and the tests; a failing test exits 1."""
    rules = tmp_path / "r.rlvp"
    rules.write_text(
        'tool t : read\nviolation e (-1) { on call error }\ntest "wrong" { episode { call t error } expect e == 0 }\n'
    )
    done = run("compile", "--test", "--check", "--examples", "20", str(rules))
    assert done.returncode == 1
    assert "0 passed, 1 failed" in done.stdout


def test_errors_keep_exit_1_when_the_pipe_closes(tmp_path):
    """A closed output pipe does not turn an input error into exit 0."""
    import subprocess
    import sys

    bad = tmp_path / "bad.rlvp"
    bad.write_text("".join(f"violation v{i} (-1) {{ on call nope{i} }}\n" for i in range(50)))
    cmd = f"{sys.executable} -c 'from rlvp_dsl.cli.compile import run; run()' {bad} 2>&1 | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
    assert done.returncode == 1


def test_auto_from_tags_validate_flags_and_drops_a_harmful_penalty(tmp_path):
    """--validate: a derived penalty that fires on successes more than failures is flagged; --drop-harmful drops it."""
    import json as _json

    manifest = tmp_path / "tools.json"
    manifest.write_text(
        _json.dumps(
            {
                "format": "rlvp-tools/1",
                "tools": [
                    {"name": "get", "tags": ["read"], "target": "id", "parameters": ["id"]},
                    {"name": "cancel", "tags": ["write", "destructive"], "target": "id", "parameters": ["id"]},
                ],
            }
        )
    )

    def record(reward, error):
        return {
            "reward": reward,
            "messages": [
                {"role": "user", "content": "cancel A"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "1", "function": {"name": "get", "arguments": {"id": "A"}}}],
                },
                {"role": "tool", "tool_call_id": "1", "content": "Error: busy" if error else "A found"},
            ],
        }

    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(_json.dumps(record(r, e)) for r, e in [(1.0, True)] * 3 + [(0.0, False)] * 3) + "\n")
    flagged = run("compile", "--auto-from-tags", str(manifest), "--validate", str(runs), "-o", str(tmp_path / "d.rlvp"))
    assert flagged.returncode == 0, flagged.stderr
    assert "| errored_call | violation | 3/3 (100.0%) | 0/3 (0.0%) |" in flagged.stdout and "HARMFUL" in flagged.stdout
    assert "1 derived rule penalises success more often than failure: errored_call" in flagged.stderr
    assert "violation errored_call" in (tmp_path / "d.rlvp").read_text()
    dropped = run("compile", "--auto-from-tags", str(manifest), "--validate", str(runs), "--drop-harmful")
    assert dropped.returncode == 0 and "violation errored_call" not in dropped.stdout
    assert "# left out errored_call: penalised 100.0% of successful and 0.0% of failed" in dropped.stdout
    missing = run("compile", "--auto-from-tags", str(manifest), "--validate", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_auto_from_tags_keeps_a_hand_written_output(tmp_path):
    """-o over a hand-written rule file is refused (exit 2, the file named, --force said), the file kept;
    a file derived earlier is replaced (re-deriving), and --force replaces the hand-written one."""
    mine = tmp_path / "mine.rlvp"
    mine.write_text("tool get : read\n")
    refused = run("compile", "--auto-from-tags", "examples/manifests/chain4_tools.json", "-o", mine)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert str(mine) in line and "--force" in line
    assert mine.read_text() == "tool get : read\n"
    derived = tmp_path / "derived.rlvp"
    for _ in range(2):
        again = run("compile", "--auto-from-tags", "examples/manifests/chain4_tools.json", "-o", derived)
        assert again.returncode == 0, again.stderr
    forced = run("compile", "--auto-from-tags", "examples/manifests/chain4_tools.json", "-o", mine, "--force")
    assert forced.returncode == 0, forced.stderr
    assert mine.read_text().startswith("# generated by rlvp-compile --auto-from-tags")
    assert run("compile", "rules/tau2_airline.rlvp", "--force").returncode == 2


def test_score_reports_ambiguous_results_in_the_summary_csv_and_json(tmp_path):
    """Two same-name calls whose results came back out of order (a TRL async tool) are counted per
    episode in --csv and --json and in the summary line, so a user sees why error rules skipped them."""

    def turn(*names):
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": n, "arguments": {"path": f"f{k}"}}}
                for k, n in enumerate(names)
            ],
        }

    record = {
        "id": "ep",
        "messages": [
            {"role": "user", "content": "tidy up"},
            turn("read_file", "read_file", "write_file"),
            {"role": "tool", "name": "write_file", "content": "written"},
            {"role": "tool", "name": "read_file", "content": "{'error': 'gone'}"},
            {"role": "tool", "name": "read_file", "content": "text"},
        ],
    }
    traj = tmp_path / "run.jsonl"
    traj.write_text(json.dumps(record) + "\n", encoding="utf-8")
    rules = tmp_path / "r.rlvp"
    rules.write_text(
        "tool read_file : read target path\ntool write_file : write target path\n"
        "violation errored_call (-0.1) { on call error }\n",
        encoding="utf-8",
    )
    done = run("score", str(rules), str(traj))
    no_traceback(done)
    assert (
        done.returncode == 0
        and "ambiguous tool results (could be a same-name call's; skipped by error rules): 2" in done.stdout
    ), done.stdout
    csv_text = run("score", str(rules), str(traj), "--csv", "-").stdout.splitlines()
    header, row = csv_text[0].split(","), csv_text[1].split(",")
    assert row[header.index("ambiguous_results")] == "2" and row[header.index("total")] == "0"
    doc = json.loads(run("score", str(rules), str(traj), "--json").stdout)
    assert doc["episodes"][0]["ambiguous_results"] == 2


def test_auto_from_tags_validate_warns_when_the_episodes_blend_domains():
    """One manifest is one domain's tools: --validate on airline and telecom episodes warns that
    the evidence blends 2 domains, naming them; on the airline episodes alone it does not."""
    samples = REPO / "examples" / "data" / "tau2_simulations" / "sierra_tau2-bench_prs"
    manifest = str(REPO / "examples" / "data" / "tau2" / "airline" / "tools_manifest.json")
    airline = str(samples / "pr103_azure-airline-full_gpt-4o.sample.json")
    telecom = str(samples / "pr17_telecom_gpt-4o.sample.json")
    blended = run("compile", "--auto-from-tags", manifest, "--validate", airline, telecom)
    assert blended.returncode == 0, blended.stderr
    (warning,) = [line for line in blended.stderr.splitlines() if "warning: --validate" in line]
    assert warning.startswith("rlvp-compile: warning: --validate read episodes of 2 domains (airline ")
    assert "telecom " in warning and warning.endswith("give the trajectories of the manifest's own domain")
    alone = run("compile", "--auto-from-tags", manifest, "--validate", airline)
    assert alone.returncode == 0 and "warning: --validate" not in alone.stderr
