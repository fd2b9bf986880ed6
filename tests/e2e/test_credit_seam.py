"""The seam, by value: rule text -> compiled credits -> per-call values -> the token advantages the loss sees.

A real compiled program (`rlvp_dsl.loads`) scores two hand-built rollouts whose token
layout is known (reasoning, call, EOS, tool output, an assistant turn), inside the
loop's own path (`trainer.loop.train`); the advantage tensor handed to
`trainer.loss.policy_loss` is compared, token by token, with numbers worked out by
hand from the rules below.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rlvp_dsl import loads
from rlvp_dsl.events import Episode, Event
from trainer import loop, update
from trainer.backend import Backend
from trainer.config import TrainConfig
from trainer.envs.base import Task
from trainer.types import Rollout

torch.set_num_threads(1)

RULES = """\
tool fetch : read target token
tool submit : write target token
violation failed_call (-0.25) { on call error }
repeat_error (-0.5)
progress stage (+1.0 per unit, max 3.0) { signal stages_remaining decreasing from 3 }
violation chatty (-0.125) { on assistant }
"""
EOS, OUT = 5, 3  # end of a turn (an action token outside every span); tool output (mask 0)


def _call(index, tool, token, ok, left, result=""):
    return Event(
        index,
        "call",
        tool=tool,
        arguments={"token": token},
        status="ok" if ok else "error",
        result=result if ok else "",
        error_text="" if ok else "wrong token",
        signals={"stages_remaining": left},
    )


# Episode A (success).  By hand, per call: fetch k0 ok, 3 -> 2 stages: stage +1.0;
# fetch zz error: failed_call -0.25; the same call again, nothing changed in between:
# failed_call -0.25 + repeat_error -0.5 = -0.75; the assistant turn: chatty -0.125
# (no span: spread over every action token); submit ok, 2 -> 0: stage +2.0.
# Layout: (tokens, mask, in the span of call k or None).
LAYOUT_A = [
    ([20, 21], 1, None),
    ([30, 31, 32], 1, 0),
    ([EOS], 1, None),
    ([OUT] * 3, 0, None),
    ([30, 33], 1, 1),
    ([EOS], 1, None),
    ([OUT] * 2, 0, None),
    ([30, 33], 1, 2),
    ([EOS], 1, None),
    ([OUT] * 2, 0, None),
    ([22, 23], 1, None),  # the assistant turn's text
    ([34, 31], 1, 3),
    ([EOS], 1, None),
    ([OUT], 0, None),
]
EVENTS_A = [
    Event(0, "user", text="go"),
    _call(1, "fetch", "k0", True, 2, "token k1"),
    _call(2, "fetch", "zz", False, 2),
    _call(3, "fetch", "zz", False, 2),
    Event(4, "assistant", text="hmm"),
    _call(5, "submit", "k1", True, 0, "done"),
]
CREDITS_A, UNATTACHED_A = [1.0, -0.25, -0.75, 2.0], -0.125

# Episode B (failure): submit k9 error: failed_call -0.25; fetch k0 ok, 3 -> 2: stage +1.0.
LAYOUT_B = [
    ([34, 35], 1, 0),
    ([EOS], 1, None),
    ([OUT] * 4, 0, None),
    ([20], 1, None),
    ([30, 31], 1, 1),
    ([EOS], 1, None),
    ([OUT], 0, None),
]
EVENTS_B = [Event(0, "user", text="go"), _call(1, "submit", "k9", False, 3), _call(2, "fetch", "k0", True, 2, "ok")]
CREDITS_B, UNATTACHED_B = [-0.25, 1.0], 0.0

# Outcome advantage of the group [1, 0]: (R - 0.5) / (std 0.5 + eps 1e-4).
A_OUT = 0.5 / (0.5 + 1e-4)


def _rollout(name, layout, events, outcome):
    ids, mask, spans = [], [], {}
    for tokens, m, k in layout:
        if k is not None:
            spans[k] = (len(ids), len(ids) + len(tokens))
        ids += tokens
        mask += [m] * len(tokens)
    episode = Episode(id=name, events=events, outcome=outcome)
    return Rollout("task", [1, 2], ids, mask, [spans[k] for k in sorted(spans)], episode, outcome)


def _expected_row(layout, credits, unattached, a_out, width):
    row = []
    for tokens, m, k in layout:
        value = (a_out + unattached + (credits[k] if k is not None else 0.0)) if m else 0.0
        row += [value] * len(tokens)
    return row + [0.0] * (width - len(row))  # padding


class _Bigram(torch.nn.Module):
    def __init__(self, vocab=40):
        super().__init__()
        self.emb, self.out = torch.nn.Embedding(vocab, 4), torch.nn.Linear(4, vocab)

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.out(self.emb(input_ids)))


def test_rule_text_to_the_advantages_the_loss_sees(tmp_path, monkeypatch):
    """Every token's advantage in the loss equals A_out + unattached + the call's credit (span tokens),
    A_out + unattached (other action tokens), 0 (tool output, padding) -- worked out from the rule text."""
    program = loads(RULES)
    a = _rollout("a", LAYOUT_A, EVENTS_A, 1.0)
    b = _rollout("b", LAYOUT_B, EVENTS_B, 0.0)
    be = Backend(
        model=_Bigram(),
        collect=lambda task, n, seed: [a, b],
        make_tasks=lambda count, seed: [Task("task", seed)],
        credit_source=program,
    )
    seen_credits, seen_adv = [], []
    real_loss = update.policy_loss

    def recording_loss(logp, old_logp, advantages, mask, **kw):
        seen_adv.append((advantages.detach().clone(), mask.clone()))
        return real_loss(logp, old_logp, advantages, mask, **kw)

    monkeypatch.setattr(update, "policy_loss", recording_loss)
    cfg = TrainConfig(
        method="rlvp",
        iterations=1,
        tasks_per_iteration=1,
        num_generations=2,
        micro_batch=2,
        process_weight=1.0,
        scale_rewards="group",
        process_norm="none",
        adv_eps=1e-4,
        out_dir=str(tmp_path),
    )
    rows = loop.train(
        cfg,
        backend=be,
        progress=False,
        on_batch=lambda it, groups, credits, weight: seen_credits.append((credits, weight)),
    )

    # compiled credits -> per-call values (the loop's own scoring)
    [(credits, weight)] = seen_credits
    assert weight == 1.0
    [[ca, cb]] = credits
    assert (list(ca.values), ca.unattached, list(cb.values), cb.unattached) == (
        CREDITS_A,
        UNATTACHED_A,
        CREDITS_B,
        UNATTACHED_B,
    )
    assert [(c.event_index, c.rule) for c in ca.credits] == [
        (1, "stage"),
        (2, "failed_call"),
        (3, "failed_call"),
        (3, "repeat_error"),
        (4, "chatty"),
        (5, "stage"),
    ]
    assert rows[0]["process/violations_per_episode"] == (3 + 1) / 2  # negative credits on calls: A 3, B 1
    # per-call values -> the token advantages the loss sees
    [(adv, mask)] = seen_adv
    width = adv.shape[1]
    want = torch.tensor(
        [
            _expected_row(LAYOUT_A, CREDITS_A, UNATTACHED_A, A_OUT, width),
            _expected_row(LAYOUT_B, CREDITS_B, UNATTACHED_B, -A_OUT, width),
        ]
    )
    assert width == max(len(a.completion_ids), len(b.completion_ids))
    assert torch.equal(
        mask,
        torch.tensor(
            [
                a.completion_mask + [0] * (width - len(a.completion_ids)),
                b.completion_mask + [0] * (width - len(b.completion_ids)),
            ],
            dtype=mask.dtype,
        ),
    )
    for got_row, want_row in zip(adv.tolist(), want.tolist(), strict=True):
        assert got_row == pytest.approx(want_row, abs=1e-6)
    # e.g. the repeated failed call's tokens in A: A_out - 0.125 - 0.75
    start, end = a.call_spans[2]
    assert adv[0, start:end].tolist() == pytest.approx([A_OUT - 0.875] * (end - start), abs=1e-6)
