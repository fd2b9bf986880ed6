"""The GRPO loop on a fake backend: metrics, dead iterations, resume == uninterrupted."""

import json
from collections import Counter

import torch

from trainer.config import TrainConfig
from trainer.loop import train

from trainer_fakes import fake_backend

torch.set_num_threads(1)


def _cfg(tmp_path, **kw):
    base = dict(
        iterations=4, tasks_per_iteration=2, num_generations=4, learning_rate=0.05, out_dir=str(tmp_path), micro_batch=5
    )
    base.update(kw)
    return TrainConfig(**base)


def test_metrics_rows_and_jsonl(tmp_path):
    """Each iteration logs the namespaced metrics; episodes generated is cumulative."""
    rows = train(_cfg(tmp_path, method="rlvp"), backend=fake_backend(), progress=False)
    assert len(rows) == 4
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines == rows
    for key in (
        "rollout/success_rate",
        "rollout/frac_dead_groups",
        "rollout/dead_iteration",
        "process/violations_per_episode",
        "process/discharges_per_episode",
        "process/weight",
        "loss/policy",
        "loss/kl",
        "policy/entropy",
        "perf/tokens_per_s",
    ):
        assert key in rows[0]
    assert [r["rollout/episodes_generated"] for r in rows] == [8, 16, 24, 32]
    assert rows[0]["process/weight"] == 1.0


def test_grpo_all_fail_is_dead_and_does_not_move_weights(tmp_path):
    """Outcome-only GRPO on all-fail batches: dead iteration, no optimiser step, weights unchanged."""
    be = fake_backend(calls=6)  # success needs 6 lucky calls: never in 2 iterations
    before = {n: p.detach().clone() for n, p in be.model.named_parameters()}
    rows = train(_cfg(tmp_path, method="grpo", iterations=2), backend=be, progress=False)
    assert all(r["rollout/dead_iteration"] == 1 and r["rollout/success_rate"] == 0 for r in rows)
    assert all(torch.equal(p, before[n]) for n, p in be.model.named_parameters())
    # the same batches under rlvp are live (the process credit gives gradient)
    be2 = fake_backend(calls=6)
    rows2 = train(_cfg(tmp_path / "r", method="rlvp", iterations=2), backend=be2, progress=False)
    assert all(r["rollout/dead_iteration"] == 0 for r in rows2)
    assert any(not torch.equal(p, before[n]) for n, p in be2.model.named_parameters())


def test_resume_equals_uninterrupted(tmp_path):
    """Training 2 + resume 2 gives the same metrics and weights as 4 straight."""
    be_full = fake_backend()
    full = train(
        _cfg(
            tmp_path / "a",
            method="rlvp",
            anneal=True,
            anneal_patience=1,
            anneal_threshold=5.0,
            anneal_iterations=3,
            anneal_floor=0.5,
        ),
        backend=be_full,
        progress=False,
    )
    be = fake_backend()
    cfg = _cfg(
        tmp_path / "b",
        method="rlvp",
        anneal=True,
        anneal_patience=1,
        anneal_threshold=5.0,
        anneal_iterations=3,
        anneal_floor=0.5,
    )
    train(cfg.replace(iterations=2), backend=be, progress=False)
    be2 = fake_backend(seed=123)  # different init: must be overwritten by the checkpoint
    rest = train(cfg, backend=be2, resume=True, progress=False)
    strip = lambda rs: [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rs]
    assert strip(rest) == strip(full[2:])
    assert [r["process/weight"] for r in rest] == [0.5, 0.5]  # the annealing state (decay to the floor) carried over
    for (n, p), (_, q) in zip(be_full.model.named_parameters(), be2.model.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4


def test_dapo_all_fail_stops_at_cap_and_counts_every_episode(tmp_path):
    """Case 4 in the loop: all-fail batches, cap 3 -> 3 rounds, all episodes counted, a message, valid JSON."""
    msgs = []
    rows = train(
        _cfg(tmp_path, method="dapo", iterations=2, dapo_max_rounds=3),
        backend=fake_backend(calls=6),
        progress=False,
        log=msgs.append,
    )
    assert [r["rollout/rounds"] for r in rows] == [3, 3]
    assert [r["rollout/episodes_generated"] for r in rows] == [3 * 8, 6 * 8]
    assert all(r["rollout/dead_iteration"] == 1 and r["rollout/frac_dead_groups"] == 1.0 for r in rows)
    assert len(msgs) == 2 and "cap of 3 rounds" in msgs[0]
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def test_dapo_scores_each_episode_once(tmp_path):
    """dapo: every episode of the first round and of the batch is scored by the rules exactly once,
    including the first-round groups that dynamic sampling keeps."""
    be = fake_backend(calls=1)  # success 1 in 6 per episode: some groups live, some resampled
    scored, events = Counter(), []
    score, collect = be.credit_source, be.collect

    def counting_scorer(episode):
        scored[id(episode)] += 1
        return score(episode)

    def recording_collect(task, n, seed):
        group = collect(task, n, seed)
        events.append(("collect", group))  # keeps every episode alive: ids stay unique
        return group

    be.credit_source, be.collect = counting_scorer, recording_collect
    cfg = _cfg(tmp_path, method="dapo", iterations=3, dapo_max_rounds=4)
    rows = train(
        cfg,
        backend=be,
        progress=False,
        log=lambda s: None,
        on_batch=lambda it, groups, credits, weight: events.append(("batch", groups)),
    )
    assert any(r["rollout/rounds"] > 1 for r in rows)
    overlap, expected = 0, set()
    collected = []
    for kind, payload in events:
        if kind == "collect":
            collected.append(payload)
            continue
        first_round = collected[: cfg.tasks_per_iteration]
        overlap += sum(any(g is f for f in first_round) for g in payload)
        expected |= {id(r.episode) for g in first_round + payload for r in g}
        collected = []
    assert overlap > 0  # kept first-round groups: the case that used to be scored twice
    assert set(scored) == expected and set(scored.values()) == {1}
