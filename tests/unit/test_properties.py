"""Built-in properties (rlvp_dsl.testing.properties, `rlvp-compile --check`): each catches a seeded bug,
and the stock rules pass."""

from __future__ import annotations

import glob
import json

import pytest

from rlvp_dsl import load_program
from rlvp_dsl.cli.compile import main
from rlvp_dsl.compile import Program
from rlvp_dsl.events import Credit
from rlvp_dsl.testing.properties import check_program, episode_json, render

from conftest import REPO

RULES = REPO / "tests" / "rules"
EXAMPLES = 40


def by_name(results):
    return {r.name: r for r in results}


def test_farmable_file_fails_not_farmable_with_a_small_counterexample():
    """The farmable obligation (opened by a free read) is caught, shrunk to <= 2 events."""
    program = load_program(str(RULES / "farmable.rlvp"))
    result = by_name(check_program(program, examples=EXAMPLES, properties=("not_farmable",)))["not_farmable"]
    assert result.status == "fail"
    finding = result.finding
    assert len(finding.episode.events) <= 2 and finding.variant is not None
    assert "no-op read `get_order`" in finding.message
    assert json.loads(episode_json(finding.variant))["events"][0]["tool"] == "get_order"


def test_never_firing_rule_fails_reachable_with_the_reason(tmp_path):
    """A contradictory condition, and a tag the manifest's tools lack, fail `reachable` with why."""
    program = load_program(str(RULES / "never_fires.rlvp"))
    result = by_name(check_program(program, examples=EXAMPLES, properties=("reachable",)))["reachable"]
    assert result.status == "fail"
    assert any("`call get_item` and `call set_item` never hold on the same event" in n for n in result.notes)
    from rlvp_dsl.manifests import load_manifest

    manifest = load_manifest(str(RULES / "never_fires_tools.json"))
    result = check_program(program, tools=manifest, tools_source="M", examples=EXAMPLES, properties=("reachable",))[0]
    assert any(
        "test_after_write (discharge) can never fire" in n and "tagged `verify`" in n and "`run_tests`" in n
        for n in result.notes
    )


def test_open_implying_discharge_is_explained():
    """An obligation whose open condition implies its discharge is reported as never opening."""
    from rlvp_dsl import loads

    program = loads(
        "tool a : read target x\ntool b : write target x\n"
        "obligation o (+0.5, expire -0.5) { open on call a ok  discharge on call ok }\n"
    )
    result = check_program(program, examples=EXAMPLES, properties=("reachable",))[0]
    assert result.status == "warn"
    assert any("it can never open" in n for n in result.notes)


class _Broken(Program):
    """A program with a seeded bug in scoring (`bug` picks which)."""

    bug = ""

    def score(self, episode):
        credits = super().score(episode)
        if self.bug == "unbounded" and episode.events:
            credits.append(Credit(0, "extra", 100.0, "x:1:1", "seeded", "violation"))
        if self.bug == "twice":
            credits += [c for c in credits if c.trigger == "discharge"]
        if self.bug == "reversed":
            credits = credits[::-1]
        return credits


@pytest.mark.parametrize(
    "bug, prop", [("unbounded", "bounded"), ("twice", "discharge_once"), ("reversed", "deterministic")]
)
def test_each_property_catches_a_seeded_bug(bug, prop):
    """Extra credit breaks `bounded`, a doubled discharge `discharge_once`, batch != stream `deterministic`."""
    base = load_program(str(REPO / "rules" / "tau2_airline.rlvp"))
    broken = _Broken(base.ruleset)
    broken.bug = bug
    result = check_program(broken, examples=EXAMPLES, properties=(prop,))[0]
    assert result.status == "fail", render([result], broken, "")
    assert result.finding.episode.events


def test_order_sensitivity_is_checked_for_history_free_rules():
    """A history-free violation that depended on order would fail; the report lists which rules may."""
    program = load_program(str(REPO / "rules" / "tau2_airline.rlvp"))
    result = check_program(program, examples=EXAMPLES, properties=("deterministic",))[0]
    assert result.status == "ok"
    assert "order-insensitive: errored_call;" in result.notes[0]


@pytest.mark.parametrize("path", sorted(glob.glob(str(REPO / "rules" / "*.rlvp"))), ids=lambda p: p.split("/")[-1])
def test_stock_rules_pass(path):
    """No stock rule file fails a property (an unreached rule is at most a warning)."""
    program = load_program(path)
    results = check_program(program, examples=EXAMPLES)
    assert [r.name for r in results if r.status == "fail"] == [], render(results, program, path)


# ---- CLI -----------------------------------------------------------------------------


def test_cli_check_farmable_exits_1_and_prints_the_counterexample(capsys):
    """`rlvp-compile --check farmable.rlvp` exits 1 and prints the shrunk episode and explained credits."""
    assert main(["--check", str(RULES / "farmable.rlvp"), "--examples", str(EXAMPLES)]) == 1
    out = capsys.readouterr().out
    assert "FAIL not_farmable" in out
    assert '"tool": "get_invoice"' in out
    assert "check_invoice +0.5 at " in out and "farmable.rlvp:14:1" in out


def test_cli_check_stock_rules_with_manifest_exits_0(capsys):
    """The airline rules against the tau2 manifest: every property ok, exit 0."""
    manifest = REPO / "examples" / "data" / "tau2" / "airline" / "tools_manifest.json"
    code = main(
        ["--check", str(REPO / "rules" / "tau2_airline.rlvp"), "--manifest", str(manifest), "--examples", str(EXAMPLES)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    for name in ("bounded", "not_farmable", "discharge_once", "deterministic"):
        assert f"ok   {name}" in out
    assert "ok   reachable" in out or "warn reachable" in out  # a small budget may miss a rare rule


def test_cli_check_usage_errors(capsys, tmp_path):
    """--manifest without --check, a missing manifest and --examples 0 are usage errors (2)."""
    rules = str(REPO / "rules" / "lean.rlvp")
    assert main([rules, "--manifest", "x.json"]) == 2
    assert main(["--check", rules, "--manifest", str(tmp_path / "missing.json")]) == 2
    assert main(["--check", rules, "--examples", "0"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["--check", rules, "--manifest", str(bad)]) == 1
    assert "error" in capsys.readouterr().err


def test_cli_check_never_firing_and_warnings_as_errors(capsys, tmp_path):
    """A rule that can never fire fails (1); one merely not seen warns: 0, or 1 with --warnings-as-errors."""
    assert main(["--check", str(RULES / "never_fires.rlvp"), "--examples", "20"]) == 1
    assert "can never fire" in capsys.readouterr().out
    rules = tmp_path / "o.rlvp"
    # possible for some argument value, but none the generator draws (regex samples are ASCII)
    rules.write_text("tool a : read target x\nviolation odd (-1) { on call a arg x matches /^[^\\x00-\\x7f]{9}$/ }\n")
    assert main(["--check", str(rules), "--examples", "20"]) == 0
    assert "warn reachable" in capsys.readouterr().out
    assert main(["--check", str(rules), "--examples", "20", "--warnings-as-errors"]) == 1
