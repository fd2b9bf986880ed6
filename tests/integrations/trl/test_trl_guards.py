"""Issue 17, section 2: RlvpReward and RlvpGRPOTrainer refuse or report what would silently lose credit.

Bad constructor arguments are refused with what was expected; a token-mode reward in the stock
GRPOTrainer fails at its first call with the fix; markers that never occur, a trainer without an
outcome, and scalar mode's amplified all-failed groups are said once and counted.  Real TRL
GRPOTrainer (rollout_func mode, CPU, tiny model), as test_trl_rollout.py.
"""

from __future__ import annotations

import logging
import threading

import pytest
from trl import GRPOTrainer

from rlvp_dsl import loads
from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward
from rlvp_dsl.readers import episode_from_text, marked_calls

from .scripted import RULES, changed, config, dataset, make_rollout, outcome_reward, snapshot, tiny

PLAN = ["read_then_cancel", "repeat_error", "malformed", "no_call"]
LOGGER = "rlvp_dsl.integrations.trl"


@pytest.mark.parametrize("kwargs, error, words", [
    ({"process_weight": float("nan")}, ValueError, "finite"),
    ({"process_weight": float("inf")}, ValueError, "finite"),
    ({"process_weight": -0.5}, ValueError, "non-negative"),
    ({"process_weight": True}, TypeError, "a number"),
    ({"process_weight": 10 ** 400}, ValueError, "finite"),
    ({"error_signal": "nope"}, ValueError, "unknown error signal 'nope'"),
    ({"error_signal": 5}, ValueError, "error_signal"),
    ({"call_markers": ("", "")}, ValueError, "non-empty"),
    ({"call_markers": ("<tool_call>", "")}, ValueError, "non-empty"),
    ({"call_markers": ("<x>", "<x>")}, ValueError, "different"),
    ({"call_markers": ("<x>",)}, ValueError, "two non-empty strings"),
    ({"call_markers": "<x></x>"}, ValueError, "two non-empty strings"),
    ({"mode": "tokens"}, ValueError, "token or scalar"),
    ({"mode": None}, ValueError, "token or scalar"),
    ({"name": ""}, ValueError, "non-empty string"),
])
def test_bad_arguments_are_refused_at_construction(kwargs, error, words):
    with pytest.raises(error, match=words):
        RlvpReward(loads(RULES), **kwargs)


def test_rules_of_the_wrong_type_are_refused():
    with pytest.raises(TypeError, match="compiled Program or the path"):
        RlvpReward(42)


def _finishes(fn, seconds: float = 10.0) -> BaseException | None:
    """Run `fn` in a thread; fail when it is still running after `seconds` (an endless loop)."""
    outcome: list = []

    def run():
        try:
            fn()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call never returned"
    return outcome[0]


def test_the_marker_scan_itself_cannot_spin_on_empty_markers():
    """Before: marked_calls with ("", "") never advanced (an endless loop in every text reader)."""
    text = '<tool_call>{"name": "get", "arguments": {}}</tool_call>'
    for markers in (("", ""), ("", "</tool_call>"), ("<tool_call>", "")):
        assert isinstance(_finishes(lambda m=markers: marked_calls(text, m)), ValueError)
        assert isinstance(_finishes(lambda m=markers: episode_from_text(text, call_markers=m)), ValueError)


def _trainer(cls, tmp_path, reward_funcs, outcomes=(0, 0, 0, 0), **overrides):
    tok, model = tiny()
    return cls(model=model, reward_funcs=reward_funcs, args=config(tmp_path, **overrides), train_dataset=dataset(),
               processing_class=tok, rollout_func=make_rollout(tok, PLAN, outcomes))


