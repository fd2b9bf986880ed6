"""rlvp credit as atropos ScoredDataGroups: values against compute_advantages and the Tinker adapter, the
package's own field list and API server (its pydantic model, queue and /batch), offline."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import torch

from rlvp_dsl.advantages import compute_advantages
from rlvp_dsl.attach import completion_credits
from rlvp_dsl.readers import episode_from_messages

from ..tinker.rollouts import (
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

pytest.importorskip("atroposlib")

from rlvp_dsl.integrations.atropos import MASKED, SCORED_DATA_GROUP_KEYS, RlvpAtropos  # noqa: E402
from rlvp_dsl.integrations.tinker import TokenRollout  # noqa: E402


def rollout(messages, outcome, logprobs=LOGPROBS):
    return TokenRollout(TOKENS, SAMPLED, PROMPT_MESSAGES + messages, len(PROMPT_MESSAGES), outcome, logprobs)


def credit(**kwargs):
    return RlvpAtropos(program(), marker_ids=([OPEN], [CLOSE]), **kwargs)


def scored_data_group_fields() -> tuple[str, ...]:
    """ScoredDataGroup's fields as the installed atroposlib declares them.  Read from its source: importing
    atroposlib.envs.base needs wandb, which the --no-deps install leaves out."""
    spec = importlib.util.find_spec("atroposlib")
    assert spec is not None and spec.submodule_search_locations
    source = Path(list(spec.submodule_search_locations)[0], "envs", "base.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "ScoredDataGroup":
            assert [ast.unparse(b) for b in node.bases] == ["TypedDict"]
            return tuple(
                s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            )
    raise AssertionError("atroposlib.envs.base has no ScoredDataGroup")


def test_fields_are_the_packages():
    assert SCORED_DATA_GROUP_KEYS == scored_data_group_fields()
    (group,) = credit().scored_groups([[rollout(CLEAN, 1.0), rollout(REPEAT, 0.0)]])
    assert tuple(group) == SCORED_DATA_GROUP_KEYS
    try:  # the TypedDict itself, where wandb and the rest of atroposlib's imports are installed
        from atroposlib.envs.base import ScoredDataGroup
    except ImportError:
        return
    assert tuple(ScoredDataGroup.__annotations__) == SCORED_DATA_GROUP_KEYS


def test_group_by_value():
    """By hand: A_out on every sampled token plus w x the call's credit on its span, 0 where masks is -100."""
    w = 0.5
    (g0, g1) = credit(process_weight=w).scored_groups(
        [[rollout(CLEAN, 1.0), rollout(REPEAT, 0.0)], [rollout(REPEAT, 0.0), rollout(REPEAT, 0.0)]]
    )
    a = 0.5 / (0.5 + 1e-4)  # (r - mean) / (population std + eps)
    for group in (g0, g1):
        assert group["tokens"] == [TOKENS, TOKENS]
        assert group["masks"] == [[t if s else -100 for t, s in zip(TOKENS, SAMPLED)]] * 2
        for row in group["advantages"]:
            assert len(row) == len(TOKENS)
            assert all(x == 0.0 for x, m in zip(row, group["masks"][0]) if m == MASKED)
        assert group["inference_logprobs"] == [[lp if s else 1.0 for lp, s in zip(LOGPROBS, SAMPLED)]] * 2
        assert group["ref_logprobs"] is None and group["messages"] is None and group["overrides"] is None
    assert g0["scores"] == [1.0, 0.0] and g1["scores"] == [0.0, 0.0]
    assert g0["advantages"][0] == pytest.approx([a * s for s in SAMPLED], abs=1e-6)
    # the repeated failure, equal outcomes (no outcome advantage): only the calls' credit, spelled out
    assert g1["advantages"][1] == pytest.approx([0.0] * 3 + [-0.05] * 4 + [0.0] * 2 + [-0.2] * 4 + [0.0] * 4)
    assert g0["advantages"][1][3:7] == pytest.approx([-a - 0.05] * 4, abs=1e-6)
    assert g0["advantages"][1][15:17] == pytest.approx([-a] * 2, abs=1e-6)  # the answer: outcome only


