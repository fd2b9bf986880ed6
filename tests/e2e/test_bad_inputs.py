"""Bad input on the three command lines, replayed from a table (issue 17, section 3).

Each `Case` is one command line, the files it finds in its folder, the exit code and the words
its error must say.  Every case asserts the same four things:

* no ``Traceback`` in what it printed;
* its exit code (0 ok, 1 errors in the input, 2 usage or I/O);
* its message, which names the file or field at fault (each fragment of ``says``);
* no file lost: every file of the case's folder is byte-identical afterwards (unless the case
  lists it in ``changes``), and every output it names in ``outputs`` exists in full.

`CASES` runs in-process (``main(argv)``: fast); what needs a real process -- a full device as
standard output, a closed pipe, Ctrl-C during the imports -- runs the console scripts exactly as
pyproject.toml wires them.  To replay a new bad input, add a row.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
RULES = str(REPO / "rules" / "tau2_airline.rlvp")

#: A file the case makes a FIFO (named pipe): reading it would block.
FIFO = object()

TOOLS = json.dumps({"format": "rlvp-tools/1", "tools": [
    {"name": "get", "tags": ["read"], "target": "id", "parameters": ["id"]},
    {"name": "cancel", "tags": ["write", "destructive"], "target": "id", "parameters": ["id"]}]})


def _chat(content=None, arguments=None, reward=1.0) -> dict:
    """One chat episode: a user message (its `content`), one call of `get` (its `arguments`), a result."""
    return {"reward": reward, "messages": [
        {"role": "user", "content": "cancel A" if content is None else content},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "1", "function": {"name": "get", "arguments": {"id": "A"} if arguments is None else arguments}}]},
        {"role": "tool", "tool_call_id": "1", "content": "A found"}]}


def _nested(depth: int) -> str:
    """JSON text of arrays nested `depth` deep (not a Python value: building that would recurse)."""
    return "[" * depth + "]" * depth


def _deep_file(depth: int) -> str:
    return json.dumps(_chat(content="@")).replace('"@"', _nested(depth))


RUNS = "\n".join(json.dumps(_chat(reward=r)) for r in (1.0, 0.0, 1.0)) + "\n"

TRAIN = """\
method = "rlvp"
iterations = 1
out_dir = "{d}/run"
env = "chain4"
env_args = { vary_tokens = false }
rules = "examples/rules/chain4_dense.rlvp"
auto_rules = "examples/rules/chain4_auto.rlvp"
tasks_per_iteration = 2
num_generations = 4
lora_target_modules = ["q_proj", "v_proj", "lm_head"]
"""


def train_config(**changes: str) -> str:
    """The small training config with `changes` (key -> TOML value text) set."""
    text = TRAIN
    for key, value in changes.items():
        text += f"{key} = {value}\n"
    return text


def _derived(data: bytes) -> bool:
    return data.startswith(b"#") and b"tool get" in data and data.endswith(b"\n")


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad command line.  ``{d}`` in `argv`, `says` and text `files` is the case's folder."""

    id: str
    tool: str  # compile | score | train
    argv: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    files: dict = dataclasses.field(default_factory=dict)  # name -> text, bytes or FIFO
    outputs: dict[str, Callable[[bytes], bool]] = dataclasses.field(default_factory=dict)
    changes: tuple[str, ...] = ()  # files the command may rewrite


def _float_fields() -> list[str]:
    from trainer.config import TrainConfig

    return [f.name for f in dataclasses.fields(TrainConfig) if str(f.type).startswith("float")]


