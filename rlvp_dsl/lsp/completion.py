"""Completion: after ``tag`` the tags (standard and declared), after ``signal`` the signals the
manifests declare, after ``call`` (or inside ``call {...}``) the tool names; elsewhere the rule
kinds, the keywords, the tools and the constants."""

from __future__ import annotations

import re

from lsprotocol import types

from ..check.tags import STANDARD_TAGS
from ..syntax.grammar import keywords
from .hover import RULE_KINDS
from .index import Index

_AFTER_TAG = re.compile(r"\btag\s+\w*$")
_AFTER_SIGNAL = re.compile(r"\bsignal\s+\w*$")
_AFTER_CALL = re.compile(r"\bcall\s+(?:\{[^}]*)?\w*$")


def completion_items(index: Index | None, line_prefix: str) -> list[types.CompletionItem]:
    """The items offered where the line so far reads `line_prefix` (`index`: the document's names,
    None when none was ever built)."""
    tools = sorted(index.tools) if index else []
    if _AFTER_TAG.search(line_prefix):
        tags = sorted(STANDARD_TAGS | (index.tags if index else set()))
        return [types.CompletionItem(t, kind=types.CompletionItemKind.EnumMember, detail="tag") for t in tags]
    if _AFTER_SIGNAL.search(line_prefix):
        signals = index.signals.values() if index else ()
        return [
            types.CompletionItem(s.name, kind=types.CompletionItemKind.Variable, detail=f"signal: {s.kind}")
            for s in sorted(signals, key=lambda s: s.name)
        ]
    if _AFTER_CALL.search(line_prefix):
        return [_tool_item(index, t) for t in tools]
    items = [
        types.CompletionItem(k, kind=types.CompletionItemKind.Class, detail="rule kind", documentation=RULE_KINDS[k])
        for k in RULE_KINDS
    ]
    items += [
        types.CompletionItem(k, kind=types.CompletionItemKind.Keyword) for k in sorted(keywords() - set(RULE_KINDS))
    ]
    items += [_tool_item(index, t) for t in tools]
    if index:
        items += [
            types.CompletionItem(c, kind=types.CompletionItemKind.Constant, detail=f"const = {v:g}")
            for c, (v, _span) in sorted(index.consts.items())
        ]
    return items


def _tool_item(index: Index | None, name: str) -> types.CompletionItem:
    info = index.tools[name] if index else None
    detail = "tool: " + ", ".join(sorted(info.tags)) if info and info.tags else "tool"
    return types.CompletionItem(name, kind=types.CompletionItemKind.Function, detail=detail)
