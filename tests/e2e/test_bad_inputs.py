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
from mutation import HOWS, mutate
import tomllib

REPO = Path(__file__).resolve().parents[2]
RULES = str(REPO / "rules" / "tau2_airline.rlvp")

#: A file the case makes a FIFO (named pipe): reading it would block.
FIFO = object()

TOOLS = json.dumps(
    {
        "format": "rlvp-tools/1",
        "tools": [
            {"name": "get", "tags": ["read"], "target": "id", "parameters": ["id"]},
            {"name": "cancel", "tags": ["write", "destructive"], "target": "id", "parameters": ["id"]},
        ],
    }
)


def _chat(content=None, arguments=None, reward=1.0) -> dict:
    """One chat episode: a user message (its `content`), one call of `get` (its `arguments`), a result."""
    return {
        "reward": reward,
        "messages": [
            {"role": "user", "content": "cancel A" if content is None else content},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "1",
                        "function": {"name": "get", "arguments": {"id": "A"} if arguments is None else arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "1", "content": "A found"},
        ],
    }


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
    Case(
        "compile-dev-zero",
        "compile",
        ("/dev/zero",),
        2,
        ("cannot read /dev/zero: a character device, not a regular file",),
    ),
    Case(
        "compile-fifo",
        "compile",
        ("{d}/rules.rlvp",),
        2,
        ("cannot read {d}/rules.rlvp: a FIFO (named pipe), not a regular file",),
        {"rules.rlvp": FIFO},
    ),
    Case(
        "compile-include-dev-zero",
        "compile",
        ("{d}/r.rlvp",),
        1,
        ("{d}/r.rlvp:1:1: error[RV001]: cannot read /dev/zero: a character device",),
        {"r.rlvp": 'include "/dev/zero"\n'},
    ),
    Case(
        "compile-tools-from-fifo",
        "compile",
        ("{d}/r.rlvp",),
        1,
        ("error[RV002]: cannot read the tool manifest {d}/m.json: a FIFO",),
        {"r.rlvp": 'tools from "m.json"\n', "m.json": FIFO},
    ),
    Case(
        "derive-from-dev-zero",
        "compile",
        ("--auto-from-tags", "/dev/zero", "-o", "{d}/out.rlvp"),
        2,
        ("cannot read /dev/zero: a character device",),
    ),
    Case(
        "derive-from-fifo",
        "compile",
        ("--auto-from-tags", "{d}/tools.json"),
        2,
        ("cannot read {d}/tools.json: a FIFO",),
        {"tools.json": FIFO},
    ),
    Case(
        "check-manifest-dev-zero",
        "compile",
        (RULES, "--check", "--manifest", "/dev/zero"),
        2,
        ("cannot read /dev/zero: a character device",),
    ),
    Case(
        "score-rules-dev-zero",
        "score",
        ("/dev/zero", "{d}/runs.jsonl"),
        2,
        ("cannot read /dev/zero: a character device",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-trajectory-dev-zero",
        "score",
        (RULES, "/dev/zero"),
        1,
        ("/dev/zero: cannot read: a character device, not a regular file: give a file, or - to read",),
    ),
    Case(
        "score-trajectory-fifo",
        "score",
        (RULES, "{d}/runs.jsonl", "{d}/more.jsonl"),
        1,
        ("{d}/more.jsonl: cannot read: a FIFO",),
        {"runs.jsonl": RUNS, "more.jsonl": FIFO},
    ),
    Case(
        "train-config-dev-zero",
        "train",
        ("/dev/zero",),
        2,
        ("/dev/zero: cannot read the config: a character device, not a regular file: give a regular file",),
    ),
    Case(
        "train-config-fifo",
        "train",
        ("{d}/c.toml",),
        2,
        ("{d}/c.toml: cannot read the config: a FIFO",),
        {"c.toml": FIFO},
    ),
    # --- JSON nested too deeply: an error naming the file and where, or a malformed call --------
    Case(
        "score-json-nested-past-the-parser",
        "score",
        (RULES, "{d}/deep.json"),
        1,
        ("{d}/deep.json:1:", "invalid JSON: arrays and objects nested more than 200 levels deep"),
        {"deep.json": _deep_file(5000)},
    ),
    Case(
        "score-json-nested-past-the-stack",
        "score",
        (RULES, "{d}/deep.json"),
        1,
        ("{d}/deep.json: messages[0].content[0]", "nested more than 200 levels deep"),
        {"deep.json": _deep_file(990)},
    ),
    Case(
        "score-jsonl-line-nested",
        "score",
        (RULES, "{d}/runs.jsonl"),
        1,
        ("{d}/runs.jsonl:2:", "nested more than 200 levels deep"),
        {"runs.jsonl": json.dumps(_chat()) + "\n" + _deep_file(3000) + "\n" + json.dumps(_chat()) + "\n"},
    ),
    Case(
        "score-arguments-nested",
        "score",
        (RULES, "{d}/run.json"),
        0,
        ("1 call had malformed arguments",),
        {"run.json": json.dumps(_chat(arguments="@")).replace('"@"', '{"a": ' + _nested(990) + "}")},
    ),
    Case(
        "score-arguments-text-nested",
        "score",
        (RULES, "{d}/run.json"),
        0,
        ("1 call had malformed arguments",),
        {"run.json": json.dumps(_chat(arguments='{"a": ' + _nested(5000) + "}"))},
    ),
    Case(
        "derive-validate-nested",
        "compile",
        ("--auto-from-tags", "{d}/tools.json", "--validate", "{d}/deep.json", "{d}/runs.jsonl", "-o", "{d}/d.rlvp"),
        1,
        ("{d}/deep.json:1:", "nested more than 200 levels deep", "{d}/d.rlvp: derived 2 tools"),
        {"tools.json": TOOLS, "runs.jsonl": RUNS, "deep.json": _deep_file(5000)},
        {"d.rlvp": _derived},
    ),
    # --- what each CLI already refused: kept here so that it stays refused ----------------------
    Case("compile-missing-file", "compile", ("{d}/nope.rlvp",), 2, ("file not found: {d}/nope.rlvp",)),
    Case("compile-a-folder", "compile", ("{d}",), 2, ("is a directory, not a rule file: {d}",)),
    Case(
        "compile-not-utf8",
        "compile",
        ("{d}/r.rlvp",),
        2,
        ("{d}/r.rlvp is not UTF-8 text: line 1, column 1 (byte 0xff)",),
        {"r.rlvp": b"\xff\xfe tool get : read\n"},
    ),
    Case(
        "compile-a-manifest-as-rules",
        "compile",
        ("{d}/tools.json",),
        2,
        ("{d}/tools.json is not a rule file (it is JSON)",),
        {"tools.json": TOOLS},
    ),
    Case(
        "compile-output-over-its-input",
        "compile",
        ("{d}/r.rlvp", "-o", "{d}/r.rlvp"),
        2,
        ("-o {d}/r.rlvp would overwrite the input {d}/r.rlvp",),
        {"r.rlvp": "tool get : read\n"},
    ),
    Case("compile-empty-output", "compile", (RULES, "-o", ""), 2, ("needs a path (got an empty one)",)),
    Case("compile-unknown-code", "compile", ("--explain-code", "RV999"), 2, ("unknown diagnostic code",)),
    Case(
        "score-arguments-swapped",
        "score",
        ("{d}/runs.jsonl", RULES),
        2,
        ("is a rule file, not a trajectory",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-csv-over-its-input",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "{d}/runs.jsonl"),
        2,
        ("--csv {d}/runs.jsonl would overwrite the input",),
        {"runs.jsonl": RUNS},
    ),
    Case("score-missing-trajectory", "score", (RULES, "{d}/nope.json"), 2, ("no such file or folder: {d}/nope.json",)),
    Case(
        "score-empty-trajectory", "score", (RULES, "{d}/e.json"), 1, ("{d}/e.json: the file is empty",), {"e.json": ""}
    ),
    Case(
        "score-compressed-trajectory",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("gzip-compressed: decompress it first",),
        {"r.json": b"\x1f\x8b\x08\x00\xff\xff\xff"},
    ),
    Case(
        "score-truncated-trajectory",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json:1:", "is the file truncated?"),
        {"r.json": json.dumps(_chat())[:-9]},
    ),
    Case(
        "score-html-to-stdout",
        "score",
        (RULES, "{d}/runs.jsonl", "--html", "-"),
        2,
        ("--html needs a file path",),
        {"runs.jsonl": RUNS},
    ),
    Case("train-a-rule-file-as-config", "train", (RULES,), 2, ("is a rule file, not a training config",)),
    Case(
        "train-unknown-key",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: unknown key 'lerning_rate'; did you mean 'learning_rate'?",),
        {"c.toml": train_config(lerning_rate="0.1")},
    ),
    Case(
        "train-boolean-as-text",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: 'anneal' must be a boolean, true or false (got \"no\", a string)",),
        {"c.toml": train_config(anneal='"no"')},
    ),
    Case(
        "train-zero-iterations-flag",
        "train",
        ("{d}/c.toml", "--iterations", "0"),
        2,
        ("--iterations: must be at least 1 (got 0)",),
        {"c.toml": train_config()},
    ),
    # --- the derived file is written before the evidence table ----------------------------------
    Case(
        "derive-validate-writes-the-file",
        "compile",
        ("--auto-from-tags", "{d}/tools.json", "--validate", "{d}/runs.jsonl", "-o", "{d}/derived.rlvp"),
        0,
        ("{d}/derived.rlvp: derived 2 tools from {d}/tools.json",),
        {"tools.json": TOOLS, "runs.jsonl": RUNS},
        {"derived.rlvp": _derived},
    ),
    # --- training settings: not a finite number, a seed out of range ---------------------------
    *[
        Case(
            f"train-{name}-inf",
            "train",
            ("{d}/c.toml",),
            1,
            (f"{{d}}/c.toml:11: '{name}' must be a finite number (got inf)",),
            {"c.toml": train_config(**{name: "inf"})},
        )
        for name in _float_fields()
    ],
    Case(
        "train-beta-nan",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: 'beta' must be a finite number (got nan)",),
        {"c.toml": train_config(beta="nan")},
    ),
    Case(
        "train-temperature-minus-inf",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: 'temperature' must be a finite number (got -inf)",),
        {"c.toml": train_config(temperature="-inf")},
    ),
    Case(
        "train-model-init-std-inf",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: model_args: 'init_std' must be a finite number >= 0 (got inf)",),
        {"c.toml": train_config(model_args="{ init_std = inf }")},
    ),
    Case(
        "train-seed-negative-in-config",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: 'seed' must be at least 0 (got -1)",),
        {"c.toml": train_config(seed="-1")},
    ),
    Case(
        "train-seed-too-large-in-config",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11: 'seed' must be at most 4294967295 (got 4294967296)",),
        {"c.toml": train_config(seed="4294967296")},
    ),
    Case(
        "train-seed-negative-flag",
        "train",
        ("{d}/c.toml", "--seed", "-1"),
        2,
        ("--seed: must be at least 0 (got -1)",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seed-too-large-flag",
        "train",
        ("{d}/c.toml", "--seed", "4294967296"),
        2,
        ("--seed: must be at most 4294967295 (got 4294967296)",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seeds-too-large",
        "train",
        ("{d}/c.toml", "--compare", "grpo,rlvp", "--seeds", "0,4294967296"),
        2,
        ("--seeds: seed 4294967296 must be at most 4294967295",),
        {"c.toml": train_config()},
    ),
    # --- a checkpoint that cannot be resumed: named, with how to recover, nothing touched -------
    Case(
        "train-resume-corrupt-checkpoint",
        "train",
        ("{d}/c.toml", "--resume"),
        1,
        ("{d}/run/checkpoint.pt: not a readable checkpoint (corrupt or cut short", "give --overwrite"),
        {
            "c.toml": train_config(),
            "run/checkpoint.pt": b"PK\x03\x04 cut short",
            "run/metrics.jsonl": '{"iteration": 0}\n',
        },
    ),
    Case(
        "train-resume-empty-checkpoint",
        "train",
        ("{d}/c.toml", "--resume"),
        1,
        ("{d}/run/checkpoint.pt: not a readable checkpoint", "give --overwrite"),
        {"c.toml": train_config(), "run/checkpoint.pt": b""},
    ),
    Case(
        "train-resume-checkpoint-of-something-else",
        "train",
        ("{d}/c.toml", "--resume"),
        1,
        ("{d}/run/checkpoint.pt: not an rlvp-train checkpoint (missing trainable",),
        {"c.toml": train_config(), "run/checkpoint.pt": "torch:{'weights': 1}"},
    ),
]


MANIFEST = str(REPO / "examples" / "data" / "tau2" / "airline" / "tools_manifest.json")

#: Flags, flag combinations and output paths of the three command lines (the new-user trial of issue 17).
CASES += [
    # --- rlvp-score: flags ------------------------------------------------------------------------
    Case(
        "score-format-unknown",
        "score",
        (RULES, "{d}/runs.jsonl", "--format", "nope"),
        2,
        ("argument --format: invalid choice: 'nope'",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-limit-negative",
        "score",
        (RULES, "{d}/runs.jsonl", "--limit", "-1"),
        2,
        ("--limit: must be at least 0 (got -1)",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-limit-text",
        "score",
        (RULES, "{d}/runs.jsonl", "--limit", "abc"),
        2,
        ("--limit: must be a whole number (got 'abc')",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-by-unknown",
        "score",
        (RULES, "{d}/runs.jsonl", "--by", "nope"),
        2,
        ("argument --by: invalid choice: 'nope'",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-domain-absent",
        "score",
        (RULES, "{d}/runs.jsonl", "--domain", "nowhere"),
        1,
        ("no episodes of domain nowhere (found: 3 with no domain recorded)",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-csv-a-folder",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "{d}"),
        2,
        ("cannot write {d}: Is a directory",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-html-a-folder",
        "score",
        (RULES, "{d}/runs.jsonl", "--html", "{d}"),
        2,
        ("cannot write {d}: Is a directory",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-csv-dev-full",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "/dev/full"),
        2,
        ("cannot write /dev/full: No space left on device",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-html-dev-full",
        "score",
        (RULES, "{d}/runs.jsonl", "--html", "/dev/full"),
        2,
        ("cannot write /dev/full: No space left on device",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-csv-in-a-new-folder",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "{d}/new/e.csv"),
        0,
        ("wrote 3 episodes to {d}/new/e.csv",),
        {"runs.jsonl": RUNS},
        {"new/e.csv": lambda b: b.count(b"\n") == 4},
    ),
    Case(
        "score-error-prefix-without-format",
        "score",
        (RULES, "{d}/runs.jsonl", "--error-prefix", "ERROR"),
        2,
        ("--error-prefix/--error-flag need --format",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-error-prefix-empty",
        "score",
        (RULES, "{d}/runs.jsonl", "--format", "openai", "--error-prefix", ""),
        2,
        ("--error-prefix: needs some text (got an empty one)",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-error-flag-empty",
        "score",
        (RULES, "{d}/runs.jsonl", "--format", "openai", "--error-flag", ""),
        2,
        ("--error-flag: needs a field name (got an empty one)",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-html-over-its-input",
        "score",
        (RULES, "{d}/runs.jsonl", "--html", "{d}/runs.jsonl"),
        2,
        ("--html {d}/runs.jsonl would overwrite the input",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-html-over-the-rules",
        "score",
        ("{d}/r.rlvp", "{d}/runs.jsonl", "--html", "{d}/r.rlvp"),
        2,
        ("--html {d}/r.rlvp would overwrite the input {d}/r.rlvp",),
        {"runs.jsonl": RUNS, "r.rlvp": "tool get : read\n"},
    ),
    Case(
        "score-csv-over-the-rules",
        "score",
        ("{d}/r.rlvp", "{d}/runs.jsonl", "--csv", "{d}/r.rlvp"),
        2,
        ("--csv {d}/r.rlvp would overwrite the input {d}/r.rlvp",),
        {"runs.jsonl": RUNS, "r.rlvp": "tool get : read\n"},
    ),
    Case("score-no-trajectories", "score", (RULES,), 2, ("the following arguments are required: trajectories",)),
    Case("score-no-arguments", "score", (), 2, ("the following arguments are required: rules, trajectories",)),
    Case(
        "score-unknown-flag",
        "score",
        (RULES, "{d}/runs.jsonl", "--bogus"),
        2,
        ("unrecognized arguments: --bogus",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-explain-and-json",
        "score",
        (RULES, "{d}/runs.jsonl", "--explain", "--json"),
        2,
        ("it does not go with --explain",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "score-csv-stdout-and-json",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "-", "--json"),
        2,
        ("--csv - writes the CSV to stdout: it does not go with --json",),
        {"runs.jsonl": RUNS},
    ),
    Case("score-stdin-twice", "score", (RULES, "-", "-"), 2, ("standard input (-) can be read once",)),
    Case(
        "score-trajectory-as-rules",
        "score",
        ("{d}/runs.jsonl", "{d}/runs.jsonl"),
        2,
        ("{d}/runs.jsonl is not a rule file (it looks like a trajectory)",),
        {"runs.jsonl": RUNS},
    ),
    Case("score-empty-rules-path", "score", ("", "{d}/runs.jsonl"), 2, ("rule file not found",), {"runs.jsonl": RUNS}),
    Case("score-empty-trajectory-path", "score", (RULES, ""), 2, ("no such file or folder",)),
    Case(
        "score-folder-of-nothing",
        "score",
        (RULES, "{d}/empty"),
        1,
        ("{d}/empty: a folder with no trajectory files",),
        {"empty/README.txt": "no trajectories here\n"},
    ),
    Case(
        "score-rules-with-errors",
        "score",
        ("{d}/r.rlvp", "{d}/runs.jsonl"),
        1,
        ("{d}/r.rlvp:1:",),
        {"runs.jsonl": RUNS, "r.rlvp": "violation v (-1) {\n"},
    ),
    Case(
        "score-rules-not-utf8",
        "score",
        ("{d}/r.rlvp", "{d}/runs.jsonl"),
        2,  # an I/O error, as rlvp-compile says of the same file
        ("rlvp-score: error: {d}/r.rlvp is not UTF-8 text: line 1, column 6 (byte 0xff)",),
        {"runs.jsonl": RUNS, "r.rlvp": b"tool \xff : read\n"},
    ),
    Case("score-rules-a-folder", "score", ("{d}", "{d}/runs.jsonl"), 2, ("{d}",), {"runs.jsonl": RUNS}),
    Case(
        "score-jsonl-one-bad-line-kept-going",
        "score",
        (RULES, "{d}/runs.jsonl", "--csv", "{d}/e.csv"),
        1,
        ("{d}/runs.jsonl:2:",),
        {"runs.jsonl": json.dumps(_chat()) + "\n{oops\n" + json.dumps(_chat()) + "\n"},
    ),
    Case("score-binary-trajectory", "score", (RULES, "{d}/r.json"), 1, ("{d}/r.json",), {"r.json": bytes(range(256))}),
    Case(
        "score-utf16-trajectory",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json",),
        {"r.json": json.dumps(_chat()).encode("utf-16")},
    ),
    Case(
        "score-reward-text",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json", "reward"),
        {"r.json": json.dumps(_chat(reward="1"))},
    ),
    Case(
        "score-reward-nan",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json", "reward"),
        {"r.json": json.dumps(_chat()).replace('"reward": 1.0', '"reward": NaN')},
    ),
    Case(
        "score-reward-400-digits",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json", "reward"),
        {"r.json": json.dumps(_chat()).replace('"reward": 1.0', '"reward": 1' + "0" * 400)},
    ),
    Case(
        "score-messages-not-a-list",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json",),
        {"r.json": json.dumps({"reward": 1.0, "messages": "hello"})},
    ),
    Case(
        "score-message-unknown-role",
        "score",
        (RULES, "{d}/r.json"),
        1,
        ("{d}/r.json", "messages[0]", "robot"),
        {"r.json": json.dumps({"reward": 1.0, "messages": [{"role": "robot", "content": "x"}]})},
    ),
    Case(
        "score-tau2-as-swe-agent",
        "score",
        (RULES, str(REPO / "examples/episodes/airline_tau2_results.json"), "--format", "swe_agent"),
        1,
        ("airline_tau2_results.json",),
    ),
    Case("score-swe-traj-empty-object", "score", (RULES, "{d}/s.traj"), 1, ("{d}/s.traj", "neither"), {"s.traj": "{}"}),
    # --- rlvp-compile: flags ----------------------------------------------------------------------
    Case("compile-no-files", "compile", (), 2, ("no rule files given",)),
    Case(
        "compile-max-diagnostics-negative",
        "compile",
        (RULES, "--max-diagnostics", "-1"),
        2,
        ("--max-diagnostics: must be at least 1 (got -1)",),
    ),
    Case(
        "compile-max-diagnostics-text",
        "compile",
        (RULES, "--max-diagnostics", "abc"),
        2,
        ("--max-diagnostics: must be a whole number (got 'abc')",),
    ),
    Case(
        "compile-examples-without-check",
        "compile",
        (RULES, "--examples", "5"),
        2,
        ("--manifest and --examples go with --check",),
    ),
    Case(
        "compile-examples-text",
        "compile",
        (RULES, "--check", "--examples", "abc"),
        2,
        ("--examples: must be a whole number (got 'abc')",),
    ),
    Case(
        "compile-output-dev-full",
        "compile",
        (RULES, "-o", "/dev/full"),
        2,
        ("cannot write /dev/full: No space left on device",),
    ),
    Case("compile-output-a-folder", "compile", (RULES, "-o", "{d}"), 2, ("cannot write {d}: Is a directory",)),
    Case(
        "compile-output-in-a-new-folder",
        "compile",
        (RULES, "-o", "{d}/new/p.json"),
        0,
        ("wrote the compiled program",),
        outputs={"new/p.json": lambda b: json.loads(b) is not None},
    ),
    Case(
        "derive-from-a-trajectory",
        "compile",
        ("--auto-from-tags", "{d}/runs.jsonl"),
        2,
        ("{d}/runs.jsonl is a trajectory, not a tool manifest",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "derive-from-a-rule-file",
        "compile",
        ("--auto-from-tags", "{d}/r.rlvp"),
        2,
        ("{d}/r.rlvp is a rule file, not a tool manifest",),
        {"r.rlvp": "tool get : read\n"},
    ),
    Case(
        "derive-from-missing",
        "compile",
        ("--auto-from-tags", "{d}/nope.json"),
        2,
        ("manifest not found: {d}/nope.json",),
    ),
    Case(
        "derive-from-a-folder", "compile", ("--auto-from-tags", "{d}"), 2, ("{d} is a directory, not a manifest file",)
    ),
    Case(
        "derive-from-bad-json",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json:1:",),
        {"m.json": '{"tools": ['},
    ),
    Case("derive-from-empty", "compile", ("--auto-from-tags", "{d}/m.json"), 1, ("{d}/m.json",), {"m.json": ""}),
    Case(
        "derive-from-not-utf8",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json", "UTF-8"),
        {"m.json": b'{"tools": ["\xff"]}'},
    ),
    Case(
        "derive-from-unknown-shape",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json: unknown manifest format",),
        {"m.json": '{"a": 1}'},
    ),
    Case(
        "derive-tools-not-a-list",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json",),
        {"m.json": '{"format": "rlvp-tools/1", "tools": 5}'},
    ),
    Case(
        "derive-tool-without-name",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json", "name"),
        {"m.json": '{"format": "rlvp-tools/1", "tools": [{"tags": ["read"]}]}'},
    ),
    Case(
        "derive-tool-tags-not-a-list",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json", "tags"),
        {"m.json": '{"format": "rlvp-tools/1", "tools": [{"name": "get", "tags": "read"}]}'},
    ),
    Case(
        "derive-deep-manifest",
        "compile",
        ("--auto-from-tags", "{d}/m.json"),
        1,
        ("{d}/m.json",),
        {"m.json": '{"tools": ' + _nested(100_000) + "}"},
    ),
    Case(
        "derive-output-dev-full",
        "compile",
        ("--auto-from-tags", MANIFEST, "-o", "/dev/full"),
        2,
        ("cannot write /dev/full: No space left on device",),
    ),
    Case(
        "derive-over-a-hand-written-file",
        "compile",
        ("--auto-from-tags", "{d}/tools.json", "-o", "{d}/mine.rlvp"),
        2,
        ("-o {d}/mine.rlvp exists and was not derived by rlvp-compile --auto-from-tags",),
        {"tools.json": TOOLS, "mine.rlvp": "tool get : read\n"},
    ),
    Case(
        "derive-validate-missing",
        "compile",
        ("--auto-from-tags", MANIFEST, "--validate", "{d}/nope.json"),
        2,
        ("no such file or folder: {d}/nope.json",),
    ),
    Case(
        "derive-validate-dev-zero",
        "compile",
        ("--auto-from-tags", MANIFEST, "--validate", "/dev/zero"),
        1,
        ("/dev/zero: cannot read: a character device",),
    ),
    Case(
        "derive-drop-harmful-without-validate",
        "compile",
        ("--auto-from-tags", MANIFEST, "--drop-harmful"),
        2,
        ("--drop-harmful needs --validate TRAJECTORIES",),
    ),
    Case(
        "compile-validate-without-derive",
        "compile",
        (RULES, "--validate", "{d}/runs.jsonl"),
        2,
        ("--validate and --drop-harmful go with --auto-from-tags MANIFEST",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "compile-drop-harmful-without-derive",
        "compile",
        (RULES, "--drop-harmful"),
        2,
        ("--validate and --drop-harmful go with --auto-from-tags MANIFEST",),
    ),
    Case(
        "compile-manifest-without-check",
        "compile",
        (RULES, "--manifest", MANIFEST),
        2,
        ("--manifest and --examples go with --check",),
    ),
    Case(
        "check-manifest-a-trajectory",
        "compile",
        (RULES, "--check", "--manifest", "{d}/runs.jsonl"),
        1,
        ("{d}/runs.jsonl:2:1: invalid JSON",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "check-manifest-missing",
        "compile",
        (RULES, "--check", "--manifest", "{d}/nope.json"),
        2,
        ("manifest not found: {d}/nope.json",),
    ),
    Case(
        "check-manifest-a-folder",
        "compile",
        (RULES, "--check", "--manifest", "{d}"),
        2,
        ("{d} is a directory, not a manifest file",),
    ),
    Case(
        "check-with-json",
        "compile",
        (RULES, "--test", "--check", "--json"),
        2,
        ("--check prints a text report: it does not go with --json",),
    ),
    Case(
        "check-examples-huge",
        "compile",
        (RULES, "--check", "--examples", "1000000000"),
        2,
        ("--examples must be between 1 and 100,000 (got 1,000,000,000)",),
    ),
    Case(
        "check-examples-zero",
        "compile",
        (RULES, "--check", "--examples", "0"),
        2,
        ("--examples must be between 1 and 100,000 (got 0)",),
    ),
    Case(
        "test-block-unclosed",
        "compile",
        ("--test", "{d}/t.rlvp"),
        1,
        ("{d}/t.rlvp:6:3: error[RV101]",),
        {"t.rlvp": 'tool get : read\nviolation v (-1) {\n on call get\n}\ntest "x" {\n  call get\n'},
    ),
    Case(
        "test-block-unknown-rule",
        "compile",
        ("--test", "{d}/t.rlvp"),
        1,
        ("{d}/t.rlvp:",),
        {
            "t.rlvp": 'tool get : read\nviolation v (-1) {\n on call get\n}\ntest "x" {\n  episode {\n'
            "    call get ok\n  }\n  expect nope -1\n}\n"
        },
    ),
    Case(
        "explain-code-missing-value",
        "compile",
        ("--explain-code",),
        2,
        ("argument --explain-code: expected one argument",),
    ),
    Case("explain-code-empty", "compile", ("--explain-code", ""), 2, ("--explain-code: needs a code",)),
    Case(
        "compile-force-without-derive",
        "compile",
        (RULES, "--force"),
        2,
        ("--force goes with --auto-from-tags MANIFEST -o PATH",),
    ),
    Case("compile-test-a-folder", "compile", ("--test", "{d}"), 2, ("is a directory, not a rule file: {d}",)),
    Case("compile-one-missing-of-two", "compile", (RULES, "{d}/nope.rlvp"), 2, ("file not found: {d}/nope.rlvp",)),
    Case("compile-unknown-flag", "compile", (RULES, "--bogus"), 2, ("unrecognized arguments: --bogus",)),
    # --- rule files broken at each construct ---------------------------------------------------------
    *[
        Case(f"compile-rules-{name}", "compile", ("{d}/r.rlvp",), 1, (f"{{d}}/r.rlvp:{where}",), {"r.rlvp": text})
        for name, where, text in [
            ("tool-target-missing", "2:1", "tool get : read target\n"),
            ("violation-no-weight", "2:", "tool get : read\nviolation v {\n on call get\n}\n"),
            ("violation-weight-text", "2:", "tool get : read\nviolation v (abc) {\n on call get\n}\n"),
            ("violation-weight-nan", "2:", "tool get : read\nviolation v (nan) {\n on call get\n}\n"),
            ("violation-weight-inf", "2:", "tool get : read\nviolation v (-1e999) {\n on call get\n}\n"),
            ("violation-unclosed", "", "tool get : read\nviolation v (-1) {\n on call get\n"),
            ("violation-no-on", "3:1", "tool get : read\nviolation v (-1) {\n}\n"),
            ("violation-unknown-tool", "3:", "tool get : read\nviolation v (-1) {\n on call gte\n}\n"),
            ("violation-unknown-tag", "3:", "tool get : read\nviolation v (-1) {\n on call tag wirte\n}\n"),
            (
                "unless-unclosed-paren",
                "5:1",
                "tool get : read\nviolation v (-1) {\n on call get\n unless seen (call get ok\n}\n",
            ),
            (
                "regex-unbalanced",
                "4:",
                "tool get : read\nviolation v (-1) {\n on call get\n unless seen (user says /(/)\n}\n",
            ),
            (
                "regex-unterminated",
                "4:",
                "tool get : read\nviolation v (-1) {\n on call get\n unless seen (user says /yes)\n}\n",
            ),
            (
                "regex-bad-flag",
                "4:",
                "tool get : read\nviolation v (-1) {\n on call get\n unless seen (user says /yes/q)\n}\n",
            ),
            ("duplicate-rule", "3:", "tool get : read\nblind_destructive (-0.3)\nblind_destructive (-0.3)\n"),
            ("unknown-construct", "1:1", "frobnicate x (-1)\n"),
            ("stray-brace", "1:", "}\n"),
            ("repeat-error-weight-positive", "1:", "repeat_error (0.3)\n"),
            ("include-missing", "1:", 'include "nope.rlvp"\n'),
            ("include-cycle", "", 'include "r.rlvp"\ntool get : read\n'),
            ("include-not-a-string", "1:", "include nope\n"),
            ("tools-from-missing", "1:", 'tools from "nope.json"\n'),
            ("tools-from-bad-json", "1:", 'tools from "r.rlvp"\n'),
            ("nul-byte", "1:", "tool get : read\x00\n"),
            ("only-a-comment-cut", "", "# just a comment\nviolation"),
        ]
    ],
    # --- rlvp-train: flags and config values ------------------------------------------------------
    Case("train-no-config", "train", (), 2, ("Missing argument 'CONFIG'",)),
    Case("train-config-missing", "train", ("{d}/nope.toml",), 2, ("CONFIG: File '{d}/nope.toml' does not exist",)),
    Case("train-config-a-folder", "train", ("{d}",), 2, ("is a directory",)),
    Case("train-config-a-trajectory", "train", ("{d}/runs.jsonl",), 1, ("{d}/runs.jsonl:1:1",), {"runs.jsonl": RUNS}),
    Case("train-config-empty", "train", ("{d}/c.toml",), 1, ("{d}/c.toml",), {"c.toml": ""}),
    Case(
        "train-config-not-utf8",
        "train",
        ("{d}/c.toml",),
        2,
        ("{d}/c.toml: not UTF-8 text: line 1, column 11 (byte 0xff)",),
        {"c.toml": b'method = "\xff"\n'},
    ),
    Case(
        "train-config-binary",
        "train",
        ("{d}/c.toml",),
        2,
        ("{d}/c.toml: not UTF-8 text",),
        {"c.toml": bytes(range(256))},
    ),
    Case("train-config-cut", "train", ("{d}/c.toml",), 1, ("{d}/c.toml:",), {"c.toml": TRAIN[:40]}),
    Case(
        "train-config-duplicate-key",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/c.toml:11",),
        {"c.toml": train_config(iterations="2")},
    ),
    Case(
        "train-method-unknown-flag",
        "train",
        ("{d}/c.toml", "--method", "nope"),
        2,
        ("--method: unknown method 'nope' (expected one of",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-method-unknown-config",
        "train",
        ("{d}/c.toml",),
        1,
        ("'method' must be one of",),
        {"c.toml": TRAIN.replace('"rlvp"', '"rlvpp"')},
    ),
    Case(
        "train-iterations-text",
        "train",
        ("{d}/c.toml", "--iterations", "abc"),
        2,
        ("--iterations: must be a whole number (got 'abc')",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-iterations-negative",
        "train",
        ("{d}/c.toml", "--iterations", "-3"),
        2,
        ("--iterations: must be at least 1 (got -3)",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seed-text",
        "train",
        ("{d}/c.toml", "--seed", "abc"),
        2,
        ("--seed: must be a whole number (got 'abc')",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seeds-text",
        "train",
        ("{d}/c.toml", "--compare", "grpo,rlvp", "--seeds", "a,b"),
        2,
        ("--seeds: seed 'a' is not a whole number",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seeds-empty",
        "train",
        ("{d}/c.toml", "--compare", "grpo,rlvp", "--seeds", ""),
        2,
        ("--seeds: has an empty item",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seeds-twice",
        "train",
        ("{d}/c.toml", "--compare", "grpo,rlvp", "--seeds", "0,0"),
        2,
        ("--seeds: names a seed twice",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-compare-unknown",
        "train",
        ("{d}/c.toml", "--compare", "grpo,nope"),
        2,
        ("--compare: unknown method 'nope'",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-compare-empty",
        "train",
        ("{d}/c.toml", "--compare", ""),
        2,
        ("--compare: has an empty item",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-compare-twice",
        "train",
        ("{d}/c.toml", "--compare", "grpo,grpo"),
        2,
        ("--compare: names a method twice",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-seeds-without-compare",
        "train",
        ("{d}/c.toml", "--seeds", "0,1"),
        2,
        ("--seeds goes with --compare or --paired",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-resume-and-overwrite",
        "train",
        ("{d}/c.toml", "--resume", "--overwrite"),
        2,
        ("--resume continues the run, --overwrite replaces it",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-out-a-file",
        "train",
        ("{d}/c.toml", "--out", "{d}/c.toml"),
        2,
        ("cannot write {d}/c.toml: it is a file, not a folder",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-out-empty",
        "train",
        ("{d}/c.toml", "--out", ""),
        2,
        ("--out: must name a folder (got '')",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-out-dev-null",
        "train",
        ("{d}/c.toml", "--out", "/dev/null"),
        2,
        ("cannot write /dev/null: it is a file, not a folder",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-unknown-flag",
        "train",
        ("{d}/c.toml", "--bogus"),
        2,
        ("No such option '--bogus'",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-resume-nothing",
        "train",
        ("{d}/c.toml", "--resume"),
        2,
        ("{d}/run has no checkpoint.pt",),
        {"c.toml": train_config()},
    ),
    Case(
        "train-resume-metrics-cut",
        "train",
        ("{d}/c.toml", "--resume"),
        1,
        ("{d}/run/checkpoint.pt: not a readable checkpoint",),
        {"c.toml": train_config(), "run/checkpoint.pt": b"", "run/metrics.jsonl": '{"iteration": 0}\n{"itera'},
    ),
    Case(
        "train-rules-missing",
        "train",
        ("{d}/c.toml",),
        1,
        ("nope.rlvp",),
        {"c.toml": TRAIN.replace("examples/rules/chain4_dense.rlvp", "{d}/nope.rlvp")},
    ),
    Case(
        "train-rules-broken",
        "train",
        ("{d}/c.toml",),
        1,
        ("{d}/r.rlvp:",),
        {"c.toml": TRAIN.replace("examples/rules/chain4_dense.rlvp", "{d}/r.rlvp"), "r.rlvp": "violation v (\n"},
    ),
    Case(
        "train-env-unknown",
        "train",
        ("{d}/c.toml",),
        1,
        ("nope_env",),
        {"c.toml": TRAIN.replace('"chain4"', '"nope_env"')},
    ),
    # (only where the kernel refuses an allocation beyond memory: with overcommit 1 it would be granted, then killed)
    *(
        [
            Case(
                "train-lora-rank-beyond-memory",
                "train",
                ("{d}/c.toml",),
                1,
                ("'lora_rank' = 100000000000: the LoRA adapter does not fit in memory",),
                {"c.toml": train_config(lora_rank="100000000000")},
            )
        ]
        if Path("/proc/sys/vm/overcommit_memory").is_file()
        and Path("/proc/sys/vm/overcommit_memory").read_text().strip() in ("0", "2")
        else []
    ),
    Case(
        "train-lora-targets-empty",
        "train",
        ("{d}/c.toml",),
        1,
        ("'lora_target_modules' must be",),
        {"c.toml": TRAIN.replace('["q_proj", "v_proj", "lm_head"]', "[]")},
    ),
    # --- rlvp-train plot ------------------------------------------------------------------------------
    Case("plot-no-runs", "train", ("plot",), 2, ("Missing argument 'RUNS...'",)),
    Case("plot-missing", "train", ("plot", "{d}/nope"), 2, ("{d}/nope: no such file or folder",)),
    Case("plot-empty-folder", "train", ("plot", "{d}/run"), 2, ("{d}/run: no metrics.jsonl",), {"run/notes.txt": "x"}),
    Case(
        "plot-metrics-cut",
        "train",
        ("plot", "{d}/run"),
        1,
        ("{d}/run/metrics.jsonl:2: the last line is cut off mid-write",),
        {"run/metrics.jsonl": '{"iteration": 0, "success": 0.5}\n{"iteration": 1, "succ'},
    ),
    Case(
        "plot-a-trajectory",
        "train",
        ("plot", "{d}/runs.jsonl"),
        1,
        ("{d}/runs.jsonl:1: not a metrics row",),
        {"runs.jsonl": RUNS},
    ),
    Case(
        "plot-out-no-extension",
        "train",
        ("plot", "{d}/run", "--out", "/dev/full"),
        2,
        ("-o: must be an image file ending in one of",),
        {"run/metrics.jsonl": '{"iteration": 0, "success": 0.5}\n'},
    ),
    Case(
        "plot-out-a-folder",
        "train",
        ("plot", "{d}/run", "--out", "{d}"),
        2,
        ("is a directory",),
        {"run/metrics.jsonl": '{"iteration": 0, "success": 0.5}\n'},
    ),
]


def _config_fields(kind: str) -> list[str]:
    """TrainConfig's fields of one type (``int``, ``float``, ``str``, ``bool``, ``dict``) that TRAIN does not set."""
    from trainer.config import TrainConfig

    given = {line.split("=")[0].strip() for line in TRAIN.splitlines()}
    return [
        f.name for f in dataclasses.fields(TrainConfig) if str(f.type).split(" ")[0] == kind and f.name not in given
    ]


#: Every setting of the wrong type, and every number out of its range.
CASES += [
    # --- a mistyped option is named first, with the closest real one (rlvp_dsl.cli.options) ------
    Case(
        "score-mistyped-option",  # argparse alone: "the following arguments are required: trajectories"
        "score",
        (RULES, "--explian", str(REPO / "examples" / "episodes")),
        2,
        ("rlvp-score: error: unrecognized arguments: --explian (did you mean --explain?)",),
    ),
    Case(
        "score-mistyped-option-with-value",
        "score",
        (RULES, str(REPO / "examples" / "episodes"), "--jsn={d}/o.json"),
        2,
        ("unrecognized arguments: --jsn={d}/o.json (did you mean --json?)",),
    ),
    Case(
        "compile-mistyped-option",
        "compile",
        (RULES, "--chek"),
        2,
        ("rlvp-compile: error: unrecognized arguments: --chek (did you mean --check?)",),
    ),
    Case("compile-unknown-option", "compile", (RULES, "--zzz"), 2, ("unrecognized arguments: --zzz\n",)),
]

CASES += [
    *[
        Case(
            f"train-{name}-{how}",
            "train",
            ("{d}/c.toml",),
            1,
            (f"{{d}}/c.toml:11: '{name}' must be",),
            {"c.toml": train_config(**{name: value})},
        )
        for kind, wrong in (
            ("int", ('"x"', "1.5", "[1]")),
            ("float", ('"x"', "[1.0]")),
            ("str", ("5", "[]")),
            ("bool", ('"yes"', "1")),
            ("dict", ("3.5", '"x"')),
        )
        for name in _config_fields(kind)
        for how, value in zip(("text", "list", "other"), wrong)
    ],
    *[
        Case(
            f"train-{name}-{value}",
            "train",
            ("{d}/c.toml",),
            1,
            (f"{{d}}/c.toml:11: '{name}' must be",),
            {"c.toml": train_config(**{name: value})},
        )
        for name, value in (
            ("lora_rank", "0"),
            ("lora_alpha", "0"),
            ("lora_alpha", "-16"),
            ("lora_dropout", "-0.1"),
            ("lora_dropout", "1"),
            ("kl_clip", "0"),
            ("kl_clip", "-1"),
            ("epsilon_high", "-0.2"),
            ("anneal_start", "-1"),
            ("success_threshold", "-0.5"),
            ("success_threshold", "50"),
            ("temperature", "0"),
            ("learning_rate", "0"),
            ("adv_eps", "0"),
            ("process_weight", "-1"),
            ("max_turns", "0"),
            ("max_new_tokens", "-1"),
            ("micro_batch", "0"),
            ("threads", "0"),
            ("updates_per_batch", "0"),
            ("token_page_rollouts", "0"),
            ("token_page_every", "-1"),
            ("checkpoint_every", "-1"),
            ("success_window", "0"),
            ("dapo_max_rounds", "0"),
            ("loss_type", '"tokenmean"'),
            ("scale_rewards", '"grp"'),
            ("process_norm", '"rms"'),
            ("dtype", '"float8"'),
        )
    ],
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
        from trainer.cli.train_command import main

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


def console_script(
    name: str, args, *, stop_at: str | None = None, **kwargs
) -> subprocess.Popen | subprocess.CompletedProcess:
    """Run the console script `name` as pip's wrapper does (``from MODULE import FUNC; sys.exit(FUNC())``,
    the entry point read from pyproject.toml); `stop_at`: Ctrl-C while that module is imported."""
    module, func = SCRIPTS[name].split(":")
    code = (
        _INTERRUPTER.format(stop=stop_at) if stop_at else "import sys\n"
    ) + f"sys.argv[0] = {name!r}\nfrom {module} import {func}\nsys.exit({func}())\n"
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
        done = console_script(
            "rlvp-score", [RULES, tmp_path / "runs.jsonl", "--csv", "-"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert "Traceback" not in done.stderr and done.returncode == 2, done.stderr
    assert "rlvp-score: error: cannot write to standard output" in done.stderr


@pytest.mark.parametrize(
    "name,stop_at",
    [
        ("rlvp-compile", "lark"),
        ("rlvp-score", "rlvp_dsl.cli.score_args"),
        ("rlvp-compile", "rlvp_dsl.pipeline"),
        ("rlvp-train", "trainer.config"),
        ("rlvp-train", "click"),
    ],
)
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
    code = _closed_pipe_run(
        "rlvp-compile", ["--auto-from-tags", tmp_path / "tools.json", "--validate", tmp_path / "runs.jsonl", "-o", out]
    )
    assert code == 0 and out.is_file() and _derived(out.read_bytes())


def test_a_closed_pipe_does_not_lose_the_csv_after_the_html_report(tmp_path):
    """``rlvp-score R T --html H --csv C 2>&1 | head``: the line about H does not stop C being written."""
    (tmp_path / "runs.jsonl").write_text(RUNS)
    code = _closed_pipe_run(
        "rlvp-score", [RULES, tmp_path / "runs.jsonl", "--html", tmp_path / "r.html", "--csv", tmp_path / "e.csv"]
    )
    assert code == 0
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
    assert (tmp_path / "e.csv").read_text().count("\n") == 4  # the header and three episodes


# ---------------------------------------------------------------------------------------------
# generated: each of the first 40 fields of the middle record of a real chat JSONL of the wrong type or removed,
# scored with --csv: every episode in the CSV (exit 0), or the record named and the others kept (exit 1)
# ---------------------------------------------------------------------------------------------
CHAT_FILE = REPO / "examples" / "episodes" / "airline_chat.jsonl"


def _record_paths(record, prefix=()) -> list[tuple]:
    """Each field path of a record, depth first."""
    items = record.items() if isinstance(record, dict) else enumerate(record) if isinstance(record, list) else ()
    out = []
    for key, child in items:
        out.append((*prefix, key))
        out.extend(_record_paths(child, (*prefix, key)))
    return out


def _chat_mutations() -> list[tuple[str, tuple, str]]:
    lines = CHAT_FILE.read_text().splitlines()
    middle = json.loads(lines[1])
    return [(f"{'.'.join(map(str, p))}:{how}", p, how) for p in _record_paths(middle)[:40] for how in HOWS]


CHAT_MUTATIONS = _chat_mutations()


@pytest.mark.parametrize("path,how", [m[1:] for m in CHAT_MUTATIONS], ids=[m[0] for m in CHAT_MUTATIONS])
def test_score_a_mutated_record_loses_nothing(path, how, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    lines = CHAT_FILE.read_text().splitlines()
    lines[1] = json.dumps(mutate(json.loads(lines[1]), path, how))
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(lines) + "\n")
    code = _run("score", [RULES, str(runs), "--csv", str(tmp_path / "e.csv")])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 1), err
    rows = (tmp_path / "e.csv").read_text().count("\n") - 1 if (tmp_path / "e.csv").exists() else 0
    if code == 0:
        assert rows == len(lines), "an episode is missing from the CSV"
    else:
        assert f"{runs}:2" in err or f"{runs}: line 2" in err, err  # the bad record, by line
        assert rows in (0, len(lines) - 1), "the good episodes are neither all written nor none"
