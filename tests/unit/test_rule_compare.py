"""rlvp_dsl/compare.py (`rlvp-score --compare`'s maths), by value on small hand-made episodes: dead groups
made live, the paired bootstrap CI, rank moves, the verdict."""

from __future__ import annotations

from operator import mul

import pytest

from rlvp_dsl.compare import (
    _Correlations,
    compare,
    dead_groups,
    is_live,
    quantile,
    rank_moves,
    ranks,
    task_groups,
)
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.pipeline import loads
from rlvp_dsl.report import pearson

HEAD = "tool a : read target x\ntool b : write target x\n"
RULES_A = HEAD + "violation errored (-0.5) { on call error }\n"
#: A plus a rule on calls of b: it separates episodes that call b from those that do not.
RULES_B = RULES_A + "violation called_b (-1) { on call b }\n"


def _episode(name, tools, outcome, task=None, errors=()):
    events = [Event(k, "call", tool=t, status="error" if k in errors else "ok") for k, t in enumerate(tools)]
    return Episode(name, events, outcome=outcome, source="runs.json", meta={} if task is None else {"task_id": task})


def _scored(text, episodes):
    program = loads(text)
    return [(e, program.score(e)) for e in episodes], [r.name for r in program.rules]


def _compare(episodes, a=RULES_A, b=RULES_B, resamples=300):
    scored_a, names_a = _scored(a, episodes)
    scored_b, names_b = _scored(b, episodes)
    return compare(scored_a, scored_b, names_a, names_b, resamples=resamples)


def test_a_rule_that_separates_a_dead_group_makes_it_live():
    """Two failed trials of one task, one calls b: dead under A (both 0), live under B (0 and -1)."""
    episodes = [
        _episode("t1-0", ["a"], 0.0, task="t1"),
        _episode("t1-1", ["a", "b"], 0.0, task="t1"),
        _episode("t2-0", ["a"], 1.0, task="t2"),
        _episode("t2-1", ["a"], 0.0, task="t2"),  # outcomes differ: not dead
        _episode("lone", ["b"], 1.0),  # no task: in no group
    ]
    c = _compare(episodes)
    assert (c.episodes, c.groups, c.dead) == (5, 2, 1)
    live = c.total.live_share
    assert (live.a, live.b, live.diff, live.ci95) == (0.0, 1.0, 1.0, (1.0, 1.0))
    assert live.shown == 1
    called_b = next(r for r in c.rules if r.name == "called_b")
    assert (called_b.in_a, called_b.in_b) == (False, True)
    assert called_b.correlation.a is None  # A lacks the rule: 0 everywhere, no variance
    assert (called_b.live_share.a, called_b.live_share.b) == (0.0, 1.0)
    moved = {m.id: m for m in c.moves}
    assert moved["t1-1"].only_b == ((1, "called_b", -1.0),) and moved["t1-1"].only_a == ()
    assert "B makes more dead groups live: +1.00 [+1.00, +1.00]" in c.verdict
    assert c.small_sample == ["5 episodes with an outcome (< 20)", "1 outcome-dead group (< 5)"]
    assert c.verdict.endswith(
        "; small sample, the CIs are indicative only: 5 episodes with an outcome (< 20), 1 outcome-dead group (< 5)"
    )
    assert c.to_json()["small_sample"] == c.small_sample


def test_the_ci_excludes_zero_when_b_ranks_outcomes_better_on_enough_episodes():
    """40 episodes: the failures call b; A's errors fall every third episode.  B's r is far above A's
    and the paired CI of B - A lies above 0."""
    episodes = [
        _episode(f"e{k}", ["a", "b"] if k % 2 else ["a"], 0.0 if k % 2 else 1.0, errors=(0,) if k % 3 == 0 else ())
        for k in range(40)
    ]
    c = _compare(episodes)
    outcomes = [e.outcome for e in episodes]
    errored = [-0.5 if k % 3 == 0 else 0.0 for k in range(40)]
    with_b = [x - (k % 2) for k, x in enumerate(errored)]
    corr = c.total.correlation
    assert corr.a == pytest.approx(pearson(errored, outcomes))
    assert corr.b == pytest.approx(pearson(with_b, outcomes))
    assert corr.diff == pytest.approx(corr.b - corr.a) and corr.diff > 0.5
    assert corr.ci95 is not None and 0 < corr.ci95[0] <= corr.diff <= corr.ci95[1]
    assert corr.resamples_defined == 300 and corr.shown == 1
    assert c.verdict.startswith(f"B ranks outcomes better: +{corr.diff:.2f} [")
    assert c.small_sample == [] and "small sample" not in c.verdict  # 40 episodes, no task groups
    swapped = _compare(episodes, a=RULES_B, b=RULES_A)
    assert swapped.total.correlation.diff == pytest.approx(-corr.diff)
    assert swapped.verdict.startswith("A ranks outcomes better: -")


