"""The rlvp reward manager, built by verl's own load_reward_manager, on hand-made batches
(offline tokenizer): outcome from verl's compute_score plus w times the rule credit."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("verl")

import verl_fakes as F  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls  # noqa: E402
from verl.trainer.ppo.reward import load_reward_manager  # noqa: E402

from rlvp_dsl import loads  # noqa: E402
from rlvp_dsl.integrations.verl.reward_manager import RlvpRewardManager  # noqa: E402
from rlvp_dsl.integrations.verl.scoring import METRIC_KEYS  # noqa: E402
from rlvp_dsl.integrations.verl.settings import SettingsError, rule_settings  # noqa: E402
from rlvp_dsl.integrations.verl.transcript import episode_from_response_text  # noqa: E402

TOK = F.build_tokenizer()
BOOM = '<tool_call>{"name": "boom", "arguments": {"x": "1"}}</tool_call>'
CALC = '<tool_call>{"name": "calc", "arguments": {"a": 2, "b": 3}}</tool_call>'
# A tool agent's response as verl's stock tool_agent renders it (decoded, special tokens skipped).
MULTI_TURN = (
    f"Let me try. {BOOM}\nuser\n<tool_response>\nError executing tool 'boom': kaboom 1\n</tool_response>\n"
    f"assistant\n{CALC}\nuser\n<tool_response>\n5\n</tool_response>\nassistant\nThe answer is 5."
)
SINGLE_TURN = f"hmm, {CALC} so 5"  # calls written as text, never run
BROKEN = "<tool_call>{not json}</tool_call> The answer is 6."


def _scores(cfg, data):
    async def go():  # built inside the running loop, as RewardLoopWorker does
        manager = load_reward_manager(cfg, TOK, reward_router_address=None, reward_model_tokenizer=None)
        return manager, [await manager.run_single(data[i : i + 1]) for i in range(len(data))]

    return asyncio.run(go())


def _data():
    return F.reward_batch(TOK, ["What is 2+3?"] * 4, [MULTI_TURN, SINGLE_TURN, BROKEN, "It is 6"], ["5", "5", "5", "5"])


def test_reward_is_outcome_plus_weighted_credit(tmp_path):
    """verl builds the registered manager; reward_score = compute_score outcome + w * rule credit."""
    cfg = F.config(F.write_rules(tmp_path), manager="rlvp", process_weight=0.5)
    cfg.reward.custom_reward_function.path = F.write_score_fn(tmp_path)
    manager, out = _scores(cfg, _data())
    assert isinstance(manager, RlvpRewardManager) and get_reward_manager_cls("rlvp") is RlvpRewardManager
    # credit by hand: boom error -0.5, calc ok discharges recover +0.25; 'hmm' -0.125;
    # a broken block is a malformed call (-0.5) that opens recover, which expires at the end (-0.25)
    outcomes, credits = [1.0, 1.0, 0.0, 0.0], [-0.25, -0.125, -0.75, 0.0]
    assert [o["reward_score"] for o in out] == [r + 0.5 * c for r, c in zip(outcomes, credits)]
    for o, r, c in zip(out, outcomes, credits):
        info = o["reward_extra_info"]
        assert set(METRIC_KEYS) <= set(info) and info["rlvp_outcome"] == r and info["rlvp_credit"] == c
    assert [o["reward_extra_info"]["rlvp_malformed"] for o in out] == [0.0, 0.0, 1.0, 0.0]


def test_default_compute_score_is_verl_s(tmp_path):
    """Without a custom reward function the outcome is verl's default_compute_score for the data source."""
    cfg = F.config(F.write_rules(tmp_path), manager="rlvp", process_weight=1.0)
    data = F.reward_batch(
        TOK, ["2+3?", "2+3?"], ["<tool_call>{bad}</tool_call> #### 5", "#### 6"], ["5", "5"], data_source="openai/gsm8k"
    )
    _, out = _scores(cfg, data)
    assert [o["reward_score"] for o in out] == [1.0 - 0.75, 0.0]


def test_the_episode_read_from_text():
    """Calls take the following tool responses in order; verl's error texts are errors."""
    read = episode_from_response_text(MULTI_TURN, prompt_messages=[{"role": "user", "content": "2+3?"}])
    episode = read.episode
    assert read.first_event == 1
    assert [(e.kind, e.tool, e.status) for e in episode.events] == [
        ("user", None, "ok"),
        ("assistant", None, "ok"),
        ("call", "boom", "error"),
        ("call", "calc", "ok"),
        ("assistant", None, "ok"),
    ]
    assert episode.events[3].result == "5" and episode.events[4].text == "The answer is 5."
    # a turn's text and calls were issued together; the next turn came after the results
    assert episode.events[1].same_message(episode.events[2]) and not episode.events[2].same_message(episode.events[3])
    single = episode_from_response_text(SINGLE_TURN).episode
    assert [e.status for e in single.calls] == ["no_result"]
    assert sorted(c.value for c in loads(F.RULES).score(single)) == [-0.125]


# An earlier turn in the prompt: a failed boom call (-0.5) that opened recover.
HISTORY = [
    {"role": "user", "content": "2+3?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "h1", "type": "function", "function": {"name": "boom", "arguments": '{"x": "1"}'}}],
    },
    {"role": "tool", "tool_call_id": "h1", "content": "Error executing tool 'boom': kaboom 0"},
]


