"""The process-weight schedule."""

import pytest

from rlvp_dsl.advantages import ProcessWeightSchedule


def _run(s, rates):
    out = []
    for t, v in enumerate(rates):
        s.observe(t, v)
        out.append(s.weight(t))
    return out


def test_constant_until_saturation_then_linear_decay():
    """Weight holds until k iterations under threshold, then falls linearly to 0."""
    s = ProcessWeightSchedule(2.0, threshold=0.1, patience=2, decay_iterations=4)
    w = _run(s, [1.0, 0.05, 0.5, 0.0, 0.0, 0.0, 0.9, 0.9, 0.9, 0.9])
    assert w[:4] == [2.0] * 4
    assert s.t0 == 4
    assert w[4:] == [2.0, 1.5, 1.0, 0.5, 0.0, 0.0]  # a later violation spike does not restart it


def test_scheduled_start_and_disabled():
    """A set start iteration triggers the decay; disabled keeps the weight."""
    s = ProcessWeightSchedule(1.0, threshold=0.0, patience=3, start=2, decay_iterations=2)
    assert _run(s, [5, 5, 5, 5, 5]) == [1.0, 1.0, 1.0, 0.5, 0.0]
    off = ProcessWeightSchedule(1.0, enabled=False, threshold=1.0, patience=1, start=0, decay_iterations=1)
    assert _run(off, [0, 0, 0]) == [1.0, 1.0, 1.0]


def test_state_roundtrip_and_bad_values():
    """state_dict restores the schedule; bad parameters raise naming the field."""
    s = ProcessWeightSchedule(1.0, patience=1, decay_iterations=3)
    _run(s, [0.0, 0.0])
    t = ProcessWeightSchedule(1.0, patience=1, decay_iterations=3)
    t.load_state_dict(s.state_dict())
    assert [t.weight(i) for i in range(5)] == [s.weight(i) for i in range(5)]
    with pytest.raises(ValueError, match="process_weight"):
        ProcessWeightSchedule(-1.0)
    with pytest.raises(ValueError, match="anneal_patience"):
        ProcessWeightSchedule(1.0, patience=0)


def test_floor_stops_the_decay_at_a_fraction_of_the_weight():
    """With a floor f the weight decays linearly to f * w0 and stays there; D = 0 drops to it at once."""
    s = ProcessWeightSchedule(2.0, threshold=0.0, patience=9, start=1, decay_iterations=4, floor=0.25)
    assert _run(s, [5] * 8) == [2.0, 2.0, 1.5, 1.0, 0.5, 0.5, 0.5, 0.5]
    at_once = ProcessWeightSchedule(1.0, threshold=0.0, patience=9, start=2, decay_iterations=0, floor=0.1)
    assert _run(at_once, [5] * 4) == [1.0, 1.0, 0.1, 0.1]
    full = ProcessWeightSchedule(1.0, threshold=0.0, patience=9, start=0, decay_iterations=3, floor=1.0)
    assert _run(full, [5] * 4) == [1.0] * 4  # a floor of 1 never lowers the weight


def test_no_floor_is_the_old_schedule():
    """floor = 0 (the class default) decays to exactly 0, as before the floor existed."""
    s = ProcessWeightSchedule(1.0, threshold=0.0, patience=9, start=0, decay_iterations=2)
    assert _run(s, [5] * 4) == [1.0, 0.5, 0.0, 0.0]


def test_resume_continues_a_floored_schedule_identically():
    """A schedule restored from state_dict mid-decay gives the same weights as the uninterrupted one."""
    rates = [2.0, 0.5, 0.5, 0.5, 3.0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
    whole = ProcessWeightSchedule(1.0, threshold=1.0, patience=3, start=20, decay_iterations=4, floor=0.1)
    expected = _run(whole, rates)
    assert expected == [1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.1, 0.1, 0.1, 0.1]
    for cut in range(1, len(rates)):
        first = ProcessWeightSchedule(1.0, threshold=1.0, patience=3, start=20, decay_iterations=4, floor=0.1)
        head = _run(first, rates[:cut])
        again = ProcessWeightSchedule(1.0, threshold=1.0, patience=3, start=20, decay_iterations=4, floor=0.1)
        again.load_state_dict(first.state_dict())
        tail = []
        for t in range(cut, len(rates)):
            again.observe(t, rates[t])
            tail.append(again.weight(t))
        assert head + tail == expected, cut


@pytest.mark.parametrize("floor", [-0.1, 1.5, float("nan")])
def test_a_floor_outside_0_1_is_refused(floor):
    """The error names the config field and says what it must be."""
    with pytest.raises(ValueError, match=r"'anneal_floor' must be between 0 and 1"):
        ProcessWeightSchedule(1.0, floor=floor)


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_a_config_floor_outside_0_1_names_file_line_and_field(tmp_path, value):
    """rlvp-train's config check: file:line, the field, what it must be and what it got."""
    from trainer.config import ConfigError, load_config

    path = tmp_path / "c.toml"
    path.write_text(f'method = "rlvp"\n\n[anneal]\nanneal = true\nanneal_floor = {value}\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:5: 'anneal_floor' must be a fraction of process_weight in [0, 1] (got {value})"


def test_annealing_is_off_by_default_and_the_main_job_does_not_anneal():
    """The defaults: no annealing, no floor; examples/chain4.toml (the main job) sets anneal = false."""
    from pathlib import Path

    from trainer.config import TrainConfig, load_config

    assert (TrainConfig().anneal, TrainConfig().anneal_floor) == (False, 0.0)
    main_job = load_config(Path(__file__).resolve().parents[2] / "examples" / "chain4.toml")
    assert main_job.anneal is False and main_job.process_weight == 1.0


def test_the_main_job_trains_at_least_five_seeds_of_each_method():
    """examples/main.sh's training step: grpo and rlvp over >= 5 seeds (its table gives medians over them)."""
    import re
    from pathlib import Path

    script = (Path(__file__).resolve().parents[2] / "examples" / "main.sh").read_text()
    step = next(line for line in script.splitlines() if line.startswith("rlvp-train examples/chain4.toml --compare"))
    methods = re.search(r"--compare (\S+)", step)
    seeds = re.search(r"--seeds (\S+)", step)
    assert methods and seeds, step
    assert set(methods.group(1).split(",")) == {"grpo", "rlvp"}
    assert len(set(seeds.group(1).split(","))) >= 5, step
