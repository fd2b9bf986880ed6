"""Bindings that can never hold (RV205/RV206) on the events they are asked of, the RV203
message for a tool given two targets, and RV210's named pair of tests (docs/language.md,
"History", "obligation", `tools from`).  The rendered messages are pinned in
tests/golden/diagnostics/ (same_on_message_turns, target_conflict*, progress_max_zero);
these tests pin what the goldens do not: the cases that stay clean, the spans, the manifest
cases, and that the help's fix really pays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvp_dsl import check_file, check_text

REPO = Path(__file__).resolve().parents[2]
TOOLS = "tool cancel : write target reservation_id\ntool get : read target reservation_id\n"
OPEN = "obligation o (+0.5, expire -0.5) {\n  open on call cancel ok\n  discharge on "


def found(text: str) -> list[tuple[str, str, int, int]]:
    """(code, message, line, column) of every diagnostic."""
    return [(d.code, d.message, d.span.line, d.span.column) for d in check_text(text, "b.rlvp").diagnostics]


@pytest.mark.parametrize(
    "rule",
    [
        # the history is asked of a call that carries the argument
        "violation v (-0.1) { on call cancel and not seen (call get ok same reservation_id) }",
        # an `or` with a call that carries it: the `seen` matters there
        "violation v (-0.1) { on assistant or call cancel and not seen (call get ok same reservation_id) }",
        # no binding: any earlier lookup
        "violation v (-0.1) { on assistant and not seen (call get ok) }",
        # `same message`: every kind of event has a message
        "violation v (-0.1) { on assistant and seen (call get same message) }",
        # the `seen` is irrelevant on assistant turns (`call cancel` is false there), so nothing to say
        "violation v (-0.1) { on assistant and not (call cancel and seen (call get same reservation_id)) }",
        OPEN + "assistant or call get ok same reservation_id\n}",
        OPEN + "assistant same message\n}",
        OPEN + "assistant\n}",
        OPEN + "call get ok same target\n}",
    ],
)
def test_bindings_that_can_hold_are_clean(rule):
    """A binding some event it is asked of carries is not reported (no false alarms)."""
    assert found(TOOLS + rule) == []


def test_a_binding_asked_of_assistant_turns_only_is_an_error_at_the_same():
    """h2/h4 of the audit: the discharge, and the event a `seen` is tested at, are assistant turns."""
    text = TOOLS + OPEN + "assistant same reservation_id\n}\n"
    assert found(text) == [
        (
            "RV206",
            "`same reservation_id` can never hold: `discharge` matches only assistant turns, "
            "and a message turn has no arguments",
            5,
            31,
        )
    ]
    text = TOOLS + "violation v (-0.1) { on assistant unless seen (call get ok same reservation_id) }\n"
    ((code, message, line, column),) = found(text)
    assert (code, line, column) == ("RV205", 3, 65)
    assert message.startswith("`same reservation_id` can never hold: the condition around this `seen` matches only")


def test_same_call_and_returned_are_asked_of_the_event_too():
    """`same call` needs a call on both sides; `returned ARG` needs the tested event's argument."""
    assert [c for c, *_ in found(TOOLS + OPEN + "assistant same call\n}\n")] == ["RV206"]
    text = TOOLS + "violation v (-0.1) { on assistant and seen (call get ok returned reservation_id) }\n"
    ((code, message, _, _),) = found(text)
    assert code == "RV205" and message.startswith("`returned reservation_id` can never hold")


def _manifest(tmp_path: Path, rules: str) -> list[tuple[str, str, str]]:
    (tmp_path / "tools.json").write_text(
        json.dumps(
            {
                "format": "rlvp-tools/1",
                "tools": [
                    {"name": "get_reservation", "tags": ["read"], "parameters": ["reservation_id"]},
                    {"name": "cancel_reservation", "tags": ["write"], "parameters": ["reservation_id", "reason"]},
                ],
            }
        )
    )
    (tmp_path / "r.rlvp").write_text('tools from "tools.json"\n' + rules)
    return [(d.code, d.message, d.help) for d in check_file(str(tmp_path / "r.rlvp")).diagnostics]


def test_the_event_a_seen_is_tested_at_must_take_the_argument(tmp_path):
    """With a manifest's parameters: the tested call's tools take no `reason`, so `seen` never holds."""
    rules = "violation v (-0.1) { on call get_reservation and not seen (call cancel_reservation same reason) }\n"
    assert _manifest(tmp_path, rules) == [
        (
            "RV205",
            "argument 'reason' is not bound by the condition around this `seen`: none of its tools "
            "(get_reservation) takes it",
            "",
        )
    ]


