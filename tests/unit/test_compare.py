"""Run summaries, the Markdown table and the learning-curve PNG, on synthetic metric rows."""

import pytest

from trainer.experiments.compare import COLLAPSE_NOTE, MACHINE_NOTE, markdown_table, summarise
from trainer.metrics import episodes_to_success, median, seed_stats, summarise_run
from trainer.experiments.plots import plot_curves


def _rows(successes, per_iter=32, method="rlvp"):
    return [
        {
            "iteration": i,
            "method": method,
            "rollout/success_rate": s,
            "rollout/frac_dead_groups": 1.0 - s,
            "rollout/dead_iteration": int(s == 0),
            "rollout/episodes_generated": per_iter * (i + 1),
            "process/violations_per_episode": 2.0,
            "process/weight": 1.0,
        }
        for i, s in enumerate(successes)
    ]


def test_episodes_to_threshold_uses_trailing_mean():
    """A single lucky iteration does not count; the trailing window must reach the threshold."""
    rows = _rows([0.0, 1.0, 0.0, 0.5, 0.5, 0.6])
    assert episodes_to_success(rows, 0.5, window=1) == 64
    assert episodes_to_success(rows, 0.5, window=3) == 4 * 32
    assert episodes_to_success(_rows([0.0] * 4), 0.5, 3) is None


def test_summary_table_and_plot(tmp_path):
    """median [min–max] over seeds, (k/n) when some seeds never reach the threshold, and a PNG."""
    results = {
        "grpo": [_rows([0, 0, 0, 0, 0]), _rows([0, 0.6, 0.6, 0.6, 0.6], method="grpo")],
        "rlvp": [_rows([0.6] * 5), _rows([0.6] * 5)],
    }
    summary = summarise(results, 0.5, 1)
    stat = summary["rlvp"]["episodes_to_threshold"]
    assert (stat["mean"], stat["std"], stat["n"], stat["median"], stat["min"], stat["max"]) == (
        32.0,
        0.0,
        2,
        32.0,
        32,
        32,
    )
    assert summary["grpo"]["episodes_to_threshold"]["n"] == 1
    table = markdown_table(summary)
    assert "| rlvp | 2 | 32 | 0 | 0.60 | 0/2 |" in table, table  # all seeds agree: no range
    grpo = next(x for x in table.splitlines() if x.startswith("| grpo |"))
    # one of two seeds never got there: the median of (64, never) is never
    assert grpo.startswith("| grpo | 2 | never [64–never] (1/2) | 3 [1–5] | 0.24 [0.00–0.48] | 0/2 |"), grpo
    assert MACHINE_NOTE in table and table.endswith(COLLAPSE_NOTE + "\n" + MACHINE_NOTE)
    assert summarise_run(results["grpo"][0])["dead_iterations"] == 5
    out = plot_curves(results, tmp_path / "c.png")
    assert out.stat().st_size > 1000


def test_a_one_seed_table_shows_values_without_a_spread():
    row = next(x for x in markdown_table(summarise({"rlvp": [_rows([0.6] * 5)]}, 0.5, 1)).splitlines() if "rlvp" in x)
    assert row == "| rlvp | 1 | 32 | 0 | 0.60 | 0/1 | 2.00 | 160 |", row


def test_the_table_gives_the_median_and_range_of_five_seeds():
    """Five seeds: the middle value and the extremes, not the mean; a never-reaching seed counts as never."""
    finals = [0.0, 0.9, 0.95, 1.0, 1.0]
    runs = [_rows([0.0] * 10 + [f] * 5) for f in finals[:1]] + [
        _rows([0.0] * 9 + [1.0] * (k + 1) + [f] * 5) for k, f in enumerate(finals[1:])
    ]
    summary = summarise({"rlvp": runs}, 0.5, 1)
    assert summary["rlvp"]["final_success"]["median"] == 0.95
    assert summary["rlvp"]["final_success"]["mean"] == pytest.approx(0.77)
    eps = summary["rlvp"]["episodes_to_threshold"]
    assert (eps["median"], eps["min"], eps["max"], eps["n"]) == (10 * 32, 320, None, 4)
    row = next(x for x in markdown_table(summary).splitlines() if x.startswith("| rlvp |"))
    assert row.startswith("| rlvp | 5 | 320 [320–never] (4/5) |") and "| 0.95 [0.00–1.00] |" in row, row


def test_seed_stats_median_and_never():
    """seed_stats: even counts average the middle pair; None is left out, or is never (+inf) on request."""
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 3.0, 2.0]) == 2.5
    s = seed_stats([1.0, None, 3.0])
    assert (s["median"], s["min"], s["max"], s["n"], s["seeds"]) == (2.0, 1.0, 3.0, 2, 3)
    s = seed_stats([1.0, None, 3.0], none_is_never=True)
    assert (s["median"], s["min"], s["max"], s["mean"]) == (3.0, 1.0, None, 2.0)
    s = seed_stats([1.0, None, None, 3.0], none_is_never=True)
    assert s["median"] is None  # (3 + inf) / 2: never
    assert seed_stats([])["median"] is None and seed_stats([])["n"] == 0
    with pytest.raises(ValueError, match="median of no values"):
        median([])


def test_a_collapse_is_a_solved_run_that_ends_failing():
    """collapsed: trailing success reached 0.8, final (last 5) below 0.5; a run that never learned is not one."""
    collapsed = summarise_run(_rows([0.2, 0.9, 0.9, 0.9, 0.1, 0.0, 0.0, 0.0, 0.0]))
    assert (collapsed["collapsed"], collapsed["peak_success"]) == (1, pytest.approx(0.9))
    assert summarise_run(_rows([0.1] * 9))["collapsed"] == 0
    assert summarise_run(_rows([0.9] * 4 + [0.6] * 5))["collapsed"] == 0
    one_lucky = summarise_run(_rows([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]))  # trailing mean of 3 never reaches 0.8
    assert one_lucky["collapsed"] == 0
    summary = summarise({"rlvp": [_rows([0.9] * 4 + [0.0] * 5), _rows([0.9] * 9)]}, 0.5, 3)
    assert summary["rlvp"]["collapsed"] == 1
    assert "| 1/2 |" in markdown_table(summary)
