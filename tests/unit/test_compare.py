"""Run summaries, the Markdown table and the learning-curve PNG, on synthetic metric rows."""

from trainer.experiments.compare import markdown_table, summarise
from trainer.metrics import episodes_to_success, summarise_run
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
    """mean +- std over seeds, (k/n) when some seeds never reach the threshold, and a PNG."""
    results = {
        "grpo": [_rows([0, 0, 0, 0, 0]), _rows([0, 0.6, 0.6, 0.6, 0.6], method="grpo")],
        "rlvp": [_rows([0.6] * 5), _rows([0.6] * 5)],
    }
    summary = summarise(results, 0.5, 1)
    assert summary["rlvp"]["episodes_to_threshold"] == {"mean": 32.0, "std": 0.0, "n": 2}
    assert summary["grpo"]["episodes_to_threshold"]["n"] == 1
    table = markdown_table(summary)
    assert "| rlvp | 32 ± 0 |" in table and "(1/2)" in table
    grpo = next(x for x in table.splitlines() if x.startswith("| grpo |"))
    assert grpo.startswith("| grpo | 64 (1/2) |"), grpo  # one seed reached it: no ± 0
    assert summarise_run(results["grpo"][0])["dead_iterations"] == 5
    out = plot_curves(results, tmp_path / "c.png")
    assert out.stat().st_size > 1000


def test_a_one_seed_table_shows_values_without_a_spread():
    table = markdown_table(summarise({"rlvp": [_rows([0.6] * 5)]}, 0.5, 1))
    assert "±" not in table and "| rlvp | 32 | 0.0 | 0.60 | 2.00 | 160 |" in table, table