def test_identical_rule_sets_give_zero_difference_and_no_difference_shown():
    """A against itself: every difference and CI is exactly 0, no episode moves, "no difference shown"."""
    episodes = [
        _episode(f"e{k}", ["a", "b"][: 1 + k % 2], float(k % 3 == 0), task=f"t{k // 2}", errors=(0,) if k % 4 else ())
        for k in range(12)
    ]
    c = _compare(episodes, a=RULES_B, b=RULES_B)
    for row in (c.total, *c.rules):
        for d in (row.correlation, row.live_share):
            assert d.diff in (0.0, None)
            assert d.ci95 in ((0.0, 0.0), None)
    assert c.total.correlation.diff == 0.0 and c.total.correlation.ci95 == (0.0, 0.0)
    assert c.moves == ()
    assert c.verdict.startswith("no difference shown (corr with outcome +0.00 [+0.00, +0.00]")


def test_resampled_correlation_equals_pearson_of_the_expanded_sample():
    """A resample given as counts per episode has the r of the episodes repeated that many times."""
    xs, ys = [0.0, -1.0, 0.5, 2.0, -0.5], [1.0, 0.0, 1.0, 1.0, 0.0]
    counts = [2, 0, 1, 1, 1]
    corr = _Correlations(ys)
    sy, syy = sum(map(mul, counts, corr.y)), sum(map(mul, counts, corr.yy))
    expanded = [(x, y) for x, y, c in zip(xs, ys, counts) for _ in range(c)]
    got = corr.r(counts, 5, sy, syy, corr.series(xs))
    assert got == pytest.approx(pearson([x for x, _ in expanded], [y for _, y in expanded]))
    assert corr.series([1.0, 1.0, 1.0, 1.0, 1.0]) is None


def test_groups_dead_groups_ranks_and_quantile():
    """Task groups need >= 2 episodes (and a task id unless asked); dead = equal outcomes; ranks share ties."""
    eps = [
        _episode("a0", [], 1.0, task="a"),
        _episode("a1", [], 1.0, task="a"),
        _episode("b0", [], 0.0, task="b"),
        _episode("b1", [], 0.0, task="b"),
        _episode("c0", [], 0.0, task="c"),
        _episode("n0", [], 0.0),
        _episode("n1", [], 0.0),
    ]
    assert task_groups(eps) == [[0, 1], [2, 3]]
    assert task_groups(eps, need_task=False) == [[0, 1], [2, 3], [5, 6]]
    assert dead_groups(eps, task_groups(eps)) == [[0, 1], [2, 3]]
    assert dead_groups(eps, task_groups(eps), all_failed=True) == [[2, 3]]
    assert is_live([0.0, 1e-12, 0.3], [0, 1]) is False and is_live([0.0, 1e-12, 0.3], [0, 2]) is True
    assert ranks([0.2, -1.0, 0.2, 0.2 + 1e-12, 5.0]) == [3.0, 1.0, 3.0, 3.0, 5.0]
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5 and quantile([1.0, 2.0, 3.0, 4.0], 0.975) == pytest.approx(3.925)


def test_rank_moves_lists_the_largest_moves_first():
    """Rank changes are B's rank minus A's; the episode that moves most comes first, unmoved ones are absent."""
    episodes = [
        _episode(f"e{k}", ["a", "b"] if k == 0 else ["a"], 1.0, errors=(0,) if k == 3 else ()) for k in range(4)
    ]
    scored_a, _ = _scored(RULES_A, episodes)
    scored_b, _ = _scored(RULES_B, episodes)
    moves = rank_moves(scored_a, scored_b)
    # A: e3 lowest (-0.5), the rest tied (rank 3); B: e0 lowest (-1), e3 next, e1 and e2 tied (3.5).
    assert [(m.id, m.rank_a, m.rank_b) for m in moves] == [
        ("e0", 3.0, 1.0),
        ("e3", 1.0, 2.0),
        ("e1", 3.0, 3.5),
        ("e2", 3.0, 3.5),
    ]
    assert moves[0].change == -2.0


def test_compare_refuses_different_episodes():
    """A and B must be scored on the same episodes, in one order."""
    scored, names = _scored(RULES_A, [_episode("x", ["a"], 1.0), _episode("y", ["a"], 0.0)])
    with pytest.raises(ValueError, match="same episodes"):
        compare(scored, scored[::-1], names, names)
    with pytest.raises(ValueError, match="resamples must be >= 1"):
        compare(scored, scored, names, names, resamples=0)
