"""Go to definition and find references.  A tool goes to its ``tool`` declarations and to its
record in each manifest that lists it (the line of its quoted name); a constant, a rule, to their
declarations; an ``include`` to the included file, a ``tools from`` to the manifest.  References:
every occurrence of the same tool, constant, rule, tag or signal in the rule set's files."""

from __future__ import annotations

import json
import os

import attrs

from ..input_files import read_input_bytes
from ..source import SourceFile, Span
from .index import CONST, INCLUDE, MANIFEST, RULE, SIGNAL, TAG, TOOL, Index

#: Kinds whose occurrences are references of one another.
_NAMED = (TOOL, CONST, RULE, TAG, SIGNAL)


@attrs.frozen
class Target:
    """A place to go: a file, and the span in it (None: the file's start)."""

    path: str
    span: Span | None = None


def definitions(index: Index, path: str, line: int, column: int) -> list[Target]:
    """Where the name under the 1-based (line, column) of `path` is defined; [] for none."""
    found = index.at(path, line, column)
    if found is None:
        return []
    if found.kind in (INCLUDE, MANIFEST):
        return [Target(found.name)] if os.path.isfile(found.name) else []
    if found.kind not in (TOOL, CONST, RULE):
        return []
    targets = [Target(o.span.file, o.span) for o in index.declarations(found.kind, found.name)]
    if found.kind == TOOL and found.name in index.tools:
        targets += [_in_manifest(m, found.name) for m in index.tools[found.name].manifests]
    return targets


def references(index: Index, path: str, line: int, column: int, *, declarations: bool = True) -> list[Target]:
    """Every occurrence of the name under the cursor, in file order (the declarations too unless
    `declarations` is False); [] when the cursor is on no name."""
    found = index.at(path, line, column)
    if found is None or found.kind not in _NAMED:
        return []
    return [
        Target(o.span.file, o.span) for o in index.references(found.kind, found.name) if declarations or not o.declares
    ]


def _in_manifest(path: str, tool: str) -> Target:
    """The first place the manifest at `path` writes the tool's name as a JSON string (its start
    when the name cannot be found or the file read)."""
    try:
        text = read_input_bytes(path).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return Target(path)
    at = text.find(json.dumps(tool, ensure_ascii=False))
    if at < 0:
        return Target(path)
    source = SourceFile(path, text)
    return Target(path, source.span(at, at + len(json.dumps(tool, ensure_ascii=False))))
