"""Diagnostics on the editor's text: the checks `rlvp-compile --json` runs (`check_text` with the
lints, sorted and capped per file by `sort_and_cap` as the CLI's default ``--max-diagnostics``),
grouped by the file each belongs to (an include's problem on the include, a manifest's on the
``tools from`` line that names it), then turned into LSP diagnostics.

The open document's unsaved text is what is checked; the files it includes (and their manifests)
are read from disk, as saved -- another open document's unsaved edits are not seen until it is saved.
"""

from __future__ import annotations

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
    lists them) by the file they belong to, and how many the per-file cap dropped."""

    result: CheckResult
    by_file: dict[str, list[Diagnostic]]
    dropped: int


def check_document(text: str, path: str) -> CheckedDocument:
    """Check the rule text `text` of the file at `path` (includes resolve relative to it) exactly as
    ``rlvp-compile --json path`` checks the saved file; never raises for bad input."""
    result = check_text(text, path, lints=True, parse=cached_parse)  # only the items an edit touched
    kept, dropped = sort_and_cap(result.diagnostics, MAX_PER_FILE)
    by_file: dict[str, list[Diagnostic]] = {path: []}
    for diagnostic in kept:
        owner = diagnostic.span.file if diagnostic.span.line > 0 else path
        by_file.setdefault(owner, []).append(diagnostic)
    return CheckedDocument(result, by_file, dropped)


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
