"""Tool manifests (the five formats): the tools an agent can call, their category tags and target argument.

`load_manifest(path)` reads a JSON file, detects its format and returns a `Manifest`;
`parse_manifest(data, path)` does the same for already-decoded JSON.  Five formats:

1. **Ours**, ``rlvp-tools/1`` (the trainer's environments write exactly this)::

       {"format": "rlvp-tools/1",
        "tools": [{"name": "cancel_reservation",
                   "tags": ["write", "destructive"],          # optional, default []
                   "target": "reservation_id",                # optional: a parameter name or null
                   "parameters": [{"name": "reservation_id", "type": "string"}],  # or ["reservation_id"]
                   "description": "..."}]}                    # optional

   ``"target": null`` declares that the tool has no target; a missing ``target`` key
   leaves it to inference (below).  A declared target must be one of the parameters.

2. **tau2-bench** ``tools_manifest.json``: ``toolkits.agent.tools[]`` and, for telecom,
   ``toolkits.user.tools[]`` (the user simulator's phone tools, tagged additionally
   ``user_side``).  ``tag`` READ / WRITE / THINK / GENERIC becomes the tag read / write /
   think / generic; ``mutates_state: true`` adds ``write``.

3. **MCP** ``tools/list`` output, ``{"tools": [...]}`` or the JSON-RPC envelope
   ``{"result": {"tools": [...]}}``; parameters are the keys of ``inputSchema.properties``.
   Tool annotations are *hints* with the defaults of the MCP specification
   (2025-06-18, ``ToolAnnotations``), applied when a hint is absent:

   * ``readOnlyHint`` (default false): true -> tag ``read``; otherwise ``write``.
   * ``destructiveHint`` (default true, meaningful only when not read-only): a tool that
     is not read-only is tagged ``destructive``, or ``additive`` when ``destructiveHint``
     is false (the spec: it "performs only additive updates").
   * ``idempotentHint`` (default false, only when not read-only): true -> ``idempotent``.
   * ``openWorldHint`` (default true): tag ``open_world``, or ``closed_world`` when it is
     false (the spec: "the tool's domain of interaction is closed").

   ``additive`` and ``closed_world`` say what MCP states and a bare ``write`` / ``read``
   does not: ``blind_destructive`` (its default and the derived rule) leaves additive writes
   out, and derivation penalises repeating a closed-world read (`rlvp_dsl.manifests.derive`).

   An optional, non-standard ``"tags": [...]`` array on a tool adds more tags (for
   example ``verify`` or ``submit``).

4. **OpenAI tool schemas**: ``[{"type": "function", "function": {"name", "description",
   "parameters": {...}}, "tags": [...]}]`` or ``{"tools": [...]}`` of those; ``tags``
   (and an optional ``target``) may also sit inside ``function``.  The flat form
   ``{"type": "function", "name": ..., "parameters": ...}`` is accepted too.

5. **BFCL function docs** (``bfcl``): the JSON-lines files of BFCL v4's multi-turn classes
   (``bfcl_eval/data/multi_turn_func_doc/gorilla_file_system.json`` ...), one function per line,
   ``{"name", "description", "parameters": {"type": "dict", "properties": {...}, "required": [...]},
   "response": {...}}`` (``"type": "dict"``, not JSON schema's ``"object"``, is how a list of them is
   told from OpenAI's flat form).  The docs carry no tags: each function's tags and target come from
   the table in `rlvp_dsl.manifests.bfcl_tags` (docs/readers.md, "BFCL function docs"), and the
   manifest declares the BFCL environment's signals (`BFCL_SIGNALS`): ``turns_matched``
   (progress, increasing), ``off_path`` (violation) and ``turn_passing`` (done).  The
   language core reads the JSON only; it never imports ``bfcl_eval``.

Our format may declare the environment's signals, top level, each with a ``kind``
(`SignalSpec`; docs/readers.md, "Manifest signals")::

    "signals": [{"name": "stages_remaining", "direction": "decreasing"},   # kind "progress" (default)
                {"name": "off_path", "kind": "violation"},                 # a 0/1 flag: this call was wrong
                {"name": "turn_passing", "kind": "done"}]                  # a 0/1 flag: answering now satisfies

A ``progress`` signal needs a direction (``decreasing`` or ``increasing``); a ``violation`` or
``done`` flag has none; each takes an optional ``description``.  Derivation turns each into rules
(`rlvp_dsl.manifests.derive`: ``progress``, ``S_flagged``, ``answer_when_done`` / ``answer_not_done``).

Missing targets are inferred (`rlvp_dsl.manifests.targets`).

Errors: `ManifestError` (`ManifestNotFound`, also a FileNotFoundError, for a missing file), naming the file, the record (``tools[3]``) and the field, with
what was expected and what was found; invalid JSON is reported with line:col.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ..input_files import check_regular
from ..source import undecodable
from ..readers.json_text import json_problem, loads as json_loads
from ..tools import ToolSpec
from .records import (
    JsonObject,
    ManifestError,
    ManifestIsADirectory,
    ManifestNotFound,
    declared_target,
    kind_of,
    need,
    schema_params,
    shown,
    tag_set,
    tool_name,
    tool_records,
)
from .bfcl_tags import bfcl_tags
from .signals import BFCL_SIGNALS, SignalSpec, read_signals
from .targets import infer_targets

#: The format tag of our own manifest.

OURS = "rlvp-tools/1"

_TAU2_TAGS = {"READ": "read", "WRITE": "write", "THINK": "think", "GENERIC": "generic"}


@attrs.frozen
class Manifest:
    """A tool catalogue: `format` is ``rlvp-tools/1``, ``tau2``, ``mcp`` or ``openai``;
    `notes` say what was inferred or assumed (one sentence each); `signals` are the
    environment's declared signals, progress levels and per-call flags (ours: the top-level
    ``signals`` list; ``bfcl``: `BFCL_SIGNALS`)."""

    path: str
    format: str
    tools: tuple[ToolSpec, ...]
    notes: tuple[str, ...] = ()
    signals: tuple[SignalSpec, ...] = ()

    def tool(self, name: str) -> ToolSpec:
        """The tool called `name` (KeyError if absent)."""
        for spec in self.tools:
            if spec.name == name:
                return spec
        raise KeyError(name)


def load_manifest(path: str) -> Manifest:
    """Read and parse the manifest at `path` (UTF-8 JSON).

    Raises:
        ManifestError: unreadable file (a device or FIFO is refused, not read), invalid JSON (with
            line:col), unknown format or a bad record; `ManifestNotFound` / `ManifestIsADirectory`
            for a missing path or a folder.
    """
    try:
        check_regular(path, stdin=False)  # a device never ends, a FIFO blocks
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8-sig")  # decoded whole: the error's offsets are the file's
    except FileNotFoundError:
        raise ManifestNotFound(path, "file not found") from None
    except IsADirectoryError:
        raise ManifestIsADirectory(path, "is a directory, not a manifest file") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not UTF-8 text: {undecodable(exc)}") from None
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror}") from None
    try:
        data = json_loads(text)  # nested too deeply: a JSONDecodeError, never a RecursionError
    except json.JSONDecodeError as exc:
        data = _json_lines(text, path) if exc.msg == "Extra data" else None  # BFCL's docs: one object a line
        if data is None:
            hint = (
                " (a manifest is one JSON document; JSON lines are read only as BFCL function docs, "
                "one {name, description, parameters} object a line)"
                if exc.msg == "Extra data"
                else ""
            )
            raise ManifestError(
                f"{path}:{exc.lineno}:{exc.colno}", f"invalid JSON: {json_problem(exc, text)}{hint}"
            ) from None
    return parse_manifest(data, path)


def _json_lines(text: str, path: str) -> list[Any] | None:
    """A JSON-lines file of BFCL function docs as a list of its records (None when its first line is
    not a BFCL function doc -- a trajectory file given as a manifest, say -- so the caller reports the
    file as invalid JSON); a bad later line is a ManifestError naming it."""
    out: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json_loads(line))
        except json.JSONDecodeError as exc:
            if not out:
                return None
            raise ManifestError(
                f"{path}:{number}:{exc.colno}", f"invalid JSON line: {json_problem(exc, line)}"
            ) from None
        if not (isinstance(out[0], dict) and _is_bfcl_doc(out[0])):
            return None
    return out


def detect_manifest_format(data: Any, path: str = "<manifest>") -> str:
    """``rlvp-tools/1``, ``tau2``, ``mcp``, ``openai`` or ``bfcl`` (ManifestError when none fits)."""
    if isinstance(data, list):
        first = next((t for t in data if isinstance(t, dict)), None)
        if first is not None and _is_bfcl_doc(first):
            return "bfcl"
        return "openai"
    if not isinstance(data, dict):
        raise ManifestError(path, f"expected a JSON object or list at the top, got {kind_of(data)}")
    if "format" in data:
        if data["format"] != OURS:
            raise ManifestError(path, f"expected '{OURS}', got {shown(data['format'])}", field="format")
        return OURS
    if "toolkits" in data:
        return "tau2"
    if isinstance(data.get("result"), dict) and "tools" in data["result"]:
        return "mcp"
    if "error" in data and "jsonrpc" in data:
        raise ManifestError(path, f"the JSON-RPC response is an error: {shown(data['error'])}", field="error")
    tools: Any = data.get("tools")  # (a list, checked below)
    if "tools" in data:
        need(isinstance(tools, list), path, "", "tools", "a list of tools", tools)
        first = next((t for t in tools if isinstance(t, dict)), None)
        if first is None or "inputSchema" in first or "annotations" in first:
            return "mcp"
        if first.get("type") == "function" or "function" in first:
            return "openai"
        raise ManifestError(
            path,
            "cannot tell the format of tools[0]: expected an MCP tool (with 'inputSchema') "
            "or an OpenAI tool ({'type': 'function', 'function': {...}}); for rlvp's own format "
            f'add "format": "{OURS}" beside "tools"',
            record="tools[0]",
        )
    raise ManifestError(
        path,
        "unknown manifest format: expected {'format': 'rlvp-tools/1', 'tools': [...]}, a tau2 "
        "manifest ('toolkits'), MCP tools/list output ('tools' or 'result.tools') or a list of "
        f"OpenAI tool schemas; got an object with keys {sorted(data)[:8]}",
    )


def parse_manifest(data: Any, path: str = "<manifest>") -> Manifest:
    """Decoded JSON -> `Manifest`, format auto-detected, missing targets inferred.

    Raises:
        ManifestError: naming the record and field, with expected vs actual.
    """
    fmt = detect_manifest_format(data, path)
    reader = {OURS: _read_ours, "tau2": _read_tau2, "mcp": _read_mcp, "openai": _read_openai, "bfcl": _read_bfcl}[fmt]
    specs = reader(data, path)
    seen: dict[str, str] = {}
    for record, spec in specs:
        if spec.name in seen:
            raise ManifestError(
                path, f"duplicate tool name '{spec.name}' (first at {seen[spec.name]})", record=record, field="name"
            )
        seen[spec.name] = record
    tools, notes = infer_targets([spec for _, spec in specs])
    if fmt == "mcp":
        notes = _mcp_assumptions(data) + notes
    signals = read_signals(data, path) if isinstance(data, dict) else ()
    if fmt == "bfcl":
        signals = BFCL_SIGNALS
        notes = [
            "tags and targets from the BFCL tag table (rlvp_dsl/manifests/bfcl_tags.py); "
            f"signals {', '.join(repr(s.name) for s in BFCL_SIGNALS)} are the BFCL environment's (trainer/envs/bfcl)"
        ] + notes
    return Manifest(path, fmt, tuple(tools), tuple(notes), signals)


def _mcp_assumptions(data: JsonObject) -> list[str]:
    """One note naming the tools without annotations and what the MCP spec makes of them."""
    tools = (data.get("result") or data).get("tools") or []
    bare = [t.get("name", "?") for t in tools if isinstance(t, dict) and not t.get("annotations")]
    if not bare:
        return []
    shown = ", ".join(bare[:8]) + (f" and {len(bare) - 8} more" if len(bare) > 8 else "")
    return [
        f"{len(bare)} tool(s) carry no annotations ({shown}): assumed, as the MCP specification says, "
        "not read-only and possibly destructive (tags write, destructive, open_world); "
        "add annotations.readOnlyHint / destructiveHint to say otherwise"
    ]


# ---- readers: each returns [(record, ToolSpec)]; target_inferred=True marks "to infer" ----


def _read_ours(data: JsonObject, path: str) -> list[tuple[str, ToolSpec]]:
    if "tools" not in data:
        raise ManifestError(path, "missing (expected a list of tools)", field="tools")
    out = []
    for record, rec in tool_records(data["tools"], path, "tools"):
        name = tool_name(rec, path, record)
        tags = tag_set(rec.get("tags", []), path, record)
        raw = rec.get("parameters", [])
        need(isinstance(raw, list), path, record, "parameters", "a list of parameters", raw)
        params = []
        for i, p in enumerate(raw):
            if isinstance(p, dict):
                params.append(tool_name(p, path, f"{record}.parameters[{i}]"))
            else:
                need(
                    isinstance(p, str) and p != "",
                    path,
                    record,
                    f"parameters[{i}]",
                    'a parameter name or {"name": ..., "type": ...}',
                    p,
                )
                params.append(p)
        params_t = tuple(params)
        target, infer = declared_target(rec, params_t, path, record)
        description = rec.get("description", "")
        need(isinstance(description, str), path, record, "description", "a string", description)
        out.append((record, ToolSpec(name, tags, target, params_t, target_inferred=infer, description=description)))
    return out


def _read_tau2(data: JsonObject, path: str) -> list[tuple[str, ToolSpec]]:
    kits = data["toolkits"]
    need(isinstance(kits, dict), path, "", "toolkits", "an object of toolkits", kits)
    if "agent" not in kits:
        raise ManifestError(path, "missing (expected the agent's toolkit)", field="toolkits.agent")
    out = []
    for side in kits:
        kit = kits[side]
        need(isinstance(kit, dict), path, "", f"toolkits.{side}", "an object with 'tools'", kit)
        for record, rec in tool_records(kit.get("tools"), path, f"toolkits.{side}.tools"):
            name = tool_name(rec, path, record)
            tag = rec.get("tag", "GENERIC")
            need(
                isinstance(tag, str) and tag in _TAU2_TAGS,
                path,
                record,
                "tag",
                "one of READ, WRITE, THINK, GENERIC",
                tag,
            )
            tags = {_TAU2_TAGS[tag]}
            mutates = rec.get("mutates_state", False)
            need(isinstance(mutates, bool), path, record, "mutates_state", "true or false", mutates)
            if mutates:
                tags.add("write")
            if side != "agent":
                tags.add(f"{side}_side")
            raw = rec.get("parameters", [])
            need(isinstance(raw, list), path, record, "parameters", "a list of parameters", raw)
            names = []
            for i, p in enumerate(raw):
                need(isinstance(p, dict), path, record, f"parameters[{i}]", "an object with 'name'", p)
                names.append(tool_name(p, path, f"{record}.parameters[{i}]"))
            params = tuple(names)
            description = rec.get("doc_first_sentence") or ""
            out.append(
                (
                    record,
                    ToolSpec(
                        name,
                        frozenset(tags),
                        None,
                        params,
                        target_inferred=True,
                        description=str(description),
                        side=side,
                    ),
                )
            )
    return out


def _read_mcp(data: JsonObject, path: str) -> list[tuple[str, ToolSpec]]:
    where = "tools"
    if isinstance(data.get("result"), dict):
        data, where = data["result"], "result.tools"
    out = []
    for record, rec in tool_records(data.get("tools"), path, where):
        name = tool_name(rec, path, record)
        params = schema_params(rec.get("inputSchema"), path, record, "inputSchema")
        ann = rec.get("annotations") or {}
        need(isinstance(ann, dict), path, record, "annotations", "an object of hints", ann)
        hints = {}
        for hint, default in (
            ("readOnlyHint", False),
            ("destructiveHint", True),
            ("idempotentHint", False),
            ("openWorldHint", True),
        ):
            value = ann.get(hint, default)
            need(isinstance(value, bool), path, record, f"annotations.{hint}", "true or false", value)
            hints[hint] = value
        tags = set(tag_set(rec["tags"], path, record)) if "tags" in rec else set()
        if hints["readOnlyHint"]:
            tags.add("read")
        else:
            tags.add("write")
            if hints["destructiveHint"]:
                tags.add("destructive")
            elif "destructive" not in tags:
                tags.add("additive")  # the spec: "performs only additive updates"
            if hints["idempotentHint"]:
                tags.add("idempotent")
        if hints["openWorldHint"]:
            tags.add("open_world")
        elif "open_world" not in tags:
            tags.add("closed_world")  # the spec: "the tool's domain of interaction is closed"
        description = rec.get("description") or ""
        need(isinstance(description, str), path, record, "description", "a string", description)
        target, infer = declared_target(rec, params, path, record)
        out.append(
            (record, ToolSpec(name, frozenset(tags), target, params, target_inferred=infer, description=description))
        )
    return out


def _read_openai(data: Any, path: str) -> list[tuple[str, ToolSpec]]:
    tools, where = (data, "") if isinstance(data, list) else (data.get("tools"), "tools")
    out = []
    for record, rec in tool_records(tools, path, where):
        kind = rec.get("type", "function")
        need(kind == "function", path, record, "type", "'function'", kind)
        fn, prefix = rec, ""
        if "function" in rec:
            fn, prefix = rec["function"], "function."
            need(isinstance(fn, dict), path, record, "function", "an object", fn)
        name = tool_name(fn, path, record, "name") if not prefix else tool_name(fn, path, f"{record}.function")
        params = schema_params(fn.get("parameters"), path, record, f"{prefix}parameters")
        tags: set[str] = set()
        if "tags" in rec:
            tags |= tag_set(rec["tags"], path, record, "tags")
        if prefix and "tags" in fn:
            tags |= tag_set(fn["tags"], path, record, "function.tags")
        holder, field = (fn, f"{prefix}target") if "target" in fn else (rec, "target")
        target, infer = declared_target(holder, params, path, record, field)
        description = fn.get("description") or ""
        need(isinstance(description, str), path, record, f"{prefix}description", "a string", description)
        out.append(
            (record, ToolSpec(name, frozenset(tags), target, params, target_inferred=infer, description=description))
        )
    return out


def _is_bfcl_doc(rec: JsonObject) -> bool:
    """A BFCL function doc: a name, no OpenAI ``type`` / ``function`` key, ``parameters.type == "dict"``."""
    params = rec.get("parameters")
    return (
        "name" in rec
        and "type" not in rec
        and "function" not in rec
        and isinstance(params, dict)
        and params.get("type") == "dict"
    )


def _read_bfcl(data: Any, path: str) -> list[tuple[str, ToolSpec]]:
    out = []
    for record, rec in tool_records(data, path, "line"):
        record = f"line[{record.partition('[')[2].rstrip(']')}]"
        name = tool_name(rec, path, record)
        need(_is_bfcl_doc(rec), path, record, "parameters", 'a BFCL parameter object {"type": "dict", ...}', rec)
        params = schema_params(rec.get("parameters"), path, record, "parameters")
        description = rec.get("description") or ""
        need(isinstance(description, str), path, record, "description", "a string", description)
        tags, target = bfcl_tags(name)
        if target is not None and target not in params:
            target = None  # (a doc that renamed the parameter: no target rather than a wrong one)
        out.append((record, ToolSpec(name, tags, target, params, target_inferred=False, description=description)))
    return out
