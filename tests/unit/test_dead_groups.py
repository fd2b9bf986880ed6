"""benchmarks/dead_groups.py: Kendall's tau-b (hand-computed, with ties), its bootstrap CI on known
cases, and the benchmark on the real tau2 simulations (the rule set's claims in docs/results.md)."""

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("dead_groups", ROOT / "benchmarks" / "dead_groups.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["dead_groups"] = module
    spec.loader.exec_module(module)
    return module


dg = _load()


@pytest.mark.parametrize(
    ("xs", "ys", "expected"),
    [
        # C - D = 4 (pairs 01 02 03 13), one pair tied in x (12), one in y (23): 4 / sqrt(5 * 5)
        ([1, 2, 2, 3], [1, 2, 3, 3], 0.8),
        # C - D = 3 (02 03 12 13 concordant, 01 discordant), pair 23 tied in both: 3 / sqrt(5 * 5)
        ([1, 2, 3, 3], [2, 1, 3, 3], 0.6),
        # one concordant, one discordant pair, two ties in each: 0
        ([1, 1, 2, 2], [1, 2, 1, 2], 0.0),
        # no ties, reversed: -1
        ([1, 2, 3], [3, 2, 1], -1.0),
        # C - D = 4 (02 03 12 13), x tied twice (01 and 23), y never: 4 / sqrt(4 * 6)
        ([0, 0, 1, 1], [1, 2, 3, 4], 4 / 24**0.5),
    ],
)
def test_tau_b_by_hand(xs, ys, expected):
    """tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)) on small cases counted by hand."""
    assert dg.kendall_tau_b(xs, ys) == pytest.approx(expected, abs=1e-12)


def test_tau_b_undefined_and_bad_lengths():
    """All x tied, or fewer than two pairs: None; unequal lengths: ValueError naming both."""
    assert dg.kendall_tau_b([1, 1, 1], [1, 2, 3]) is None
    assert dg.kendall_tau_b([1], [1]) is None
    with pytest.raises(ValueError, match="got 2 and 3"):
        dg.kendall_tau_b([1, 2], [1, 2, 3])


def test_resample_tau_equals_tau_of_the_expanded_sample():
    """The bootstrap's count-weighted tau-b equals kendall_tau_b of the resample written out."""
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(2, 9)
        xs = [rng.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(n)]
        ys = [rng.choice([0.0, 0.25, 1.0]) for _ in range(n)]
        counts = [rng.randint(0, 3) for _ in range(n)]
        expanded = [i for i, c in enumerate(counts) for _ in range(c)]
        want = dg.kendall_tau_b([xs[i] for i in expanded], [ys[i] for i in expanded])
        got = dg._TauB(xs, ys)(counts)
        assert (got is None) == (want is None) and (got is None or got == pytest.approx(want, abs=1e-12))


def test_bootstrap_known_cases():
    """Perfect agreement: every defined resample is +1 (CI [1, 1]); reversed: [-1, -1]; two pairs:
    half the resamples draw one pair twice and are undefined."""
    xs = list(range(12))
    assert dg.bootstrap_tau_b(xs, xs, resamples=300)[:2] == (1.0, 1.0)
    assert dg.bootstrap_tau_b(xs, xs[::-1], resamples=300)[:2] == (-1.0, -1.0)
    low, high, defined = dg.bootstrap_tau_b([0, 1], [0, 1], resamples=2000, seed=3)
    assert (low, high) == (1.0, 1.0) and 900 < defined < 1100
    assert dg.bootstrap_tau_b([0], [0]) is None
    assert dg.bootstrap_tau_b([1, 2, 3], [3, 1, 2], seed=5) == dg.bootstrap_tau_b([1, 2, 3], [3, 1, 2], seed=5)


def test_bootstrap_ci_of_a_known_distribution():
    """n = 3, (x, y) = (0,0), (1,2), (2,1): a resample is one of 27 equally likely index triples;
    tau-b is undefined on the 3 of one pair, +1 on the 12 of two pairs one of which is (0,0), -1 on
    the 6 of (1,2) and (2,1) only, +1/3 on the 6 of all three: the 2.5 % quantile is -1, the 97.5 % +1."""
    low, high, _ = dg.bootstrap_tau_b([0, 1, 2], [0, 2, 1], resamples=4000, seed=1)
    assert (low, high) == (-1.0, 1.0)


def test_quantile_type_7():
    """Linear between order statistics, numpy's default."""
    assert dg.quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert dg.quantile([0.0, 10.0], 0.975) == pytest.approx(9.75)
    with pytest.raises(ValueError):
        dg.quantile([], 0.5)


def test_runs_on_the_shipped_samples(capsys):
    """examples/data's tau2 sample, two rule files: exit 0, a table per domain present, a row per rule file."""
    rules = [str(ROOT / "rules/tau2_airline.rlvp"), str(ROOT / "rules/tau2_telecom.rlvp")]
    assert dg.main([str(ROOT / "examples/data/tau2_simulations"), *rules, "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("airline: ") and "\ntelecom: " in out
    assert all(out.count(f"| {r} |") == 2 for r in rules)
    assert "| call count (agent calls) |" in out and "bootstrap: 50 resamples" in out


def test_bad_input_is_named_not_a_traceback(tmp_path, capsys):
    """A missing folder, or one without tau2 episodes: exit 2 naming it; a rule file with errors: exit 1
    with its diagnostic; an action check without a boolean match: exit 2 naming the file, record and field."""
    assert dg.main([str(tmp_path / "nope"), str(ROOT / "rules/tau2_airline.rlvp")]) == 2
    assert "nope" in capsys.readouterr().err
    bad = tmp_path / "bad.rlvp"
    bad.write_text("violation v (-1) { on call nosuchtool }\n")
    assert dg.main([str(ROOT / "examples/data/tau2_simulations"), str(bad)]) == 1
    assert "bad.rlvp:1:" in capsys.readouterr().err
    assert dg.main([str(ROOT / "examples/data/tau_bench_v1"), str(ROOT / "rules/tau2_airline.rlvp")]) == 2
    assert "no tau2 episode of airline or telecom" in capsys.readouterr().err
    broken = tmp_path / "sims"
    broken.mkdir()
    sample = next((ROOT / "examples/data/tau2_simulations").rglob("*.json"))
    data = json.loads(sample.read_text())
    sim = next(s for s in data["simulations"] if s["reward_info"].get("action_checks"))
    sim["reward_info"]["action_checks"][0]["action_match"] = "yes"
    (broken / "x.json").write_text(json.dumps(data))
    assert dg.main([str(broken), str(ROOT / "rules/tau2_airline.rlvp")]) == 2
    assert "action_checks[0]: field 'action_match'" in capsys.readouterr().err


SHARED = ROOT.parent / "shared" / "data" / "tau2_simulations"


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not found at {SHARED}")
def test_the_claims_of_docs_results_on_the_shared_simulations(capsys):
    """docs/results.md, issue 19: on the shared airline simulations the revised rules rank failed
    episodes by gold-action progress (tau-b >= +0.3, CI above 0), keep 9 of the 13 outcome-dead
    groups live (the issue's 2/3: `one_call_at_a_time` makes tasks 7 and 32 live), and correlate
    with success at least as well as the rules before (+0.17)."""
    argv = [str(SHARED), str(ROOT / "rules/tau2_airline.rlvp"), str(ROOT / "rules/tau2_telecom.rlvp")]
    assert dg.main([*argv, "--resamples", "300", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    airline = doc["domains"]["airline"]
    assert (airline["dead_groups"], airline["failed_with_gold"]) == (13, 148)
    ours = airline["sources"][str(ROOT / "rules/tau2_airline.rlvp")]
    assert ours["tau_b"] >= 0.3 and ours["ci95"][0] > 0
    assert ours["live_dead_groups"] == 9 and ours["corr_success"] >= 0.17
    assert airline["sources"]["call count (agent calls)"]["live_dead_groups"] == 8
    telecom = doc["domains"]["telecom"]["sources"][str(ROOT / "rules/tau2_telecom.rlvp")]
    assert telecom["tau_b"] > 0 and telecom["corr_success"] > 0
