"""The HTML credit report of `rlvp-score --html`, opened in headless Chromium."""

from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="selenium is not installed (the test extra)")

from html_golden import CLEAN, EXPECTED, GOLDEN, LINKS, RULE_LINES, RULES, RULES_PATH  # noqa: E402
from .page_tools import open_page, pixel_spread  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from rlvp_dsl.html import build_report, write_report
from rlvp_dsl.pipeline import loads

EPISODE_NUMBER = {"golden": 0, "clean": 1}


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    program = loads(RULES, RULES_PATH)
    report = build_report(program, [(e, program.score(e)) for e in (GOLDEN, CLEAN)], {RULES_PATH: RULES})
    return write_report(report, tmp_path_factory.mktemp("report") / "report.html")


@pytest.fixture
def page(chromium, report_path):
    open_page(chromium, report_path)
    assert chromium.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    return chromium


def _open_all(driver):
    for row in driver.find_elements(By.CSS_SELECTOR, "tr.episode"):
        row.click()


def test_one_badge_per_credit_with_its_value_on_its_event(page):
    assert page.find_elements(By.CSS_SELECTOR, ".badge") == []  # timelines are drawn when opened
    _open_all(page)
    badges = page.find_elements(By.CSS_SELECTOR, "li.event .badge")
    assert len(badges) == len(EXPECTED)
    for episode, event, rule, value, _ in EXPECTED:
        on_event = page.find_elements(By.CSS_SELECTOR, f"#ep-{EPISODE_NUMBER[episode]}-ev-{event} .badge")
        assert [(b.get_attribute("data-rule"), float(b.get_attribute("data-value")), b.text) for b in on_event] == [
            (rule, value, f"{value:+.2f}")
        ]
    assert page.find_element(By.ID, "ep-0-ev-10").text.endswith("Done </script><b>not bold</b>")


def test_filtering_by_a_rule_hides_the_other_episodes_and_credits(page):
    _open_all(page)
    Select(page.find_element(By.ID, "rule-filter")).select_by_visible_text("edit_unread")
    rows = {
        r.get_attribute("data-episode"): r.is_displayed() for r in page.find_elements(By.CSS_SELECTOR, "tr.episode")
    }
    assert rows == {"0": True, "1": False}  # only the golden episode has an edit_unread credit
    shown = [b.get_attribute("data-rule") for b in page.find_elements(By.CSS_SELECTOR, ".badge") if b.is_displayed()]
    assert shown == ["edit_unread"]
    assert page.find_element(By.ID, "shown-count").text == "1 of 2 episodes shown"
    Select(page.find_element(By.ID, "rule-filter")).select_by_visible_text("all rules")
    assert all(r.is_displayed() for r in page.find_elements(By.CSS_SELECTOR, "tr.episode"))
    assert len([b for b in page.find_elements(By.CSS_SELECTOR, ".badge") if b.is_displayed()]) == len(EXPECTED)


def test_sorting_by_process_total(page):
    def order():
        return [r.get_attribute("data-episode") for r in page.find_elements(By.CSS_SELECTOR, "tr.episode")]

    page.find_element(By.CSS_SELECTOR, "button.sort[data-key=total]").click()
    assert order() == ["1", "0"]  # +0.5 before -0.4: descending first
    page.find_element(By.CSS_SELECTOR, "button.sort[data-key=total]").click()
    assert order() == ["0", "1"]


def test_a_credit_links_its_rule_line_and_an_obligation_its_other_event(page):
    page.find_element(By.CSS_SELECTOR, "tr.episode[data-episode='0']").click()
    credit = page.find_element(By.CSS_SELECTOR, "#ep-0-ev-3 .credit")
    source = credit.find_element(By.CSS_SELECTOR, "a.src-link-inline")
    assert source.get_attribute("href").endswith(f"#src-0-L{RULE_LINES['test_after_edit']}")
    source.click()
    line = page.find_element(By.ID, f"src-0-L{RULE_LINES['test_after_edit']}")
    assert "current" in line.get_attribute("class").split() and "obligation test_after_edit" in line.text
    other, what = LINKS[("golden", 3)]
    link = credit.find_element(By.CSS_SELECTOR, "a.event-link")
    assert link.get_attribute("href").endswith(f"#ep-0-ev-{other}") and link.text == f"{what} at event {other}"
    mark = page.find_element(By.CSS_SELECTOR, f"#ep-0-ev-{other} .mark")
    assert mark.find_element(By.CSS_SELECTOR, "a").get_attribute("href").endswith("#ep-0-ev-3")


def test_a_long_result_is_shortened_and_expands(page):
    page.find_element(By.CSS_SELECTOR, "tr.episode[data-episode='0']").click()
    result = page.find_element(By.CSS_SELECTOR, "#ep-0-ev-3 pre.result")
    full = GOLDEN.events[3].result
    assert len(result.text) < len(full)
    page.find_element(By.CSS_SELECTOR, "#ep-0-ev-3 button.expand").click()
    assert result.text == full


def test_a_screenshot_of_the_report_is_not_blank(page):
    _open_all(page)
    variance, colours = pixel_spread(page.get_screenshot_as_png())
    assert variance > 100 and colours > 50


def test_chips_are_coloured_by_sign_and_the_timeline_shows_signal_values(chromium, tmp_path):
    """A rule's chip is red for a penalty, green for a reward; an opened timeline lists each event's
    signal values; a total of float dust reads 0.00, not -0.00."""
    from rlvp_dsl.events import Episode, Event

    program = loads(RULES, RULES_PATH)
    signalled = Episode(
        "signalled",
        [
            *CLEAN.events[:1],
            Event(
                index=1,
                kind="call",
                tool="read_file",
                arguments={"path": "a.py"},
                result="x",
                signals={"goals_remaining": 2},
            ),
        ],
        outcome=1.0,
    )
    scored = [(e, program.score(e)) for e in (GOLDEN, CLEAN, signalled)]
    open_page(chromium, write_report(build_report(program, scored, {RULES_PATH: RULES}), tmp_path / "r.html"))
    chips = {
        (c.get_attribute("data-rule"), c.get_attribute("class"))
        for c in chromium.find_elements(By.CSS_SELECTOR, "tr.episode[data-episode='0'] .hit")
    }
    assert chips == {("edit_unread", "hit neg"), ("errored", "hit neg"), ("test_after_edit", "hit pos")}
    chromium.find_element(By.CSS_SELECTOR, "tr.episode[data-episode='2']").click()
    signal = chromium.find_element(By.CSS_SELECTOR, "#ep-2-ev-1 .signal")
    assert signal.get_attribute("data-signal") == "goals_remaining" and signal.text == "goals_remaining = 2"
    assert chromium.execute_script("return (-4e-17).toFixed(2)") == "-0.00"  # what the page must not show
    assert "-0.00" not in chromium.find_element(By.ID, "episode-rows").text
