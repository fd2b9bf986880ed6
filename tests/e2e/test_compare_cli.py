"""`rlvp-score --compare A B TRAJECTORY...` end to end, as a subprocess, on the samples under examples/:
the text, --json, --csv and --html outputs checked by value against rlvp-score's own scoring of each
rule file, and bad input (a missing rule file, A == B, a trajectory that does not read)."""

from __future__ import annotations

import csv
import html
import io
import json
import math
from pathlib import Path

import pytest

from tests.e2e.test_cli import REPO, no_traceback, run

RULES_A = "rules/tau2_airline.rlvp"
#: A small A: one rule that gives both failed trials of the dead group below the same total.
SMALL_A = (
    "tool cancel_reservation : write target reservation_id\n"
    "violation cancel_ok (-0.1) { on call cancel_reservation ok }\n"
)
#: B: A and one rule more, which separates the two trials (the second cancels with an error first).
EXTRA_RULE = "violation cancel_errored (-1) { on call cancel_reservation error }\n"
SAMPLES = "examples/data/tau2_simulations"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A's and B's rule files, and examples/episodes/airline_tau2_results.json with both trials failed (one
    outcome-dead group)."""
    folder = tmp_path_factory.mktemp("compare")
    rules_a, rules_b = folder / "a.rlvp", folder / "b.rlvp"
    rules_a.write_text(SMALL_A, encoding="utf-8")
    rules_b.write_text(SMALL_A + EXTRA_RULE, encoding="utf-8")
    data = json.loads((REPO / "examples/episodes/airline_tau2_results.json").read_text(encoding="utf-8"))
    for simulation in data["simulations"]:
        simulation["reward_info"]["reward"] = 0.0
    dead = folder / "dead.json"
    dead.write_text(json.dumps(data), encoding="utf-8")
    return {"a": rules_a, "b": rules_b, "dead": dead, "folder": folder}


@pytest.fixture(scope="module")
def compared(inputs) -> dict:
    """--json, --csv and --html of one run, and each rule file's own rlvp-score --json on the same episodes."""
    out = inputs["folder"]
    done = run(
        "score",
        "--compare",
        inputs["a"],
        inputs["b"],
        SAMPLES,
        inputs["dead"],
        "--json",
        "--csv",
        out / "cmp.csv",
        "--html",
        out / "cmp.html",
    )
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    singles = {}
    for side, rules in (("a", inputs["a"]), ("b", inputs["b"])):
        one = run("score", rules, SAMPLES, inputs["dead"], "--json")
        assert one.returncode == 0, one.stderr
        singles[side] = json.loads(one.stdout)
    return {
        "json": json.loads(done.stdout),
        "csv": (out / "cmp.csv").read_text(encoding="utf-8"),
        "html": (out / "cmp.html").read_text(encoding="utf-8"),
        "singles": singles,
    }


def _live_share(single: dict) -> float:
    """The share of outcome-dead (file, task) groups whose process totals differ, from rlvp-score --json."""
    groups: dict[tuple, list[dict]] = {}
    for e in single["episodes"]:
        if "#simulations[" in e["id"]:
            groups.setdefault((e["source"], _task(e)), []).append(e)
    dead = [g for g in groups.values() if len(g) >= 2 and len({e["outcome"] for e in g}) == 1]
    return sum(max(e["total"] for e in g) - min(e["total"] for e in g) > 1e-9 for g in dead) / len(dead)


def _task(episode: dict) -> str:
    path = REPO / episode["source"] if not Path(episode["source"]).is_absolute() else Path(episode["source"])
    data = json.loads(path.read_text(encoding="utf-8"))
    index = int(episode["id"].rsplit("[", 1)[1].rstrip("]"))
    return data["simulations"][index]["task_id"]


def test_json_matches_each_rule_files_own_scores(inputs, compared):
    """The correlations are rlvp-score's own (per rule and in total); the dead group is live under B only."""
    doc, singles = compared["json"], compared["singles"]
    assert (doc["b"], doc["episodes"], doc["with_outcome"], doc["groups"], doc["dead_groups"]) == (
        str(inputs["b"]),
        6,
        6,
        1,
        1,
    )
    assert (doc["resamples"], doc["seed"], doc["level"]) == (2000, 0, 0.95)
    scoring = (REPO / "docs" / "scoring.md").read_text(encoding="utf-8")
    assert [key for key in doc if f'"{key}"' not in scoring] == []  # every key is documented
    total = doc["total"]["correlation"]
    assert total["a"] == pytest.approx(singles["a"]["summary"]["process_outcome_correlation"])
    assert total["b"] == pytest.approx(singles["b"]["summary"]["process_outcome_correlation"])
    assert total["diff"] == pytest.approx(total["b"] - total["a"])
    assert total["ci95"][0] <= total["diff"] <= total["ci95"][1]
    for side in ("a", "b"):
        for rule in singles[side]["summary"]["rules"]:
            row = next(r for r in doc["rules"] if r["name"] == rule["name"])
            assert row[f"in_{side}"] is True
            want = rule["outcome_correlation"]
            assert row["correlation"][side] == (pytest.approx(want) if want is not None else None)
    live = doc["total"]["live_share"]
    assert (live["a"], live["b"]) == (_live_share(singles["a"]), _live_share(singles["b"])) == (0.0, 1.0)
    assert live["ci95"] == [1.0, 1.0]
    extra = next(r for r in doc["rules"] if r["name"] == "cancel_errored")
    assert (extra["in_a"], extra["in_b"], extra["live_share"]["b"]) == (False, True, 1.0)
    moved = {m["id"]: m for m in doc["rank_moves"]}
    errored = moved["dead.json#simulations[1]"]  # the trial that cancels with an error first
    assert errored["only_b"] == [{"event": errored["only_b"][0]["event"], "rule": "cancel_errored", "value": -1.0}]
    assert errored["total_b"] == pytest.approx(errored["total_a"] - 1.0)
    assert doc["verdict"].endswith(
        "B makes more dead groups live: +1.00 [+1.00, +1.00]; small sample, the CIs are indicative only: "
        "6 episodes with an outcome (< 20), 1 outcome-dead group (< 5)"
    )
    assert doc["small_sample"] == ["6 episodes with an outcome (< 20)", "1 outcome-dead group (< 5)"]


