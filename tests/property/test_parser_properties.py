"""Properties of the front end: parsing and checking never crash, compiling is deterministic."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import strategies as S  # noqa: E402
from conftest import expensive  # noqa: E402

from rlvp_dsl import check_text, loads  # noqa: E402
from rlvp_dsl.diagnostics import CODES, Diagnostic  # noqa: E402
from rlvp_dsl.parser import parse  # noqa: E402
from rlvp_dsl.source import SourceFile  # noqa: E402

#: Codes a grammatical program may still get from the parser (values, not syntax).
_VALUE_CODES = {"RV104", "RV106", "RV209"}


def _assert_diagnostics(diagnostics):
    for d in diagnostics:
        assert isinstance(d, Diagnostic)
        assert d.code in CODES
        for internal in ("__ANON", "$END", "LPAR", "RBRACE", "SIGNED_NUMBER", "QUOTED_NAME"):
            assert internal not in d.message and internal not in d.help, d


@given(S.grammar_programs())
@expensive
def test_grammar_programs_parse(text):
    """Every program generated from the grammar parses, with at most value diagnostics."""
    tree, diagnostics = parse(SourceFile("gen.rlvp", text))
    assert tree is not None, diagnostics
    assert {d.code for d in diagnostics} <= _VALUE_CODES, diagnostics


@given(S.grammar_programs())
def test_check_never_raises_on_grammar_programs(text):
    """check_text returns diagnostics (unknown tools, signs, ...) and never raises."""
    _assert_diagnostics(check_text(text, "gen.rlvp").diagnostics)


@given(S.mutated_texts())
def test_check_never_raises_on_mutated_text(text):
    """Truncated and edited rule text gives our diagnostics, never an exception."""
    result = check_text(text, "mut.rlvp")
    _assert_diagnostics(result.diagnostics)
    if not result.ok:
        assert result.diagnostics


@given(S.tool_tables().flatmap(S.rule_files))
@expensive
def test_compiling_twice_is_byte_identical(text):
    """The same text compiled twice gives byte-identical canonical JSON."""
    first = json.dumps(loads(text).to_json(), sort_keys=True)
    second = json.dumps(loads(text).to_json(), sort_keys=True)
    assert first == second


@given(S.tool_tables().flatmap(S.rule_files))
@expensive
def test_location_does_not_change_the_program(text):
    """The program does not depend on the file name or on comments and blank lines."""
    moved = "# moved\n\n" + text.replace("\n", "\n\n")
    assert loads(text, "a.rlvp").to_json() == loads(moved, "b/c.rlvp").to_json()
