"""A new user's first hour with `rlvp-compile` and `rlvp-score`, as subprocesses: the README
tour runs as printed on what the repository ships, the docs' outputs are real, and every
mistake gets a one-line answer and exit 1 or 2, never a traceback."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .forked_cli import CliServer

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "data"
SERVER = CliServer(["rlvp_dsl.cli.compile", "rlvp_dsl.cli.score"])


@pytest.fixture(scope="module", autouse=True)
def _stop_the_server():
    yield
    SERVER.close()


def run(
    tool: str, *args: str, cwd: Path = REPO, stdin: bytes | None = None, env: dict | None = None, timeout: int = 180
) -> subprocess.CompletedProcess:
    """`python -m rlvp_dsl.cli.TOOL ARGS` in `cwd`, a child process forked from one that has done the
    imports (forked_cli.py); with `env`, a plain subprocess (the environment must be there before
    the imports)."""
    if env is None:
        done = SERVER.run(f"rlvp_dsl.cli.{tool}", list(args), cwd, stdin, timeout)
    else:
        done = subprocess.run(
            [sys.executable, "-m", f"rlvp_dsl.cli.{tool}", *map(str, args)],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=env,
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    )


_SHARED: dict[tuple[str, ...], subprocess.CompletedProcess] = {}


def run_shared(tool: str, *args: str) -> subprocess.CompletedProcess:
    """`run` from the repository root for a command that only reads the repository's own files, run
    once for the module: the README tour and docs/testing-rules.md print two of the same `--check`
    commands (about 10 s each), and both tests check that one run's output."""
    key = (tool, *map(str, args))
    if key not in _SHARED:
        _SHARED[key] = run(tool, *args)
    return _SHARED[key]


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]


# ---- the README tour ---------------------------------------------------------------


def _tour_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A five-minute tour") : readme.index("**6. Use it from Python**")]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", tour, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(("rlvp-compile", "rlvp-score")):
                commands.append(line)
    return commands


def test_the_tour_reads_only_what_the_repository_ships():
    """The README tour names no ../shared path and tells a new shell to activate .venv."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A five-minute tour") : readme.index("## Layout")]
    assert "../shared" not in tour
    assert ". .venv/bin/activate" in tour


@pytest.mark.parametrize("command", _tour_commands())
def test_each_tour_command_runs_as_printed(command, tmp_path):
    """Every rlvp-compile / rlvp-score command of the tour runs from the repository root: exit 0
    (the farmable example exits 1, as the README says), no traceback."""
    tool, *args = command.split()
    args = [str(tmp_path / "airline.rlvp") if a == "build/airline.rlvp" else a for a in args]
    args = [str(tmp_path / "episodes.csv") if a == "build/episodes.csv" else a for a in args]
    args = [str(tmp_path / "report.html") if a == "build/report.html" else a for a in args]
    if "build/airline.rlvp" in command and "--auto-from-tags" not in command:
        assert (
            run(
                "compile",
                "--auto-from-tags",
                "examples/data/tau2/airline/tools_manifest.json",
                "-o",
                tmp_path / "airline.rlvp",
            ).returncode
            == 0
        )
    files = [a for a in args if not a.startswith("-")]
    expanded = []
    for a in args:  # the shell's glob
        expanded.extend(sorted(str(p.relative_to(REPO)) for p in REPO.glob(a)) if "*" in a else [a])
    writes = any("build/" in a for a in command.split())
    done = (run if writes else run_shared)(tool.removeprefix("rlvp-"), *expanded)
    no_traceback(done)
    expected = 1 if "farmable" in command else 0
    assert done.returncode == expected, (command, files, done.stderr[-2000:])


def test_the_samples_have_their_licences_beside_them():
    """Each sample folder of examples/data carries the licence of the repository it comes from."""
    for folder in ("tau2", "tau2_simulations", "tau_bench_v1", "swe_agent"):
        assert list((SAMPLES / folder).glob("LICENSE*")), folder


# ---- versions, codes and their page ---------------------------------------------------


@pytest.mark.parametrize("tool", ["compile", "score"])
def test_version(tool):
    """--version prints the program, the package version and Python's, and exits 0."""
    done = run(tool, "--version")
    assert done.returncode == 0
    assert re.match(rf"rlvp-{tool} \S+ \(Python 3\.\d+", done.stdout), done.stdout


def test_explain_code_prints_cause_fix_and_the_real_output():
    """--explain-code names the code's cause and fix and shows what its example prints."""
    done = run("compile", "--explain-code", "rv201")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RV201: unknown tool")
    assert "Cause: " in done.stdout and "Fix: " in done.stdout
    assert "error[RV201]: unknown tool 'serch_flights'" in done.stdout


def test_explain_code_of_an_unknown_code_is_a_usage_error():
    """An unknown code: exit 2, one line naming the codes and the page."""
    done = run("compile", "--explain-code", "RV999")
    assert done.returncode == 2
    assert "unknown diagnostic code 'RV999'" in done.stderr and "docs/diagnostics.md" in done.stderr
    no_traceback(done)