def test_credit_on_the_prompt_history_is_not_the_response_s(tmp_path):
    """The rules see the prompt's history: its failed boom opened recover, which the
    response's ok calc discharges (+0.25, on the response's call).  The history's own -0.5
    is dropped, its call is not counted, and its obligation expiring in a response that
    never recovers lands on the history's call: dropped too."""
    cfg = F.config(F.write_rules(tmp_path), manager="rlvp", process_weight=1.0)
    cfg.reward.custom_reward_function.path = F.write_score_fn(tmp_path)
    recovers = f"{CALC}\nuser\n<tool_response>\n5\n</tool_response>\nassistant\nIt is 5."
    data = F.reward_batch(TOK, ["2+3?", "2+3?"], [recovers, "It is 5"], ["5", "5"])
    raw = np.empty(2, dtype=object)
    raw[:] = [HISTORY, HISTORY]
    data.non_tensor_batch["raw_prompt"] = raw
    _, out = _scores(cfg, data)
    info = [o["reward_extra_info"] for o in out]
    assert [i["rlvp_calls"] for i in info] == [1.0, 0.0]
    assert [i["rlvp_credit"] for i in info] == [0.25, 0.0]
    assert [o["reward_score"] for o in out] == [1.25, 1.0]
    program = loads(F.RULES)
    whole = [
        sorted(c.value for c in program.score(episode_from_response_text(r, prompt_messages=HISTORY).episode))
        for r in (recovers, "It is 5")
    ]
    assert whole == [[-0.5, 0.25], [-0.5, -0.25]]  # what scoring the whole episode would have added


def test_agent_loop_scoring_is_used_and_never_counted_twice(tmp_path):
    """A row carrying the rlvp_tool_agent's scoring: token mode adds nothing, scalar mode adds w * its credit."""
    cfg = F.config(F.write_rules(tmp_path), manager="rlvp", process_weight=0.5)
    cfg.reward.custom_reward_function.path = F.write_score_fn(tmp_path)
    data = F.reward_batch(TOK, ["2+3?", "2+3?"], ["It is 5", "It is 5"], ["5", "5"])
    extra = np.empty(2, dtype=object)
    extra[:] = [
        {"rlvp": {"mode": "token", "credit": -1.0, "metrics": {}}},
        {"rlvp": {"mode": "scalar", "credit": -1.0, "metrics": {}}},
    ]
    data.non_tensor_batch["tool_extra_fields"] = extra
    _, out = _scores(cfg, data)
    assert [o["reward_score"] for o in out] == [1.0, 1.0 - 0.5]
    assert [o["reward_extra_info"]["rlvp_process"] for o in out] == [0.0, -0.5]


def test_missing_rules_fail_at_construction(tmp_path):
    """No rule file, or one that does not exist, is an error naming the config key."""
    cfg = F.config(str(tmp_path / "nope.rlvp"), manager="rlvp")
    with pytest.raises(SettingsError, match="reward.reward_kwargs.rlvp.rules' names"):
        _scores(cfg, _data())
    cfg = OmegaConf.merge(cfg, {"reward": {"reward_kwargs": {"rlvp": {"rules": None}}}})
    with pytest.raises(SettingsError, match="must name the rule file"):
        _scores(cfg, _data())


def test_settings_from_a_composed_verl_config(tmp_path):
    """`+reward.reward_kwargs.rlvp.*` overrides on verl's own Hydra config are what the manager reads."""
    import os

    import verl
    from hydra import compose, initialize_config_dir

    rules = F.write_rules(tmp_path)
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=[
                "reward.reward_manager.name=rlvp",
                f"+reward.reward_kwargs.rlvp.rules={rules}",
                "+reward.reward_kwargs.rlvp.process_weight=0.5",
            ],
        )
    settings = rule_settings(cfg)
    assert (settings.rules, settings.process_weight, settings.error_signal) == (rules, 0.5, "verl")


def test_verl_settings_take_every_documented_name_and_refuse_others(tmp_path):
    """reward_kwargs.rlvp.error_signal goes through the readers' resolver: the names docs/readers.md lists."""
    from rlvp_dsl.readers import ERROR_SIGNALS

    rules = tmp_path / "r.rlvp"
    rules.write_text("violation errored_call (-0.1) { on call error }\n", encoding="utf-8")

    def settings(signal):
        return rule_settings({"reward": {"reward_kwargs": {"rlvp": {"rules": str(rules), "error_signal": signal}}}})

    for name in ERROR_SIGNALS:
        assert settings(name).error_signal == name
    with pytest.raises(SettingsError, match=r"error_signal': unknown error signal 'verll' \(did you mean 'verl'\?\)"):
        settings("verll")
    with pytest.raises(SettingsError, match=r"error_signal': expected a name, got 5"):
        settings(5)


@pytest.mark.parametrize(
    "markers,fragment",
    [
        (["<tool_call>", "<tool_call>"], "two different strings"),  # one marker for both ends: no call's end is found
        (["<tool_call>", ""], "two non-empty strings"),
        ("<tool_call>", "two non-empty strings"),
    ],
)
def test_verl_settings_check_call_markers_as_rlvp_reward_does(tmp_path, markers, fragment):
    """reward_kwargs.rlvp.call_markers is refused where RlvpReward refuses it, with the key named."""
    rules = tmp_path / "r.rlvp"
    rules.write_text("violation errored_call (-0.1) { on call error }\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"'reward\.reward_kwargs\.rlvp\.call_markers' must be " + fragment):
        rule_settings({"reward": {"reward_kwargs": {"rlvp": {"rules": str(rules), "call_markers": markers}}}})
