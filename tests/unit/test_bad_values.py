"""Bad values are isolated, never spread, never fatal: NaN signals, overflowing literals, NaN in JSON output."""

from __future__ import annotations

import json
import math

from rlvp_dsl import check_text, loads
from rlvp_dsl.cli import json_text
from rlvp_dsl.events import CALL, Episode, Event
from rlvp_dsl.reference import score_reference

PROGRESS = """
progress proof (+0.5) { signal goals_remaining decreasing }
"""


def _calls(*values):
    return Episode(
        "e",
        tuple(
            Event(index=i, kind=CALL, tool="t", signals={} if v is None else {"goals_remaining": v})
            for i, v in enumerate(values)
        ),
    )


def test_a_nan_first_reading_is_skipped_not_a_baseline():
    """NaN, inf and missing readings are no value: the first finite one sets the best, later ones still earn."""
    program = loads(PROGRESS)
    episode = _calls(float("nan"), 3, None, float("inf"), 2, float("-inf"), 1)
    got = [(c.event_index, c.value) for c in program.score(episode)]
    assert got == [(4, 0.5), (6, 0.5)]
    assert got == [(c.event_index, c.value) for c in score_reference(program.ruleset, episode)]


def test_an_overflowing_literal_is_a_compile_error_with_a_caret():
    """-1e400 is RV104 at its column, not an infinite weight."""
    result = check_text("violation x (-1e400) { on call }\n", "x.rlvp")
    assert not result.ok
    [d] = [d for d in result.diagnostics if d.code == "RV104"]
    assert (d.span.line, d.span.column) == (1, 14) and "-1e400" in d.message and "out of range" in d.message


def test_json_output_is_always_valid_json():
    """Non-finite numbers become null; the text parses with a strict parser."""
    text = json_text({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": -math.inf}})
    strict = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert strict == {"a": None, "b": [1.0, None], "c": {"d": None}}