CASES = [
    # --- endless or blocking inputs: devices and FIFOs are refused, not read -------------------
    Case("compile-dev-zero", "compile", ("/dev/zero",), 2,
         ("cannot read /dev/zero: a character device, not a regular file",)),
    Case("compile-fifo", "compile", ("{d}/rules.rlvp",), 2,
         ("cannot read {d}/rules.rlvp: a FIFO (named pipe), not a regular file",), {"rules.rlvp": FIFO}),
    Case("compile-include-dev-zero", "compile", ("{d}/r.rlvp",), 1,
         ("{d}/r.rlvp:1:1: error[RV001]: cannot read /dev/zero: a character device",),
         {"r.rlvp": 'include "/dev/zero"\n'}),
    Case("compile-tools-from-fifo", "compile", ("{d}/r.rlvp",), 1,
         ("error[RV002]: cannot read the tool manifest {d}/m.json: a FIFO",),
         {"r.rlvp": 'tools from "m.json"\n', "m.json": FIFO}),
    Case("derive-from-dev-zero", "compile", ("--auto-from-tags", "/dev/zero", "-o", "{d}/out.rlvp"), 2,
         ("cannot read /dev/zero: a character device",)),
    Case("derive-from-fifo", "compile", ("--auto-from-tags", "{d}/tools.json"), 2,
         ("cannot read {d}/tools.json: a FIFO",), {"tools.json": FIFO}),
    Case("check-manifest-dev-zero", "compile", (RULES, "--check", "--manifest", "/dev/zero"), 2,
         ("cannot read /dev/zero: a character device",)),
    Case("score-rules-dev-zero", "score", ("/dev/zero", "{d}/runs.jsonl"), 2,
         ("cannot read /dev/zero: a character device",), {"runs.jsonl": RUNS}),
    Case("score-trajectory-dev-zero", "score", (RULES, "/dev/zero"), 1,
         ("/dev/zero: cannot read: a character device, not a regular file: give a file, or - to read",)),
    Case("score-trajectory-fifo", "score", (RULES, "{d}/runs.jsonl", "{d}/more.jsonl"), 1,
         ("{d}/more.jsonl: cannot read: a FIFO",), {"runs.jsonl": RUNS, "more.jsonl": FIFO}),
    Case("train-config-dev-zero", "train", ("/dev/zero",), 2,
         ("/dev/zero: cannot read the config: a character device, not a regular file: give a regular file",)),
    Case("train-config-fifo", "train", ("{d}/c.toml",), 2, ("{d}/c.toml: cannot read the config: a FIFO",),
         {"c.toml": FIFO}),
    # --- JSON nested too deeply: an error naming the file and where, or a malformed call --------
    Case("score-json-nested-past-the-parser", "score", (RULES, "{d}/deep.json"), 1,
         ("{d}/deep.json:1:", "invalid JSON: arrays and objects nested more than 200 levels deep"),
         {"deep.json": _deep_file(5000)}),
    Case("score-json-nested-past-the-stack", "score", (RULES, "{d}/deep.json"), 1,
         ("{d}/deep.json: messages[0].content[0]", "nested more than 200 levels deep"),
         {"deep.json": _deep_file(990)}),
    Case("score-jsonl-line-nested", "score", (RULES, "{d}/runs.jsonl"), 1,
         ("{d}/runs.jsonl:2:", "nested more than 200 levels deep"),
         {"runs.jsonl": json.dumps(_chat()) + "\n" + _deep_file(3000) + "\n" + json.dumps(_chat()) + "\n"}),
    Case("score-arguments-nested", "score", (RULES, "{d}/run.json"), 0,
         ("1 call had malformed arguments",),
         {"run.json": json.dumps(_chat(arguments="@")).replace('"@"', '{"a": ' + _nested(990) + "}")}),
    Case("score-arguments-text-nested", "score", (RULES, "{d}/run.json"), 0,
         ("1 call had malformed arguments",),
         {"run.json": json.dumps(_chat(arguments='{"a": ' + _nested(5000) + "}"))}),
    Case("derive-validate-nested", "compile",
         ("--auto-from-tags", "{d}/tools.json", "--validate", "{d}/deep.json", "{d}/runs.jsonl", "-o", "{d}/d.rlvp"),
         1, ("{d}/deep.json:1:", "nested more than 200 levels deep", "{d}/d.rlvp: derived 2 tools"),
         {"tools.json": TOOLS, "runs.jsonl": RUNS, "deep.json": _deep_file(5000)}, {"d.rlvp": _derived}),
    # --- what each CLI already refused: kept here so that it stays refused ----------------------
    Case("compile-missing-file", "compile", ("{d}/nope.rlvp",), 2, ("file not found: {d}/nope.rlvp",)),
    Case("compile-a-folder", "compile", ("{d}",), 2, ("is a directory, not a rule file: {d}",)),
    Case("compile-not-utf8", "compile", ("{d}/r.rlvp",), 2, ("{d}/r.rlvp is not UTF-8 text (byte 0)",),
         {"r.rlvp": b"\xff\xfe tool get : read\n"}),
    Case("compile-a-manifest-as-rules", "compile", ("{d}/tools.json",), 2,
         ("{d}/tools.json is not a rule file (it is JSON)",), {"tools.json": TOOLS}),
    Case("compile-output-over-its-input", "compile", ("{d}/r.rlvp", "-o", "{d}/r.rlvp"), 2,
         ("-o {d}/r.rlvp would overwrite the input {d}/r.rlvp",), {"r.rlvp": "tool get : read\n"}),
    Case("compile-empty-output", "compile", (RULES, "-o", ""), 2, ("needs a path (got an empty one)",)),
    Case("compile-unknown-code", "compile", ("--explain-code", "RV999"), 2, ("unknown diagnostic code",)),
    Case("score-arguments-swapped", "score", ("{d}/runs.jsonl", RULES), 2,
         ("is a rule file, not a trajectory",), {"runs.jsonl": RUNS}),
    Case("score-csv-over-its-input", "score", (RULES, "{d}/runs.jsonl", "--csv", "{d}/runs.jsonl"), 2,
         ("--csv {d}/runs.jsonl would overwrite the input",), {"runs.jsonl": RUNS}),
    Case("score-missing-trajectory", "score", (RULES, "{d}/nope.json"), 2,
         ("no such file or folder: {d}/nope.json",)),
    Case("score-empty-trajectory", "score", (RULES, "{d}/e.json"), 1, ("{d}/e.json: the file is empty",),
         {"e.json": ""}),
    Case("score-compressed-trajectory", "score", (RULES, "{d}/r.json"), 1, ("gzip-compressed: decompress it first",),
         {"r.json": b"\x1f\x8b\x08\x00\xff\xff\xff"}),
    Case("score-truncated-trajectory", "score", (RULES, "{d}/r.json"), 1,
         ("{d}/r.json:1:", "is the file truncated?"), {"r.json": json.dumps(_chat())[:-9]}),
    Case("score-html-to-stdout", "score", (RULES, "{d}/runs.jsonl", "--html", "-"), 2,
         ("--html needs a file path",), {"runs.jsonl": RUNS}),
    Case("train-a-rule-file-as-config", "train", (RULES,), 2, ("is a rule file, not a training config",)),
    Case("train-unknown-key", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml:11: unknown key 'lerning_rate'; did you mean 'learning_rate'?",),
         {"c.toml": train_config(lerning_rate="0.1")}),
    Case("train-boolean-as-text", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml:11: 'anneal' must be a boolean, true or false (got \"no\", a string)",),
         {"c.toml": train_config(anneal='"no"')}),
    Case("train-zero-iterations-flag", "train", ("{d}/c.toml", "--iterations", "0"), 2,
         ("--iterations: must be at least 1 (got 0)",), {"c.toml": train_config()}),
    # --- the derived file is written before the evidence table ----------------------------------
    Case("derive-validate-writes-the-file", "compile",
         ("--auto-from-tags", "{d}/tools.json", "--validate", "{d}/runs.jsonl", "-o", "{d}/derived.rlvp"), 0,
         ("{d}/derived.rlvp: derived 2 tools from {d}/tools.json",), {"tools.json": TOOLS, "runs.jsonl": RUNS},
         {"derived.rlvp": _derived}),
    # --- training settings: not a finite number, a seed out of range ---------------------------
    *[Case(f"train-{name}-inf", "train", ("{d}/c.toml",), 1,
           (f"{{d}}/c.toml:11: '{name}' must be a finite number (got inf)",), {"c.toml": train_config(**{name: "inf"})})
      for name in _float_fields()],
    Case("train-beta-nan", "train", ("{d}/c.toml",), 1, ("{d}/c.toml:11: 'beta' must be a finite number (got nan)",),
         {"c.toml": train_config(beta="nan")}),
    Case("train-temperature-minus-inf", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml:11: 'temperature' must be a finite number (got -inf)",),
         {"c.toml": train_config(temperature="-inf")}),
    Case("train-model-init-std-inf", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml: 'init_std' must be a finite number >= 0 (got inf)",),
         {"c.toml": train_config(model_args="{ init_std = inf }")}),
    Case("train-seed-negative-in-config", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml:11: 'seed' must be at least 0 (got -1)",), {"c.toml": train_config(seed="-1")}),
    Case("train-seed-too-large-in-config", "train", ("{d}/c.toml",), 1,
         ("{d}/c.toml:11: 'seed' must be at most 4294967295 (got 4294967296)",),
         {"c.toml": train_config(seed="4294967296")}),
    Case("train-seed-negative-flag", "train", ("{d}/c.toml", "--seed", "-1"), 2,
         ("--seed: must be at least 0 (got -1)",), {"c.toml": train_config()}),
    Case("train-seed-too-large-flag", "train", ("{d}/c.toml", "--seed", "4294967296"), 2,
         ("--seed: must be at most 4294967295 (got 4294967296)",), {"c.toml": train_config()}),
    Case("train-seeds-too-large", "train", ("{d}/c.toml", "--compare", "grpo,rlvp", "--seeds", "0,4294967296"), 2,
         ("--seeds: seed 4294967296 must be at most 4294967295",), {"c.toml": train_config()}),
    # --- a checkpoint that cannot be resumed: named, with how to recover, nothing touched -------
    Case("train-resume-corrupt-checkpoint", "train", ("{d}/c.toml", "--resume"), 1,
         ("{d}/run/checkpoint.pt: not a readable checkpoint (corrupt or cut short", "give --overwrite"),
         {"c.toml": train_config(), "run/checkpoint.pt": b"PK\x03\x04 cut short", "run/metrics.jsonl": '{"iteration": 0}\n'}),
    Case("train-resume-empty-checkpoint", "train", ("{d}/c.toml", "--resume"), 1,
         ("{d}/run/checkpoint.pt: not a readable checkpoint", "give --overwrite"),
         {"c.toml": train_config(), "run/checkpoint.pt": b""}),
    Case("train-resume-checkpoint-of-something-else", "train", ("{d}/c.toml", "--resume"), 1,
         ("{d}/run/checkpoint.pt: not an rlvp-train checkpoint (missing trainable",),
         {"c.toml": train_config(), "run/checkpoint.pt": "torch:{'weights': 1}"}),
]


def _write(folder: Path, files: dict) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:
            os.mkfifo(path)
        elif isinstance(content, str) and content.startswith("torch:"):
            import torch

            torch.save(eval(content.removeprefix("torch:")), path)  # noqa: S307 - a literal of this table
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.replace("{d}", str(folder)).encode())


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(tool: str, argv: list[str]) -> int:
    if tool == "train":
        from trainer.cli import main

        return main.main(argv, standalone_mode=False)
    module = __import__(f"rlvp_dsl.cli.{tool}", fromlist=["main"])
    try:
        return module.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(case: Case, tmp_path: Path, capsys, monkeypatch):
    """The case's exit code and message, no traceback, no file lost or cut short."""
    monkeypatch.chdir(REPO)
    _write(tmp_path, case.files)
    before = _snapshot(tmp_path)
    code = _run(case.tool, [a.format(d=tmp_path) for a in case.argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == case.code, err
    for fragment in case.says:
        assert fragment.format(d=tmp_path) in err, err
    after = _snapshot(tmp_path)
    for name, data in before.items():
        if name not in case.changes:
            assert after.get(name) == data, f"{name} was changed or removed"
    for name, complete in case.outputs.items():
        assert name in after and complete(after[name]), f"{name} is missing or cut short"


@pytest.mark.parametrize("tool,argv,code", [("score", [RULES, "-"], 1), ("compile", ["-"], 2)])
def test_a_device_as_standard_input_is_refused_and_a_file_is_read(tool, argv, code, monkeypatch, capsys):
    """``- < /dev/zero``: one line naming standard input, not a read that never ends; ``- < file`` still reads."""
    with open("/dev/zero") as zero:
        monkeypatch.setattr(sys, "stdin", zero)
        assert _run(tool, argv) == code
    out, err = capsys.readouterr()
    assert "standard input is a device (such as /dev/zero)" in err and "Traceback" not in out + err
    source = REPO / ("examples/data/tau_bench_v1" if tool == "score" else "rules/tau2_airline.rlvp")
    with open(next(source.glob("*.json")) if source.is_dir() else source) as given:
        monkeypatch.setattr(sys, "stdin", given)
        assert _run(tool, argv) == 0, capsys.readouterr().err


def test_every_float_setting_has_an_inf_case():
    """The table covers every float field of TrainConfig (a new one gets its case by itself)."""
    assert {c.id for c in CASES} >= {f"train-{name}-inf" for name in _float_fields()}
    assert {"learning_rate", "temperature", "beta", "epsilon_high"} <= set(_float_fields())


# ---------------------------------------------------------------------------------------------
# the console scripts as installed: a full device, a closed pipe, Ctrl-C during the imports
# ---------------------------------------------------------------------------------------------
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]

#: Put first in a script's process: Ctrl-C arrives while the module STOP_AT is being imported.
_INTERRUPTER = textwrap.dedent("""\
    import sys
    class _CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == {stop!r}:
                raise KeyboardInterrupt
    sys.meta_path.insert(0, _CtrlC())
    """)


def console_script(name: str, args, *, stop_at: str | None = None, **kwargs) -> subprocess.Popen | subprocess.CompletedProcess:
    """Run the console script `name` as pip's wrapper does (``from MODULE import FUNC; sys.exit(FUNC())``,
    the entry point read from pyproject.toml); `stop_at`: Ctrl-C while that module is imported."""
    module, func = SCRIPTS[name].split(":")
    code = (_INTERRUPTER.format(stop=stop_at) if stop_at else "import sys\n") + \
        f"sys.argv[0] = {name!r}\nfrom {module} import {func}\nsys.exit({func}())\n"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, timeout=300, **kwargs)


