"""Diagnostics on the editor's text: the checks `rlvp-compile --json` runs (`check_text` with the
lints, sorted and capped per file by `sort_and_cap` as the CLI's default ``--max-diagnostics``),
grouped by the file each belongs to (an include's problem on the include, a manifest's on the
``tools from`` line that names it), then turned into LSP diagnostics.

The open document's unsaved text is what is checked, and so is every other open document's: an
included file that is open is read from the editor (`overlay`), unsaved edits included, not from
disk; the others, and the manifests, are read from disk.  The diagnostics are `rlvp-compile`'s on
the files as they would be saved.

Where the cap drops diagnostics of a file, one Information diagnostic (`more_lsp`) says how many, in
the CLI's words ("... and 2 more diagnostics not shown"), at the first one dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs
from lsprotocol import types

from ..diagnostics import ERROR, MAX_PER_FILE, Diagnostic, sort_and_cap
from ..pipeline import CheckResult, check_text
from ..source import SourceFile
from .incremental import cached_parse
from .positions import Codec, to_range

#: The `source` of every diagnostic the server publishes.
SOURCE = "rlvp"


@attrs.frozen
class CheckedDocument:
    """One check of a document: the pipeline's result, the diagnostics kept (as `rlvp-compile --json`
    lists them) by the file they belong to, how many the per-file cap dropped, and per file with
    dropped ones: (how many, the first of them)."""

    result: CheckResult
    by_file: dict[str, list[Diagnostic]]
    dropped: int
    more: dict[str, tuple[int, Diagnostic]] = attrs.field(factory=dict)

    @property
    def read(self) -> frozenset[str]:
        """The rule files this check read (the document, its includes), as `key` of their paths."""
        return frozenset(key(path) for path in self.result.sources)


def key(path: str) -> str:
    """The loader's key of a file path (normalised, absolute), the key of `check_document`'s overlay."""
    return os.path.normpath(os.path.abspath(path))


def check_document(text: str, path: str, overlay: Mapping[str, str] | None = None) -> CheckedDocument:
    """Check the rule text `text` of the file at `path` (includes resolve relative to it) exactly as
    ``rlvp-compile --json path`` checks the saved file; never raises for bad input.

    `overlay`: the texts of other files by `key` of their paths (the editor's open documents), read
    instead of the disk when the rule set includes them."""
    result = check_text(text, path, lints=True, parse=cached_parse, overlay=overlay)  # only the items an edit touched
    kept, dropped = sort_and_cap(result.diagnostics, MAX_PER_FILE)
    by_file: dict[str, list[Diagnostic]] = {path: []}
    for diagnostic in kept:
        by_file.setdefault(_owner(diagnostic, path), []).append(diagnostic)
    more: dict[str, tuple[int, Diagnostic]] = {}
    if dropped:
        rest, _ = sort_and_cap(set(result.diagnostics) - set(kept), len(result.diagnostics))  # sorted as shown
        for diagnostic in rest:
            owner = _owner(diagnostic, path)
            n, first = more.get(owner, (0, diagnostic))
            more[owner] = (n + 1, first)
    return CheckedDocument(result, by_file, dropped, more)


def _owner(diagnostic: Diagnostic, path: str) -> str:
    """The file a diagnostic is published on: its span's, or the document's for one without a line."""
    return diagnostic.span.file if diagnostic.span.line > 0 else path


def to_lsp(diagnostic: Diagnostic, source: SourceFile | None, codec: Codec) -> types.Diagnostic:
    """An LSP diagnostic: the CLI's code, range, severity and message; its help line in
    ``data["help"]`` (shown by hover, read by the quick fixes of `actions`)."""
    return types.Diagnostic(
        range=to_range(diagnostic.span, source, codec),
        message=diagnostic.message,
        severity=types.DiagnosticSeverity.Error if diagnostic.severity == ERROR else types.DiagnosticSeverity.Warning,
        code=diagnostic.code,
        source=SOURCE,
        data={"help": diagnostic.help},
    )


def more_lsp(count: int, first: Diagnostic, source: SourceFile | None, codec: Codec) -> types.Diagnostic:
    """The Information diagnostic saying that the cap left `count` diagnostics of a file unshown, in
    `rlvp-compile`'s words, at the first of them (`first`)."""
    return types.Diagnostic(
        range=to_range(first.span, source, codec),
        message=f"... and {count} more diagnostic{'s' if count != 1 else ''} not shown",  # the CLI's render_text
        severity=types.DiagnosticSeverity.Information,
        source=SOURCE,
        data={
            "help": f"at most {MAX_PER_FILE} diagnostics are shown per file, as rlvp-compile's default; "
            "fix these, or run `rlvp-compile --max-diagnostics N FILE` to list them all"
        },
    )