def test_the_diagnostics_page_is_up_to_date():
    """docs/diagnostics.md is what docs/gen_diagnostics.py writes from the codes table."""
    done = subprocess.run(
        [sys.executable, "docs/gen_diagnostics.py", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_codes_table_has_one_page():
    """Only docs/diagnostics.md lists the codes; the other pages link to it instead of a second,
    hand-kept copy that goes stale (docs/language.md had one without RV306-RV307)."""
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name == "diagnostics.md":
            continue
        rows = re.findall(r"^\| \[?RV\d{3}", page.read_text(encoding="utf-8"), re.M)
        assert len(rows) < 3, f"{page.name} has a table of diagnostic codes: link docs/diagnostics.md instead"
    assert "(diagnostics.md)" in (REPO / "docs" / "language.md").read_text(encoding="utf-8")


def test_every_code_is_documented_and_every_example_gives_its_code():
    """Each code of diagnostics.CODES has a cause and a fix; each example is reported with its code."""
    from rlvp_dsl.diagnostic_docs import DOCS, EXAMPLE_PATH, missing_docs
    from rlvp_dsl.diagnostics import CODES
    from rlvp_dsl.pipeline import check_text

    assert missing_docs() == []
    for code, doc in DOCS.items():
        assert doc.cause and doc.fix, code
        if doc.example:
            codes = {d.code for d in check_text(doc.example, EXAMPLE_PATH, lints=True).diagnostics}
            assert code in codes, (code, codes)
    page = (REPO / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    assert all(f"## {code}" in page for code in CODES)


def _documented_runs(page: str) -> list[tuple[str, list[str]]]:
    runs = []
    for block in re.findall(r"```\n(\$ rlvp-compile .*?)```", page, re.S):
        command, *lines = block.rstrip("\n").splitlines()
        runs.append((command[2:], lines))
    return runs


@pytest.mark.parametrize(
    "command,lines",
    _documented_runs((REPO / "docs" / "testing-rules.md").read_text()),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_the_outputs_in_testing_rules_are_real(command, lines):
    """Each `$ rlvp-compile ...` output in docs/testing-rules.md is what the command prints now (the
    page's lines appear in order; a line `...` stands for lines left out)."""
    tool, *args = command.split()
    done = run_shared(tool.removeprefix("rlvp-"), *args)
    actual = (done.stdout + done.stderr).splitlines()
    position = 0
    for line in lines:
        if line.strip() == "...":
            continue
        while position < len(actual) and actual[position].rstrip() != line.rstrip():
            position += 1
        assert position < len(actual), f"not printed by `{command}` (in order): {line!r}\nprinted:\n" + "\n".join(
            actual
        )
        position += 1


# ---- rlvp-compile ---------------------------------------------------------------------


def test_test_of_a_missing_file_is_an_io_error_not_zero_passed():
    """--test nosuch.rlvp: exit 2 and the file named, never `0 passed, 0 failed`."""
    done = run("compile", "--test", "no/such.rlvp")
    assert done.returncode == 2
    assert "rlvp-compile: error: file not found: no/such.rlvp" in done.stderr
    assert "passed" not in done.stdout + done.stderr
    beside = run("compile", "--test", "no/such.rlvp", "rules/chain.rlvp")
    assert beside.returncode == 2
    assert "3 passed, 0 failed; not run: no/such.rlvp" in beside.stdout


def test_test_of_files_without_test_blocks_says_no_tests_ran(tmp_path):
    """--test where no file has a `test` block: `no tests ran`, exit 1 (pytest: "no tests collected" is
    no success); beside a file that has tests it is only a note, exit 0."""
    (tmp_path / "plain.rlvp").write_text("tool a : read\nviolation x (-1) { on call a }\n")
    done = run("compile", "--test", tmp_path / "plain.rlvp")
    assert done.returncode == 1
    assert f"rlvp-compile: error: no tests ran: {tmp_path / 'plain.rlvp'} has no `test` blocks" in done.stderr
    assert "0 passed" not in done.stdout
    beside = run("compile", "--test", tmp_path / "plain.rlvp", "rules/chain.rlvp")
    assert beside.returncode == 0, beside.stderr
    assert f"{tmp_path / 'plain.rlvp'}: no tests (no `test` blocks)" in beside.stdout
    assert beside.stdout.rstrip().endswith("3 passed, 0 failed")


def test_test_with_json_prints_only_json_on_stdout():
    """--test --json: stdout is one JSON document whose objects list their tests; the summary is on stderr."""
    done = run("compile", "--test", "--json", "rules/chain.rlvp")
    assert done.returncode == 0, done.stderr
    (doc,) = json.loads(done.stdout)
    assert [t["passed"] for t in doc["tests"]] == [True, True, True]
    assert set(doc["tests"][0]) == {"name", "location", "passed", "failures"}
    assert "3 passed, 0 failed" in done.stderr


def test_check_without_hypothesis_says_how_to_install_it():
    """A core-only install: --check prints the one-line install command and exits 2, no traceback."""
    code = (
        "import sys; sys.modules['hypothesis'] = None; from rlvp_dsl.cli.compile import main; "
        "sys.exit(main(['--check', 'rules/chain.rlvp']))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--check needs hypothesis" in done.stderr and "pip install 'hypothesis>=6.100'" in done.stderr
    no_traceback(done)


def test_check_leaves_no_hypothesis_folder_behind(tmp_path):
    """--check writes Hypothesis's cache under the user's cache folder, not the current directory."""
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = run("compile", "--check", REPO / "rules" / "chain.rlvp", "--examples", "10", cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == []


def test_check_refuses_a_huge_example_count():
    """--examples beyond 100,000 is a usage error at once, not a run of hours."""
    done = run("compile", "--check", "rules/chain.rlvp", "--examples", "99999999999999999999")
    assert done.returncode == 2 and "between 1 and 100,000" in done.stderr


@pytest.mark.parametrize("text", ["", "   \n# only a comment\n"])
def test_an_empty_rule_file_compiles_with_a_warning(tmp_path, text):
    """An empty (or comment-only) file: exit 0 with RV306; --warnings-as-errors makes it exit 1."""
    path = tmp_path / "empty.rlvp"
    path.write_text(text)
    done = run("compile", path)
    assert done.returncode == 0
    assert "warning[RV306]: the rule set has no rules" in done.stderr
    assert run("compile", "--warnings-as-errors", path).returncode == 1


def test_counts_of_one_read_in_the_singular(tmp_path):
    """One rule, one tool, one tool declaration, one undeclared tool: "1 rule", "1 tool", never "1 rules"."""
    (tmp_path / "decl.rlvp").write_text("tool a : read\n")
    done = run("compile", "decl.rlvp", cwd=tmp_path)
    assert "no rules, only 1 tool declaration:" in done.stderr, done.stderr
    (tmp_path / "r.rlvp").write_text("tool a : read\nviolation one (-0.1) { on call a }\n")
    record = json.loads(_two_call_episode(1.0))
    record["messages"][1]["tool_calls"][1]["function"]["name"] = "zzz"
    (tmp_path / "e.jsonl").write_text(json.dumps(record) + "\n")
    done = run("score", "r.rlvp", "e.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "note: 1 of 2 calls go to 1 tool the rules do not declare (zzz)" in done.stderr
    assert "(1 rule)" in done.stdout and "1 rules" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "condition", ['on call put arg idd == "x"', "on call put\n  unless seen (call get ok same idd)"]
)
def test_a_typo_in_an_argument_name_of_inline_tools_is_flagged(tmp_path, condition):
    """`arg idd` / `same idd` with inline tools whose target is `id`: RV307 with a did-you-mean."""
    path = tmp_path / "typo.rlvp"
    path.write_text(
        f"tool get : read target id\ntool put : write target id\nviolation v (-0.5) {{\n  {condition}\n}}\n"
    )
    done = run("compile", path)
    assert done.returncode == 0
    assert "warning[RV307]: argument 'idd'" in done.stderr and "did you mean 'id'?" in done.stderr


def test_an_argument_a_test_episode_passes_is_known(tmp_path):
    """A name the file's own test episode passes to the tool is not a typo."""
    path = tmp_path / "ok.rlvp"
    path.write_text(
        'tool get : read target id\nviolation v (-0.5) { on call get arg idx == "x" }\n'
        'test "t" {\n  episode {\n    call get {"idx": "x"} ok\n  }\n  expect v at call 0 == -0.5\n}\n'
    )
    done = run("compile", path)
    assert done.returncode == 0 and "RV307" not in done.stderr, done.stderr


# ---- rlvp-score -----------------------------------------------------------------------

CHAT = (
    '{"id": "a", "reward": 1, "messages": [{"role": "user", "content": "hi"}]}\n'
    '{"id": "b", "reward": 0, "messages": [{"role": "user", "content": "yo"}]}\n'
)


@pytest.mark.parametrize("name", ["run.json", "run.txt", "run.ndjson"])
def test_score_reads_jsonl_by_content(tmp_path, name):
    """A JSONL file is read as JSONL whatever it is called."""
    path = tmp_path / name
    path.write_text(CHAT)
    done = run("score", "rules/tau2_airline.rlvp", path)
    assert done.returncode == 0, done.stderr
    assert "episodes: 2 " in done.stdout


def test_score_reads_standard_input():
    """`-` reads the trajectories from standard input."""
    done = run("score", "rules/tau2_airline.rlvp", "-", "--json", stdin=CHAT.encode())
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [e["id"] for e in doc["episodes"]] == ["a", "b"]
    assert {e["source"] for e in doc["episodes"]} == {"<stdin>"}


def test_score_warns_when_domains_are_blended_and_filters_by_domain():
    """Airline and telecom episodes in one summary: a warning; --domain airline keeps only those."""
    blended = run("score", "rules/tau2_airline.rlvp", "examples/data/tau2_simulations")
    assert blended.returncode == 0
    assert "come from 2 domains (airline 3, telecom 1)" in blended.stderr
    one = run("score", "rules/tau2_airline.rlvp", "examples/data/tau2_simulations", "--domain", "airline", "--json")
    assert one.returncode == 0 and "blends" not in one.stderr
    doc = json.loads(one.stdout)
    assert {e["domain"] for e in doc["episodes"]} == {"airline"}
    assert doc["domains"] == {"airline": 3, "telecom": 1} and doc["selected_domains"] == ["airline"]


def test_score_reads_the_tau_bench_v1_domain_from_its_policy():
    """tau-bench v1 records its domain only in the policy heading; it is read from there."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/data/tau_bench_v1", "--domain", "airline")
    assert done.returncode == 0, done.stderr
    assert "episodes: 3 " in done.stdout


def test_score_by_domain_prints_one_summary_each():
    """--by domain: one summary per domain, in name order."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/data/tau2_simulations", "--by", "domain")
    assert done.returncode == 0
    assert re.findall(r"^== domain (\S+): (\d+) episodes?", done.stdout, re.M) == [("airline", "3"), ("telecom", "1")]


def test_score_domain_typo_gets_a_did_you_mean():
    """--domain airlin: exit 1, the domains found and `did you mean 'airline'?`; a typo beside a right name
    keeps the right one's episodes and warns about the typo."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/data/tau2_simulations", "--domain", "airlin")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rlvp-score: error: no episodes of domain airlin (found: airline 3, telecom 1)")
    assert line.endswith("--domain airlin: did you mean 'airline'?")
    both = run(
        "score",
        "rules/tau2_airline.rlvp",
        "examples/data/tau2_simulations",
        "--domain",
        "airline",
        "--domain",
        "telcom",
    )
    assert both.returncode == 0 and "warning: --domain telcom: did you mean 'telecom'?" in both.stderr


def test_score_csv_has_one_row_per_episode(tmp_path):
    """--csv PATH: the documented columns, one rule:NAME column per rule, one row per episode."""
    out = tmp_path / "out" / "episodes.csv"
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--csv", out)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 6
    assert list(rows[0])[:10] == [
        "id",
        "source",
        "domain",
        "outcome",
        "events",
        "calls",
        "malformed_calls",
        "orphan_results",
        "ambiguous_results",
        "total",
    ]
    assert "rule:write_unconfirmed" in rows[0]
    to_stdout = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--csv", "-")
    assert to_stdout.stdout == out.read_text()


SUMS_RULES = """tool a : read
tool b : write
violation one (-0.1) { on call a }
violation two (-0.2) { on call b }
"""


def _two_call_episode(reward: float) -> str:
    calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in (("1", "a"), ("2", "b"))
    ]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "1", "content": "x"},
        {"role": "tool", "tool_call_id": "2", "content": "y"},
    ]
    return json.dumps({"id": "e1", "reward": reward, "messages": messages}) + "\n"


def test_score_csv_numbers_are_rounded(tmp_path):
    """--csv writes 0.1 + 0.2 as 0.3 (not 0.30000000000000004), outcomes too."""
    (tmp_path / "r.rlvp").write_text(SUMS_RULES)
    (tmp_path / "e.jsonl").write_text(_two_call_episode(0.1 + 0.2))
    done = run("score", "r.rlvp", "e.jsonl", "--csv", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = csv.DictReader(io.StringIO(done.stdout))
    assert (row["outcome"], row["total"], row["rule:one"], row["rule:two"]) == ("0.3", "-0.3", "-0.1", "-0.2")
    assert "0000000" not in done.stdout


def test_score_csv_and_compile_output_create_missing_folders(tmp_path):
    """`--csv build/x.csv` and `-o build/...` on a fresh clone: the folders are made."""
    csv_path = tmp_path / "build" / "deeper" / "x.csv"
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--csv", csv_path)
    assert done.returncode == 0 and csv_path.read_text().startswith("id,source,"), done.stderr
    program = tmp_path / "out" / "p.json"
    done = run("compile", "rules/chain.rlvp", "--emit-program", "-o", program)
    assert done.returncode == 0, done.stderr
    assert json.loads(program.read_text())["format"] == "rlvp-program/1"
    derived = tmp_path / "derived" / "airline.rlvp"
    done = run("compile", "--auto-from-tags", "examples/data/tau2/airline/tools_manifest.json", "-o", derived)
    assert done.returncode == 0 and derived.read_text().strip(), done.stderr


def test_score_output_under_a_file_is_an_io_error(tmp_path):
    """A --csv path whose folder is a file: exit 2, one line naming the path."""
    (tmp_path / "file").write_text("x")
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--csv", tmp_path / "file" / "x.csv")
    assert done.returncode == 2
    assert f"cannot write {tmp_path / 'file' / 'x.csv'}" in done.stderr
    no_traceback(done)


def test_score_json_has_the_documented_keys():
    """--json: the top-level and per-episode keys docs/scoring.md lists."""
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--json")
    doc = json.loads(done.stdout)
    assert list(doc) == [
        "rules",
        "program",
        "skipped",
        "errors",
        "domains",
        "selected_domains",
        "summary",
        "groups",
        "episodes",
    ]
    assert list(doc["episodes"][0]) == [
        "id",
        "source",
        "domain",
        "outcome",
        "events",
        "calls",
        "malformed_calls",
        "orphan_results",
        "ambiguous_results",
        "total",
        "rule_totals",
        "credits",
    ]
    scoring = (REPO / "docs" / "scoring.md").read_text()
    assert all(f'"{key}"' in scoring for key in doc)


@pytest.mark.parametrize(
    "fmt,path,looks",
    [
        ("openai", "examples/episodes/airline_tau2_results.json", "tau2"),
        ("swe_agent", "examples/episodes/airline_tau2_results.json", "tau2"),
        ("swe_agent", "examples/episodes/airline_chat.jsonl", "openai"),
        ("tau2", "examples/data/swe_agent", "swe_agent"),
    ],
)
def test_score_with_a_wrong_format_names_the_file_and_the_format_it_looks_like(fmt, path, looks):
    """--format that does not fit: exit 1, the file named, the format its content looks like; no
    empty episode scored."""
    done = run("score", "rules/tau2_airline.rlvp", path, "--format", fmt)
    assert done.returncode == 1, done.stdout
    assert f"rlvp-score: error: {path}" in done.stderr and f"'{looks}'" in done.stderr, done.stderr
    assert "episodes:" not in done.stdout
    no_traceback(done)


def test_score_warns_of_a_tool_name_that_is_not_text(tmp_path):
    """A trajectory with `"name": 5`: the call is scored as malformed and a warning names the file,
    the record and the field (not a silent `None`, not an undeclared tool `None`)."""
    (tmp_path / "r.rlvp").write_text(SUMS_RULES)
    record = json.loads(_two_call_episode(1.0))
    record["messages"][1]["tool_calls"][1]["function"]["name"] = 5
    (tmp_path / "e.jsonl").write_text(json.dumps(record) + "\n")
    done = run("score", "r.rlvp", "e.jsonl", "--explain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "rlvp-score: warning: 1 call has a tool name that is not text (scored as malformed): "
        "e.jsonl: line 1: messages[1].tool_calls[1]: field 'function.name': expected a tool name (text), got 5"
    ) in done.stderr
    assert "(None)" not in done.stderr and "call (no tool name) [malformed: line 1:" in done.stdout


def test_score_notes_calls_with_malformed_arguments(tmp_path):
    """Arguments that are not valid JSON: the summary says how many calls had them (without --explain);
    a clean episode gets no such note."""
    (tmp_path / "r.rlvp").write_text(SUMS_RULES)
    record = json.loads(_two_call_episode(1.0))
    record["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"id": '
    (tmp_path / "e.jsonl").write_text(json.dumps(record) + "\n")
    done = run("score", "r.rlvp", "e.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "rlvp-score: note: 1 call had malformed arguments (not a JSON object; scored as failed calls; "
        "--explain shows them)"
    ) in done.stderr.splitlines()
    (tmp_path / "e.jsonl").write_text(_two_call_episode(1.0))
    assert "malformed arguments" not in run("score", "r.rlvp", "e.jsonl", cwd=tmp_path).stderr


def test_score_with_the_arguments_swapped_says_so():
    """A trajectory given as the rule file: exit 2 and the right order, not a page of syntax errors."""
    done = run("score", "examples/episodes/airline_chat.jsonl", "rules/tau2_airline.rlvp")
    assert done.returncode == 2
    assert "the rule file comes first" in done.stderr and "RV101" not in done.stderr


# ---- mistakes: a clear answer, never a traceback --------------------------------------

MISTAKES = [
    ("compile", []),
    ("compile", ["--nonsense", "x.rlvp"]),
    ("compile", ["no/such.rlvp"]),
    ("compile", ["."]),
    ("compile", ["{binary}"]),
    ("compile", ["{latin1}"]),
    ("compile", ["--max-diagnostics", "0", "rules/chain.rlvp"]),
    ("compile", ["--max-diagnostics", "lots", "rules/chain.rlvp"]),
    ("compile", ["--examples", "abc", "--check", "rules/chain.rlvp"]),
    ("compile", ["--examples", "0", "--check", "rules/chain.rlvp"]),
    ("compile", ["--manifest", "x.json", "rules/chain.rlvp"]),
    ("compile", ["--check", "rules/chain.rlvp", "--manifest", "{binary}"]),
    ("compile", ["--auto-from-tags", "{binary}"]),
    ("compile", ["--auto-from-tags", "{empty}"]),
    ("compile", ["--auto-from-tags", "."]),
    ("compile", ["--auto-from-tags", "examples/manifests/chain4_tools.json", "-o", "."]),
    ("compile", ["rules/chain.rlvp", "rules/swe.rlvp", "-o", "p.json"]),
    ("compile", ["--explain-code", "x" * 100_000]),
    ("score", []),
    ("score", ["rules/chain.rlvp"]),
    ("score", ["no/such.rlvp", "x"]),
    ("score", ["rules", "examples/episodes"]),
    ("score", ["{binary}", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "no/such.json"]),
    ("score", ["rules/tau2_airline.rlvp", "{binary}"]),
    ("score", ["rules/tau2_airline.rlvp", "{empty}"]),
    ("score", ["rules/tau2_airline.rlvp", "{badjson}"]),
    ("score", ["rules/tau2_airline.rlvp", "{emptydir}"]),
    ("score", ["rules/tau2_airline.rlvp", "-", "-"]),
    ("score", ["rules/tau2_airline.rlvp", "--format", "nonsense", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--limit", "-3", "--explain", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--limit", "3", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--error-prefix", "ERR", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--format", "tau2", "examples/episodes/airline_chat.jsonl"]),
    ("score", ["rules/tau2_airline.rlvp", "--domain", "retail", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--by", "task", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--csv", "-", "--json", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--csv", ".", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--format", "openai", "examples/episodes/airline_tau2_results.json"]),
    ("score", ["rules/tau2_airline.rlvp", "--format", "swe_agent", "examples/data/tau2_simulations"]),
    ("score", ["rules/tau2_airline.rlvp", "--domain", "", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--json", "--explain", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "rules/tau2_airline.rlvp"]),
    ("score", ["rules/tau2_airline.rlvp", "rules"]),
    ("score", ["rules/tau2_airline.rlvp", "--csv", "rules/tau2_airline.rlvp", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "--csv", "rules/tau2_airline.rlvp/x.csv", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "-"]),
    ("compile", ["-"]),
    ("compile", ["-", "-"]),
    ("compile", ["--test", "no/such.rlvp"]),
    ("compile", ["--test", "{empty}"]),
    ("compile", ["examples/manifests/airline_tools.json"]),
    ("compile", ["rules/chain.rlvp", "--emit-program", "-o", "rules/chain.rlvp"]),
    ("compile", ["rules/chain.rlvp", "--emit-program", "-o", "rules/chain.rlvp/p.json"]),
    ("compile", ["rules/chain.rlvp", "--emit-program", "-o", ""]),
    ("compile", ["--auto-from-tags", ""]),
    ("compile", ["--check", "{empty_rules}"]),
    ("score", ["rules/tau2_airline.rlvp", "--format", "openai", "--error-prefix", "", "examples/episodes"]),
    ("score", ["rules/tau2_airline.rlvp", "{nan_reward}"]),
    ("compile", ["--emit-program", "--test", "rules/chain.rlvp"]),
    ("compile", ["-o", "p.json", "--check", "rules/chain.rlvp"]),
    ("compile", ["--json", "--check", "rules/chain.rlvp"]),
    ("compile", ["--json", "--auto-from-tags", "examples/manifests/chain4_tools.json"]),
    ("compile", ["--test", "--auto-from-tags", "examples/manifests/chain4_tools.json"]),
]


def test_an_output_never_overwrites_an_input(tmp_path):
    """--csv onto a trajectory or the rule file, -o onto the rule file or the manifest: exit 2, the
    input named, the file unchanged."""
    chat = tmp_path / "run.jsonl"
    chat.write_bytes((REPO / "examples" / "episodes" / "airline_chat.jsonl").read_bytes())
    rules = tmp_path / "r.rlvp"
    rules.write_bytes(
        (REPO / "rules" / "chain.rlvp")
        .read_bytes()
        .replace(b'"../examples/', b'"' + str(REPO).encode() + b"/examples/")
    )
    manifest = tmp_path / "tools.json"
    manifest.write_bytes((REPO / "examples" / "manifests" / "chain4_tools.json").read_bytes())
    before = {p: p.read_bytes() for p in (chat, rules, manifest)}
    for tool, args, victim in [
        ("score", ["rules/tau2_airline.rlvp", chat, "--csv", chat], chat),
        ("score", ["rules/tau2_airline.rlvp", tmp_path, "--csv", chat], chat),
        ("score", [rules, chat, "--csv", rules], rules),
        ("score", ["rules/tau2_airline.rlvp", chat, "--html", chat], chat),
        ("compile", [rules, "--emit-program", "-o", rules], rules),
        ("compile", ["--auto-from-tags", manifest, "-o", manifest], manifest),
    ]:
        done = run(tool, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert f"would overwrite the input {victim}" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_compile_o_says_what_it_wrote(tmp_path):
    """`rlvp-compile RULES -o PATH` writes the compiled program and says so (it was silent)."""
    out = tmp_path / "program.json"
    done = run("compile", "rules/tau2_airline.rlvp", "-o", out)
    assert done.returncode == 0, done.stderr
    assert f"wrote the compiled program (canonical JSON) to {out}" in done.stderr
    assert out.read_text().lstrip().startswith("{")


def test_csv_and_html_on_one_path_is_a_usage_error(tmp_path):
    """--csv X --html X would leave only the CSV: refused before anything is written."""
    out = tmp_path / "both.out"
    done = run("score", "rules/tau2_airline.rlvp", "examples/episodes", "--csv", out, "--html", out)
    assert done.returncode == 2 and "--csv and --html name the same file" in done.stderr, done.stderr
    assert not out.exists()


def test_an_output_under_a_file_names_the_file(tmp_path):
    """-o/--csv whose folder is a file: `X is a file, not a folder`, not `File exists`."""
    done = run("compile", "rules/chain.rlvp", "--emit-program", "-o", "rules/chain.rlvp/p.json")
    assert done.returncode == 2
    assert "cannot write rules/chain.rlvp/p.json: rules/chain.rlvp is a file, not a folder" in done.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["examples/episodes", "--domain", ""], "argument --domain: needs a domain name (got an empty one)"),
        (["examples/episodes", "--csv", ""], "argument --csv: needs a path (got an empty one)"),
        (["rules/chain.rlvp"], "rules/chain.rlvp is a rule file, not a trajectory"),
        (["examples/episodes", "--json", "--explain"], "it does not go with --explain"),
    ],
)
def test_score_usage_mistakes(args, message):
    """Contradictions and misplaced files are usage errors (exit 2) saying what is wrong."""
    done = run("score", "rules/tau2_airline.rlvp", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    no_traceback(done)


def test_score_a_binary_file_named_rlvp_is_not_called_a_rule_file(tmp_path):
    """A binary `x.rlvp` among the trajectories: the reader's "not UTF-8 text" error, not "is a rule file"."""
    (tmp_path / "x.rlvp").write_bytes(bytes(range(256)) * 4)
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "x.rlvp")
    assert done.returncode == 1, done.stderr
    assert "is a rule file" not in done.stderr and "not UTF-8 text" in done.stderr
    no_traceback(done)


def test_score_a_folder_without_trajectories_says_so(tmp_path):
    """A folder holding no *.json/*.jsonl/*.ndjson/*.traj: the error says it is such a folder."""
    (tmp_path / "notes.txt").write_text("x")
    done = run("score", "rules/tau2_airline.rlvp", tmp_path)
    assert done.returncode == 1
    assert f"{tmp_path}: a folder with no trajectory files (*.json, *.jsonl, *.ndjson, *.traj)" in done.stderr


def test_score_counts_a_file_named_twice_once():
    """`rlvp-score R runs/ runs/a.jsonl`: the file's episodes are scored once."""
    once = run("score", "rules/tau2_airline.rlvp", "examples/episodes")
    twice = run(
        "score",
        "rules/tau2_airline.rlvp",
        "examples/episodes",
        "examples/episodes/airline_chat.jsonl",
        "examples/episodes",
    )
    assert once.returncode == twice.returncode == 0
    assert "episodes: 6 " in once.stdout and twice.stdout == once.stdout


def test_score_names_a_trajectory_file_that_holds_no_episode(tmp_path):
    """A tau2 file with an empty simulations list: `no episodes found` and the file named as empty."""
    (tmp_path / "r.json").write_text('{"simulations": []}')
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "r.json")
    assert done.returncode == 1
    assert f"{tmp_path / 'r.json'}: a trajectory file that holds no episodes" in done.stderr


def test_score_says_when_every_episode_of_a_file_was_rejected(tmp_path):
    """A file whose only record is malformed: the record's error, then the file named as rejected (not as
    empty); a JSON null or an empty object is named in JSON's words."""
    (tmp_path / "r.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}], "reward": "yes"}\n')
    (tmp_path / "n.json").write_text("null")
    (tmp_path / "e.json").write_text("{}")
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "r.jsonl")
    assert done.returncode == 1 and "field 'reward': expected a finite number or null, got 'yes'" in done.stderr
    assert f"{tmp_path / 'r.jsonl'}: every episode of it was rejected (the errors above)" in done.stderr
    assert "holds no episodes" not in done.stderr
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "n.json", tmp_path / "e.json")
    assert "not a trajectory: JSON null" in done.stderr and "not a trajectory: an empty JSON object" in done.stderr


def test_score_on_truncated_files_names_the_cut_and_nothing_else(tmp_path):
    """A JSONL file whose only line is cut off: the line:col error, then the file as rejected (never "holds
    no episodes"); a cut JSON file, which never became a file of episodes: the error and one summary line."""
    line = (REPO / "examples" / "episodes" / "airline_chat.jsonl").read_text().splitlines()[0]
    (tmp_path / "cut.jsonl").write_text(line[:200])
    (tmp_path / "cut.json").write_text((REPO / "examples" / "episodes" / "airline_tau2_results.json").read_text()[:500])
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "cut.jsonl")
    assert (
        done.returncode == 1
        and f"{tmp_path / 'cut.jsonl'}:1:" in done.stderr
        and "is the file truncated?" in done.stderr
    )
    assert f"{tmp_path / 'cut.jsonl'}: every episode of it was rejected (the errors above)" in done.stderr
    assert "holds no episodes" not in done.stderr and "Traceback" not in done.stderr
    done = run("score", "rules/tau2_airline.rlvp", tmp_path / "cut.json")
    assert done.returncode == 1 and "is the file truncated?" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"rlvp-score: error: no episodes could be read from {tmp_path / 'cut.json'} (the errors above)"
    )


