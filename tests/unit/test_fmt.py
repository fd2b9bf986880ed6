"""The formatter (`rlvp_dsl.syntax.fmt.format_source`): where each comment goes, and its properties on
generated programs and on every stock and golden rule file: formatting twice changes nothing, the
syntax tree and the compiled program stay the same, and every comment survives."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import strategies as S  # noqa: E402

from rlvp_dsl import check_text  # noqa: E402
from rlvp_dsl.diagnostics import RuleError, has_errors  # noqa: E402
from rlvp_dsl.parser import parse  # noqa: E402
from rlvp_dsl.source import SourceFile  # noqa: E402
from rlvp_dsl.syntax import get_parser  # noqa: E402
from rlvp_dsl.syntax.fmt import MAX_WIDTH, format_source, wrap_line  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RULE_FILES = sorted(
    str(p.relative_to(REPO))
    for pattern in ("rules/*.rlvp", "examples/**/*.rlvp", "tests/golden/**/*.rlvp", "tests/rules/**/*.rlvp")
    for p in REPO.glob(pattern)
)


def comments(text: str) -> Counter[str]:
    """The multiset of the comments of `text` (as the lexer reads them, trailing spaces dropped)."""
    tokens = get_parser().lex(text, dont_ignore=True)
    return Counter(str(t.value).rstrip() for t in tokens if t.type == "COMMENT")


def tree(text: str, path: str = "x.rlvp"):
    parsed, diagnostics = parse(SourceFile(path, text))
    assert parsed is not None and not has_errors(diagnostics), diagnostics
    return parsed.items


def program_hash(text: str, path: str) -> str | None:
    """sha256 of the compiled program's canonical JSON (`--emit-program`), None when it does not check."""
    checked = check_text(text, path)
    if checked.ruleset is None:
        return None
    return hashlib.sha256(json.dumps(checked.ruleset.to_json(), sort_keys=True).encode()).hexdigest()


def assert_properties(text: str, path: str = "x.rlvp", *, compiled: bool = True) -> str:
    """fmt is idempotent, keeps the tree (spans aside), every comment, and the compiled program."""
    formatted = format_source(text, path=path)
    assert format_source(formatted, path=path) == formatted
    assert tree(formatted, path) == tree(text, path)
    assert comments(formatted) == comments(text)
    if compiled:
        assert program_hash(formatted, path) == program_hash(text, path)
    return formatted


# ---- where comments go ---------------------------------------------------------------------


def test_header_and_comments_before_items_stay_in_place():
    """The header stays the header (its blank line kept); a comment before an item stays directly before it."""
    text = "# header\n\n#  about a\ntool a : read\n# the rule\nviolation v (-1) { on call a }\n"
    assert format_source(text) == (
        "# header\n\n#  about a\ntool a : read\n\n# the rule\nviolation v (-1) {\n  on call a\n}\n"
    )


def test_trailing_comments_stay_on_their_printed_line():
    """A trailing comment stays at the end of the printed line holding the token before it."""
    text = "tool a   # the tool\nviolation v (-1.0) {   # head\n  on call a  # when\n}  # end\n"
    assert format_source(text) == "tool a  # the tool\n\nviolation v (-1) {  # head\n  on call a  # when\n}  # end\n"


def test_own_line_comments_inside_a_block_stay_before_their_line():
    """Inside a block, an own-line comment goes above the line it preceded; before `}` it keeps the block's indent."""
    text = (
        "tool a\nobligation o (+1, expire -1) {\n# opens\nopen on call a\n\n"
        "    # discharges\n  discharge on assistant\n# last\n}\n"
    )
    assert format_source(text) == (
        "tool a\n\nobligation o (+1, expire -1) {\n  # opens\n  open on call a\n"
        "  # discharges\n  discharge on assistant\n  deadline at end\n  # last\n}\n"
    )


def test_trailing_comments_on_a_joined_line_move_above_it():
    """Two trailing comments whose lines the printer joins go above the joined line, in order."""
    text = "tool a\ntool b\nviolation v (-1) {\n  on call a  # one\n     or call b  # two\n}\n"
    assert format_source(text) == "tool a\ntool b\n\nviolation v (-1) {\n  # one\n  # two\n  on call a or call b\n}\n"


def test_a_comment_inside_a_split_condition_goes_above_its_line():
    """An own-line comment between the parts of a condition goes above the printed line."""
    text = "tool a\ntool b\nviolation v (-1) {\n  on call a\n  # b too\n  or call b\n}\n"
    assert format_source(text) == "tool a\ntool b\n\nviolation v (-1) {\n  # b too\n  on call a or call b\n}\n"


def test_test_blocks_are_formatted_with_their_comments():
    """A `test` block is printed in the canonical layout; comments inside its episode stay with their events."""
    text = (
        "tool a : read\nviolation v (-1) { on call a error }\n"
        'test "t" {\n  episode {\n    # the failing call\n    call a {} error   # fails\n'
        "    # nothing after\n  }\n  expect v ==   -1.0\n}\n# the end\n"
    )
    assert format_source(text) == (
        "tool a : read\n\nviolation v (-1) {\n  on call a error\n}\n\n"
        'test "t" {\n  episode {\n    # the failing call\n    call a error  # fails\n'
        "    # nothing after\n  }\n  expect v == -1\n}\n# the end\n"
    )


