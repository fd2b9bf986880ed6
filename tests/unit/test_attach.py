"""Per-call and per-token credits from rule credits (issue 2 case 7, issue 3 attachment)."""

import math

import pytest

from rlvp_dsl.attach import (
    CallCredits,
    CreditCountError,
    call_credits,
    completion_calls,
    completion_credits,
    episode_token_credits,
    per_call_values,
    score_calls,
    token_credits,
)
from rlvp_dsl.events import Credit, Episode, Event


def _episode():
    return Episode(
        id="ep1",
        events=[
            Event(index=0, kind="user", text="hi"),
            Event(index=1, kind="call", tool="a"),
            Event(index=2, kind="assistant", text="thinking"),
            Event(index=3, kind="call", tool="b"),
        ],
    )


def _credit(i, v, rule="r", trigger="fire", kind="violation"):
    return Credit(event_index=i, rule=rule, value=v, location="x.rlvp:1:1", reason="", kind=kind, trigger=trigger)


def test_credits_summed_per_call():
    """Credits on the same call add; credits on assistant turns are kept apart as unattached."""
    cc = call_credits(
        _episode(),
        [
            _credit(1, -0.5),
            _credit(1, 0.25, trigger="discharge", kind="obligation"),
            _credit(3, 1.0, trigger="discharge", kind="obligation"),
            _credit(2, -0.1),
        ],
    )
    assert cc.values == (-0.25, 1.0)
    assert cc.violations == (1, 0) and cc.discharges == (1, 1)
    assert cc.unattached == pytest.approx(-0.1)
    assert cc.turn_values == ((2, -0.1),)
    assert cc.total == pytest.approx(0.65)


def test_credit_on_user_or_missing_event_is_flagged_not_fatal():
    """A credit on a user message or outside the episode is dropped and named (rule, index); the rest is kept."""
    cc = call_credits(_episode(), [_credit(0, -1.0), _credit(9, -1.0), _credit(1, -0.5)])
    assert cc.values[0] == -0.5 and cc.total == pytest.approx(-0.5)
    assert len(cc.flagged) == 2
    assert "rule 'r'" in cc.flagged[0] and "user event 0" in cc.flagged[0] and "credited event 9" in cc.flagged[1]


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), "x", True])
def test_a_non_finite_credit_is_isolated_to_its_call(bad, caplog):
    """None/NaN/inf/non-numbers from a program give that call nothing, one warning, and never spread."""
    import rlvp_dsl.attach as attach

    attach._warned.clear()
    credits = [
        _credit(1, bad, rule="broken"),
        _credit(1, -0.5),
        _credit(3, 1.0, trigger="discharge", kind="obligation"),
    ]
    with caplog.at_level("WARNING", logger="rlvp_dsl.attach"):
        cc = call_credits(_episode(), credits)
        call_credits(_episode(), credits)  # the second time: counted, not logged again
    assert cc.values == (-0.5, 1.0) and all(math.isfinite(v) for v in cc.values)
    assert len(cc.flagged) == 1 and "'broken'" in cc.flagged[0] and "event 1" in cc.flagged[0]
    assert len([r for r in caplog.records if "broken" in r.getMessage()]) == 1


def test_a_function_returning_none_or_nan_flags_those_calls():
    """A user credit function's None/NaN values: 0 for those calls, flagged; the others kept."""
    cc = per_call_values("fn", _episode(), [None, 0.25])
    assert cc.values == (0.0, 0.25) and len(cc.flagged) == 1 and "value 0" in cc.flagged[0]
    cc = per_call_values("fn", _episode(), [0.5, float("nan")])
    assert cc.values == (0.5, 0.0) and "value 1" in cc.flagged[0]


def test_wrong_count_raises_naming_rule_expected_actual():
    """Issue 2 case 7: a source with the wrong number of credits raises; nothing is broadcast."""
    with pytest.raises(CreditCountError, match=r"'my_rule' returned 1 credits .*expected 2") as err:
        per_call_values("my_rule", _episode(), [0.5])
    assert (err.value.expected, err.value.actual) == (2, 1)
    with pytest.raises(CreditCountError, match="returned 3 credits"):
        score_calls(lambda ep: [0.0, 0.0, 0.0], _episode(), source="three")
    with pytest.raises(CreditCountError):
        per_call_values("scalar", _episode(), 0.5)  # a scalar is not broadcast


def test_score_calls_with_program_like_object():
    """An object with score(episode) is treated as a compiled program."""

    class Prog:
        path = "rules/x.rlvp"

        def score(self, ep):
            return [_credit(3, -0.3)]

    assert score_calls(Prog(), _episode()).values == (0.0, -0.3)


