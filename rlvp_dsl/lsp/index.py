"""The names of a rule set, where each is declared and where it is used: tools, constants, rules,
tags, signals, includes and ``tools from`` manifests, over the document and every file it includes.

`build_index(text, path)` parses the document's text (its includes read from disk, as
`diagnostics` does) and reads its manifests; a file with syntax errors contributes nothing, so the
server keeps the last index built without them (`server.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import attrs

from .. import ast
from ..loader import load_files, load_manifests
from ..manifests import Manifest
from ..manifests.signals import SignalSpec
from ..source import Span
from .positions import contains

#: The kinds of `Occurrence`.
TOOL, CONST, RULE, TAG, SIGNAL, INCLUDE, MANIFEST = "tool", "const", "rule", "tag", "signal", "include", "manifest"


@attrs.frozen
class Occurrence:
    """A name in a file: its `kind` (`TOOL`, `CONST`, ...), the name (for `INCLUDE` and `MANIFEST`:
    the resolved path of the file named), its span, and whether it declares the name."""

    kind: str
    name: str
    span: Span
    declares: bool = False


@attrs.frozen
class ToolInfo:
    """A tool as the rule set knows it: tags and target merged over its declarations and
    manifests; where it is declared (`ToolDecl` names) and the manifests that list it."""

    name: str
    tags: frozenset[str]
    target: str | None
    declared_at: tuple[Span, ...] = ()
    manifests: tuple[str, ...] = ()
    description: str = ""


@attrs.define
class Index:
    """Every `Occurrence` by file, and the tables hover and completion read."""

    occurrences: dict[str, list[Occurrence]] = attrs.field(factory=dict)
    tools: dict[str, ToolInfo] = attrs.field(factory=dict)
    consts: dict[str, tuple[float, Span]] = attrs.field(factory=dict)
    rules: dict[str, ast.Rule] = attrs.field(factory=dict)
    signals: dict[str, SignalSpec] = attrs.field(factory=dict)
    tags: set[str] = attrs.field(factory=set)
    files: list[ast.RuleFile] = attrs.field(factory=list)

    def at(self, path: str, line: int, column: int) -> Occurrence | None:
        """The occurrence under the 1-based (line, column) of `path`: the narrowest span holding it."""
        found = [o for o in self.occurrences.get(path, ()) if contains(o.span, line, column)]
        return min(found, key=_width, default=None)

    def all(self) -> Iterator[Occurrence]:
        for found in self.occurrences.values():
            yield from found

    def declarations(self, kind: str, name: str) -> list[Occurrence]:
        return [o for o in self.all() if o.kind == kind and o.name == name and o.declares]

    def references(self, kind: str, name: str) -> list[Occurrence]:
        return [o for o in self.all() if o.kind == kind and o.name == name]


def _width(o: Occurrence) -> tuple[int, int]:
    return (o.span.end_line or o.span.line) - o.span.line, (o.span.end_column or o.span.column) - o.span.column


def build_index(text: str, path: str) -> tuple[Index, bool]:
    """The index of the rule text `text` at `path` and its includes; and whether every file parsed
    (False: some file had syntax errors and is missing from the index)."""
    files, _sources, diagnostics = load_files(path, text=text)
    complete = not any(d.code.startswith("RV1") for d in diagnostics)
    manifests, _problems = load_manifests(files)
    index = Index(files=files)
    for f in files:
        found: list[Occurrence] = index.occurrences.setdefault(f.path, [])
        base = os.path.dirname(f.path)
        for item in f.items:
            found.extend(_item_occurrences(item, base, index, manifests.get((f.path, getattr(item, "path", "")))))
    return index, complete


def _item_occurrences(item: ast.Item, base: str, index: Index, manifest: Manifest | None) -> Iterator[Occurrence]:
    if isinstance(item, ast.Include):
        yield Occurrence(INCLUDE, os.path.join(base, item.path), item.span)
    elif isinstance(item, ast.ToolsFrom):
        manifest_path = os.path.join(base, item.path)
        yield Occurrence(MANIFEST, manifest_path, item.span)
        if manifest is not None:
            for spec in manifest.tools:
                _add_tool(index, spec.name, spec.tags, spec.target, manifest=manifest_path, about=spec.description)
                index.tags.update(spec.tags)
            for signal in manifest.signals:
                index.signals.setdefault(signal.name, signal)
    elif isinstance(item, ast.ToolDecl):
        tags = frozenset(t.text for t in item.tags)
        _add_tool(index, item.name.text, tags, item.target.text if item.target else None, at=item.name.span)
        index.tags.update(tags)
        yield Occurrence(TOOL, item.name.text, item.name.span, declares=True)
        yield from (Occurrence(TAG, t.text, t.span) for t in item.tags)
    elif isinstance(item, ast.ConstDecl):
        index.consts.setdefault(item.name.text, (item.value, item.name.span))
        yield Occurrence(CONST, item.name.text, item.name.span, declares=True)
    elif isinstance(item, ast.InlineTest):
        for expect in item.expects:
            if expect.rule is not None:
                yield Occurrence(RULE, expect.rule.text, expect.rule.span)
        for event in item.events or ():
            if event.tool is not None:
                yield Occurrence(TOOL, event.tool.text, event.tool.span)
    elif isinstance(item, ast.RULE_TYPES):
        index.rules.setdefault(item.name.text, item)
        yield Occurrence(RULE, item.name.text, item.name.span, declares=True)
        yield from _rule_occurrences(item)


def _add_tool(
    index: Index,
    name: str,
    tags: Iterable[str],
    target: str | None,
    *,
    at: Span | None = None,
    manifest: str | None = None,
    about: str = "",
) -> None:
    old = index.tools.get(name) or ToolInfo(name, frozenset(), None)
    index.tools[name] = ToolInfo(
        name,
        old.tags | frozenset(tags),
        old.target or target,
        old.declared_at + ((at,) if at is not None else ()),
        old.manifests + ((manifest,) if manifest is not None and manifest not in old.manifests else ()),
        old.description or about,
    )


def _rule_occurrences(rule: ast.Rule) -> Iterator[Occurrence]:
    weights: list[ast.Weight] = []
    exprs: list[ast.Expr | None] = []
    if isinstance(rule, ast.Violation):
        weights, exprs = [rule.weight], [rule.on, rule.unless]
    elif isinstance(rule, ast.Obligation):
        weights, exprs = [rule.credit, rule.expire], [rule.open, rule.discharge, rule.deadline.cond]
    elif isinstance(rule, ast.RepeatError):
        weights, exprs = [rule.weight], [rule.reset, rule.on]
    elif isinstance(rule, ast.BlindDestructive):
        weights, exprs = [rule.weight], [rule.on, rule.inspected_by]
    elif isinstance(rule, ast.Progress):
        weights = [rule.weight]
        yield Occurrence(SIGNAL, rule.signal.text, rule.signal.span)
    for weight in weights:
        if weight.const is not None:
            yield Occurrence(CONST, weight.const.text, weight.const.span)
    for expr in exprs:
        if expr is None:
            continue
        for node in ast.walk(expr):
            if isinstance(node, ast.CallAtom):
                yield from (Occurrence(TOOL, t.text, t.span) for t in node.tools)
            elif isinstance(node, ast.TagAtom):
                yield Occurrence(TAG, node.tag.text, node.tag.span)
            elif isinstance(node, ast.SignalTest):
                yield Occurrence(SIGNAL, node.signal.text, node.signal.span)
