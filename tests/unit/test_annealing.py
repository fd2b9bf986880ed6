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