def test_a_token_mode_reward_in_the_stock_trainer_fails_with_the_fix(tmp_path):
    """Before: the stock GRPOTrainer trained on 0 from it for every completion, silently."""
    trainer = _trainer(GRPOTrainer, tmp_path, [outcome_reward, RlvpReward(loads(RULES))], max_steps=1)
    before = snapshot(trainer.model)
    with pytest.raises(ValueError, match=r"RlvpReward\(mode='token'\) was called by GRPOTrainer.*RlvpGRPOTrainer"
                                         r".*mode='scalar'"):
        trainer.train()
    assert not changed(before, trainer.model)
    # a call by hand (no trainer) still reads the rows, and RlvpGRPOTrainer takes the same reward
    reward = RlvpReward(loads(RULES))
    assert reward(prompts=["please"], completions=["done"]) == [0.0] and len(reward.last_rows) == 1
    _trainer(RlvpGRPOTrainer, tmp_path, [outcome_reward, reward], max_steps=1).train()


def test_markers_the_tokenizer_cannot_tell_apart_are_refused(tmp_path):
    """'<tc>' and '</tc>' are both the unknown token of the tiny tokenizer: no call's end could be found."""
    with pytest.raises(ValueError, match="encodes both call markers"):
        _trainer(RlvpGRPOTrainer, tmp_path, [outcome_reward, RlvpReward(loads(RULES), call_markers=("<tc>", "</tc>"))])


def test_markers_that_never_occur_are_said_once_and_counted(tmp_path, caplog):
    """Before: rlvp/unmatched_spans read 0 while every call's credit was dropped, and nothing was said."""
    reward = RlvpReward(loads(RULES), call_markers=("yes", "A"), process_weight=0.5)  # words no completion generates
    trainer = _trainer(RlvpGRPOTrainer, tmp_path, [outcome_reward, reward])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    said = [r for r in caplog.records if r.name == LOGGER and "never occur" in r.getMessage()]
    assert len(said) == 1 and "call_markers" in said[0].getMessage()
    counted = [e["rlvp/calls_without_span"] for e in trainer.state.log_history if "rlvp/calls_without_span" in e]
    assert counted and all(n == 4 for n in counted)  # read_then_cancel 2 + repeat_error 2 per group


def test_the_hermes_markers_leave_no_call_without_a_span(tmp_path, caplog):
    trainer = _trainer(RlvpGRPOTrainer, tmp_path, [outcome_reward, RlvpReward(loads(RULES))], max_steps=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    assert [e["rlvp/calls_without_span"] for e in trainer.state.log_history if "rlvp/calls_without_span" in e] == [0]
    assert not [r for r in caplog.records if r.name == LOGGER and "never occur" in r.getMessage()]


def test_a_trainer_without_an_outcome_reward_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _trainer(RlvpGRPOTrainer, tmp_path, [RlvpReward(loads(RULES))])
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1 and "RlvpGRPOTrainer has no outcome reward" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _trainer(RlvpGRPOTrainer, tmp_path, [outcome_reward, RlvpReward(loads(RULES))])
    assert not [r for r in caplog.records if r.name == LOGGER]


def _amplified(trainer) -> list[float]:
    return [e["rlvp/amplified_groups"] for e in trainer.state.log_history if "rlvp/amplified_groups" in e]


def test_scalar_mode_counts_the_all_failed_groups_it_amplifies(tmp_path, caplog):
    """All outcomes 0, totals 0, -0.25, -0.05, 0: TRL's z-score makes them about +-1.3; counted and said once."""
    reward = RlvpReward(loads(RULES), mode="scalar", process_weight=0.5)
    trainer = _trainer(GRPOTrainer, tmp_path, [outcome_reward, reward], max_steps=3)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    assert _amplified(trainer) == [1.0, 1.0]  # one group per batch, from the second batch on
    said = [r for r in caplog.records if r.name == LOGGER and "amplified" in r.getMessage()]
    assert len(said) == 1 and "unit-size" in said[0].getMessage()


def test_scalar_mode_counts_nothing_where_the_outcomes_differ(tmp_path):
    reward = RlvpReward(loads(RULES), mode="scalar", process_weight=0.5)
    trainer = _trainer(GRPOTrainer, tmp_path, [outcome_reward, reward], outcomes=(1, 0, 0, 0), max_steps=3)
    trainer.train()
    assert _amplified(trainer) == [0.0, 0.0]
