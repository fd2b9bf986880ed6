"""rlvp advantages on verifiers 0.4 traces, by value against compute_advantages on the same batch (CPU)."""

from __future__ import annotations

import pytest
import torch

from rlvp_dsl.advantages import compute_advantages
from rlvp_dsl.attach import completion_credits
from rlvp_dsl.readers import episode_from_messages

from ..tinker.rollouts import CLEAN, CLOSE, OPEN, PROMPT_MESSAGES, REPEAT, REPEAT_CREDITS, program

v1 = pytest.importorskip("verifiers.v1")

from verifiers.v1 import AgentConfig, AgentInfo, MessageNode, Trace  # noqa: E402
from verifiers.v1.trace import TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402

from rlvp_dsl.integrations.verifiers import RlvpVerifiers  # noqa: E402

SCAFFOLD = 5  # the template's generation prompt: in an assistant node's token_ids, mask False
#: (token_ids, mask) per node: system, user, call, tool, call, tool, answer -- 20 tokens.
NODE_TOKENS = [
    ([1], [0]),
    ([2, 3], [0, 0]),
    ([SCAFFOLD, OPEN, 11, 12, CLOSE], [0, 1, 1, 1, 1]),
    ([20, 21], [0, 0]),
    ([SCAFFOLD, OPEN, 11, 12, CLOSE], [0, 1, 1, 1, 1]),
    ([20, 21], [0, 0]),
    ([SCAFFOLD, 30, 31], [0, 1, 1]),
]
MASK = [m for _, ms in NODE_TOKENS for m in ms]
SPANS = ((4, 8), (11, 15))


def typed(message: dict):
    role = message["role"]
    if role == "system":
        return SystemMessage(content=message["content"])
    if role == "user":
        return UserMessage(content=message["content"])
    if role == "tool":
        return ToolMessage(tool_call_id=message["tool_call_id"], content=message["content"])
    calls = [
        ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    ]
    return AssistantMessage(content=message["content"], tool_calls=calls or None)


def trace(completion: list[dict], reward: float) -> Trace:
    t = Trace(task=TraceTask(type="cancel", data={}), agent=AgentInfo(config=AgentConfig()))
    for k, (message, (ids, mask)) in enumerate(zip(PROMPT_MESSAGES + completion, NODE_TOKENS, strict=True)):
        t.nodes.append(
            MessageNode(
                parent=k - 1 if k else None,
                message=typed(message),
                sampled=message["role"] == "assistant",
                token_ids=ids,
                mask=[bool(m) for m in mask],
                logprobs=[-0.1] * sum(mask),
            )
        )
    t.record_reward("outcome", reward)
    return t


def test_node_advantages_equal_compute_advantages():
    w = 0.5
    groups = [
        [trace(CLEAN, 1.0), trace(REPEAT, 0.0), trace(REPEAT, 0.5)],
        [trace(REPEAT, 0.0), trace(CLEAN, 0.0), trace(CLEAN, 0.0)],
    ]
    RlvpVerifiers(program(), marker_ids=([OPEN], [CLOSE]), process_weight=w).assign(groups)

    # the reference: the same batch, credits and spans built here, through compute_advantages
    prog, head = program(), episode_from_messages(PROMPT_MESSAGES)
    credits = [
        [
            completion_credits(
                prog,
                episode_from_messages(PROMPT_MESSAGES + m, id="completion"),
                first_event=len(head.events),
                source="x",
            )
            for m in ms
        ]
        for ms in ([CLEAN, REPEAT, REPEAT], [REPEAT, CLEAN, CLEAN])
    ]
    assert credits[0][1].values == pytest.approx(REPEAT_CREDITS)
    ref = compute_advantages(
        [[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]],
        credits,
        [[SPANS] * 3] * 2,
        torch.tensor([MASK] * 6, dtype=torch.float32),
        credit_mode="token",
        process_weight=w,
    ).advantages
    for b, t in enumerate(x for g in groups for x in g):
        (branch,) = t.branches
        assert branch.advantages == pytest.approx(ref[b].tolist(), abs=1e-6)  # verifiers' own spread
        for node in t.nodes:
            if node.sampled:
                assert len(node.advantages) == len(node.logprobs) == sum(node.mask)
            else:
                assert node.advantages is None
        off = (0, 1, 2, 3, 8, 9, 10, 15, 16, 17)  # prompt, scaffold, tool outputs
        assert [branch.advantages[k] for k in off] == [0.0] * 10
        assert t.info["rlvp"]["provides_advantages"] is True
    # by hand: the second group's outcomes are equal, so only the failed calls' credit is left
    repeat = groups[1][0]
    assert repeat.nodes[2].advantages == pytest.approx([w * -0.1] * 4)
    assert repeat.nodes[4].advantages == pytest.approx([w * -0.4] * 4)
    assert repeat.nodes[6].advantages == [0.0, 0.0]
    assert repeat.metrics["rlvp_credit"] == pytest.approx(-0.5)
    assert repeat.metrics["rlvp_violations"] == 3.0


def test_refusals_are_named():
    forked = trace(CLEAN, 1.0)
    forked.nodes.append(forked.nodes[6].model_copy(update={"parent": 5}))  # a second leaf: two branches
    rlvp = RlvpVerifiers(program(), marker_ids=([OPEN], [CLOSE]))
    with pytest.raises(ValueError, match=r"groups\[0\]\[1\] .* has 2 trainable branches"):
        rlvp.assign([[trace(CLEAN, 0.0), forked]])
    with pytest.raises(ValueError, match="outcomes has group sizes"):
        rlvp.assign([[trace(CLEAN, 0.0)]], outcomes=[[1.0, 2.0]])
    with pytest.raises(TypeError, match=r"groups\[0\]\[0\] must be a verifiers.v1.Trace"):
        rlvp.assign([[object()]])


def test_the_declaration_survives_verifiers_own_record_and_wire_trace():
    """verifiers 0.4 has no "provides advantages" flag (its only advantage fields are
    ``MessageNode.advantages`` and ``Branch.advantages``); what it tells a consumer is ``Branch.advantages``
    not None ("assigned", unlike a never-scored branch).  A trainer reads traces through ``to_record`` and
    ``WireTrace`` (the loader for consumers without the run's packages): the advantages, ``info["rlvp"]`` and
    the metrics come back through the package's own code."""
    from verifiers.v1.trace import WireTrace

    scored, unscored = trace(REPEAT, 0.0), trace(CLEAN, 1.0)
    assert unscored.branches[0].advantages is None
    adv = RlvpVerifiers(program(), marker_ids=([OPEN], [CLOSE]), process_weight=0.5).assign(
        [[scored, trace(CLEAN, 1.0)]]
    )
    assert RlvpVerifiers.provides_advantages is True
    for decimals, tolerance in ((None, 0.0), (4, 5e-5)):  # every digit, and the package's default rounding
        wire = WireTrace.model_validate(scored.to_record(float_decimals=decimals))
        (branch,) = wire.branches
        assert branch.advantages is not None
        assert branch.advantages == pytest.approx(adv.per_token[0][0], abs=tolerance)
        assert any(a != 0 for a in branch.advantages)
        assert wire.info["rlvp"] == {
            "provides_advantages": True,
            "process_weight": 0.5,
            "rules": scored.info["rlvp"]["rules"],
        }
        assert wire.metrics["rlvp_violations"] == 3.0
    wire_unscored = WireTrace.model_validate(unscored.to_record())
    assert wire_unscored.branches[0].advantages is None and "rlvp" not in wire_unscored.info
