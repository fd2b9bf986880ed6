"""The trainer's token page (trainer/token_page.py), opened in headless Chromium."""

from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="selenium is not installed (the test extra)")

from .page_tools import open_page, pixel_spread  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from rlvp_dsl.attach import CallCredits  # noqa: E402
from rlvp_dsl.events import Episode, Event  # noqa: E402
from trainer import token_page  # noqa: E402
from rlvp_dsl.advantages import compute_advantages  # noqa: E402
from trainer.batch import pad_batch  # noqa: E402
from trainer.types import Rollout  # noqa: E402

#: per rollout, its calls' credits; groups of two: (a, a), (b, b)
CREDITS = [[0.5, -0.25], [0.0], [0.0, 0.0], [-1.0, 0.0]]
OUTCOMES = [1.0, 0.0, 0.0, 0.0]
CALL_LENGTHS = [[2, 3], [2], [1, 1], [2, 2]]


def make_rollout(task_id: str, call_lengths: list[int], outcome: float) -> Rollout:
    """Calls of the given token lengths, each followed by 2 tool-output tokens (mask 0)."""
    ids, mask, spans, events = [], [], [], []
    for k, n in enumerate(call_lengths):
        spans.append((len(ids), len(ids) + n))
        ids += [10 + k] * n + [3, 3]
        mask += [1] * n + [0, 0]
        events.append(Event(index=k, kind="call", tool=f"t{k}", arguments={"x": str(k)}))
    return Rollout(task_id, [1, 2], ids, mask, spans, Episode(id=task_id, events=events, outcome=outcome), outcome)


def credits_of(values: list[float]) -> CallCredits:
    return CallCredits(tuple(values), tuple(int(v < 0) for v in values), tuple(int(v > 0) for v in values))


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    rs = [make_rollout("ab"[k // 2], lens, out) for k, (lens, out) in enumerate(zip(CALL_LENGTHS, OUTCOMES))]
    cs = [credits_of(v) for v in CREDITS]
    _, _, mask = pad_batch(rs)
    adv = compute_advantages(
        [OUTCOMES[:2], OUTCOMES[2:]],
        [cs[:2], cs[2:]],
        [[r.call_spans for r in rs[:2]], [r.call_spans for r in rs[2:]]],
        mask,
        credit_mode="token",
        process_weight=1.0,
    )
    return token_page.write(
        tmp_path_factory.mktemp("run"), 3, "rlvp", rs, cs, adv.advantages, adv.outcome, adv.process, mask, 1.0, count=4
    )


@pytest.fixture
def page(chromium, page_path):
    open_page(chromium, page_path)
    return chromium


def _background(element) -> str:
    return element.value_of_css_property("background-color")


def test_one_coloured_span_per_credited_call(page):
    credited = page.find_elements(By.CSS_SELECTOR, "span.call.credited")
    expected = [(row, k) for row, values in enumerate(CREDITS) for k, v in enumerate(values) if v != 0]
    assert [
        (
            int(c.find_element(By.XPATH, "ancestor::section").get_attribute("data-row")),
            int(c.get_attribute("data-call")),
        )
        for c in credited
    ] == expected
    for call in credited:
        for token in call.find_elements(By.CSS_SELECTOR, ".tok"):
            assert _background(token) not in ("rgba(0, 0, 0, 0)", "transparent")
    labels = page.find_elements(By.CSS_SELECTOR, ".call-label .badge")
    assert len(labels) == len(expected)


def test_masked_tool_output_is_greyed_and_uncoloured(page):
    masked = page.find_elements(By.CSS_SELECTOR, ".tok.masked")
    assert len(masked) == 2 * sum(len(lens) for lens in CALL_LENGTHS)
    assert all(t.get_attribute("data-a") is None for t in masked)


def test_the_process_toggle_leaves_only_the_credited_calls_coloured(page):
    page.find_element(By.CSS_SELECTOR, "input[name=view][value=p]").click()
    assert page.find_element(By.TAG_NAME, "body").get_attribute("data-view") == "p"
    for call in page.find_elements(By.CSS_SELECTOR, "span.call"):
        coloured = [_background(t) != "rgba(0, 0, 0, 0)" for t in call.find_elements(By.CSS_SELECTOR, ".tok")]
        assert set(coloured) == {float(call.get_attribute("data-value")) != 0}
    page.find_element(By.CSS_SELECTOR, "input[name=view][value=o]").click()
    # outcome part: group b failed throughout (advantage 0), group a's success is green on every action token
    row3 = page.find_elements(By.CSS_SELECTOR, "section[data-row='3'] .tok:not(.masked)")
    assert {_background(t) for t in row3} == {"rgba(0, 0, 0, 0)"}
    row0 = page.find_elements(By.CSS_SELECTOR, "section[data-row='0'] .tok:not(.masked)")
    assert all(_background(t).startswith("rgba(26, 127, 55") for t in row0)


def test_a_screenshot_of_the_token_page_is_not_blank(page):
    variance, colours = pixel_spread(page.get_screenshot_as_png())
    assert variance > 100 and colours > 50
