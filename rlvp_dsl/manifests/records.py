"""One manifest record read field by field: the error that names file, record and field
(`ManifestError`), and the checks every manifest format shares (`need`, `tool_records`, `tool_name`,
`tag_set`, `schema_params`, `declared_target`), each raising `ManifestError` with what was expected
and what was found.  The formats themselves are in `formats`.
"""

from __future__ import annotations

import json
from typing import Any

#: A decoded JSON object of a manifest (its values are whatever the file holds, checked as read).
JsonObject = dict[str, Any]


class ManifestError(Exception):
    """A manifest that cannot be read: names the file, the record and the field."""

    def __init__(self, path: str, message: str, *, record: str = "", field: str = ""):
        self.path = path
        self.record = record
        self.field = field
        self.message = message
        where = ".".join(p for p in (record, field) if p)
        super().__init__(f"{path}: {where}: {message}" if where else f"{path}: {message}")


class ManifestNotFound(ManifestError, FileNotFoundError):
    """The manifest file does not exist (also a FileNotFoundError, for callers that map it to a usage error)."""


class ManifestIsADirectory(ManifestError, IsADirectoryError):
    """The manifest path is a folder (also an IsADirectoryError: a usage error, as for a rule file)."""


def kind_of(value: Any) -> str:
    """A JSON value's kind in JSON's words (``an object``, ``null``, ...)."""
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def shown(value: Any) -> str:
    """A value as JSON, shortened to 60 characters."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def need(cond: bool, path: str, record: str, field: str, expected: str, value: Any) -> None:
    """Raise `ManifestError` (``expected EXPECTED, got KIND VALUE``) unless `cond`."""
    if not cond:
        raise ManifestError(
            path,
            f"expected {expected}, got " + ("null" if value is None else f"{kind_of(value)} {shown(value)}"),
            record=record,
            field=field,
        )


def tool_records(tools: Any, path: str, where: str) -> list[tuple[str, JsonObject]]:
    need(isinstance(tools, list), path, "", where, "a list of tools", tools)
    out = []
    for i, rec in enumerate(tools):
        record = f"{where}[{i}]"
        need(isinstance(rec, dict), path, record, "", "an object", rec)
        out.append((record, rec))
    return out


def tool_name(rec: JsonObject, path: str, record: str, field: str = "name") -> str:
    if field not in rec:
        raise ManifestError(path, "missing (every tool needs a name)", record=record, field=field)
    name: str = rec[field]  # (checked below)
    need(isinstance(name, str) and name.strip() != "", path, record, field, "a non-empty string", name)
    return name


def tag_set(value: Any, path: str, record: str, field: str = "tags") -> frozenset[str]:
    need(isinstance(value, list), path, record, field, "a list of strings", value)
    for i, tag in enumerate(value):
        need(isinstance(tag, str) and tag.strip() != "", path, record, f"{field}[{i}]", "a non-empty string", tag)
    return frozenset(value)


def schema_params(schema: Any, path: str, record: str, field: str) -> tuple[str, ...]:
    if schema is None:
        return ()
    need(isinstance(schema, dict), path, record, field, "a JSON schema object", schema)
    props = schema.get("properties", {})
    need(isinstance(props, dict), path, record, f"{field}.properties", "an object", props)
    return tuple(props)


def declared_target(
    rec: JsonObject, params: tuple[str, ...], path: str, record: str, field: str = "target"
) -> tuple[str | None, bool]:
    """(target, still_to_infer)."""
    if field.split(".")[-1] not in rec:
        return None, True
    target = rec[field.split(".")[-1]]
    if target is None:
        return None, False
    need(isinstance(target, str) and target != "", path, record, field, "a parameter name or null", target)
    if params and target not in params:
        raise ManifestError(
            path, f"expected one of the parameters {list(params)}, got {target!r}", record=record, field=field
        )
    return target, False
