"""The server's incremental parse (`rlvp_dsl.lsp.incremental`) gives `parse`'s trees, spans
included, and its diagnostics; an edit re-parses only the item it touched."""

from __future__ import annotations

import attrs
import pytest

from rlvp_dsl.lsp import incremental
from rlvp_dsl.parser import parse
from rlvp_dsl.source import SourceFile

from .client import REPO

RULE_FILES = sorted(
    p for folder in ("rules", "tests", "examples") for p in (REPO / folder).rglob("*.rlvp") if ".venv" not in p.parts
)


def _both(path: str, text: str) -> tuple[object, object]:
    source = SourceFile(path, text)
    (full, full_problems), (pieces, piece_problems) = parse(source), incremental.cached_parse(source)
    return _data(full, full_problems), _data(pieces, piece_problems)


def _data(tree, problems) -> tuple[object, object]:
    return (attrs.asdict(tree) if tree is not None else None), [d.to_json() for d in problems]


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_piece_parsed_alone_gives_the_whole_parse(path):
    """Each piece parsed at its place (nothing kept), then the whole parse's items filed under the
    pieces: both are `parse`'s tree, spans included (or, for a file with syntax errors, no tree)."""
    source = SourceFile(str(path), path.read_text(encoding="utf-8-sig"))
    full, problems = parse(source)
    bounds = [0, *incremental.item_starts(source.text)[1:], len(source.text)]
    tree, pieces = incremental.parse_pieces(source, bounds, {})
    if len(bounds) < 3:  # one item: always parsed whole
        return
    if full is None or problems:  # a syntax error: some piece has it too (then the whole parse is used)
        assert tree is None and pieces == {}
        return
    assert attrs.asdict(tree) == attrs.asdict(full)
    assert incremental._filed(source, bounds, full) == pieces


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_tree_and_diagnostics_as_parse(path):
    """The first parse of a path, then the same text again (every piece kept)."""
    text = path.read_text(encoding="utf-8-sig")
    assert _both(str(path), text) == _both(str(path), text)
    full, pieces = _both(str(path), text)
    assert pieces == full
    incremental.forget(str(path))


def test_an_edit_reparses_one_item_and_a_broken_one_falls_back():
    text = "".join(f"tool t{i} : read\nviolation v{i} (-0.1) {{ on call t{i} error }}\n" for i in range(50))
    path = "edit_test.rlvp"
    assert _both(path, text)[1][1] == []
    before = incremental.parsed_pieces
    edited = text.replace("(-0.1) { on call t7 ", "(-0.2) { on call t7 ")
    full, pieces = _both(path, edited)
    assert pieces == full and incremental.parsed_pieces == before + 1
    broken = edited.replace("on call t9 error }", "on call t9 error")  # never closed: parse's own diagnostics
    full, pieces = _both(path, broken)
    assert pieces == full and pieces[0] is None and pieces[1][0]["code"] == "RV101"
    incremental.forget(path)
