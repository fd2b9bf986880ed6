"""A training config's text: where a key is set (`key_location`, `line_of`) and what is wrong with a
value's TOML type (`type_error`), for the errors `trainer.config` raises (file:line, the key, what
was expected and what was given)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

#: TOML's names for the value types a config can hold (what "got" says).
_TOML_TYPE = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}


def _shown(value: Any) -> str:
    """A value as TOML writes it, and its TOML type: ``"no", a string``."""
    kind = next((name for t, name in _TOML_TYPE.items() if isinstance(value, t)), type(value).__name__)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{text}, a{'n' if kind[0] in 'aeiou' else ''} {kind}"


def type_error(key: str, value: Any, want: str) -> str | None:
    """What is wrong with ``value`` for a field annotated ``want`` (``"int"``, ``"float | None"``, ...);
    None when it fits.  ``bool`` is not an integer here, an integer is a number."""
    optional = want.endswith(" | None")
    base = want.removesuffix(" | None")
    if value is None:
        return None if optional else f"'{key}' must be set (got nothing)"
    expected = {
        "bool": ("a boolean, true or false", lambda v: isinstance(v, bool)),
        "int": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
        "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
        "str": ("a string", lambda v: isinstance(v, str)),
        "list": (
            'an array of strings, e.g. ["q_proj", "v_proj"]',
            lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
        ),
        "dict": ("a table, e.g. { num_distractors = 2 }", lambda v: isinstance(v, dict)),
    }.get(base)
    if expected is None or expected[1](value):
        return None
    return f"'{key}' must be {expected[0]} (got {_shown(value)})"


def line_of(text: str, key: str) -> int | None:
    """The 1-based line where ``key = ...`` is set in the TOML ``text`` (first match), else the line
    of a ``[key]`` or ``[section.key]`` table header (``env_args`` written as a table, e.g.
    ``[env.env_args]`` as examples/bfcl.toml does), if found."""
    pattern = re.compile(rf"""^\s*["']?{re.escape(key)}["']?\s*=""")
    header = re.compile(rf"""^\s*\[\s*(?:["']?\w+["']?\s*\.\s*)?["']?{re.escape(key)}["']?\s*\]""")
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if pattern.match(line):
            return n
    return next((n for n, line in enumerate(lines, 1) if header.match(line)), None)


def table_key_line(text: str, table: str, key: str) -> int | None:
    """The 1-based line where ``key = ...`` is set inside the ``[table]`` (or ``[section.table]``)
    table of the TOML ``text``, if that table is written as one and sets it; else None."""
    start = line_of(text, table)
    lines = text.splitlines()
    if start is None or "=" in lines[start - 1].split("#")[0]:
        return None  # no such table, or written inline (`table = { ... }`)
    pattern = re.compile(rf"""^\s*["']?{re.escape(key)}["']?\s*=""")
    for n, line in enumerate(lines[start:], start + 1):
        if line.lstrip().startswith("["):
            return None
        if pattern.match(line):
            return n
    return None


def setting_line(text: str, key: str) -> int | None:
    """The 1-based line of setting ``key`` in the TOML ``text``: `line_of` for a key, and for a
    dotted ``table.knob`` (``gen_args.call_style``) the knob's line in a ``[table]`` table, else the
    table's own line (``gen_args = { ... }`` written inline), if found."""
    table, dot, knob = key.partition(".")
    if dot:
        return table_key_line(text, table, knob) or line_of(text, table)
    return line_of(text, key)


def key_location(path: str | os.PathLike, key: str) -> str:
    """``path:line`` where ``key = ...`` is set in the config file ``path`` (a dotted
    ``table.knob`` as `setting_line` finds it), else ``path``."""
    try:
        line = setting_line(Path(path).read_text(encoding="utf-8"), key)
    except (OSError, UnicodeDecodeError):
        line = None
    return f"{path}:{line}" if line else str(path)
