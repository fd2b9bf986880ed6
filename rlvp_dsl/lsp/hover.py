"""Hover text (Markdown): a tool's tags and target, a constant's value, a rule's kind, a rule kind's
meaning, a diagnostic code's cause and fix (docs/diagnostics.md, `rlvp_dsl.diagnostic_docs`) -- for
the code under the cursor and for every diagnostic whose range holds it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from .. import ast
from ..diagnostic_docs import DOCS
from ..diagnostics import CODES, Diagnostic
from ..manifests.signals import SignalSpec
from .index import CONST, INCLUDE, MANIFEST, RULE, SIGNAL, TAG, TOOL, Index, Occurrence, ToolInfo
from .positions import contains

#: Each rule kind's meaning, in one line (docs/language.md, "Rules").
RULE_KINDS: dict[str, str] = {
    "violation": "`violation NAME (W) { on C [unless U] }`: every call or assistant turn satisfying "
    "`C and not U` receives W (< 0), on that event.",
    "obligation": "`obligation NAME (+CREDIT, expire PENALTY) { open on O  discharge on D [same B]  deadline ... }`: "
    "an event satisfying O opens an instance; a later event satisfying D discharges it (CREDIT on the "
    "discharging event); at the deadline or the episode's end it expires (PENALTY on the opening event).",
    "repeat_error": "`repeat_error NAME (W)`: a call identical to an earlier failed call, with nothing "
    "between them resetting it, receives W (< 0).",
    "blind_destructive": "`blind_destructive NAME (W) { on C inspected_by I }`: a destructive call whose "
    "target no earlier inspecting call looked at receives W (< 0).",
    "progress": "`progress NAME (+W [per unit] [, max CAP]) { signal S decreasing|increasing [from START] }`: credit W when "
    "the environment's signal S reaches a new best value (per new best, or per unit of improvement), "
    "capped by `max` over one episode.",
}

_CODE = re.compile(r"RV\d{3}", re.IGNORECASE)


def hover_text(
    index: Index | None,
    path: str,
    line: int,
    column: int,
    word: str,
    diagnostics: Sequence[Diagnostic] = (),
) -> str | None:
    """The Markdown shown for the 1-based (line, column) of `path`, whose word is `word`; None when
    there is nothing to say.  `diagnostics`: those published on `path`."""
    parts: list[str] = []
    found = index.at(path, line, column) if index is not None else None
    if found is not None and index is not None:
        parts.append(_occurrence_text(found, index))
    elif word in RULE_KINDS:
        parts.append(f"**{word}** (rule kind): {RULE_KINDS[word]}")
    elif _CODE.fullmatch(word):
        parts.append(code_text(word.upper()))
    for d in diagnostics:
        if contains(d.span, line, column):
            text = code_text(d.code)
            if d.help:
                text += f"\n\nHere: {d.help}"
            parts.append(text)
    parts = [p for p in parts if p]
    return "\n\n---\n\n".join(parts) if parts else None


def code_text(code: str) -> str:
    """A diagnostic code's summary, cause and fix, as docs/diagnostics.md gives them ("" for an unknown code)."""
    if code not in CODES:
        return ""
    text = f"**{code}**: {CODES[code]}"
    doc = DOCS.get(code)
    if doc is not None:
        text += f"\n\nCause: {doc.cause}\n\nFix: {doc.fix}"
    return text


def _occurrence_text(o: Occurrence, index: Index) -> str:
    if o.kind == TOOL:
        info = index.tools.get(o.name)
        return _tool_text(info) if info is not None else f"tool `{o.name}`: not declared"
    if o.kind == CONST:
        const = index.consts.get(o.name)
        return f"const `{o.name}` = {const[0]:g}" if const is not None else f"const `{o.name}`: not declared"
    if o.kind == RULE:
        rule = index.rules.get(o.name)
        if rule is None:
            return f"rule `{o.name}`: not declared"
        return f"{rule.kind} `{o.name}`{_weights(rule)}\n\n{RULE_KINDS[rule.kind]}"
    if o.kind == TAG:
        users = sorted(t.name for t in index.tools.values() if o.name in t.tags)
        return f"tag `{o.name}`: " + (", ".join(f"`{u}`" for u in users) if users else "no tool carries it")
    if o.kind == SIGNAL:
        signal = index.signals.get(o.name)
        return _signal_text(o.name, signal)
    if o.kind == INCLUDE:
        return f"include: `{o.name}`" + ("" if os.path.isfile(o.name) else " (not found)")
    if o.kind == MANIFEST:
        listed = sorted(t.name for t in index.tools.values() if o.name in t.manifests)
        return f"tool manifest `{o.name}`: {len(listed)} tools" + (
            ": " + ", ".join(f"`{n}`" for n in listed[:20]) + (", ..." if len(listed) > 20 else "") if listed else ""
        )
    return ""


def _tool_text(info: ToolInfo) -> str:
    tags = ", ".join(sorted(info.tags)) or "none"
    lines = [f"tool `{info.name}`", "", f"tags: {tags}", "", f"target: {info.target or 'none'}"]
    if info.manifests:
        lines += ["", "from: " + ", ".join(f"`{m}`" for m in info.manifests)]
    if info.description:
        lines += ["", info.description]
    return "\n".join(lines)


def _weights(rule: ast.Rule) -> str:
    def shown(w: ast.Weight) -> str:
        return w.const.text if w.const is not None else f"{w.value:g}"

    if isinstance(rule, ast.Obligation):
        return f" (+{shown(rule.credit)}, expire {shown(rule.expire)})"
    return f" ({shown(rule.weight)})"


def _signal_text(name: str, signal: SignalSpec | None) -> str:
    if signal is None:
        return f"signal `{name}` (not declared by a manifest)"
    direction = f", {signal.direction}" if signal.direction else ""
    return f"signal `{name}`: {signal.kind}{direction}"
