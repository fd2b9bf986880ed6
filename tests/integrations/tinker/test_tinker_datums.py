"""rlvp credit as Tinker datums: values by hand and against compute_advantages, offline (no network)."""

from __future__ import annotations

import pytest
import torch

from rlvp_dsl.advantages import compute_advantages, outcome_advantages
from rlvp_dsl.attach import completion_credits
from rlvp_dsl.pipeline import loads
from rlvp_dsl.readers import episode_from_messages

from .rollouts import (
    ANSWER_SPAN,
    CALL_SPANS,
    CLEAN,
    CLOSE,
    LOGPROBS,
    OPEN,
    PROMPT_MESSAGES,
    REPEAT,
    REPEAT_CREDITS,
    SAMPLED,
    TOKENS,
    program,
)

tinker = pytest.importorskip("tinker")

from rlvp_dsl.integrations.tinker import RlvpTinker, TokenRollout  # noqa: E402


def rollout(messages, outcome, logprobs=LOGPROBS):
    return TokenRollout(TOKENS, SAMPLED, PROMPT_MESSAGES + messages, len(PROMPT_MESSAGES), outcome, logprobs)


def credit(**kwargs):
    return RlvpTinker(program(), marker_ids=([OPEN], [CLOSE]), **kwargs)


def expected_row(a_out: float, w: float, call_credits=(0.0, 0.0)) -> list[float]:
    """By hand: A_out on every sampled token, plus w x the call's credit on its span; 0 elsewhere."""
    row = [a_out * s for s in SAMPLED]
    for (start, end), c in zip(CALL_SPANS, call_credits, strict=True):
        for t in range(start, end):
            row[t] += w * c
    return row


def test_datum_fields_by_value():
    w = 0.5
    groups = [[rollout(CLEAN, 1.0), rollout(REPEAT, 0.0)], [rollout(REPEAT, 0.0), rollout(REPEAT, 0.0)]]
    datums = credit(process_weight=w).datums(groups)
    assert len(datums) == 4
    # (r - mean) / (population std + eps)
    a = outcome_advantages(torch.tensor([[1.0, 0.0]], dtype=torch.float64))[0].tolist()
    assert a[0] == pytest.approx(0.5 / (0.5 + 1e-4), abs=1e-6) and a[1] == pytest.approx(-a[0])
    rows = [
        expected_row(a[0], w),
        expected_row(a[1], w, REPEAT_CREDITS),
        expected_row(0.0, w, REPEAT_CREDITS),  # equal outcomes: no outcome advantage, the credit stays
        expected_row(0.0, w, REPEAT_CREDITS),
    ]
    for d, row in zip(datums, rows, strict=True):
        assert isinstance(d, tinker.Datum)
        assert d.model_input.to_ints() == TOKENS[:-1]
        assert d.loss_fn_inputs["target_tokens"].tolist() == TOKENS[1:]
        assert d.loss_fn_inputs["target_tokens"].dtype == "int64"
        assert d.loss_fn_inputs["advantages"].dtype == "float32"
        assert d.loss_fn_inputs["logprobs"].tolist() == pytest.approx(LOGPROBS[1:])
        adv = d.loss_fn_inputs["advantages"].tolist()
        assert len(adv) == len(d.loss_fn_inputs["target_tokens"].tolist()) == len(TOKENS) - 1
        assert adv == pytest.approx(row[1:], abs=1e-6)  # position j predicts token j + 1
    # the repeated failure's tokens, spelled out: prompt and tool outputs get exactly 0
    adv = datums[3].loss_fn_inputs["advantages"].tolist()
    assert adv[:2] == [0.0, 0.0]  # targets 2, 3 (prompt)
    assert adv[2:6] == pytest.approx([-0.05] * 4)  # targets: call 0's four tokens
    assert adv[6:8] == [0.0, 0.0]  # tool output
    assert adv[8:12] == pytest.approx([-0.2] * 4)  # call 1: -0.1 - 0.3, times w
    assert adv[12:14] == [0.0, 0.0]
    assert adv[14:16] == [0.0, 0.0]  # the answer: no credit, no outcome advantage in this group


