"""Diagnostics see the editor's live text of every open document: an included file's unsaved edits
are what the including document's check reads, each edit re-checks the open documents that include
the file, and what is published equals `rlvp-compile` on the files as they would be saved.  And the
per-file cap (10) is said: one Information diagnostic, in the CLI's words, at the first one not shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from .client import REPO
from .test_diagnostics import _expected, _published

MAIN = 'include "inc.rlvp"\nviolation m1 (-0.1) { on call a }\n'
INC = "tool a : read\nviolation inc_v (-0.1) { on call zzz }\n"


def _cli(*paths: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, list[dict]]]:
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.cli.compile", "--json", *map(str, paths)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    return done, {entry["file"]: entry["diagnostics"] for entry in json.loads(done.stdout)}


def _shown(lsp, uri: str) -> list[tuple]:
    """(code, message, start, end) of what is published on `uri`."""
    return [
        (d.code, d.message, (d.range.start.line, d.range.start.character), (d.range.end.line, d.range.end.character))
        for d in lsp.published[uri]
    ]


def test_an_open_included_file_is_read_from_the_editor_not_the_disk(lsp, tmp_path):
    folder = tmp_path / "my dir"  # a space: the uri is quoted, the path is not
    folder.mkdir()
    main, inc = folder / "main.rlvp", folder / "inc.rlvp"
    main.write_text(MAIN, encoding="utf-8")
    inc.write_text(INC, encoding="utf-8")
    main_uri, inc_uri = lsp.open(main), lsp.open(inc)
    assert "%20" in main_uri
    assert _shown(lsp, main_uri) == []
    assert _shown(lsp, inc_uri) == [("RV201", "unknown tool 'zzz'", (1, 33), (1, 36))]
    assert lsp.published_version[inc_uri] == 1

    # an unsaved edit of the include: the error it fixed is gone, the new one is there (not both)
    lsp.replace(inc_uri, "tool a : read\n\n\nviolation inc_v (-0.1) { on call qqq }\n")
    assert _shown(lsp, inc_uri) == [("RV201", "unknown tool 'qqq'", (3, 33), (3, 36))]
    assert lsp.published_version[inc_uri] == 2

    # an unsaved edit of the include that breaks the file including it: that file re-checked at once
    broken = "tool b : read\nviolation inc_v (-0.1) { on call b }\n"
    lsp.replace(inc_uri, broken)
    assert _shown(lsp, main_uri) == [("RV201", "unknown tool 'a'", (1, 30), (1, 31))]
    assert lsp.published_version[main_uri] == 1
    assert _shown(lsp, inc_uri) == []

    # ... exactly what rlvp-compile says once the files are saved as they are in the editor
    inc.write_text(broken, encoding="utf-8")
    _done, cli = _cli(main, inc)
    for uri, path in ((main_uri, main), (inc_uri, inc)):
        expected = sorted({_expected(d) for p in (main, inc) for d in cli[str(p)] if _expected(d)[0] == uri})
        assert sorted(_published(lsp, uri)) == expected, path.name

    # the include closed (its unsaved text dropped, the disk's is the original again): main re-checked
    inc.write_text(INC, encoding="utf-8")
    lsp.close(inc_uri)
    assert _shown(lsp, main_uri) == []
    assert _shown(lsp, inc_uri) == [("RV201", "unknown tool 'zzz'", (1, 33), (1, 36))]  # main's check of it
    assert lsp.published_version[inc_uri] is None  # no longer an open document
    lsp.close(main_uri)
    assert lsp.published[main_uri] == [] and lsp.published[inc_uri] == []


def test_diagnostics_over_the_cap_are_counted_as_the_cli_counts_them(lsp, tmp_path):
    rules = tmp_path / "many.rlvp"
    text = "tool a : read\n" + "".join(f"violation v{i} (-0.1) {{ on call b{i} }}\n" for i in range(12))
    rules.write_text(text, encoding="utf-8")
    uri = lsp.open(rules)
    shown = lsp.published[uri]
    assert [d.message for d in shown[:10]] == [f"unknown tool 'b{i}'" for i in range(10)]
    more = shown[10:]
    assert [(d.message, int(d.severity), d.code, d.source) for d in more] == [
        ("... and 2 more diagnostics not shown", int(types.DiagnosticSeverity.Information), None, "rlvp")
    ]
    assert (more[0].range.start.line, more[0].range.start.character, more[0].range.end.character) == (11, 31, 34)
    assert more[0].data["help"] == (
        "at most 10 diagnostics are shown per file, as rlvp-compile's default; "
        "fix these, or run `rlvp-compile --max-diagnostics N FILE` to list them all"
    )
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.cli.compile", str(rules)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (done.stdout + done.stderr).strip().splitlines()[-1] == more[0].message  # the CLI's own line

    lsp.replace(uri, text.replace("call b0", "call a"))  # 11 errors: one more not shown
    assert [d.message for d in lsp.published[uri][10:]] == ["... and 1 more diagnostic not shown"]
    lsp.replace(uri, text.replace("call b0", "call a").replace("call b1 ", "call a "))  # 10: nothing more
    assert len(lsp.published[uri]) == 10
    assert all(d.severity == types.DiagnosticSeverity.Error for d in lsp.published[uri])
    lsp.close(uri)
