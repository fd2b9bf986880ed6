"""`EnvRollout` (TRL's ``rollout_func``) samples through the compact trainer's rollout: for the same
group seeds, tasks and model, the rows it hands TRL are the episodes `collect_groups` plays (one
cached batch of every group) and the ones the re-fed `HFGenerator` reference plays group by group,
token for token; its log-probs are the sampler's (0 on tool tokens and on forced tokens).

chain-4, the embedded tiny model with its LoRA adapter, a real TRL `GRPOTrainer` from `build_trl_run`,
one call of the rollout_func for a batch of 3 tasks x 4 generations (no optimiser step)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rlvp_dsl.call_spans import find_call_spans
from trainer.config import load_config
from trainer.experiments import trl_runs
from trainer.experiments.trl_rollout import CALL_MARKERS, CallMarkers, SampledLogprobs, _seed_of
from trainer.sampling.generation import HFGenerator
from trainer.sampling.rollout import collect_groups

ROOT = Path(__file__).resolve().parents[3]
TASKS, G, STEP = 3, 4, 0


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The rows of one `EnvRollout` call, and what it was given (rollout, model, tokenizer, prompts)."""
    torch.set_num_threads(1)
    trl_runs.quiet_libraries()
    cfg = load_config(ROOT / "examples" / "chain4.toml").replace(
        tasks_per_iteration=TASKS, num_generations=G, model_args={"hidden_size": 32, "intermediate_size": 64}
    )
    run = trl_runs.build_trl_run("grpo", cfg, steps=1, out_dir=str(tmp_path_factory.mktemp("same")), threads=1)
    rollout, trainer = run.rollout, run.trainer
    dataset = rollout.dataset()["prompt"]  # one conversation per task, in `rollout.prompts` order
    prompts = [dataset[k] for k in range(TASKS) for _ in range(G)]  # as TRL repeats them
    assert int(trainer.state.global_step) == STEP
    model = trainer.accelerator.unwrap_model(trainer.model)
    before = torch.random.get_rng_state()
    rows = rollout(prompts, trainer)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is left as it was
    tasks = list(rollout.prompts.values())[:TASKS]
    seeds = [_seed_of(rollout.seed, STEP, j) for j in range(TASKS)]
    return rows, rollout, model, trainer.processing_class, tasks, seeds


def _check_rows_equal(rows, groups, logprobs: SampledLogprobs | None = None) -> None:
    flat = [(j, g, r) for j, group in enumerate(groups) for g, r in enumerate(group)]
    assert len(rows["completion_ids"]) == len(flat) == TASKS * G
    for k, (j, g, r) in enumerate(flat):
        assert rows["completion_ids"][k] == r.completion_ids
        assert rows["prompt_ids"][k] == r.prompt_ids
        assert rows["env_mask"][k] == r.completion_mask
        assert rows["outcome"][k] == r.outcome and rows["task_id"][k] == r.task_id
        if logprobs is not None:
            want = logprobs.of(j, g, len(r.completion_ids))
            assert rows["logprobs"][k] == pytest.approx(want, abs=1e-5)


def test_env_rollout_samples_what_the_compact_rollout_samples(played):
    """Same ids as `collect_groups` (the compact trainer's cached batch) with the marked call trie."""
    rows, rollout, model, tok, tasks, seeds = played
    markers = CallMarkers(tok, CALL_MARKERS)
    logprobs = SampledLogprobs()
    groups = collect_groups(
        model, tok, rollout.env_factory, tasks, G, rollout.gen_cfg, seeds, call_trie=markers.marked, on_turn=logprobs
    )
    _check_rows_equal(rows, groups, logprobs)
    assert rows["logprobs"] == [
        logprobs.of(j, g, len(r.completion_ids)) for j, gr in enumerate(groups) for g, r in enumerate(gr)
    ]
    # the rows are real, varied episodes: several calls each, not all the same
    assert len({tuple(ids) for ids in rows["completion_ids"]}) > TASKS
    assert all(sum(m) > 0 and 0 in m for m in rows["env_mask"])


def test_env_rollout_equals_the_refed_reference_group_by_group(played):
    """The independent path: each group alone, every context re-fed to `generate` (no cache), the
    global torch RNG seeded by the group's seed -- the same ids, and the same log-probs to float rounding."""
    rows, rollout, model, tok, tasks, seeds = played
    markers = CallMarkers(tok, CALL_MARKERS)
    logprobs = SampledLogprobs()
    reference = HFGenerator(model, tok)
    groups = []
    for j, (task, seed) in enumerate(zip(tasks, seeds, strict=True)):
        (group,) = collect_groups(
            reference,
            tok,
            rollout.env_factory,
            [task],
            G,
            rollout.gen_cfg,
            [seed],
            call_trie=markers.marked,
            on_turn=lambda _j, g, offset, sample, j=j: logprobs(j, g, offset, sample),
        )
        groups.append(group)
    _check_rows_equal(rows, groups, logprobs)


def test_logprobs_and_call_markers_of_every_row(played):
    """Per row: log-probs are 0 on tool tokens and on forced tokens (a single allowed id), negative
    and finite on sampled choices; every call sits between the markers, which find the rollout's spans."""
    rows, rollout, _, tok, _, _ = played
    open_ids, close_ids = CallMarkers(tok, CALL_MARKERS).ids
    chosen = 0
    for ids, mask, lps in zip(rows["completion_ids"], rows["env_mask"], rows["logprobs"], strict=True):
        allowed = rollout.allowed[tuple(ids)]
        assert len(lps) == len(ids) == len(allowed)
        for m, lp, a in zip(mask, lps, allowed, strict=True):
            if not m or (a is not None and len(a) == 1):
                assert lp == 0.0
            else:
                assert math.isfinite(lp) and lp < 0.0
                chosen += 1
        spans = find_call_spans(ids, open_ids, close_ids, mask)
        assert spans and all(ids[s : s + len(open_ids)] == open_ids for s, _ in spans)
    assert chosen > 0 and rollout.span_mismatches == 0
    assert rollout.history[-1]["step"] == STEP and rollout.history[-1]["rollout/episodes_generated"] == TASKS * G


def test_a_prompt_naming_no_task_is_a_clear_error(played):
    _, rollout, _, _, _, _ = played

    class Trainer:  # only what EnvRollout reads before it samples
        num_generations = G

    with pytest.raises(ValueError, match="names none of its tasks"):
        rollout(["no such task"] * G, Trainer())