def test_equals_compute_advantages_on_the_same_batch():
    c = credit(process_weight=0.7, process_norm="group_rms", scale_rewards="batch")
    groups = [[rollout(REPEAT, 0.2), rollout(CLEAN, 1.0), rollout(REPEAT, 0.0)]]
    (got,) = c.scored_groups(groups)
    prog = program()
    head = episode_from_messages(PROMPT_MESSAGES)
    credits = [
        completion_credits(
            prog, episode_from_messages(list(r.messages), id="c"), first_event=len(head.events), source="x"
        )
        for r in groups[0]
    ]
    assert [cc.values for cc in credits] == [pytest.approx(REPEAT_CREDITS), (0.0, 0.0), pytest.approx(REPEAT_CREDITS)]
    ref = compute_advantages(
        [[0.2, 1.0, 0.0]],
        [credits],
        [[CALL_SPANS] * 3],
        torch.tensor([SAMPLED] * 3, dtype=torch.float32),
        credit_mode="token",
        process_weight=0.7,
        scale_rewards="batch",
        process_norm="group_rms",
    )
    for i in range(3):
        assert got["advantages"][i] == pytest.approx(ref.advantages[i].tolist(), abs=1e-6)
    assert got["advantages"][0][CALL_SPANS[1][0]] != got["advantages"][0][-1]  # the credit is there


def test_equals_the_tinker_datums_shifted():
    """Tinker's advantages are aligned with target_tokens (tokens[1:]); atropos' with tokens."""
    pytest.importorskip("tinker")
    from rlvp_dsl.integrations.tinker import RlvpTinker

    groups = [[rollout(REPEAT, 0.3), rollout(CLEAN, 0.9)], [rollout(CLEAN, 0.0), rollout(REPEAT, 1.0)]]
    kw = dict(marker_ids=([OPEN], [CLOSE]), process_weight=0.4)
    datums = RlvpTinker(program(), **kw).datums(groups)
    scored = RlvpAtropos(program(), **kw).scored_groups(groups)
    rows = [row for group in scored for row in group["advantages"]]
    for d, row in zip(datums, rows, strict=True):
        assert row[1:] == pytest.approx(d.loss_fn_inputs["advantages"].tolist(), abs=1e-6)
        assert row[0] == 0.0


def test_through_the_atropos_api_server():
    """The package's own trainer-side path: its pydantic ScoredData accepts the groups, POST /scored_data_list
    queues them, GET /batch (grab_exact_from_heterogeneous_queue) hands them to the trainer unchanged."""
    from atroposlib.api.server import ScoredData, app
    from fastapi.testclient import TestClient

    groups = [[rollout(REPEAT, 0.0), rollout(CLEAN, 1.0)], [rollout(CLEAN, 0.5), rollout(REPEAT, 0.5)]]
    scored = credit(process_weight=0.5).scored_groups(groups)
    for group in scored:
        ScoredData.model_validate(group)
    with TestClient(app) as client:
        assert client.get("/reset_data").status_code == 200
        try:
            reg = dict(wandb_group="g", wandb_project="p", batch_size=4, max_token_len=64, checkpoint_dir="")
            assert client.post(
                "/register", json=dict(reg, save_checkpoint_interval=1, starting_step=0, num_steps=1)
            ).is_success
            assert client.post("/scored_data_list", json=scored).json() == {"status": "received", "groups_processed": 2}
            batch = client.get("/batch").json()["batch"]
        finally:
            client.get("/reset_data")
    assert len(batch) == 2 and sum(len(g["tokens"]) for g in batch) == 4
    got = sorted(batch, key=lambda g: g["scores"])
    for sent, back in zip(sorted(scored, key=lambda g: g["scores"]), got, strict=True):
        for key in ("tokens", "masks", "scores", "advantages", "inference_logprobs"):
            assert back[key] == sent[key]  # floats survive the JSON round trip exactly
    assert batch[0]["advantages"] != batch[1]["advantages"]


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: TokenRollout(TOKENS, SAMPLED[:-1], PROMPT_MESSAGES + CLEAN, 2, 1.0, LOGPROBS),
            r"groups\[0\]\[1\]\.sampled has 16",
        ),
        (
            lambda: TokenRollout(TOKENS, [1] + SAMPLED[1:], PROMPT_MESSAGES + CLEAN, 2, 1.0, LOGPROBS),
            r"groups\[0\]\[1\]'s first token",
        ),
        (lambda: TokenRollout(TOKENS, SAMPLED, PROMPT_MESSAGES + CLEAN, 2, 1.0), "some rollouts have logprobs"),
        (lambda: TokenRollout(TOKENS, SAMPLED, [{"role": "wizard"}], 0, 1.0, LOGPROBS), r"groups\[0\]\[1\]\.messages"),
    ],
)
def test_bad_rollouts_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        credit().scored_groups([[rollout(CLEAN, 0.0), make()]])


def test_without_logprobs():
    (group,) = credit().scored_groups([[rollout(CLEAN, 0.0, None), rollout(REPEAT, 1.0, None)]])
    assert group["inference_logprobs"] is None