def test_the_check_command_in_the_bfcl_rules_header_passes():
    """rules/bfcl.rlvp's header names the command that checks it; that command exits 0 with every
    property ok (it needs no bfcl-eval: the manifest is a file of the repository)."""
    header = (REPO / "rules" / "bfcl.rlvp").read_text(encoding="utf-8")
    command = next(line.strip("# \n") for line in header.splitlines() if "rlvp-compile --check" in line)
    tool, *args = command.split()
    done = run(tool.removeprefix("rlvp-"), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout and "all 9 rule outcomes reached" in done.stdout


def test_check_of_a_rule_file_without_tools_says_what_it_needs(tmp_path):
    """--check needs tools to generate calls: a file declaring none is a one-line usage error, no traceback."""
    (tmp_path / "empty.rlvp").write_text("")
    done = run("compile", "--check", tmp_path / "empty.rlvp")
    assert done.returncode == 2
    assert "--check generates calls of known tools" in done.stderr and "--manifest MANIFEST" in done.stderr
    no_traceback(done)


@pytest.mark.parametrize(
    "path,what", [("examples/episodes/airline_chat.jsonl", "a trajectory"), ("rules/chain.rlvp", "a rule file")]
)
def test_derive_from_a_file_that_is_no_manifest_says_what_it_is(path, what):
    """--auto-from-tags on a trajectory or a rule file: exit 2, `X is a trajectory, not a tool manifest`."""
    done = run("compile", "--auto-from-tags", path)
    assert done.returncode == 2
    assert f"rlvp-compile: error: {path} is {what}, not a tool manifest" in done.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--emit-program", "--test", "rules/chain.rlvp"],
            "--emit-program writes the compiled program: it does not go with",
        ),
        (["-o", "p.json", "--check", "rules/chain.rlvp"], "-o writes the compiled program: it does not go with"),
        (["--json", "--check", "rules/chain.rlvp"], "--check prints a text report: it does not go with --json"),
        (
            ["--json", "--auto-from-tags", "examples/manifests/chain4_tools.json"],
            "--json does not go with --auto-from-tags",
        ),
        (
            ["--check", "--auto-from-tags", "examples/manifests/chain4_tools.json"],
            "--check does not go with --auto-from-tags",
        ),
    ],
)
def test_compile_refuses_a_flag_that_would_do_nothing(args, message):
    """A flag the mode ignores is a usage error naming it, not silently dropped."""
    done = run("compile", *args)
    assert done.returncode == 2
    assert f"rlvp-compile: error: {message}" in done.stderr
    assert not (REPO / "p.json").exists()


