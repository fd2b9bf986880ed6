"""Stage 1 of the checker: ``tools from`` manifests and ``tool`` declarations merged into one
tool table (a tool declared twice keeps one target, RV203, and the union of its tags and
parameters); the universe of event classes and the tag sets follow from it.  Where each
tool's target came from (a ``target`` clause, or a manifest -- which may have inferred it from
the tools' parameters, `rlvp_dsl.manifests.targets`) is kept for the RV203 message."""

from __future__ import annotations

from .. import ast
from ..analysis import Universe
from ..diagnostics import did_you_mean
from ..tools import ToolSpec
from .state import CheckState, TargetOrigin
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
                spec = ToolSpec(
                    item.name.text,
                    frozenset(t.text for t in item.tags),
                    item.target.text if item.target else None,
                    item.params,
                    span=item.name.span,
                )
                origin = TargetOrigin(item.target.span) if item.target else None
                _declare(state, spec, origin)
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
        origin = TargetOrigin(item.span, item.path, spec.target_inferred)
        _declare(
            state,
            ToolSpec(spec.name, spec.tags, spec.target, spec.params, span=item.span),
            origin if spec.target else None,
        )


def _declare(state: CheckState, tool: ToolSpec, origin: TargetOrigin | None) -> None:
    """Add `tool` to the table, or merge it into the tool of its name (RV203 for a second target).

    `origin`: where `tool`'s target comes from (None when it has none)."""
    old = state.tools.get(tool.name)
    if old is None:
        state.tools[tool.name] = tool
        if origin is not None:
            state.target_origins[tool.name] = origin
        return
    if old.target and tool.target and old.target != tool.target and origin is not None:
        earlier: TargetOrigin = state.target_origins[tool.name]
        help = "a tool has one target; remove one of the two"
        if earlier.inferred or origin.inferred:
            help = (
                "a tool has one target: `tools from` infers one from a manifest's parameters when the "
                "manifest declares none (docs/language.md, `tools from`); drop the `target` clause, or make it agree"
            )
            # the `target` clause is the likely typo: suggest the inferred name for it
            close = (
                did_you_mean(old.target, {tool.target}) if origin.inferred else did_you_mean(tool.target, {old.target})
            )
            help = f"{close} {help}" if close else help
        state.error(
            "RV203", f"{origin.now(tool.name, tool.target)}, but {earlier.before(old.target)}", origin.span, help
        )
        return
    if origin is not None and not old.target:
        state.target_origins[tool.name] = origin
    params = (
        old.params
        if tool.params is None
        else (tool.params if old.params is None else tuple(dict.fromkeys(old.params + tool.params)))
    )
    state.tools[tool.name] = ToolSpec(tool.name, old.tags | tool.tags, old.target or tool.target, params, span=old.span)
