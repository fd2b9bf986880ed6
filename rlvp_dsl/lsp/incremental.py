"""Re-parsing only what an edit touched: a file's top-level items parsed one by one and kept, so a
one-character edit of a 1,000-line rule file re-parses one item, not the file (benchmarks/
lsp_latency.py).

`cached_parse(source)` has `rlvp_dsl.parser.parse`'s contract and results: the text is cut where
its top-level items start (the loader's own scan, `loader._ITEM_SCAN`: strings, regexes, comments
and braces skipped); each piece is parsed at its place in the file (padded with the newlines and
spaces before it, so every span is the one the whole parse gives) and kept under (line, column,
text); the pieces' items, in order, are the file's.  When any piece does not parse cleanly, the
whole text is parsed by `parse` itself, so a file with a syntax error gets exactly the CLI's
diagnostics.  tests/lsp/test_incremental.py checks the trees equal `parse`'s, spans included, on
every rule file of the repository.

`install()` makes the loader parse through it in this process (the server's only:
`rlvp_dsl.loader` looks `parse` up at each file it reads).
"""

from __future__ import annotations

from .. import ast, loader
from ..diagnostics import Diagnostic
from ..parser import parse
from ..source import SourceFile

#: Per file path: the pieces of its last parse, (line, column, text) -> their items.
_pieces: dict[str, dict[tuple[int, int, str], tuple[ast.Item, ...]]] = {}

#: How many pieces were parsed (not found kept) since the process started: for the tests.
parsed_pieces = 0


def item_starts(text: str) -> list[int]:
    """The offsets where top-level items start (their keyword), as the loader's item scan finds them."""
    depth = 0
    starts = []
    for m in loader._ITEM_SCAN.finditer(text):
        token = m.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and (token in loader._ITEM_WORDS or (token == "test" and m.group("q") is not None)):
            starts.append(m.start())
    return starts


def cached_parse(source: SourceFile) -> tuple[ast.RuleFile | None, list[Diagnostic]]:
    """`parse(source)`, re-parsing only the pieces of the text that changed since this path's last parse."""
    global parsed_pieces
    text = source.text
    bounds = [0, *item_starts(text)[1:], len(text)]
    if len(bounds) < 3:  # one item or none: nothing to keep apart
        return parse(source)
    kept = _pieces.get(source.path, {})
    pieces: dict[tuple[int, int, str], tuple[ast.Item, ...]] = {}
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
                _pieces.pop(source.path, None)
                return parse(source)
            found = tree.items
        pieces[key] = found
        items.extend(found)
    _pieces[source.path] = pieces
    return ast.RuleFile(source.path, tuple(items)), []


def forget(path: str) -> None:
    """Drop what is kept for `path` (a closed document)."""
    _pieces.pop(path, None)


def install() -> None:
    """Make `rlvp_dsl.loader` parse through `cached_parse` in this process."""
    setattr(loader, "parse", cached_parse)  # noqa: B010 (the loader imports `parse` by name)