def test_compile_reads_a_rule_file_from_standard_input():
    """`rlvp-compile -` checks rule text from stdin (named <stdin>); bad text gets <stdin>:line:col; bytes
    that are not UTF-8 are an I/O error."""
    text = b"tool search : read\nviolation failed (-0.1) { on call search error }\n"
    done = run("compile", "-", stdin=text)
    assert done.returncode == 0, done.stderr
    assert "<stdin>: ok: 1 rule (1 violation), 1 tool" in done.stderr
    bad = run("compile", "-", stdin=b"violaton x (-1) { on call }\n")
    assert bad.returncode == 1 and "<stdin>:1:1: error[RV101]: unexpected name 'violaton'; did you mean" in bad.stderr
    binary = run("compile", "-", stdin=bytes(range(256)))
    assert (
        binary.returncode == 2 and "standard input is not UTF-8 text: line 2, column 118 (byte 0x80)" in binary.stderr
    )
    assert run("compile", "-", "-", stdin=text).returncode == 2


@pytest.mark.parametrize(
    "path,advice",
    [
        (
            "examples/manifests/airline_tools.json",
            "rlvp-compile --auto-from-tags examples/manifests/airline_tools.json",
        ),
        ("examples/episodes/airline_chat.jsonl", "it looks like a trajectory"),
    ],
)
def test_compile_of_a_json_file_says_what_to_run_instead(path, advice):
    """A manifest or a trajectory given to rlvp-compile: one line (exit 2) with the command it needs."""
    done = run("compile", path)
    assert done.returncode == 2
    assert f"rlvp-compile: error: {path} is not a rule file" in done.stderr and advice in done.stderr
    assert "RV101" not in done.stderr


