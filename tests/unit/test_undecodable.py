"""`rlvp_dsl.source.undecodable`: where a file stops being UTF-8, as line and column (code points)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvp_dsl.source import SourceFile, undecodable


def _error(data: bytes, codec: str = "utf-8") -> UnicodeDecodeError:
    with pytest.raises(UnicodeDecodeError) as info:
        data.decode(codec)
    return info.value


def test_line_and_column_count_code_points():
    # "é" is two bytes, one column; the bad byte is the fifth character of line 3
    assert undecodable(_error("a\nbc\nxé\tz".encode() + b"\xff")) == "line 3, column 5 (byte 0xff)"


def test_a_bom_is_not_a_column():
    assert undecodable(_error(b"\xef\xbb\xbfab\xe9", "utf-8-sig")) == "line 1, column 3 (byte 0xe9)"


def test_a_cut_sequence_shows_its_bytes():
    # a three-byte sequence cut after two bytes, then a newline
    assert undecodable(_error(b"x\xe2\x82\n")) == "line 1, column 2 (byte 0xe2 0x82)"


@given(st.text(), st.text(), st.sampled_from([b"\xff", b"\xc0", b"\x80", b"\xed\xa0\x80"]))
def test_the_position_is_that_of_the_text_before(before, after, bad):
    line, column = SourceFile("f", before + "!").position(len(before))
    shown = undecodable(_error(before.encode() + bad + after.encode()))
    assert shown.startswith(f"line {line}, column {column} (byte 0x{bad[0]:02x}")
