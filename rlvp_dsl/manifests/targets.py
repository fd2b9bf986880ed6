"""Target inference: which argument of a tool names the object it reads or changes.

Where a tool declares no target (tau2 and MCP never do), it is
inferred per side (agent tools and user-side tools separately): the target of a
write/destructive tool is its first *identifier-like* parameter (``id``, ``path``,
``file``, ``filename``, ``url``, ``uri`` or a name ending in ``_id``, ``_path``,
``_file``, ``_filename``, ``_url``, ``_uri``) that some read tool also takes; the target
of a read tool (tagged read, verify or test, and not write) is its first identifier-like
parameter that some write tool also takes.
Shared parameters that are not identifiers (``origin``, ``date``) never become targets.
Every inference is recorded in `Manifest.notes`.
"""

from __future__ import annotations

import attrs

from ..tools import ToolSpec

_ID_NAMES = frozenset({"id", "path", "file", "filename", "url", "uri"})
_ID_SUFFIXES = ("_id", "_path", "_file", "_filename", "_url", "_uri")
_WRITE_TAGS = frozenset({"write", "destructive"})
_READ_TAGS = frozenset({"read", "verify", "test"})  # tools that look at objects without changing them


def is_identifier_param(name: str) -> bool:
    """True for identifier-like parameter names (`reservation_id`, `id`, `path`, `url`, ...)."""
    low = name.lower()
    return low in _ID_NAMES or low.endswith(_ID_SUFFIXES)


def _is_write(spec: ToolSpec) -> bool:
    return bool(spec.tags & _WRITE_TAGS)


def _is_read(spec: ToolSpec) -> bool:
    return bool(spec.tags & _READ_TAGS) and not _is_write(spec)


def infer_targets(tools: list[ToolSpec]) -> tuple[list[ToolSpec], list[str]]:
    """Infer the target of every tool whose target is still open.

    On input, ``target_inferred=True`` marks a tool that declared no target (the readers
    set it); on output it is true only where a target was actually found.  Returns the
    tools (in order) and one note per inference.
    """
    out: list[ToolSpec] = []
    notes: list[str] = []
    for spec in tools:
        if not spec.target_inferred:
            out.append(spec)
            continue
        if _is_write(spec):
            partners = [t for t in tools if t.side == spec.side and _is_read(t)]
        elif _is_read(spec):
            partners = [t for t in tools if t.side == spec.side and _is_write(t)]
        else:
            partners = []
        found = None
        for param in spec.params or ():  # (a manifest's tools always list their parameters)
            if not is_identifier_param(param):
                continue
            sharing = [t.name for t in partners if param in (t.params or ())]
            if sharing:
                found = (param, sharing)
                break
        if found is None:
            out.append(attrs.evolve(spec, target=None, target_inferred=False))
            continue
        param, sharing = found
        shown = ", ".join(sharing[:3]) + (f" and {len(sharing) - 3} more" if len(sharing) > 3 else "")
        notes.append(f"target of {spec.name} inferred as {param} (shared with {shown})")
        out.append(attrs.evolve(spec, target=param, target_inferred=True))
    return out, notes