@pytest.fixture(scope="module")
def mistake_files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mistakes")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (root / "latin1.rlvp").write_bytes("tool caf\xe9 : read\n".encode("latin-1"))
    (root / "empty.json").write_text("")
    (root / "bad.json").write_text("[1, 2")
    (root / "emptydir").mkdir()
    (root / "empty.rlvp").write_text("")
    (root / "nan.json").write_text('{"reward": NaN, "messages": [{"role": "user", "content": "hi"}]}')
    return {
        "binary": str(root / "binary.bin"),
        "latin1": str(root / "latin1.rlvp"),
        "empty": str(root / "empty.json"),
        "badjson": str(root / "bad.json"),
        "emptydir": str(root / "emptydir"),
        "empty_rules": str(root / "empty.rlvp"),
        "nan_reward": str(root / "nan.json"),
    }


@pytest.mark.parametrize("tool,args", MISTAKES, ids=[f"{t} {' '.join(a)[:60]}" for t, a in MISTAKES])
def test_a_mistake_gets_a_short_answer_and_exit_1_or_2(tool, args, mistake_files, tmp_path):
    """Bad paths, flags, files and values: exit 1 or 2, a message naming the program, no traceback."""
    args = [a.format(**mistake_files) if a.startswith("{") else a for a in args]
    done = run(tool, *args, stdin=b"{not json")
    no_traceback(done)
    assert done.returncode in (1, 2), (done.returncode, done.stdout[-500:], done.stderr[-1000:])
    assert f"rlvp-{tool}" in done.stderr or "error[" in done.stderr, done.stderr[-1000:]
    assert len(done.stderr) < 5000, "the answer is short"


@pytest.mark.parametrize("line", ["// a C comment", "tool a : read  // the reader"])
def test_a_double_slash_comment_gets_the_comment_hint(tmp_path, line):
    """`//` is answered with how comments are written, not with regex syntax."""
    path = tmp_path / "slashes.rlvp"
    path.write_text(line + "\n")
    done = run("compile", path)
    assert done.returncode == 1
    assert "help: comments start with `#`, not `//`" in done.stderr


def test_the_tau_bench_policy_heading_names_the_domain():
    """tau-bench v1's wiki headings (airline, retail) name the domain; other text names none."""
    from rlvp_dsl.readers.tau_bench_v1 import policy_domain

    assert policy_domain("# Airline Agent Policy\n\nThe current time is ...") == "airline"
    assert policy_domain("# Retail agent policy\n\nAs a retail agent ...") == "retail"
    assert policy_domain("You are a helpful agent.") is None and policy_domain(None) is None
