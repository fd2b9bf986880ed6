"""The HTML report's model (rlvp_dsl/html/model.py: what goes where), its rendering, and `rlvp-score --html`."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO
from html_golden import CLEAN, EXPECTED, GOLDEN, LINKS, RULE_LINES, RULES, RULES_PATH

from rlvp_dsl import explain
from rlvp_dsl.cli.score import main as score_main
from rlvp_dsl.events import Credit
from rlvp_dsl.html import build_report, render_report
from rlvp_dsl.html.model import histogram, linked_event, script_safe_json, split_location
from rlvp_dsl.pipeline import loads


@pytest.fixture(scope="module")
def report():
    program = loads(RULES, RULES_PATH)
    scored = [(e, program.score(e)) for e in (GOLDEN, CLEAN)]
    return build_report(program, scored, {RULES_PATH: RULES}, result_limit=200)


def _placed(report):
    return sorted(
        (ep["id"], ev["index"], c["rule"], c["value"], c["trigger"])
        for ep in report.episodes
        for ev in ep["events"]
        for c in ev["credits"]
    )


def test_every_credit_sits_on_its_event_with_its_value(report):
    assert _placed(report) == sorted(EXPECTED)
    assert all(not ep["unplaced"] for ep in report.episodes)


def test_a_credit_links_its_rule_line(report):
    for ep in report.episodes:
        for ev in ep["events"]:
            for c in ev["credits"]:
                assert (c["src"], c["line"]) == (0, RULE_LINES[c["rule"]])
                assert report.sources[0].lines[c["line"] - 1].split()[1] == c["rule"]
    assert [(r.name, r.source, r.line) for r in report.rules] == [(n, 0, k) for n, k in RULE_LINES.items()]


def test_obligation_credits_link_the_other_event_and_it_points_back(report):
    links = {}
    for ep in report.episodes:
        for ev in ep["events"]:
            for c in ev["credits"]:
                if c["kind"] == "obligation":
                    links[(ep["id"], ev["index"])] = (c["link"]["event"], c["link"]["what"])
                else:
                    assert c["link"] is None
    assert links == LINKS
    by_id = {ep["id"]: ep for ep in report.episodes}
    for (episode, at), (other, what) in LINKS.items():
        marks = by_id[episode]["events"][other]["marks"]
        assert [(m["rule"], m["event"], m["what"]) for m in marks] == [("test_after_edit", at, what)]


@pytest.mark.parametrize(
    "reason, trigger, related, deadline, expected",
    [
        (explain.discharged(3), "discharge", 3, None, (3, "opened")),
        (explain.expired_before(7), "expire", 7, "before", (7, "expired")),
        (explain.expired_within(2, 9), "expire", 9, "within", (9, "expired")),
        (explain.expired_end(), "expire", 11, "end", (11, "episode ended")),
        (explain.violation_text(GOLDEN.events[1]), "fire", None, None, None),
    ],
)
def test_the_linked_event_is_the_credits_related_event(reason, trigger, related, deadline, expected):
    kind = "obligation" if trigger != "fire" else "violation"
    credit = Credit(4, "r", 0.1, "x.rlvp:1:1", reason, kind, trigger, related_event=related, deadline=deadline)
    assert linked_event(credit) == expected


def test_the_scorer_gives_each_obligation_credit_its_related_event_and_deadline(report):
    """The links the page draws come from Credit fields the scorer sets, not from the explanation's words."""
    program = loads(RULES, RULES_PATH)
    for episode in (GOLDEN, CLEAN):
        for c in program.score(episode):
            assert (c.span.file, c.span.line) == (RULES_PATH, RULE_LINES[c.rule])
            if c.trigger == "discharge":
                assert c.reason == explain.discharged(c.related_event) and c.deadline is None
            elif c.trigger == "expire":
                assert c.deadline in ("before", "within", "end") and c.related_event is not None
            else:
                assert (c.related_event, c.deadline) == (None, None)


def test_summary_rows_count_fires_episodes_and_totals(report):
    rows = {r.name: r.summary for r in report.rules}
    assert (rows["edit_unread"].fires, rows["edit_unread"].episodes, rows["edit_unread"].total) == (1, 1, -0.5)
    obligation = rows["test_after_edit"]
    assert (obligation.fires, obligation.discharges, obligation.expiries, obligation.episodes) == (3, 2, 1, 2)
    assert obligation.total == pytest.approx(0.7)
    # golden (outcome 0) took -0.5 from edit_unread, clean (outcome 1) none: r = +1
    assert rows["edit_unread"].outcome_correlation == pytest.approx(1.0)


def test_episode_records_carry_totals_hits_and_shortened_results(report):
    golden, clean = report.episodes
    assert golden["total"] == pytest.approx(-0.4) and clean["total"] == pytest.approx(0.5)
    assert golden["hit"] == [0, 1, 2] and clean["hit"] == [2]
    assert golden["rule_totals"] == pytest.approx({"edit_unread": -0.5, "errored": -0.1, "test_after_edit": 0.2})
    long = golden["events"][3]
    assert len(long["result"]) == 200 and long["result_len"] == len(GOLDEN.events[3].result)
    assert golden["events"][1]["args"] == '{"path": "a.py"}' and golden["events"][2]["status"] == "error"


def test_histogram_has_a_bar_per_distinct_total_split_by_outcome():
    h = histogram([-0.5, 0.0, 0.0, -0.5, 0.1], [0.0, 1.0, 0.0, None, 1.0])
    assert h.labels == ("-0.5", "0", "+0.1")
    assert (h.low, h.high, h.unknown) == ((1, 1, 0), (0, 1, 1), (1, 0, 0))
    assert h.tallest == 2