def test_blank_lines_between_items_and_comments():
    """One blank line where the source had any between declarations or comments; the printer's around rules."""
    text = "tool a\n\n\n\ntool b\ntool c\n# trailer one\n\n\n# trailer two\n"
    assert format_source(text) == "tool a\n\ntool b\ntool c\n# trailer one\n\n# trailer two\n"


def test_tool_and_const_tables_are_aligned():
    """Consecutive tool declarations align their ':' and 'target'; consecutive consts their '='."""
    text = (
        "tool get_x : read target id\ntool rm : write, destructive target id\ntool ls\nconst A = 1\nconst LONG = -0.5\n"
    )
    assert format_source(text) == (
        "tool get_x : read               target id\n"
        "tool rm    : write, destructive target id\n"
        "tool ls\n"
        "const A    = 1\n"
        "const LONG = -0.5\n"
    )


def test_long_conditions_break_before_top_level_operators():
    """A line over MAX_WIDTH breaks before its top-level `or`s (else `and`s), never inside parentheses."""
    line = "  on call a ok and seen (call b or call c) and " + " and ".join(f"tag t{i}" for i in range(20))
    assert len(line) > MAX_WIDTH
    pieces = wrap_line(line)
    assert pieces[0] == "  on call a ok"
    assert pieces[1] == "      and seen (call b or call c)"
    assert all(p.startswith("      and tag t") for p in pieces[2:]) and len(pieces) == 22
    assert wrap_line("  on (" + " or ".join(["call a"] * 30) + ")") == ["  on (" + " or ".join(["call a"] * 30) + ")"]
    text = "tool a\nviolation v (-1) {\n  on " + " or ".join(f"call a arg x == {i}" for i in range(10)) + "\n}\n"
    formatted = assert_properties(text)
    assert formatted.splitlines()[3:5] == ["  on call a arg x == 0", "      or call a arg x == 1"]


def test_a_file_with_only_comments_and_an_empty_file():
    assert format_source("") == ""
    assert format_source("\n\n") == ""
    assert format_source("# only\n\n\n# comments   \n") == "# only\n\n# comments\n"
    assert format_source("tool a\r\n# c\r\n") == "tool a\n# c\n"


def test_a_file_that_does_not_parse_raises_its_diagnostics():
    """Syntax errors come back as a RuleError with file:line:col; nothing is formatted."""
    with pytest.raises(RuleError) as raised:
        format_source("tool a\nviolation v (-1) {\n  on call a\n", path="rules/x.rlvp")
    assert raised.value.diagnostics[0].code == "RV103"
    assert str(raised.value).startswith("rules/x.rlvp:2:")
    with pytest.raises(RuleError) as raised:
        format_source("tool `open` : read\nconst x = 1e999\n", path="v.rlvp")
    assert "v.rlvp:2:" in str(raised.value)


# ---- properties --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", RULE_FILES)
def test_stock_and_golden_files(path):
    """Every stock, example and golden rule file that parses: idempotent, same tree, comments and program."""
    text = (REPO / path).read_text(encoding="utf-8-sig")
    try:
        format_source(text, path=path)
    except RuleError:
        assert "diagnostics" in path  # only the golden error cases do not parse
        return
    assert_properties(text, str(REPO / path))


@pytest.mark.parametrize(
    "path", sorted(str(p.relative_to(REPO)) for d in ("rules", "examples/rules") for p in (REPO / d).glob("*.rlvp"))
)
def test_shipped_rule_files_are_in_canonical_layout(path):
    """The rule files we ship -- hand-written and derived by `--auto-from-tags` -- are what
    `rlvp-compile --fmt` leaves (as `ruff format --check` holds for the Python)."""
    text = (REPO / path).read_text(encoding="utf-8")
    assert format_source(text, path=path) == text, f"run: rlvp-compile --fmt {path}"


def test_derived_rule_files_are_in_canonical_layout():
    """`derive_text` writes the formatter's layout: aligned tool table, wrapped long conditions."""
    from rlvp_dsl.manifests import load_manifest
    from rlvp_dsl.manifests.derive import derive_text

    for name in ("chain4_tools.json", "dialog_tools.json", "bfcl_tools.json"):
        derived = derive_text(load_manifest(str(REPO / "examples" / "manifests" / name)))
        assert format_source(derived) == derived
    assert "tool fetch     : read               target token" in derive_text(
        load_manifest(str(REPO / "examples" / "manifests" / "chain4_tools.json"))
    )


@st.composite
def commented(draw, text: str) -> str:
    """`text` with comments added: on their own lines (indented or not) and at the ends of lines."""
    out = []
    for k, line in enumerate(text.splitlines()):
        if draw(st.integers(0, 3)) == 0:
            out.append(draw(st.sampled_from(("", "  ", "\t"))) + f"# own {k}")
        if draw(st.integers(0, 3)) == 0:
            out.append("")
        out.append(line + (f"  # end {k} " if draw(st.integers(0, 2)) == 0 else ""))
    return "\n".join(out) + "\n"


@given(S.tool_tables().flatmap(S.rule_files).flatmap(commented))
def test_generated_rule_files_with_comments(text):
    """Generated rule files with comments everywhere: idempotent, same tree, comments and compiled program."""
    assert_properties(text)


@given(S.grammar_programs())
def test_programs_from_the_grammar(text):
    """Programs generated from the grammar (comments wherever the grammar allows them): idempotent, same
    tree, same comments."""
    parsed, diagnostics = parse(SourceFile("gen.rlvp", text))
    assume(parsed is not None and not has_errors(diagnostics))
    assert_properties(text, "gen.rlvp", compiled=False)
