"""The rule files the docs show are real: docs/language.md's opening example checks clean and its
`test` example passes as written, and docs/testing-rules.md's count of the airline rules'
`test` blocks is the file's."""

from __future__ import annotations

import re
from pathlib import Path

from rlvp_dsl import check_file, check_text, loads
from rlvp_dsl.testing.rule_tests import run_tests

REPO = Path(__file__).resolve().parents[2]
LANGUAGE = (REPO / "docs" / "language.md").read_text(encoding="utf-8")
#: Spelled-out counts the docs use (docs/testing-rules.md writes "fifteen").
NUMBER_WORDS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}


def _block(marker: str) -> str:
    """The fenced code block of docs/language.md holding `marker` (exactly one)."""
    (block,) = [b for b in re.findall(r"^```\n(.*?)^```", LANGUAGE, re.S | re.M) if marker in b]
    return block


def test_the_opening_example_checks_clean():
    """The rule file at the top of docs/language.md has no diagnostics."""
    result = check_text(_block("# rules/example.rlvp"), "example.rlvp")
    assert result.ok and not result.diagnostics, [d.message for d in result.diagnostics]
    assert [r.name for r in result.ruleset.rules] == [
        "write_unconfirmed",
        "verify_after_write",
        "repeat_error",
        "blind_destructive",
        "proof",
    ]


def test_the_test_example_is_complete_and_passes():
    """The `test` example of "Tests inside rule files" passes on its own (it once named a rule
    the page never defined: RV211 when pasted after the opening example)."""
    program = loads(_block('test "a write after a read is not blind"'), "doc_test.rlvp")
    (result,) = run_tests(program)
    assert result.name == "a write after a read is not blind" and result.failures == ()
    # what the expectations pin: the failed cancel costs -0.1, the read before it spares -0.3
    assert sorted((c.rule, c.value) for c in result.credits) == [("errored_call", -0.1)]


def test_testing_rules_counts_the_airline_tests():
    """docs/testing-rules.md says how many `test` blocks rules/tau2_airline.rlvp carries."""
    text = (REPO / "docs" / "testing-rules.md").read_text(encoding="utf-8")
    (word,) = re.findall(r"airline\s+rules\s+carry\s+(\w+)", text)
    tests = check_file(str(REPO / "rules" / "tau2_airline.rlvp")).ruleset.tests
    assert NUMBER_WORDS[word] == len(tests)
