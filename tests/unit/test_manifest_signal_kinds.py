"""Manifest signal kinds (progress / violation / done): how they are read, the errors that name the
file, record and field, the rules `--auto-from-tags` derives from them (tree, printed text, credits),
and the BFCL environment's flags scored by the derived rules on real ground-truth replays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvp_dsl import ast, pipeline
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.manifests import ManifestError, SignalSpec, load_manifest, parse_manifest
from rlvp_dsl.manifests.derive import DeriveWeights, derive_rules, derive_text
from rlvp_dsl.parser import parse
from rlvp_dsl.source import SourceFile

from test_bfcl import _credits, needs_bfcl, play

ROOT = Path(__file__).resolve().parents[2]
BFCL_MANIFEST = ROOT / "examples" / "manifests" / "bfcl_tools.json"

TOOLS = [{"name": "ls", "tags": ["read"]}, {"name": "mv", "tags": ["write"], "parameters": ["src"], "target": None}]
SIGNALS = [
    {"name": "turns", "direction": "increasing"},
    {"name": "off_path", "kind": "violation", "description": "the call left the path"},
    {"name": "turn_passing", "kind": "done"},
]


def manifest(signals=SIGNALS):
    return parse_manifest({"format": "rlvp-tools/1", "tools": TOOLS, "signals": signals}, "m.json")


def rules_by_name(tree: ast.RuleFile) -> dict[str, ast.Item]:
    return {item.name.text: item for item in tree.items if isinstance(item, ast.RULE_TYPES)}


def flag(name: str, value: float) -> ast.Expr:
    return ast.And((ast.CallAtom(), ast.SignalTest(ast.Name(name), "==", value)))


def test_each_kind_is_read_with_its_direction():
    assert manifest().signals == (
        SignalSpec("turns", "increasing", "", "progress"),
        SignalSpec("off_path", "", "the call left the path", "violation"),
        SignalSpec("turn_passing", "", "", "done"),
    )


@pytest.mark.parametrize(
    "record, message",
    [
        (
            {"name": "f", "kind": "violaton"},
            "m.json: signals[2].kind: expected one of 'progress', 'violation', 'done', "
            "got a string 'violaton' (did you mean 'violation'?)",
        ),
        (
            {"name": "f", "kind": 1},
            "m.json: signals[2].kind: expected one of 'progress', 'violation', 'done', got a number 1",
        ),
        (
            {"name": "f", "kind": "done", "direction": "increasing"},
            "m.json: signals[2].direction: a done signal is a 0/1 flag on each call result and has no direction "
            "(got 'increasing'); leave 'direction' out, or declare kind 'progress'",
        ),
        (
            {"name": "f", "kind": "progress"},
            "m.json: signals[2].direction: expected 'decreasing' or 'increasing' (a progress signal needs the "
            "direction that means progress), got null",
        ),
        (
            {"name": "f", "kind": "violation", "description": 3},
            "m.json: signals[2].description: expected a string, got a number 3",
        ),
    ],
)
def test_bad_signal_records_name_file_record_and_field(tmp_path, record, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"format": "rlvp-tools/1", "tools": TOOLS, "signals": SIGNALS[:2] + [record]}))
    with pytest.raises(ManifestError) as info:
        load_manifest(str(path))
    assert str(info.value) == str(tmp_path / message)
    assert (info.value.record, info.value.field) == ("signals[2]", message.split(".")[2].split(":")[0])


def test_derived_tree_for_each_kind():
    """violation -> S_flagged; done -> the answer obligation and the penalty on an undone answer."""
    rules = rules_by_name(derive_rules(manifest()))
    assert rules["progress_turns"] == ast.Progress(
        ast.Name("progress_turns"), ast.Weight(1.0), ast.Name("turns"), "increasing"
    )
    assert rules["off_path_flagged"] == ast.Violation(
        ast.Name("off_path_flagged"), ast.Weight(-0.1), flag("off_path", 1.0)
    )
    done, undone = flag("turn_passing", 1.0), flag("turn_passing", 0.0)
    assert rules["answer_when_done"] == ast.Obligation(
        ast.Name("answer_when_done"),
        ast.Weight(0.1),
        ast.Weight(0.0),
        done,
        ast.And((ast.KindAtom("assistant"), ast.Not(ast.Seen(undone, None, done)))),
        None,
        ast.Deadline("before", ast.KindAtom("user")),
    )
    assert rules["answer_not_done"] == ast.Violation(
        ast.Name("answer_not_done"),
        ast.Weight(-0.3),
        ast.KindAtom("assistant"),
        ast.Seen(done, None, ast.KindAtom("user")),
    )
    assert list(rules)[-4:] == ["progress_turns", "off_path_flagged", "answer_when_done", "answer_not_done"]


def test_derived_text_for_each_kind_parses_back_and_compiles():
    text = derive_text(manifest())
    assert (
        "# the environment's declared violation signal off_path (the call left the path): a call it flags (== 1) "
        "was judged wrong by the environment, and costs a little\n"
        "violation off_path_flagged (-0.1) {\n  on call signal off_path == 1\n}\n"
    ) in text
    assert (
        "obligation answer_when_done (+0.1, expire 0) {\n"
        "  open on call signal turn_passing == 1\n"
        "  discharge on assistant\n"
        "      and not seen (call signal turn_passing == 0 since call signal turn_passing == 1)\n"
        "  deadline before user\n}\n"
    ) in text
    assert "Not farmable: one instance at a time (no key)" in text
    assert (
        "violation answer_not_done (-0.3) {\n  on assistant\n  unless seen (call signal turn_passing == 1 since user)\n}\n"
        in text
    )
    parsed, diagnostics = parse(SourceFile("m.rlvp", text))
    assert diagnostics == [] and parsed == derive_rules(manifest(), path="m.rlvp")
    result = pipeline.check_text(text, "m.rlvp", lints=True)
    assert result.ok and result.diagnostics == [], [d.message for d in result.diagnostics]


def test_several_done_signals_name_their_rules_and_weights_are_configurable():
    two = SIGNALS[:2] + [{"name": "a_done", "kind": "done"}, {"name": "b_done", "kind": "done"}]
    weights = DeriveWeights(flagged=-0.2, done_answer=0.3, answer_not_done=-0.5)
    rules = rules_by_name(derive_rules(manifest(two), weights=weights))
    assert [n for n in rules if "done" in n] == [
        "answer_when_done_a_done",
        "answer_not_done_a_done",
        "answer_when_done_b_done",
        "answer_not_done_b_done",
    ]
    assert rules["answer_when_done_b_done"].credit == ast.Weight(0.3)
    assert rules["answer_not_done_a_done"].weight == ast.Weight(-0.5)
    assert rules["off_path_flagged"].weight == ast.Weight(-0.2)
    for bad in ({"flagged": 0.1}, {"done_answer": -0.1}, {"answer_not_done": 0.0}):
        with pytest.raises(ValueError, match="must be"):
            DeriveWeights(**bad)


def _episode(*events: tuple) -> Episode:
    out = []
    for kind, signals in events:
        fields = {"tool": "ls", "status": "ok", "tags": ("read",)} if kind == "call" else {"text": "x"}
        out.append(Event(index=len(out), kind=kind, signals=signals, **fields))
    return Episode("t", tuple(out))


def test_derived_done_rules_credit_by_value():
    """The answer after a done call earns +0.1 once; a copy of it, an answer after the request was undone,
    and an answer with no done call since the user's message earn nothing; the last costs -0.3.  An
    instance never discharged expires with 0 on the call that opened it."""
    program = pipeline.loads(derive_text(manifest()), "m.rlvp")

    def credits(*events):
        return sorted((c.rule, c.event_index, round(c.value, 6)) for c in program.score(_episode(*events)))

    done, undone = {"turn_passing": 1.0}, {"turn_passing": 0.0}
    assert credits(("user", {}), ("call", done), ("assistant", {}), ("assistant", {})) == [("answer_when_done", 2, 0.1)]
    assert credits(("user", {}), ("call", done), ("call", undone), ("assistant", {})) == [("answer_when_done", 1, 0.0)]
    assert credits(
        ("user", {}), ("call", undone), ("call", done), ("assistant", {}), ("user", {}), ("assistant", {})
    ) == [
        ("answer_not_done", 5, -0.3),
        ("answer_when_done", 3, 0.1),
    ]
    # a done call left unanswered at the next user message expires unpaid (expire 0)
    assert credits(("user", {}), ("call", done), ("user", {}), ("call", {"off_path": 1.0})) == [
        ("answer_when_done", 1, 0.0),
        ("off_path_flagged", 3, -0.1),
    ]


def test_the_bfcl_doc_format_declares_the_environments_three_signals(tmp_path):
    path = tmp_path / "fs.json"
    line = '{"name": "ls", "description": "", "parameters": {"type": "dict", "properties": {}}}\n'
    path.write_text(line + line.replace('"ls"', '"pwd"'))
    m = load_manifest(str(path))
    assert m.format == "bfcl"
    assert [(s.name, s.kind, s.direction) for s in m.signals] == [
        ("turns_matched", "progress", "increasing"),
        ("off_path", "violation", ""),
        ("turn_passing", "done", ""),
    ]
    assert all(s.description for s in m.signals)
    assert "signals 'turns_matched', 'off_path', 'turn_passing' are the BFCL environment's" in m.notes[0]


@needs_bfcl
def test_bfcl_env_manifest_declares_its_flags_by_the_same_names():
    from rlvp_dsl.manifests.bfcl_tags import BFCL_DONE_SIGNAL, BFCL_VIOLATION_SIGNAL
    from trainer.envs.bfcl import BfclEnv
    from trainer.envs.bfcl.env import OFF_PATH, TURN_PASSING

    assert (OFF_PATH, TURN_PASSING) == (BFCL_VIOLATION_SIGNAL, BFCL_DONE_SIGNAL)
    env_signals = parse_manifest(BfclEnv().manifest()).signals
    assert env_signals == load_manifest(str(BFCL_MANIFEST)).signals
    assert [(s.name, s.kind) for s in env_signals] == [
        ("turns_matched", "progress"),
        ("off_path", "violation"),
        ("turn_passing", "done"),
    ]


@needs_bfcl
def test_derived_bfcl_rules_score_ground_truth_and_perturbed_replays():
    """examples/rules/bfcl_auto.rlvp on multi_turn_base_1 (ls; cd + mv; cd + grep; tail)."""
    from trainer.envs.base import Task, ToolCall
    from trainer.envs.bfcl import BfclEnv

    program = pipeline.load_program(str(ROOT / "examples" / "rules" / "bfcl_auto.rlvp"))
    env = BfclEnv()
    task_id = "multi_turn_base_1"
    env.reset(Task(task_id, 0))
    truth = env.ground_truth()

    def score(turns):
        episode = play(env, task_id, turns)
        landed = sorted({(c.rule, c.event_index) for c in program.score(episode)})
        return env.outcome(), _credits(program, episode), landed

    outcome, clean, landed = score(truth)
    assert outcome == 1.0
    # each of the 4 answers closes a passed turn; blind_destructive: the mv's source was never read by name
    assert clean == {"progress_turns_matched": 4.0, "answer_when_done": 0.4, "blind_destructive": -0.2}
    assert [i for rule, i in landed if rule == "answer_when_done"] == [2, 6, 10, 13]  # the assistant events

    # an ok call the turn does not make (pwd) before turn 1's ls: flagged, the task still passes
    detour = [list(t) for t in truth]
    detour[0] = [ToolCall("pwd", {})] + detour[0]
    outcome, credits, landed = score(detour)
    assert outcome == 1.0
    assert credits == {**clean, "off_path_flagged": -0.1}
    assert ("off_path_flagged", 1) in landed

    # a wrong argument: cd into a folder that does not exist; the cd and the mv after it leave the path
    wrong = [list(t) for t in truth]
    wrong[1][0] = ToolCall("cd", {"folder": "nowhere"})
    outcome, credits, landed = score(wrong)
    assert outcome == 0.0
    assert [i for rule, i in landed if rule == "off_path_flagged"] == [4, 5]
    # turn 1 is paid; turn 2 never passes, and no later turn can (the flag stays 0 after a failed turn),
    # so every later answer is an undone answer
    assert credits["answer_when_done"] == pytest.approx(0.1)
    assert [i for rule, i in landed if rule == "answer_not_done"] == [6, 10, 13]
    assert credits["off_path_flagged"] == pytest.approx(-0.2) and credits["answer_not_done"] == pytest.approx(-0.9)

    # a skipped turn: turn 3 answered without a call (BFCL: empty_turn_model_response)
    idle = [list(t) for t in truth]
    idle[2] = []
    outcome, credits, landed = score(idle)
    assert outcome == 0.0
    assert ("answer_not_done", 8) in landed  # the idle answer itself
    assert credits["answer_when_done"] == pytest.approx(0.2) and credits["answer_not_done"] == pytest.approx(-0.6)
    assert sum(clean.values()) > sum(score(detour)[1].values()) > sum(credits.values())


def test_auto_from_tags_end_to_end_on_the_bfcl_manifest(tmp_path):
    """rlvp-compile --auto-from-tags on the shipped BFCL manifest writes the shipped derived file, and
    --check passes every property on it (not_farmable and discharge_once for answer_when_done)."""
    out = tmp_path / "bfcl_auto.rlvp"
    cli = [sys.executable, "-m", "rlvp_dsl.cli.compile"]
    done = subprocess.run(
        [*cli, "--auto-from-tags", str(BFCL_MANIFEST), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    shipped = (ROOT / "examples" / "rules" / "bfcl_auto.rlvp").read_text().splitlines()[1:]
    assert out.read_text().splitlines()[1:] == shipped
    checked = subprocess.run(
        [*cli, "--check", str(out), "--manifest", str(BFCL_MANIFEST), "--examples", "60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for prop in ("bounded", "not_farmable", "discharge_once", "reachable", "deterministic"):
        assert f"ok   {prop}" in checked.stdout, checked.stdout
    assert "all 8 rule outcomes reached" in checked.stdout


def test_a_tools_list_without_format_says_how_to_name_ours(tmp_path):
    """{"tools": [...]} in rlvp's own shape but without "format": the error names the format to add."""
    from rlvp_dsl.manifests import ManifestError, load_manifest

    path = tmp_path / "m.json"
    path.write_text('{"tools": [{"name": "a", "tags": ["read"]}]}', encoding="utf-8")
    with pytest.raises(ManifestError) as raised:
        load_manifest(str(path))
    assert 'add "format": "rlvp-tools/1" beside "tools"' in str(raised.value)
    assert "tools[0]" in str(raised.value)
