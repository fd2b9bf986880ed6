"""verl's reward loop hosted on a local Ray cluster: RewardLoopManager's workers build the rlvp
reward manager from the plugin, and verl's AgentLoopWorker._compute_score sends an rlvp_tool_agent
output to them, as in training."""

from __future__ import annotations

import asyncio
import os

import pytest

pytest.importorskip("verl")
ray = pytest.importorskip("ray")

import verl_fakes as F  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.experimental.reward_loop import RewardLoopManager  # noqa: E402

TOK = F.build_tokenizer()
CALC = '<tool_call>{"name": "calc", "arguments": {"a": 2, "b": 3}}</tool_call>'
BOOM = '<tool_call>{"name": "boom", "arguments": {"x": "1"}}</tool_call>'


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's memory monitor kills workers when the whole machine is above 95 %, whoever uses it;
    # these workers need well under 1 GB, so a busy machine must not fail the test.
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def reward_loop(cluster, tmp_path_factory):
    """A RewardLoopManager with one Ray worker running the rlvp reward manager."""
    tmp = tmp_path_factory.mktemp("rlvp_ray")
    F.build_tokenizer(save_dir=tmp / "tok")
    cfg = F.config(F.write_rules(tmp), manager="rlvp", process_weight=0.5)
    cfg.reward.custom_reward_function.path = F.write_score_fn(tmp)
    cfg.actor_rollout_ref.model = {"path": str(tmp / "tok"), "tokenizer_path": str(tmp / "tok")}
    manager = RewardLoopManager(cfg, rm_resource_pool=None)
    yield manager, cfg
    for worker in manager.reward_loop_workers:
        ray.kill(worker)


def test_reward_loop_workers_score_with_the_rlvp_manager(reward_loop):
    """compute_rm_score on Ray: outcome + 0.5 * credit at the last valid response token, rlvp metrics alongside."""
    manager, _ = reward_loop
    data = F.reward_batch(TOK, ["2+3?"] * 2, [f"{BOOM} It is 5", "<tool_call>{x}</tool_call> It is 6"], ["5", "5"])
    out = manager.compute_rm_score(data)
    rm = out.batch["rm_scores"]
    lengths = data.batch["attention_mask"][:, 16:].sum(-1)
    # row 0: boom never ran (text) -> no credit; row 1: malformed -0.5, recover expires -0.25
    assert [float(rm[i, int(lengths[i]) - 1]) for i in range(2)] == [1.0, 0.5 * -0.75]
    assert float(rm.abs().sum()) == 1.0 + 0.375
    assert "rlvp_credit" in out.meta_info["reward_extra_keys"]
    assert out.non_tensor_batch["rlvp_credit"].tolist() == [0.0, -0.75]


def test_a_ray_worker_has_the_pieces_after_import_verl(cluster):
    """In a Ray worker process, `import verl` alone registers rlvp's three pieces."""

    @ray.remote(num_cpus=1)
    def probe():
        import sys

        import verl  # noqa: F401

        from rlvp_dsl.integrations.verl._registry import PIECES, held

        return "rlvp_dsl.integrations.verl" in sys.modules, sorted(p.name for p in PIECES if held(p))

    assert ray.get(probe.remote()) == (True, ["rlvp", "rlvp_token", "rlvp_tool_agent"])


def test_agent_loop_output_through_verl_s_compute_score(reward_loop):
    """verl's AgentLoopWorker._compute_score sends a token-mode rlvp_tool_agent output to the Ray
    reward worker: the outcome comes back without the credit (it rides on the tokens), and
    as_dict() writes both into rm_scores."""
    _, cfg = reward_loop
    cfg = cfg.copy()
    cfg.algorithm.adv_estimator = "rlvp_token"
    prompt = [{"role": "user", "content": "What is 2+3?"}]
    out, _ = F.run_agent(cfg, TOK, [f"Let me try. {BOOM}", CALC, "It is 5."], prompt)
    stub = object.__new__(AgentLoopWorker)  # the worker's state _compute_score reads
    stub.reward_loop_worker_handles, stub.processor, stub.mm_processor_kwargs = (
        reward_loop[0].reward_loop_workers,
        None,
        {},
    )
    kwargs = {"raw_prompt": prompt, "data_source": "rlvp_test", "reward_model": {"ground_truth": "5"}, "uid": "p0"}
    asyncio.run(AgentLoopWorker._compute_score(stub, [out], kwargs))
    assert out.reward_score == 1.0
    info = out.extra_fields["reward_extra_info"]
    assert info["rlvp_process"] == 0.0 and info["rlvp_credit"] == -0.25
    rm = out.as_dict()["rm_scores"]
    mask = out.response_mask
    assert float(rm[max(t for t, m in enumerate(mask) if m)]) == 1.0
    assert sorted(set(rm.tolist())) == [-0.5, 0.0, 0.25, 1.0]
