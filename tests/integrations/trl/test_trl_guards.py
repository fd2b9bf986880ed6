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

from rlvp_dsl import RuleError, loads
from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward
from rlvp_dsl.readers import episode_from_text, marked_calls

from .scripted import RULES, changed, config, dataset, make_rollout, outcome_reward, snapshot, tiny

PLAN = ["read_then_cancel", "repeat_error", "malformed", "no_call"]
LOGGER = "rlvp_dsl.integrations.trl"


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"process_weight": float("nan")}, ValueError, "finite"),
        ({"process_weight": float("inf")}, ValueError, "finite"),
        ({"process_weight": -0.5}, ValueError, "non-negative"),
        ({"process_weight": True}, TypeError, "a number"),
        ({"process_weight": 10**400}, ValueError, "finite"),
        ({"error_signal": "nope"}, ValueError, "unknown error signal 'nope'"),
        ({"error_signal": 5}, TypeError, "'error_signal': error_signal must be an ErrorSignal or one of"),
        ({"call_markers": ("", "")}, ValueError, "non-empty"),
        ({"call_markers": ("<tool_call>", "")}, ValueError, "non-empty"),
        ({"call_markers": ("<x>", "<x>")}, ValueError, "different"),
        ({"call_markers": ("<x>",)}, ValueError, "two non-empty strings"),
        ({"call_markers": "<x></x>"}, TypeError, "'call_markers' must be a pair of strings"),
        ({"call_markers": ("<x>", 5)}, TypeError, "'call_markers' must be a pair of strings"),
        ({"mode": "tokens"}, ValueError, "token or scalar"),
        ({"mode": None}, TypeError, "'mode' must be a string, token or scalar \\(got NoneType None\\)"),
        ({"mode": 5}, TypeError, "'mode' must be a string, token or scalar \\(got int 5\\)"),
        ({"name": ""}, ValueError, "non-empty string"),
        ({"name": 3}, TypeError, "'name' must be a string, the name TRL logs the reward under \\(got int 3\\)"),
    ],
)
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
    return cls(
        model=model,
        reward_funcs=reward_funcs,
        args=config(tmp_path, **overrides),
        train_dataset=dataset(),
        processing_class=tok,
        rollout_func=make_rollout(tok, PLAN, outcomes),
    )


def test_a_token_mode_reward_in_the_stock_trainer_fails_with_the_fix(tmp_path):
    """Before: the stock GRPOTrainer trained on 0 from it for every completion, silently."""
    trainer = _trainer(GRPOTrainer, tmp_path, [outcome_reward, RlvpReward(loads(RULES))], max_steps=1)
    before = snapshot(trainer.model)
    with pytest.raises(
        ValueError,
        match=r"RlvpReward\(mode='token'\) was called by GRPOTrainer.*RlvpGRPOTrainer"
        r".*mode='scalar'",
    ):
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


# --- the new-user trial (issue 17): more constructor arguments, and malformed completions ----------
@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"process_weight": "1"}, TypeError, "a number"),
        ({"process_weight": None}, TypeError, "a number"),
        ({"process_weight": float("-inf")}, ValueError, "finite"),
        ({"process_weight": [1.0]}, TypeError, "a number"),
        ({"error_signal": "opnai"}, ValueError, "did you mean 'openai'"),
        ({"error_signal": ""}, ValueError, "error_signal"),
        ({"error_signal": ["trl"]}, TypeError, "'error_signal': error_signal must be an ErrorSignal"),
        ({"call_markers": None}, TypeError, "'call_markers' must be a pair of strings"),
        ({"call_markers": ("<a>", "</a>", "<b>")}, ValueError, "two non-empty strings"),
        ({"call_markers": (1, 2)}, TypeError, "'call_markers' must be a pair of strings"),
        ({"mode": "Scalar"}, ValueError, "token or scalar"),
        ({"mode": 1}, TypeError, "'mode' must be a string, token or scalar"),
        ({"name": None}, TypeError, "'name' must be a string"),
        ({"name": 5}, TypeError, "'name' must be a string"),
    ],
)
def test_more_bad_arguments_are_refused_at_construction(kwargs, error, words):
    with pytest.raises(error, match=words):
        RlvpReward(loads(RULES), **kwargs)


@pytest.mark.parametrize(
    "rules, error, words",
    [
        ("/dev/zero", RuleError, "a character device, not a regular file"),
        ("/nonexistent/rules.rlvp", RuleError, "file not found: /nonexistent/rules.rlvp\n  = help: check the path$"),
        ("/tmp", RuleError, "is a directory"),
        (None, TypeError, "compiled Program or the path"),
        (b"rules.rlvp", TypeError, "compiled Program or the path"),
        ("tool get : read", RuleError, "file not found"),  # rule text, not a path: loads() it first
    ],
)
def test_rules_that_cannot_be_loaded_are_refused_by_name(rules, error, words):
    with pytest.raises(error, match=words):
        RlvpReward(rules)


