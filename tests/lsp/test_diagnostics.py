"""The server's diagnostics are `rlvp-compile --json`'s: for every golden diagnostics and lints file,
the same codes, severities, ranges, messages and help lines, each on the file it belongs to (an
include's problem on the included file); an edit that introduces an error publishes it, and the
edit that fixes it clears it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .client import REPO

GOLDEN = sorted((REPO / "tests" / "golden" / "diagnostics").glob("*.rlvp")) + sorted(
    (REPO / "tests" / "golden" / "lints").glob("*.rlvp")
)


@pytest.fixture(scope="module")
def cli_json() -> dict[str, list[dict]]:
    """``rlvp-compile --json`` on every golden file (absolute paths, one process): diagnostics by file."""
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.cli.compile", "--json", *map(str, GOLDEN)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    return {entry["file"]: entry["diagnostics"] for entry in json.loads(done.stdout)}


def _utf16(path: str, line: int, column: int) -> int:
    text = Path(path).read_text(encoding="utf-8-sig").split("\n")[line - 1] if line > 0 else ""
    return len(text[: column - 1].encode("utf-16-le")) // 2


def _expected(diagnostic: dict) -> tuple:
    span = diagnostic["span"]
    line, end_line = span["line"], span["end_line"]
    start = (max(line - 1, 0), _utf16(span["file"], line, span["column"]) if line > 0 else 0)
    end = (max(end_line - 1, 0), _utf16(span["file"], end_line, span["end_column"]) if line > 0 else 0)
    severity = 1 if diagnostic["severity"] == "error" else 2
    return (
        Path(span["file"]).resolve().as_uri(),
        diagnostic["code"],
        severity,
        start,
        end,
        diagnostic["message"],
        diagnostic["help"],
    )


def _published(lsp, uri: str) -> list[tuple]:
    return [
        (
            uri,
            d.code,
            int(d.severity),
            (d.range.start.line, d.range.start.character),
            (d.range.end.line, d.range.end.character),
            d.message,
            d.data["help"],
        )
        for d in lsp.published.get(uri, [])
    ]


def test_golden_files_publish_the_cli_diagnostics(lsp, cli_json):
    assert len(GOLDEN) >= 30
    for path in GOLDEN:
        expected = sorted(_expected(d) for d in cli_json[str(path)])
        assert expected, f"{path.name}: a golden file without diagnostics"
        uri = lsp.open(path)
        uris = {uri} | {e[0] for e in expected}
        got = sorted(d for u in uris for d in _published(lsp, u))
        assert got == expected, path.name
        lsp.close(uri)
        assert all(lsp.published.get(u) == [] for u in uris), f"{path.name}: closing did not clear"


def test_an_edit_publishes_an_error_and_the_fix_clears_it(lsp, tmp_path):
    rules = tmp_path / "edit.rlvp"
    good = "tool search : read\nviolation failed (-0.1) { on call search error }\n"
    rules.write_text(good, encoding="utf-8")
    uri = lsp.open(rules)
    assert lsp.published[uri] == []
    lsp.replace(uri, good.replace("call search", "call serch"))  # the unsaved text is what is checked
    [d] = lsp.published[uri]
    assert (d.code, d.message, d.data["help"]) == ("RV201", "unknown tool 'serch'", "did you mean 'search'?")
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (1, 34, 39)
    lsp.replace(uri, good)
    assert lsp.published[uri] == []
    lsp.close(uri)


def test_unicode_columns_are_utf16(lsp, tmp_path):
    """Spans count code points; LSP columns count UTF-16 units (an astral character is two)."""
    rules = tmp_path / "wide.rlvp"
    text = "tool search : read\nviolation v (-0.1) { on call search result matches /\U0001f600/ and call serch }\n"
    rules.write_text(text, encoding="utf-8")
    uri = lsp.open(rules)
    [d] = [d for d in lsp.published[uri] if d.code == "RV201"]
    column = text.split("\n")[1].index("serch")  # code points
    assert d.range.start.character == column + 1  # the emoji is 2 UTF-16 units
    lsp.close(uri)
