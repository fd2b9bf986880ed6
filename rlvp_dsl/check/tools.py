"""Stage 1 of the checker: ``tools from`` manifests and ``tool`` declarations merged into one
tool table (a tool declared twice keeps one target, RV203, and the union of its tags and
parameters); the universe of event classes and the tag sets follow from it."""

from __future__ import annotations

from .. import ast
from ..analysis import Universe
from ..diagnostics import quoted
from ..tools import ToolSpec
from .state import CheckState
from .tags import BUILTIN_TAGS


def collect_tools(state: CheckState) -> None:
    """Fill `state.tools` (then `universe`, `declared_tags`, `known_tags`) from the files' declarations."""
    for f in state.files:
        for item in f.items:
            if isinstance(item, ast.ToolsFrom):
                _tools_from(state, f, item)
            elif isinstance(item, ast.ToolDecl):
                for tag in item.tags:
                    state.tag_origins.setdefault(tag.text, (item.name.text, tag.span))
                _declare(
                    state,
                    ToolSpec(
                        item.name.text,
                        frozenset(t.text for t in item.tags),
                        item.target.text if item.target else None,
                        item.params,
                        span=item.name.span,
                    ),
                )
    state.universe = Universe(state.tools)
    # the tool table is final here: its tags once, not once per condition (10,000 tools, 10,000 rules)
    state.declared_tags = set().union(*(t.tags for t in state.tools.values()))
    state.known_tags = state.declared_tags | BUILTIN_TAGS


def _tools_from(state: CheckState, f: ast.RuleFile, item: ast.ToolsFrom) -> None:
    manifest = state.manifests.get((f.path, item.path))
    if manifest is None:  # the loader reported why (RV001, RV002)
        if state.unread_manifest is None:
            state.unread_manifest = item.span
        return
    for spec in manifest.tools:
        for tag in sorted(spec.tags):
            state.tag_origins.setdefault(tag, (spec.name, item.span))
        _declare(state, ToolSpec(spec.name, spec.tags, spec.target, spec.params, span=item.span))


def _declare(state: CheckState, tool: ToolSpec) -> None:
    old = state.tools.get(tool.name)
    if old is None:
        state.tools[tool.name] = tool
        return
    if old.target and tool.target and old.target != tool.target:
        state.error(
            "RV203",
            f"tool {quoted(tool.name)} declared with target {quoted(tool.target)}, "
            f"but earlier with target {quoted(old.target)} (at {old.span.location})",
            tool.span,
            "a tool has one target; remove one of the declarations",
        )
        return
    params = (
        old.params
        if tool.params is None
        else (tool.params if old.params is None else tuple(dict.fromkeys(old.params + tool.params)))
    )
    state.tools[tool.name] = ToolSpec(tool.name, old.tags | tool.tags, old.target or tool.target, params, span=old.span)
