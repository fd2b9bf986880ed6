"""The `test` blocks of every stock rule file (rules/*.rlvp, examples/rules/*.rlvp) pass, one pytest
case per block: the rule files' own examples are part of the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvp_dsl import load_program
from rlvp_dsl.testing.rule_tests import run_tests

REPO = Path(__file__).resolve().parent.parent
FILES = sorted((REPO / "rules").glob("*.rlvp")) + sorted((REPO / "examples" / "rules").glob("*.rlvp"))
CASES = [(path, result.name) for path in FILES for result in run_tests(load_program(str(path)))]


def test_every_stock_rule_file_has_tests():
    """Each stock rule file carries at least one test block (its examples are checked)."""
    with_tests = {path for path, _ in CASES}
    assert [p.name for p in FILES if p.parent.name == "rules" and p.parent.parent == REPO and p not in with_tests] == []


@pytest.mark.parametrize(("path", "name"), CASES, ids=[f"{p.name}:{n}" for p, n in CASES])
def test_block(path, name):
    """The block's expectations hold."""
    [result] = [r for r in run_tests(load_program(str(path))) if r.name == name]
    assert result.passed, "\n".join(result.failures)
