"""The suite's float bound (`tests/tolerance.py`) holds for sums in any order and rejects more."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, strategies as st

from tolerance import assert_close, gamma, terms, tolerance, unit_roundoff

torch.set_num_threads(1)


def _recursive(xs: torch.Tensor) -> torch.Tensor:
    """Left-to-right float32 summation, one rounding per addition (Higham's recursive summation)."""
    total = torch.zeros((), dtype=xs.dtype)
    for x in xs:
        total = total + x
    return total


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=1, max_size=200), st.randoms())
def test_two_summation_orders_stay_within_the_bound(values, rnd):
    """Recursive sums of the same float32 terms in two orders, and torch's blocked sum, are within
    2 gamma_n sum|x_i| of each other (Higham 2002, eq. (3.5))."""
    xs = torch.tensor(values, dtype=torch.float32)
    shuffled = xs[torch.tensor(rnd.sample(range(len(values)), len(values)))]
    magnitude = float(xs.double().abs().sum())
    forward, other, blocked = _recursive(xs), _recursive(shuffled), xs.sum()
    for got in (other, blocked):
        assert_close(got, forward, n=terms(len(values)), scale=magnitude)


def test_a_difference_above_the_bound_fails_and_non_finite_values_must_match():
    x = torch.linspace(-1, 1, 11)
    bound = tolerance(10) * float(x.abs().max())
    assert_close(x + 0.5 * bound, x, n=10)
    with pytest.raises(AssertionError, match="exceeds 2 gamma_10"):
        assert_close(x + 2 * bound, x, n=10)
    with pytest.raises(AssertionError, match="non-finite"):
        assert_close(torch.tensor([1.0, math.inf]), torch.tensor([1.0, 2.0]), n=1)
    assert_close(torch.tensor([1.0, -math.inf]), torch.tensor([1.0, -math.inf]), n=1)


def test_gamma_is_highams():
    u = unit_roundoff(torch.float32)
    assert u == 2.0**-24 and unit_roundoff(torch.float64) == 2.0**-53
    assert gamma(100) == pytest.approx(100 * u / (1 - 100 * u), rel=1e-15)
    with pytest.raises(ValueError, match="n \\* u < 1"):
        gamma(2**24)