def test_csv_rows_carry_the_json_values(compared):
    """One CSV row per rule (the total first), the same numbers as the JSON document."""
    doc = compared["json"]
    rows = list(csv.DictReader(io.StringIO(compared["csv"])))
    assert [r["rule"] for r in rows] == ["total", *(r["name"] for r in doc["rules"])]
    for row, want in zip(rows, [doc["total"], *doc["rules"]]):
        assert (row["in_a"], row["in_b"]) == (str(int(want["in_a"])), str(int(want["in_b"])))
        for prefix, key in (("corr", "correlation"), ("live", "live_share")):
            d = want[key]
            low, high = d["ci95"] or (None, None)
            for column, value in zip(("a", "b", "diff", "low", "high"), (d["a"], d["b"], d["diff"], low, high)):
                cell = row[f"{prefix}_{column}"]
                assert (cell == "") if value is None else math.isclose(float(cell), value), (row["rule"], column)


def test_html_shows_a_and_b_side_by_side(compared):
    """The existing report page with the comparison table, the verdict and A's and B's rule tables."""
    page, doc = compared["html"], compared["json"]
    assert f'<p class="verdict" id="verdict">{html.escape(doc["verdict"])}</p>' in page
    table = page.split('id="compare-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr data-rule=") == 1 + len(doc["rules"])
    side = page.split('id="rules-side-by-side"', 1)[1].split("</section>", 1)[0]
    a_table, b_table = side.split('<table class="rules">')[1:3]
    assert "cancel_errored" not in a_table and "cancel_errored" in b_table
    assert a_table.count("<tr data-rule=") + 1 == b_table.count("<tr data-rule=")
    assert 'id="rlvp-data"' in page and "A against B" in page


def test_text_output_ends_with_the_verdict(inputs, compared):
    """Without --json: the table and the rank moves, the verdict last."""
    done = run("score", "--compare", inputs["a"], inputs["b"], SAMPLES, inputs["dead"])
    no_traceback(done)
    assert done.returncode == 0
    lines = done.stdout.rstrip("\n").split("\n")
    assert lines[-1] == f"verdict: {compared['json']['verdict']}"
    assert "2000 resamples" in done.stdout and "| cancel_errored | B |" in done.stdout


def test_the_same_rule_file_twice_gives_no_difference(inputs):
    """A against a copy of itself: 0 difference, no episode moves, "no difference shown"."""
    copy = inputs["folder"] / "copy.rlvp"
    copy.write_text((REPO / RULES_A).read_text(encoding="utf-8"), encoding="utf-8")
    done = run("score", "--compare", RULES_A, copy, SAMPLES, inputs["dead"], "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["total"]["correlation"]["diff"] == 0.0 and doc["total"]["correlation"]["ci95"] == [0.0, 0.0]
    assert doc["rank_moves"] == [] and doc["verdict"].startswith("no difference shown")


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing rules", "rule file not found: no_such.rlvp"),
        ("same paths", "A and B are the same file"),
        ("bad trajectory", "did not read"),
        ("no trajectory", "--compare needs two rule files and a trajectory"),
        ("one rule file", "--compare needs two rule files and a trajectory"),
        ("with --explain", "--explain does not go with --compare"),
    ],
)
def test_bad_input_is_a_clear_error_with_exit_2(inputs, case, message):
    """A missing rule file, A == B, a trajectory that does not read (beside one that does), no trajectory, or an
    option --compare does not take: one error line, exit 2, no traceback."""
    bad = inputs["folder"] / "broken.json"
    bad.write_text('{"simulations": [', encoding="utf-8")
    args = {
        "missing rules": ["no_such.rlvp", inputs["b"], SAMPLES],
        "same paths": [RULES_A, RULES_A, SAMPLES],
        "bad trajectory": [RULES_A, inputs["b"], SAMPLES, bad],
        "no trajectory": [RULES_A, inputs["b"]],
        "one rule file": [RULES_A],
        "with --explain": [RULES_A, inputs["b"], SAMPLES, "--explain"],
    }[case]
    done = run("score", "--compare", *args)
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""
    if case == "bad trajectory":
        assert str(bad) in done.stderr
