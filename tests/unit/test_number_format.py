"""How rlvp-score writes numbers: CSV cells rounded to their decimals, and no negative zero in
the summary, the --explain lines or the CSV."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from rlvp_dsl.cli.score_output import CSV_DECIMALS, csv_number
from rlvp_dsl.report import fixed


@pytest.mark.parametrize(
    "value,cell",
    [
        (0.1 + 0.2, "0.3"),
        (-2.8000000000000003, "-2.8"),
        (-0.0, "0"),
        (-1e-17, "0"),
        (1.0, "1"),
        (3, "3"),
        (0.125, "0.125"),
        (1.5e-7, "1.5e-07"),
        (None, ""),
        (float("nan"), ""),
        (12345.678, "12345.678"),
    ],
)
def test_csv_number(value, cell):
    assert csv_number(value) == cell


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_csv_number_reads_back_within_rounding_and_is_never_negative_zero(x):
    cell = csv_number(x)
    assert not cell.startswith("-0") or cell.startswith("-0.")
    assert cell != "-0"
    assert math.isclose(float(cell), x, abs_tol=10.0**-CSV_DECIMALS)


@pytest.mark.parametrize(
    "value,spec,text",
    [
        (-0.0, "+.2f", "+0.00"),
        (-0.0004, "+.3f", "+0.000"),
        (-0.0006, "+.3f", "-0.001"),
        (-1e-300, ".2f", "0.00"),
        (-5, "+.2f", "-5.00"),
        (0.25, "+.3f", "+0.250"),
    ],
)
def test_fixed_never_shows_a_negative_zero(value, spec, text):
    assert fixed(value, spec) == text
