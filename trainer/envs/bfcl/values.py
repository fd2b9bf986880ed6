"""Each parameter's closed value set for one task: what a constrained decoder may emit.

Drawn from the task itself, never from its ground truth (`expressible` then says whether the
ground truth can be written with them):

* ``boolean``: ``True``, ``False``;
* a parameter with an ``enum`` in the doc: the enum values;
* ``string``: the quoted strings of a parameter's own description (``'l'`` of ``wc``'s mode), the
  quoted strings of the user turns (``'final_report.pdf'``), in order of
  appearance; for a path-like parameter (``folder``, ``path``) also ``..`` and ``.``; then, for a
  file-like parameter (``file_name``, ``source``, ``folder``, ...) the file and folder names of the
  scenario's file system, for any other the capitalised names of the user turns (``San
  Francisco``, ``Tesla``) and the names and short strings of the other classes' scenarios (``initial_config``: user names, ids, passwords, symbols; at most `MAX_CHARS`
  characters, in the config's order);
* ``integer`` / ``float``: the numbers written in the user turns, then the integers of the scenario;
* ``array``: ``['x']`` for each ``#tag`` / ``@user`` word of the user turns, and per user turn the
  list of its numbers;
* ``dict``: none (such a function is only callable without it when it is optional).

An optional parameter also takes `OMIT` (the call leaves it out).  Each set keeps its first
``max_values`` candidates, and a function's sets are trimmed (largest first) until it has at most
``max_tool_calls`` calls (the product of its set sizes).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from trainer.envs.bfcl.backends import coerce

OMIT = "None"
#: Capitalised words that start sentences, not names.
_STOP = frozenset(
    "I Can Could Please The Then Now After Also And Next Finally First Once If Let Make My Could Would".split()
)
MAX_CHARS = 40
_QUOTED = re.compile(r"""(?<![\w'])'([^'\n]{1,80})'(?![\w])|"([^"\n]{1,80})\"""")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_MARKED = re.compile(r"(?<!\w)[#@][\w.]+")
_PROPER = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){0,2}\b")
_PATHLIKE = {"folder", "path", "dir_name"}
_FILELIKE = {"file_name", "file_name1", "file_name2", "source", "destination", "folder", "path", "dir_name", "name"}


def value_text(value: Any) -> str:
    """A value as its text in a value set (``True``, ``20``, ``5.5``, ``['@Julia']``)."""
    return value if isinstance(value, str) else repr(value)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i and i.strip() == i and len(i) <= 80))


def _config_items(config: Any) -> tuple[list[str], list[str]]:
    """(short strings and names, integers) of a scenario, in order."""
    strings: list[str] = []
    numbers: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and len(key) <= MAX_CHARS and key not in ("type", "contents", "content"):
                    strings.append(key)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, bool):
            return
        elif isinstance(node, int):
            numbers.append(str(node))
        elif isinstance(node, str) and len(node) <= MAX_CHARS:
            strings.append(node)

    walk(config)
    return _unique(strings), _unique(numbers)


def task_candidates(turns: Iterable[str], config: Any) -> dict[str, list[str]]:
    """The candidate pools of a task: ``quoted``, ``numbers``, ``marked``, ``config``, ``config_numbers``,
    ``turn_lists`` (per user turn, the list of its numbers)."""
    turns = list(turns)
    text = "\n".join(turns)
    quoted = _unique(a or b for a, b in _QUOTED.findall(text))
    numbers = _unique(_NUMBER.findall(text))
    marked = _unique(m.rstrip(".") for m in _MARKED.findall(text))
    proper = _unique(p for turn in turns for p in _PROPER.findall(turn) if p not in _STOP)
    files, _ = _config_items({k: v for k, v in config.items() if k == "GorillaFileSystem"})
    strings, ints = _config_items({k: v for k, v in config.items() if k != "GorillaFileSystem"})
    turn_lists = []
    for turn in turns:
        nums = [coerce(n, "float") for n in _NUMBER.findall(turn)]
        if len(nums) >= 2:
            turn_lists.append(repr(nums))
    return {
        "quoted": quoted,
        "numbers": numbers,
        "marked": marked,
        "files": files,
        "config": strings,
        "proper": proper,
        "config_numbers": ints,
        "turn_lists": _unique(turn_lists),
    }


def param_values(name: str, prop: dict[str, Any], required: bool, pools: dict[str, list[str]], cap: int) -> list[str]:
    """The value set of one parameter (see the module docstring)."""
    kind = prop.get("type", "string")
    if "enum" in prop:
        values = [value_text(v) for v in prop["enum"]]
    elif kind == "boolean":
        values = ["True", "False"]
    elif kind == "string":
        extra = ["..", "."] if name in _PATHLIKE else []
        doc_quoted = _unique(a or b for a, b in _QUOTED.findall(str(prop.get("description", ""))))
        if name in _FILELIKE:
            values = pools["quoted"] + extra + pools["files"]
        else:
            values = doc_quoted + pools["quoted"] + pools["proper"] + pools["config"]
    elif kind in ("integer", "float"):
        values = pools["numbers"] + pools["config_numbers"]
        if kind == "integer":
            values = [v for v in values if re.fullmatch(r"-?\d+", v)]
    elif kind == "array":
        values = [repr([m]) for m in pools["marked"]] + pools["turn_lists"]
    else:
        values = []
    values = _unique(values)[:cap]
    return values if required else [OMIT, *values][: cap + 1]


def trim(sets: dict[str, list[str]], max_calls: int) -> dict[str, list[str]]:
    """Drop the last value of the largest set until the product of the sizes is at most `max_calls`."""
    sets = {k: list(v) for k, v in sets.items()}

    def product() -> int:
        out = 1
        for v in sets.values():
            out *= len(v)
        return out

    while product() > max_calls:
        largest = max(sets, key=lambda k: len(sets[k]))
        if len(sets[largest]) <= 1:
            break
        sets[largest].pop()
    return sets
