"""The document outline: the tools, constants and rules a file declares, in source order."""

from __future__ import annotations

from lsprotocol import types

from .. import ast
from ..source import SourceFile
from .positions import Codec, to_range


def document_symbols(tree: ast.RuleFile, source: SourceFile, codec: Codec) -> list[types.DocumentSymbol]:
    """One symbol per ``tool``, ``const`` and rule of `tree` (the file of `source`): its name, a
    detail (the tool's tags, the constant's value, the rule's kind), the item's range and the
    name's range."""
    out: list[types.DocumentSymbol] = []
    for item in tree.items:
        if isinstance(item, ast.ToolDecl):
            kind, detail = types.SymbolKind.Function, "tool: " + ", ".join(t.text for t in item.tags)
        elif isinstance(item, ast.ConstDecl):
            kind, detail = types.SymbolKind.Constant, f"const = {item.value:g}"
        elif isinstance(item, ast.RULE_TYPES):
            kind, detail = types.SymbolKind.Event, item.kind
        else:
            continue
        out.append(
            types.DocumentSymbol(
                name=item.name.text,
                kind=kind,
                range=to_range(item.span, source, codec),
                selection_range=to_range(item.name.span, source, codec),
                detail=detail,
            )
        )
    return out