FULL_DEVICE = [
    ("rlvp-compile", (RULES, "--emit-program")),
    ("rlvp-compile", (RULES, "--json")),
    ("rlvp-score", (RULES, "{d}/runs.jsonl", "--json")),
    ("rlvp-score", (RULES, "{d}/runs.jsonl", "--csv", "-")),
    ("rlvp-score", (RULES, "{d}/runs.jsonl")),
    ("rlvp-train", ("--help",)),
]
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")


@needs_dev_full
@pytest.mark.parametrize("name,args", FULL_DEVICE, ids=lambda x: " ".join(x[-1:]) if isinstance(x, tuple) else x)
def test_a_full_standard_output_is_an_io_error_not_exit_0(name, args, tmp_path, monkeypatch, capsys):
    """`... > /dev/full` (the entry point in-process): one error line naming standard output, exit 2."""
    import importlib

    (tmp_path / "runs.jsonl").write_text(RUNS)
    module, func = SCRIPTS[name].split(":")
    entry = getattr(importlib.import_module(module), func)
    full = open("/dev/full", "w")
    monkeypatch.setattr(sys, "stdout", full)
    monkeypatch.setattr(sys, "argv", [name, *(a.format(d=tmp_path) for a in args)])
    with pytest.raises(SystemExit) as exited:
        entry()
    monkeypatch.undo()
    full.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert exited.value.code == 2, err
    assert f"{name}: error: cannot write to standard output: {os.strerror(errno.ENOSPC)}" in err


