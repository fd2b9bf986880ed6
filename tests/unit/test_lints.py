"""Lints (rlvp_dsl/lints.py): each RV3xx criterion fires where it should and stays silent elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvp_dsl import check_text, loads
from rlvp_dsl.cli.compile import main as compile_main
from rlvp_dsl.manifests.derive import derive_text
from rlvp_dsl.diagnostics import CODES
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.lints import LINT_CODES, LintOptions, lint
from rlvp_dsl.manifests import load_manifest
from rlvp_dsl.pipeline import check_file

REPO = Path(__file__).resolve().parents[2]
TOOLS = (
    "tool fetch : read target item\ntool book : write target item\ntool wipe : write, destructive target item\n"
    "tool check : verify target item\ntool submit : submit\n"
)

#: Stock rule files with a lint the lead has been told about (strict: fixing the rule fails the xfail).


def lints_of(text: str, **options) -> list[tuple[str, str]]:
    """(code, message) of the lint warnings of a rule text that checks without errors."""
    result = check_text(TOOLS + text, "l.rlvp")
    assert result.ok, result.diagnostics
    return [(d.code, d.message) for d in lint(result.ruleset, LintOptions(**options))]


def codes(text: str, **options) -> list[str]:
    return [c for c, _ in lints_of(text, **options)]


def call(i, tool, status="ok", result=None, **args) -> Event:
    return Event(
        i, "call", tool=tool, arguments=args, status=status, result=result, error_text="" if status == "ok" else status
    )


# ---- stock rules -------------------------------------------------------------------


@pytest.mark.parametrize("name", [p.name for p in sorted((REPO / "rules").glob("*.rlvp"))])
def test_stock_rules_lint_clean(name):
    """Every stock rule file compiles with no lint warning."""
    result = check_file(str(REPO / "rules" / name), lints=True)
    assert result.ok and result.diagnostics == [], [d.message for d in result.diagnostics]


@pytest.mark.parametrize("manifest", sorted((REPO / "examples" / "manifests").glob("*.json")), ids=lambda p: p.name)
def test_derived_rules_lint_clean(manifest):
    """Rules derived from every example manifest carry no lint warning."""
    result = check_text(derive_text(load_manifest(str(manifest))), str(REPO / "examples" / "derived.rlvp"), lints=True)
    assert result.ok and result.diagnostics == [], [d.message for d in result.diagnostics]


# ---- RV301 credit with no penalty path -----------------------------------------------


def test_free_obligation_nothing_penalises_is_rv301():
    """Credit > 0, expire 0, no violation on its open or discharge events: RV301."""
    assert codes("obligation o (+0.5, expire 0) { open on call book ok discharge on call check ok }") == ["RV301"]


def test_obligation_with_expire_penalty_is_not_rv301():
    """An expire penalty is the matching penalty path."""
    assert codes("obligation o (+0.5, expire -0.1) { open on call book ok discharge on call check ok }") == []


def test_free_obligation_whose_open_a_violation_can_penalise_is_not_rv301():
    """A violation that can fire on the opening calls is a penalty path (even with expire 0)."""
    text = (
        "violation unread (-0.2) { on call book unless seen (call fetch ok) }\n"
        "obligation o (+0.5, expire 0) { open on call book ok discharge on call check ok }"
    )
    assert codes(text) == []


def test_violation_on_other_events_does_not_count_as_a_penalty_path():
    """A violation that can only fire on failed calls does not cover an ok-only open and discharge."""
    text = (
        "violation failed (-0.2) { on call error }\n"
        "obligation o (+0.5, expire 0) { open on call book ok discharge on call check ok }"
    )
    assert codes(text) == ["RV301"]


def test_progress_only_rule_set_is_rv301_and_a_penalty_silences_it():
    """Progress in a rule set that penalises nothing is RV301; one violation on calls is enough."""
    progress = "progress p (+0.2) { signal goals decreasing }\n"
    assert codes(progress) == ["RV301"]
    assert codes(progress + "repeat_error (-0.3)") == []


# ---- RV302 double counting -----------------------------------------------------------


def test_equal_conditions_up_to_order_and_nesting_are_rv302():
    """`call error` and `error and (call)` are one reason."""
    ((code, message),) = lints_of("violation a (-0.1) { on call error }\nviolation b (-0.1) { on error and (call) }")
    assert code == "RV302" and "'b'" in message and "'a'" in message


def test_double_counting_really_double_penalises():
    """What RV302 claims: one failed call receives both penalties."""
    program = loads(TOOLS + "violation a (-0.1) { on call error }\nviolation b (-0.2) { on error call }")
    credits = program.score(Episode("e", (call(0, "book", "error"),)))
    assert sorted(c.rule for c in credits) == ["a", "b"]


def test_narrowing_to_a_tool_is_rv302_on_the_narrow_rule():
    """`call book error` only narrows `call error`: reported on the narrower rule."""
    ((code, message),) = lints_of(
        "violation narrow (-0.2) { on call book error }\nviolation broad (-0.1) { on call error }"
    )
    assert code == "RV302" and message.startswith("every event that fires rule 'narrow' also fires rule 'broad'")


def test_repeat_error_beside_errored_call_is_not_double_counting():
    """A repeated failure and a failure are different reasons."""
    assert codes("repeat_error (-0.3)\nviolation errored_call (-0.1) { on call error }") == []


def test_step_cost_beside_a_failure_penalty_is_not_double_counting():
    """A bare `call` (a step cost) tests only the kind of event: never the broader rule."""
    assert codes("violation step (-0.01) { on call }\nviolation failed (-0.1) { on call error }") == []


def test_extra_behavioural_test_is_a_different_reason():
    """`tag write` narrowed by an `unless seen` adds a reason, not scope: not RV302."""
    text = (
        "violation writes (-0.05) { on call tag write }\n"
        'violation unconfirmed (-0.5) { on call tag write unless seen (user says "yes") }'
    )
    assert codes(text) == []


def test_two_obligations_with_equal_open_and_discharge_are_rv302():
    """Equal open, discharge and binding: each discharge is paid twice."""
    body = "{ open on call book ok discharge on call check ok same item }"
    assert codes(f"obligation a (+0.1, expire -0.1) {body}\nobligation b (+0.1, expire -0.2) {body}") == ["RV302"]
    other = "{ open on call book ok discharge on call check ok same target }"
    assert codes(f"obligation a (+0.1, expire -0.1) {body}\nobligation b (+0.1, expire -0.2) {other}") == []


def test_two_progress_rules_on_one_signal_are_rv302():
    """Same signal, same direction: RV302; opposite directions are different reasons."""
    base = "repeat_error (-0.3)\nprogress a (+0.1) { signal g decreasing }\n"
    assert codes(base + "progress b (+0.1) { signal g decreasing }") == ["RV302"]
    assert codes(base + "progress b (+0.1) { signal g increasing }") == []


# ---- RV303 discharge implied by open ---------------------------------------------------


def test_discharge_implied_by_open_is_rv303_and_never_opens():
    """Open `call ok result contains "token"` implies the discharge: RV303, and it never pays or expires."""
    text = (
        "violation failed (-0.5) { on call error }\n"
        'obligation advance (+0.5, expire -0.25) {\n  open on call ok and result contains "token"\n'
        '  discharge on call ok and (result contains "token" or call submit)\n  deadline within 3 calls\n}'
    )
    ((code, message),) = lints_of(text)
    assert code == "RV303" and "can never open" in message
    episode = Episode("e", tuple(call(i, "fetch", result=f"token k{i}") for i in range(5)))
    assert [c for c in loads(TOOLS + text).score(episode) if c.rule == "advance"] == []


def test_implication_through_scope_and_or():
    """Discharge scope that every opening class surely has (a tag of the opened tool) counts; an `or` open
    needs every branch to imply."""
    assert codes("obligation o (+0.1, expire -0.1) { open on call book ok discharge on call tag write ok }") == [
        "RV303"
    ]
    assert codes(
        "obligation o (+0.1, expire -0.1) { open on call book ok or call wipe ok discharge on call tag write ok }"
    ) == ["RV303"]
    assert (
        codes(
            "obligation o (+0.1, expire -0.1) { open on call book ok or call fetch ok discharge on call tag write ok }"
        )
        == []
    )
    assert codes("obligation o (+0.1, expire -0.1) { open on call tag write ok discharge on call book ok }") == []


def test_open_matching_malformed_calls_is_rv303_with_its_own_message():
    """Open on any write, discharge on any write: it opens only on malformed or unanswered calls."""
    ((code, message),) = lints_of(
        "obligation o (+0.1, expire -0.1) { open on call tag write discharge on call tag write }"
    )
    assert code == "RV303" and "only on malformed or unanswered calls" in message


def test_recover_style_obligation_is_not_rv303():
    """Open on an error, discharge on an ok call: different statuses, no implication."""
    assert codes("obligation r (+0.25, expire -0.25) { open on call error discharge on call ok }") == []


# ---- RV304 weights that dwarf the outcome ----------------------------------------------


def test_rule_above_the_outcome_is_rv304_and_options_scale_it():
    """|weight| 2 > 1 x outcome 1: RV304; with outcome_scale 3 or rule_ratio 2 it is silent."""
    text = "violation harm (-2.0) { on call wipe }"
    assert codes(text) == ["RV304"]
    assert codes(text, outcome_scale=3.0) == []
    assert codes(text, rule_ratio=2.0) == []
    assert codes("violation harm (-1.0) { on call wipe }") == []


def test_event_bound_above_total_ratio_is_rv304():
    """Six rules of bound 1 sum to 6 > 5: one RV304 for the rule set; total_ratio 6 silences it."""
    text = "".join(
        f"violation v{i} (-1.0) {{ on {c} }}\n"
        for i, c in enumerate(["call fetch", "call book", "call wipe", "call check", "call submit", "assistant"])
    )
    assert codes(text) == ["RV304"]
    assert codes(text, total_ratio=6.0) == []


@pytest.mark.parametrize("field", ["outcome_scale", "rule_ratio", "total_ratio"])
def test_bad_lint_option_names_the_field(field):
    """A non-positive option is a ValueError naming it."""
    result = check_text(TOOLS + "repeat_error (-0.3)", "l.rlvp")
    with pytest.raises(ValueError, match=field):
        lint(result.ruleset, LintOptions(**{field: 0}))


# ---- RV305 unreachable deadline ---------------------------------------------------------


def test_before_condition_no_event_satisfies_is_rv305():
    """`before call submit and assistant` can never pass; `before call submit` can."""
    body = "open on call book ok discharge on call check ok deadline before"
    assert codes(f"obligation o (+0.1, expire -0.1) {{ {body} call submit and assistant }}") == ["RV305"]
    assert codes(f"obligation o (+0.1, expire -0.1) {{ {body} call submit }}") == []
    assert codes(f'obligation o (+0.1, expire -0.1) {{ {body} user says "bye" }}') == []


# ---- registration and the CLI -------------------------------------------------------------


def test_codes_are_registered_and_documented():
    """Every lint code is in diagnostics.CODES and has its entry in docs/diagnostics.md (the page
    generated from that table; tests/e2e/test_first_hour.py checks it is up to date)."""
    doc = (REPO / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    for code in LINT_CODES:
        assert CODES[code].startswith("warning:")
        assert f"| [{code}](#{code.lower()}) |" in doc and f"\n## {code}\n" in doc


def test_cli_shows_lints_and_warnings_as_errors_fails(capsys):
    """rlvp-compile prints the warning and exits 0; with --warnings-as-errors it exits 1."""
    path = str(REPO / "tests" / "golden" / "lints" / "outsized_weight.rlvp")
    assert compile_main([path]) == 0
    assert "warning[RV304]" in capsys.readouterr().err
    assert compile_main([path, "--warnings-as-errors"]) == 1


def test_check_file_lints_only_when_asked():
    """The library's check_file leaves lints to the caller (rlvp-compile asks for them)."""
    path = str(REPO / "tests" / "golden" / "lints" / "outsized_weight.rlvp")
    assert check_file(path).diagnostics == []
    assert [d.code for d in check_file(path, lints=True).diagnostics] == ["RV304"]
