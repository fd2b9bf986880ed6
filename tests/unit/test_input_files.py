"""Standard input: a device that never ends is refused, /dev/null is empty input (rlvp_dsl.input_files)."""

from __future__ import annotations

import pytest

from rlvp_dsl.input_files import NotARegularFile, read_stdin_bytes


def test_dev_null_as_standard_input_is_empty_input_not_an_endless_device():
    with open("/dev/null", "rb") as null:
        assert read_stdin_bytes(null) == b""


def test_dev_zero_as_standard_input_is_refused_with_the_reason():
    with open("/dev/zero", "rb") as zero, pytest.raises(NotARegularFile, match="would never end") as info:
        read_stdin_bytes(zero)
    assert info.value.filename == "<stdin>"