def test_a_manifest_target_conflict_names_the_manifest_and_the_inference(tmp_path):
    """d10 of the audit: the inferred target, where it came from, and a did-you-mean for the clause."""
    ((code, message, help),) = _manifest(tmp_path, "tool cancel_reservation : write target reservaton_id\n")
    assert code == "RV203"
    assert message == (
        "tool 'cancel_reservation' declared with target 'reservaton_id', but earlier the manifest 'tools.json' "
        f"gave it target 'reservation_id' (inferred from its parameters by `tools from` at {tmp_path}/r.rlvp:1:1)"
    )
    assert help.startswith("did you mean 'reservation_id'? a tool has one target: `tools from` infers one")


def test_a_target_conflict_points_at_both_target_clauses():
    """f2 of the audit: the earlier target is line 2's, not the first declaration of the tool."""
    (d,) = check_text("tool a : read\ntool a : read target x\ntool a : write target y\n", "f2.rlvp").diagnostics
    assert (d.code, d.span.line, d.span.column) == ("RV203", 3, 23)
    assert d.message == "tool 'a' declared with target 'y', but earlier declared with target 'x' (at f2.rlvp:2:22)"


def test_rv210_names_the_two_tests_that_never_hold_together():
    """g6 of the audit: the compile-time warning names the pair, as `--check` does."""
    text = "tool a : read\ntool b : write\n"
    ((_, message, line, column),) = found(text + 'violation v (-0.5) { on call a and text contains "x" }')
    assert (line, column) == (3, 11)
    assert message == (
        "rule 'v' can never fire: no event satisfies its condition: "
        '`call a` and `text contains "x"` never hold on one event'
    )
    ((_, message, _, _),) = found(text + "violation v (-0.5) { on call a and call b or assistant and error }")
    assert message.endswith(
        ": `call a` and `call b` never hold on one event; `assistant` and `error` never hold on one event"
    )


def test_the_suggested_fix_pays(tmp_path):
    """g7t of the audit: with `same id` the obligation is refused; dropped, as the help says, the
    answer discharges it (+0.5) where before every instance expired."""
    body = (
        "tool a : read target id\nobligation o (+0.5, expire -0.5) {{\n  open on call a ok\n  discharge on assistant{}\n}}\n"
        'test "assistant answers" {{\n  episode {{\n    call a {{"id": "X"}} ok\n    assistant "X is fine"\n  }}\n'
        "  expect o == 0.5\n}}\n"
    )
    (tmp_path / "bad.rlvp").write_text(body.format(" same id"))
    (tmp_path / "good.rlvp").write_text(body.format(""))
    run = [sys.executable, "-m", "rlvp_dsl.cli.compile", "--test"]
    bad = subprocess.run(run + [str(tmp_path / "bad.rlvp")], capture_output=True, text=True, cwd=REPO)
    good = subprocess.run(run + [str(tmp_path / "good.rlvp")], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode != 0 and "error[RV206]" in bad.stdout + bad.stderr
    assert good.returncode == 0 and "1 passed, 0 failed" in good.stdout, good.stdout + good.stderr


def test_check_names_an_opener_whose_tools_cannot_carry_the_binding(tmp_path):
    """`rlvp-compile --check --manifest M`: an obligation keyed `same reservation_id` whose open
    condition matches only tools of M that take no such argument can never open -- said as that,
    not as "held on no event ... (raise --examples)".  A tool a `tool` line declares (its
    parameters not known) is not such a tool."""
    manifest = tmp_path / "other.json"
    manifest.write_text(
        json.dumps(
            {
                "format": "rlvp-tools/1",
                "tools": [
                    {"name": "toggle", "tags": ["write"], "parameters": []},
                    {"name": "lookup", "tags": ["read"], "parameters": ["line_id"]},
                ],
            }
        ),
        encoding="utf-8",
    )
    rules = tmp_path / "r.rlvp"
    rules.write_text(
        "tool toggle : write\ntool lookup : read\n"
        "obligation o (+0.1, expire -0.1) {\n  open on call tag write ok\n"
        "  discharge on call tag read ok same reservation_id\n}\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.cli.compile", "--check", str(rules), "--manifest", str(manifest)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    said = "no instance can open"
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("o (")]
    assert lines == [
        f"o ({outcome}) can never fire: its open condition holds only on events with no value for "
        f"`same reservation_id` (no tool of the manifest {manifest} that it matches takes it): {said}"
        for outcome in ("discharge", "expire")
    ], done.stdout
