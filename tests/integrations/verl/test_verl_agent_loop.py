"""The rlvp_tool_agent loop: verl's real ToolAgentLoop run with a scripted server and real
function tools; by value, each call's credit lands on exactly that call's tokens of the
rm_scores its output writes, and the v1 trainer's path turns them into rlvp_token advantages."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
import verl_fakes as F  # noqa: E402
from hydra.errors import InstantiationException  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from rlvp_dsl.attach import CallCredits  # noqa: E402
from rlvp_dsl.integrations.verl.agent_loop import RlvpAgentLoopOutput  # noqa: E402
from rlvp_dsl.advantages import compute_advantages  # noqa: E402

TOK = F.build_tokenizer()
OPEN_ID, CLOSE_ID = TOK.convert_tokens_to_ids(F.OPEN), TOK.convert_tokens_to_ids(F.CLOSE)
BOOM = '<tool_call>{"name": "boom", "arguments": {"x": "1"}}</tool_call>'
CALC = '<tool_call>{"name": "calc", "arguments": {"a": 2, "b": 3}}</tool_call>'
BROKEN = "<tool_call>{not json}</tool_call>"  # verl drops it without a tool message
PROMPT = [{"role": "user", "content": "What is 2+3?"}]
REFUSED = InstantiationException  # hydra wraps the loop's SettingsError, in verl's workers as here
SCRIPT = [f"Let me try. {BOOM}{BROKEN}", CALC, "The answer is 5."]


def _run(tmp_path, turns=SCRIPT, **kwargs):
    out, loop = F.run_agent(F.config(F.write_rules(tmp_path), **kwargs), TOK, turns, PROMPT)
    return out, loop


def _channel(out, outcome):
    out.reward_score = outcome  # what verl's reward loop sets before as_dict()
    d = out.as_dict()
    return d["rm_scores"].tolist(), d["response_mask"].tolist(), list(out.response_ids)


def _last(mask):
    return max(t for t, m in enumerate(mask) if m)


def test_each_call_s_credit_is_on_exactly_its_tokens(tmp_path):
    """boom (error) -0.5, the dropped block (malformed) -0.5, calc (discharges recover) +0.25, each on
    its own tokens; the outcome on the last action token; 0 everywhere else."""
    out, _ = _run(tmp_path)
    assert isinstance(out, RlvpAgentLoopOutput)
    rm, mask, ids = _channel(out, 1.0)
    spans = F.marked_spans(ids, mask, OPEN_ID, CLOSE_ID)
    assert [TOK.decode(ids[s:e]) for s, e in spans] == [BOOM, BROKEN, CALC]
    expected = [0.0] * len(ids)
    for (s, e), credit in zip(spans, [-0.5, -0.5, 0.25]):
        expected[s:e] = [credit] * (e - s)
    expected[_last(mask)] = 1.0
    assert rm == expected
    info = out.extra_fields["rlvp"]
    assert info["mode"] == "token" and info["credit"] == -0.75
    assert info["metrics"]["rlvp_malformed"] == 1.0 and info["metrics"]["rlvp_calls"] == 3.0
    assert out.as_dict()["extra_fields"]["reward_extra_info"]["rlvp_outcome"] == 1.0  # for verl's tables


def test_assistant_turn_credit_on_every_action_token_but_the_last(tmp_path):
    """'hmm' (-0.125, an assistant turn) reaches every generated token but the last, which carries the outcome;
    boom's own credit is -0.75 (failed -0.5, and the recover it opened expires unmet, -0.25)."""
    out, _ = _run(tmp_path, [f"hmm {BOOM}", "The answer is 5."])
    rm, mask, ids = _channel(out, 0.0)
    ((s, e),) = F.marked_spans(ids, mask, OPEN_ID, CLOSE_ID)
    last = _last(mask)
    for t, (value, m) in enumerate(zip(rm, mask)):
        want = 0.0 if not m or t == last else -0.125 + (-0.75 if s <= t < e else 0.0)
        assert value == want, t
    assert out.extra_fields["rlvp"]["metrics"]["rlvp_dropped"] == -0.125


