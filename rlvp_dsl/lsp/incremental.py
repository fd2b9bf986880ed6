"""Re-parsing only what an edit touched: a file's top-level items parsed one by one and kept, so a
one-character edit of a 1,000-line rule file re-parses one item, not the file (benchmarks/
lsp_latency.py).

`cached_parse(source)` has `rlvp_dsl.parser.parse`'s contract and results: the text is cut where
its top-level items start (the loader's own scan, `loader.item_keywords`: strings, regexes, comments
and braces skipped); each piece is parsed at its place in the file (padded with the newlines and
spaces before it, so every span is the one the whole parse gives) and kept under (line, column,
text); the pieces' items, in order, are the file's.  When any piece does not parse cleanly, the
whole text is parsed by `parse` itself, so a file with a syntax error gets exactly the CLI's
diagnostics (a keystroke in a text that does not parse costs a whole parse).  The first parse of a
path is the whole parse too (its items filed under their pieces): parsing 5,000 lines piece by
piece, each padded, would cost more than once whole.  tests/lsp/test_incremental.py checks the trees equal `parse`'s, spans included, on
every rule file of the repository.

The server checks through it: `rlvp_dsl.pipeline.check_text(..., parse=cached_parse)` (the loader's
``parse`` argument, `rlvp_dsl.loader.load_files`).
"""

from __future__ import annotations

from .. import ast, loader
from ..diagnostics import Diagnostic
from ..parser import parse
from ..source import SourceFile

#: The pieces of one file: (line, column, text) -> their items.
Pieces = dict[tuple[int, int, str], tuple[ast.Item, ...]]

#: Per file path: the pieces of its last parse.
_pieces: dict[str, Pieces] = {}

#: How many pieces were parsed (not found kept) since the process started: for the tests.
parsed_pieces = 0


def item_starts(text: str) -> list[int]:
    """The offsets where top-level items start (their keyword), as the loader's item scan finds them."""
    return [start for start, _end in loader.item_keywords(text)]


def cached_parse(source: SourceFile) -> tuple[ast.RuleFile | None, list[Diagnostic]]:
    """`parse(source)`, re-parsing only the pieces of the text that changed since this path's last
    parse.  The first parse of a path is `parse` itself, its items filed under their pieces."""
    text = source.text
    bounds = [0, *item_starts(text)[1:], len(text)]
    kept = _pieces.get(source.path)
    if kept is None or len(bounds) < 3:  # first seen, or one item: the whole parse
        tree, problems = parse(source)
        if tree is not None and not problems:
            _pieces[source.path] = _filed(source, bounds, tree)
        return tree, problems
    tree, pieces = parse_pieces(source, bounds, kept)
    if tree is None:  # a piece does not parse cleanly: the whole parse's diagnostics (the pieces kept stay)
        return parse(source)
    _pieces[source.path] = pieces
    return tree, []


def parse_pieces(source: SourceFile, bounds: list[int], kept: Pieces) -> tuple[ast.RuleFile | None, Pieces]:
    """The file's tree from its pieces (`bounds`: where they start, then the text's end), those in
    `kept` reused, the others parsed at their places; and the pieces.  None (and {}) when a piece
    does not parse cleanly."""
    global parsed_pieces
    text = source.text
    pieces: Pieces = {}
    items: list[ast.Item] = []
    for start, end in zip(bounds, bounds[1:]):
        line, column = source.position(start)
        key = (line, column, text[start:end])
        found = kept.get(key)
        if found is None:
            padded = "\n" * (line - 1) + " " * (column - 1) + key[2]
            tree, problems = parse(SourceFile(source.path, padded))
            parsed_pieces += 1
            if tree is None or problems:
                return None, {}
            found = tree.items
        pieces[key] = found
        items.extend(found)
    return ast.RuleFile(source.path, tuple(items)), pieces


def _filed(source: SourceFile, bounds: list[int], tree: ast.RuleFile) -> Pieces:
    """The whole parse's items under their pieces: one item per piece, each starting where its piece's
    keyword does ({} -- nothing kept -- when the scan and the tree disagree)."""
    starts = [0, *item_starts(source.text)]
    if len(starts) != len(tree.items) + 1:
        return {}
    pieces: Pieces = {}
    for i, item in enumerate(tree.items):
        if (item.span.line, item.span.column) != source.position(starts[i + 1]):
            return {}
        start, end = bounds[i], bounds[i + 1]
        line, column = source.position(start)
        pieces[(line, column, source.text[start:end])] = (item,)
    return pieces


def forget(path: str) -> None:
    """Drop what is kept for `path` (a closed document)."""
    _pieces.pop(path, None)