def test_equals_compute_advantages_on_the_same_batch():
    """The adapter's per-token values are compute_advantages' on a batch built by hand here."""
    c = credit(process_weight=0.7, process_norm="group_rms")
    groups = [[rollout(REPEAT, 0.2), rollout(CLEAN, 1.0), rollout(REPEAT, 0.0)]]
    got = c.advantages(groups)
    prog = program()
    credits = []
    for r in groups[0]:
        head = episode_from_messages(PROMPT_MESSAGES)
        whole = episode_from_messages(list(r.messages), id="completion")
        credits.append(completion_credits(prog, whole, first_event=len(head.events), source="x"))
    assert [cc.values for cc in credits] == [pytest.approx(REPEAT_CREDITS), (0.0, 0.0), pytest.approx(REPEAT_CREDITS)]
    ref = compute_advantages(
        [[0.2, 1.0, 0.0]],
        [credits],
        [[CALL_SPANS] * 3],
        torch.tensor([SAMPLED] * 3, dtype=torch.float32),
        credit_mode="token",
        process_weight=0.7,
        process_norm="group_rms",
    )
    assert [list(s) for s in got.spans[0]] == [list(CALL_SPANS)] * 3
    for i in range(3):
        assert got.per_token[0][i] == pytest.approx(ref.advantages[i].tolist(), abs=1e-6)
    assert ref.advantages[0, CALL_SPANS[1][0]].item() != ref.advantages[0, ANSWER_SPAN[0]].item()  # credit is there


def test_ragged_rollouts_pad_and_answer_credit_spreads():
    """Rollouts of different lengths in one group; a rule credit on the answer (no span) lands on every
    sampled token of its rollout, never on prompt or tool tokens."""
    prog = loads('violation said_done (-0.2) { on assistant says "done" }\n')
    c = RlvpTinker(prog, marker_ids=([OPEN], [CLOSE]))
    short = TokenRollout(TOKENS[:9], SAMPLED[:9], PROMPT_MESSAGES + CLEAN[:2], len(PROMPT_MESSAGES), 0.0)
    full = rollout(CLEAN, 0.0)
    got = c.advantages([[short, full]])
    assert len(got.per_token[0][0]) == 9 and len(got.per_token[0][1]) == len(TOKENS)
    assert got.per_token[0][0] == [0.0] * 9  # no answer, no credit, equal outcomes
    assert got.per_token[0][1] == pytest.approx([-0.2 * s for s in SAMPLED])


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: TokenRollout(TOKENS, SAMPLED[:-1], PROMPT_MESSAGES + CLEAN, 2, 1.0),
            r"groups\[0\]\[1\]\.sampled has 16",
        ),
        (lambda: TokenRollout(TOKENS, SAMPLED, PROMPT_MESSAGES + CLEAN, 2, 1.0, [0.0]), r"logprobs has 1 entries"),
        (lambda: TokenRollout(TOKENS, SAMPLED, [{"role": "wizard"}], 0, 1.0), r"groups\[0\]\[1\]\.messages"),
        (lambda: TokenRollout(TOKENS, [1] + SAMPLED[1:], PROMPT_MESSAGES + CLEAN, 2, 1.0), "first token is sampled"),
        (lambda: TokenRollout(TOKENS, SAMPLED, PROMPT_MESSAGES + CLEAN, 9, 1.0), r"n_prompt_messages must be"),
    ],
)
def test_bad_rollouts_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        credit().datums([[rollout(CLEAN, 0.0), make()]])


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale_rewards"):
        credit(scale_rewards="rms")
    with pytest.raises(ValueError, match="process_weight"):
        credit(process_weight=float("nan"))
    with pytest.raises(ValueError, match="all groups must have 2"):
        credit().advantages([[rollout(CLEAN, 0.0), rollout(CLEAN, 1.0)], [rollout(CLEAN, 0.0)]])
    with pytest.raises(TypeError, match="marker_ids"):
        RlvpTinker(program(), marker_ids=[10])


def test_a_marked_span_the_messages_lack_is_a_failed_call_and_numpy_inputs_work():
    """The second marked span has no call in the messages (the harness could not parse it): it becomes a
    malformed call, scored as failed (errored_call, -0.1) on its own tokens."""
    np = pytest.importorskip("numpy")
    messages = PROMPT_MESSAGES + CLEAN[:2] + [{"role": "assistant", "content": "done"}]
    r = TokenRollout(np.array(TOKENS), np.array(SAMPLED), messages, len(PROMPT_MESSAGES), 0.0, np.array(LOGPROBS))
    got = credit(process_weight=0.5).advantages([[r, rollout(CLEAN, 0.0)]])
    assert got.credits[0][0].values == pytest.approx((0.0, -0.1))
    assert got.per_token[0][0] == pytest.approx(expected_row(0.0, 0.5, (0.0, -0.1)))
    (d, _) = credit(process_weight=0.5).datums([[r, rollout(CLEAN, 0.0)]])
    assert d.loss_fn_inputs["advantages"].tolist()[8:12] == pytest.approx([-0.05] * 4)