def test_token_credits_spans_and_mask():
    """Whole call credit on every token of its span; empty spans and masked tokens get nothing."""
    out = token_credits([1.0, -2.0, 5.0], [(0, 2), (3, 5), (5, 5)], 6, mask=[1, 1, 0, 1, 0, 1])
    assert out == [1.0, 1.0, 0.0, -2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="outside"):
        token_credits([1.0], [(4, 9)], 6)
    with pytest.raises(CreditCountError):
        token_credits([1.0, 2.0], [(0, 1)], 6)


def test_episode_token_credits_calls_on_spans_and_turns_on_every_action_token():
    """An episode's per-token credit: each call's credit on its span, the assistant turns' on every action token."""
    cc = CallCredits((1.0, -2.0), (0, 1), (0, 0), unattached=0.5)
    mask = [1, 1, 0, 1, 1, 0]
    assert episode_token_credits(cc, [(0, 2), (2, 4)], 6, mask) == [1.5, 1.5, 0.0, -1.5, 0.5, 0.0]
    assert episode_token_credits(cc, [(0, 2), (2, 4)], 6, mask) == [
        p + cc.unattached * m for p, m in zip(token_credits(cc.values, [(0, 2), (2, 4)], 6, mask), mask)
    ]


def test_an_answers_credit_lands_on_its_span_where_the_rollout_knows_it():
    """`turn_spans`: an answer's credit on exactly its tokens (masked ones excluded); an answer with no
    span, or an empty one, keeps the old rule: its credit on every action token."""
    episode = Episode(
        id="conv",
        events=[
            Event(index=0, kind="user", text="hi"),
            Event(index=1, kind="call", tool="a"),
            Event(index=2, kind="assistant", text="answer"),
            Event(index=3, kind="user", text="more"),
            Event(index=4, kind="assistant", text="answer"),
        ],
    )
    cc = call_credits(episode, [_credit(1, 1.0), _credit(2, -0.25), _credit(4, -0.5), _credit(4, 0.125)])
    assert cc.turn_values == ((2, -0.25), (4, -0.375)) and cc.unattached == -0.625
    mask = [1, 1, 1, 0, 1, 1, 0]
    # call 0 on tokens 0-1, answer 2 on token 2, answer 4 on tokens 4-6 (6 is masked)
    assert episode_token_credits(cc, [(0, 2)], 7, mask, turn_spans={2: (2, 3), 4: (4, 7)}) == [
        1.0,
        1.0,
        -0.25,
        0.0,
        -0.375,
        -0.375,
        0.0,
    ]
    # answer 4 has no span: its -0.375 goes on every action token; an empty span counts as none
    for spans in ({2: (2, 3)}, {2: (2, 3), 4: (5, 5)}):
        assert episode_token_credits(cc, [(0, 2)], 7, mask, turn_spans=spans) == [
            0.625,
            0.625,
            -0.625,
            0.0,
            -0.375,
            -0.375,
            0.0,
        ]
    assert episode_token_credits(cc, [(0, 2)], 7, mask) == episode_token_credits(cc, [(0, 2)], 7, mask, turn_spans={})
    with pytest.raises(ValueError, match=r"answer span of event 2 = \(6, 9\) lies outside"):
        episode_token_credits(cc, [(0, 2)], 7, mask, turn_spans={2: (6, 9)})


def test_episode_token_credits_weighs_each_credit_before_credits_add():
    """With a weight, each call's credit and the unattached credit are weighted before they add on a token."""
    cc = CallCredits((0.1, 0.2), (0, 0), (0, 0), unattached=0.3)
    w = 0.7
    out = episode_token_credits(cc, [(0, 2), (1, 3)], 3, [1, 1, 1], weight=w)
    assert out == [w * 0.1 + w * 0.3, w * 0.1 + w * 0.2 + w * 0.3, w * 0.2 + w * 0.3]
    assert episode_token_credits(CallCredits((), (), ()), [], 2, [1, 1], weight=w) == [0.0, 0.0]


def test_completion_credits_drop_the_prompts_credit():
    """Credit on an event before the completion's first event is dropped; the prompt's calls are not counted."""
    episode = _episode()
    credits = [_credit(1, -1.0), _credit(2, -0.5), _credit(3, -0.25)]
    program = type("P", (), {"score": lambda self, e: credits})()
    cc = completion_credits(program, episode, first_event=2, source="rules")
    assert cc.values == (0.0, -0.25) and cc.unattached == -0.5
    assert [c.event_index for c in cc.credits] == [2, 3]
    assert completion_calls(episode, 2) == 1
    assert completion_calls(episode, 0) == 2
    assert completion_credits(program, episode, first_event=0, source="rules") == call_credits(
        episode, credits, "rules"
    )


def test_attach_never_imports_torch():
    """rlvp_dsl.attach is pure Python: importing it loads no torch."""
    import subprocess
    import sys

    code = "import sys, rlvp_dsl.attach; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0