def test_calls_verl_did_not_run_are_no_result(tmp_path):
    """Beyond max_parallel_calls, and in a last turn the turn limit left unparsed, calls get no result
    (no credit under these rules); tool results go to the calls that ran."""
    out, _ = _run(tmp_path, [f"{BOOM}{CALC}", CALC, "Done."], max_parallel_calls=1)
    rm, mask, ids = _channel(out, 0.0)
    spans = F.marked_spans(ids, mask, OPEN_ID, CLOSE_ID)
    assert [set(rm[s:e]) for s, e in spans] == [{-0.5}, {0.0}, {0.25}]  # boom ran, 1st calc did not, 2nd did
    out, _ = _run(tmp_path, [f"{CALC}{BROKEN}"], max_assistant_turns=1)
    rm, mask, ids = _channel(out, 0.0)
    spans = F.marked_spans(ids, mask, OPEN_ID, CLOSE_ID)
    assert set(rm[spans[0][0] : spans[0][1]]) == {0.0}  # parsed by nobody, run by nobody: no_result
    assert out.extra_fields["rlvp"]["metrics"]["rlvp_malformed"] == 1.0


def test_v1_trainer_path_gives_the_compact_trainer_s_advantages(tmp_path):
    """Two sessions of one prompt through as_dict() -> TransferQueue layout -> padded batch ->
    verl's v1 advantage function: equal to compute_advantages on the same calls, spans and outcomes."""
    fields, rows = [], []
    for outcome in (1.0, 0.0):
        out, _ = _run(tmp_path)
        out.reward_score = outcome
        field = out.as_dict()
        field["uid"] = "p0"
        fields.append(field)
        rows.append((list(out.response_ids), list(out.response_mask)))
    td = list_of_dict_to_tensordict(fields).select("response_mask", "rm_scores").to_padded_tensor()
    data = DataProto(batch=td)  # as TrainerBase._compute_advantage builds it
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    data.non_tensor_batch["uid"] = np.array(["p0", "p0"], dtype=object)
    algorithm = OmegaConf.create(
        {"adv_estimator": "rlvp_token", "use_kl_in_reward": False, "rlvp": {"process_weight": 0.5}}
    )
    got = compute_advantage_for_multi_trajectories(
        data, batch_keys=["p0_0_0", "p0_1_0"], adv_estimator="rlvp_token", config=algorithm
    ).batch["advantages"]
    T = got.shape[1]
    spans = [F.marked_spans(ids, mask, OPEN_ID, CLOSE_ID) for ids, mask in rows]
    credits = [CallCredits((-0.5, -0.5, 0.25), (1, 1, 0), (0, 0, 1))] * 2
    masks = torch.tensor([mask + [0] * (T - len(mask)) for _, mask in rows])
    expected = compute_advantages(
        [[1.0, 0.0]], [credits], [spans], masks, credit_mode="token", process_weight=0.5
    ).advantages
    assert torch.equal(got, expected)


def test_scalar_mode_rides_to_the_rlvp_reward_manager(tmp_path):
    """With stock grpo the loop writes no token credit and needs the rlvp reward manager."""
    with pytest.raises(REFUSED, match="reward_manager.name' must be rlvp"):
        _run(tmp_path, estimator="grpo", manager="naive")
    out, _ = _run(tmp_path, estimator="grpo", manager="rlvp")
    rm, mask, _ = _channel(out, 1.0)
    assert out.extra_fields["rlvp"]["mode"] == "scalar" and out.extra_fields["rlvp"]["credit"] == -0.75
    assert rm == [0.0] * (len(rm) - 1) + [1.0]  # verl's own layout: the scalar at the last token


def test_configs_that_would_lose_the_credit_fail_at_construction(tmp_path):
    """The legacy trainer, a colocated reward model and a non-hermes format are refused, naming the key."""
    rules = F.write_rules(tmp_path)
    for override, key in [
        ({"trainer": {"use_v1": False}}, "trainer.use_v1"),
        ({"reward": {"reward_model": {"enable": True}}}, "enable_resource_pool"),
        ({"actor_rollout_ref": {"rollout": {"multi_turn": {"format": "gpt-oss"}}}}, "multi_turn.format"),
    ]:
        cfg = OmegaConf.merge(F.config(rules), override)
        with pytest.raises(REFUSED, match=key):
            F.run_agent(cfg, TOK, SCRIPT, PROMPT)