def test_histogram_bins_many_distinct_totals():
    totals = [k / 10 for k in range(100)]
    h = histogram(totals, [1.0] * 100, max_bars=10)
    assert len(h.labels) == 10 and h.high == (10,) * 10 and sum(h.low) == 0
    assert (h.labels[0], h.labels[-1]) == ("[+0, +0.99)", "[+8.91, +9.9]")


def test_script_safe_json_cannot_close_the_script_element():
    doc = {"text": "</script><script>alert(1)</script> & \u2028"}
    text = script_safe_json(doc)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == doc


def test_split_location():
    assert split_location("rules/x.rlvp:42:1") == ("rules/x.rlvp", 42)
    assert split_location("C:/r/x.rlvp:3:7") == ("C:/r/x.rlvp", 3)
    assert split_location("<generated>") == ("<generated>", 0)


def test_the_page_is_self_contained_and_anchors_every_rule_line(report):
    page = render_report(report)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must load nothing"
    assert "<link" not in page and "@import" not in page
    for line in range(1, len(RULES.split("\n")) + 1):
        assert f'id="src-0-L{line}"' in page
    data = json.loads(re.search(r'<script type="application/json" id="rlvp-data">(.*?)</script>', page, re.S).group(1))
    assert data["rules"] == ["edit_unread", "errored", "test_after_edit"]
    assert [e["id"] for e in data["episodes"]] == ["golden", "clean"]
    assert "</script><b>" not in page  # the assistant text of event 10 stays data


def test_rlvp_score_writes_the_report_into_a_new_folder(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "report.html"
    code = score_main([str(REPO / "rules/tau2_airline.rlvp"), str(REPO / "examples/episodes"), "--html", str(out)])
    assert code == 0
    page = out.read_text(encoding="utf-8")
    assert "write_unconfirmed" in page and "cancel_confirmed" in page
    assert f"wrote the HTML report of 6 episodes to {out}" in capsys.readouterr().err


def test_rlvp_score_html_to_an_unwritable_path_is_an_io_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = score_main(
        [str(REPO / "rules/tau2_airline.rlvp"), str(REPO / "examples/episodes"), "--html", str(blocker / "report.html")]
    )
    assert code == 2
    assert "cannot write" in capsys.readouterr().err


def test_rlvp_score_html_goes_with_csv_on_stdout_and_refuses_stdout_itself(tmp_path, capsys):
    out = tmp_path / "report.html"
    rules, episodes = str(REPO / "rules/tau2_airline.rlvp"), str(REPO / "examples/episodes")
    assert score_main([rules, episodes, "--csv", "-", "--html", str(out)]) == 0
    assert out.is_file() and capsys.readouterr().out.startswith("id,source,domain,outcome")
    assert score_main([rules, episodes, "--html", "-"]) == 2
    assert "--html needs a file path" in capsys.readouterr().err


def test_a_non_finite_outcome_is_shown_as_unknown():
    program = loads(RULES, RULES_PATH)
    odd = CLEAN.__class__("odd", CLEAN.events, outcome=float("nan"))
    report = build_report(program, [(odd, program.score(odd))], {RULES_PATH: RULES})
    assert report.episodes[0]["outcome"] is None
    assert json.loads(report.data_json())["episodes"][0]["outcome"] is None


def test_chips_are_coloured_by_the_sign_of_the_rules_total(report):
    """An episode's rule chips carry the sign of the rule's total (red, green, grey), not only the rule."""
    golden, clean = report.episodes
    assert [(c["rule"], c["sign"]) for c in golden["chips"]] == [
        ("edit_unread", "neg"),
        ("errored", "neg"),
        ("test_after_edit", "pos"),
    ]
    assert [(c["rule"], c["sign"]) for c in clean["chips"]] == [("test_after_edit", "pos")]
    script = (REPO / "rlvp_dsl" / "html" / "templates" / "report.js").read_text()
    assert '"hit " + c.sign' in script  # the page draws the chip with that class


@pytest.mark.parametrize("x,sign", [(0.25, "pos"), (-0.1, "neg"), (0.0, "zero"), (-4e-17, "zero"), (3e-12, "zero")])
def test_sign_of_a_total_ignores_float_dust(x, sign):
    from rlvp_dsl.html.model import sign_of

    assert sign_of(x) == sign


def test_a_correlation_of_float_dust_is_not_shown_as_minus_zero():
    """-4e-17 (a constant column's rounding) is +0.000 on the page, never -0.000."""
    from rlvp_dsl.html.render import _signed

    assert _signed(-4e-17, "+.3f") == "+0.000" and _signed(-4e-17, ".3f") == "0.000"
    assert _signed(-0.25, "+.3f") == "-0.250" and _signed(None) == "n/a"


def test_the_timeline_carries_each_events_signal_values():
    """An event's environment signals (goals_remaining, ...) are in its record, non-finite ones as None."""
    from rlvp_dsl.events import Episode, Event

    program = loads(RULES, RULES_PATH)
    events = [
        Event(index=0, kind="user", text="go"),
        Event(
            index=1,
            kind="call",
            tool="read_file",
            arguments={"path": "a.py"},
            result="x",
            signals={"goals_remaining": 2, "score": float("inf")},
        ),
    ]
    episode = Episode("sig", events, outcome=1.0)
    report = build_report(program, [(episode, program.score(episode))], {RULES_PATH: RULES})
    user, call = report.episodes[0]["events"]
    assert "signals" not in user and call["signals"] == {"goals_remaining": 2, "score": None}
    assert json.loads(report.data_json())["episodes"][0]["events"][1]["signals"] == {
        "goals_remaining": 2,
        "score": None,
    }