@needs_dev_full
def test_rlvp_score_csv_to_a_full_disk_exits_2_not_0(tmp_path):
    """``rlvp-score R T --csv - > /dev/full`` as a process: the CSV cannot be written, and it says so (exit 2)."""
    (tmp_path / "runs.jsonl").write_text(RUNS)
    with open("/dev/full", "w") as full:
        done = console_script("rlvp-score", [RULES, tmp_path / "runs.jsonl", "--csv", "-"], stdout=full,
                              stderr=subprocess.PIPE, text=True)
    assert "Traceback" not in done.stderr and done.returncode == 2, done.stderr
    assert "rlvp-score: error: cannot write to standard output" in done.stderr


@pytest.mark.parametrize("name,stop_at", [("rlvp-compile", "lark"), ("rlvp-score", "lark"),
                                          ("rlvp-compile", "rlvp_dsl.pipeline"), ("rlvp-train", "torch"),
                                          ("rlvp-train", "click")])
def test_ctrl_c_during_the_imports_exits_130_quietly(name, stop_at):
    """Ctrl-C while a console script loads its libraries: exit 130, nothing printed."""
    done = console_script(name, ["--version"], stop_at=stop_at, capture_output=True, text=True)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "" and done.stdout == ""


def _closed_pipe_run(name: str, args) -> int:
    """Run a console script whose standard output and error are a pipe nobody reads (``2>&1 | head``
    after head has gone); its exit status."""
    read, write = os.pipe()
    os.close(read)
    try:
        return console_script(name, args, stdout=write, stderr=write).returncode
    finally:
        os.close(write)


def test_a_closed_pipe_does_not_lose_the_derived_rule_file(tmp_path):
    """``rlvp-compile --auto-from-tags M -o F --validate T 2>&1 | head``: F is written in full, exit 0."""
    (tmp_path / "tools.json").write_text(TOOLS)
    (tmp_path / "runs.jsonl").write_text(RUNS)
    out = tmp_path / "derived.rlvp"
    code = _closed_pipe_run("rlvp-compile", ["--auto-from-tags", tmp_path / "tools.json", "--validate",
                                             tmp_path / "runs.jsonl", "-o", out])
    assert code == 0 and out.is_file() and _derived(out.read_bytes())


def test_a_closed_pipe_does_not_lose_the_csv_after_the_html_report(tmp_path):
    """``rlvp-score R T --html H --csv C 2>&1 | head``: the line about H does not stop C being written."""
    (tmp_path / "runs.jsonl").write_text(RUNS)
    code = _closed_pipe_run("rlvp-score", [RULES, tmp_path / "runs.jsonl", "--html", tmp_path / "r.html",
                                           "--csv", tmp_path / "e.csv"])
    assert code == 0
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
    assert (tmp_path / "e.csv").read_text().count("\n") == 4  # the header and three episodes