def test_a_missing_relative_rule_file_says_it_is_looked_up_in_the_current_folder(tmp_path, monkeypatch):
    """No including file here: the help names the current folder, where a relative path starts."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuleError) as caught:
        RlvpReward("nope.rlvp")
    assert str(caught.value) == (
        "nope.rlvp: error[RV001]: file not found: nope.rlvp\n"
        f"  = help: check the path (a relative path starts at the current folder, {tmp_path})"
    )
    assert "including file" not in str(caught.value)


CALL = '<tool_call>{"name": "cancel_reservation", "arguments": {"reservation_id": "A"}}</tool_call>'


@pytest.mark.parametrize(
    "prompt, completion, unscorable",
    [
        ("p", None, True),
        ("p", 5, True),
        ("p", {"role": "assistant"}, True),
        ("p", [1, 2], True),
        ("p", [{"content": "x"}], True),
        ("p", [{"role": "assistant", "content": 5}], True),
        ("p", b"bytes", True),
        ([1], "x", True),
        (5, "x", False),  # not a prompt TRL makes: read as no prompt
        (None, "x", False),
        ("p", "<tool_call>" + "[" * 50_000 + "</tool_call>", False),  # a malformed call, not a RecursionError
        ("p", "<think>" + CALL, False),  # a call inside an unclosed thought: no call
        ("p", "\ud800" + CALL, False),
        ("p", "\x00" + CALL, False),
        ("p", CALL[:-5], False),  # cut off before its closing marker
        ("p", "", False),
    ],
)
def test_a_malformed_completion_is_isolated_to_its_row(prompt, completion, unscorable):
    """Each bad completion: a finite value for its row, the good row beside it scored as alone."""
    reward = RlvpReward(loads(RULES), mode="scalar")
    alone = reward(prompts=["p"], completions=[CALL])
    values = reward(prompts=[prompt, "p"], completions=[completion, CALL])
    assert len(values) == 2 and all(v == v and abs(v) < float("inf") for v in values)
    assert values[1] == alone[0]
    assert (reward.last_rows[0].problem != "") == unscorable
    assert reward.unscorable_rows == int(unscorable)


def test_an_unreadable_row_is_named_by_its_batch_row_and_message():
    """Row 2's second completion message has an unknown role: ``completions[2] (messages[1])``, not the
    reader's index into prompt + completion (``messages[3]``); a bad prompt message is ``prompts[k]``;
    a completion of the wrong type names its row."""
    reward = RlvpReward(loads(RULES), mode="scalar")
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    good = [{"role": "assistant", "content": "ok"}]
    bad = [{"role": "assistant", "content": "a"}, {"role": "robot", "content": "x"}]
    reward(prompts=[prompt] * 3, completions=[good, good, bad])
    assert [row.problem for row in reward.last_rows] == [
        "",
        "",
        "completions[2] (messages[1]): field 'role': expected one of assistant/user/tool/system, got 'robot'",
    ]
    reward(prompts=[prompt, [{"role": "robot", "content": "x"}]], completions=[good, 5])
    assert [row.problem for row in reward.last_rows] == [
        "",
        "completions[1]: a completion must be text or a list of chat messages (got int)",
    ]
    reward(prompts=[[{"role": "robot", "content": "x"}]], completions=[good])
    assert reward.last_rows[0].problem == (
        "prompts[0] (messages[0]): field 'role': expected one of assistant/user/tool/system, got 'robot'"
    )
    reward(prompts=[prompt], completions=[good], rlvp_messages=[bad])
    assert reward.last_rows[0].problem == (
        "rlvp_messages[0] (messages[1]): field 'role': expected one of assistant/user/tool/system, got 'robot'"
    )
    assert reward.read(prompt, bad).problem == (  # one row alone: its part, no batch row
        "completion (messages[1]): field 'role': expected one of assistant/user/tool/system, got 'robot'"
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"prompts": ["a", "b"], "completions": ["x"]}, "2 prompts, 1 completions"),
        ({"prompts": ["a"], "completions": None}, "needs prompts and completions"),
        ({"prompts": "a", "completions": ["x"]}, "'prompts' must be a list"),
        ({"prompts": ["a", "b"], "completions": ["x", "y"], "rlvp_messages": [[]]}, "1 rlvp_messages"),
        ({"prompts": ["a"], "completions": ["x"], "rlvp_messages": 5}, "'rlvp_messages' must be a list"),
    ],
)
def test_a_misaligned_batch_is_refused_naming_the_lengths(kwargs, words):
    """Before: zip's ValueError, an IndexError or a TypeError from inside the call."""
    with pytest.raises(ValueError, match=words):
        RlvpReward(loads(RULES), mode="scalar")(**kwargs)


@pytest.mark.parametrize(
    "reward_funcs, words",
    [
        ([outcome_reward], "found 0"),
        ([outcome_reward, RlvpReward(loads(RULES), mode="scalar")], "found 0"),
        ([outcome_reward, RlvpReward(loads(RULES)), RlvpReward(loads(RULES))], "found 2"),
    ],
)
def test_rlvp_grpo_trainer_needs_exactly_one_token_mode_reward(tmp_path, reward_funcs, words):
    with pytest.raises(ValueError, match=f"needs exactly one RlvpReward.*{words}"):
        _trainer(RlvpGRPOTrainer, tmp_path, reward_funcs)
