"""Each parameter's closed value set for one task: what a constrained decoder may emit.

Drawn from the task itself, never from its ground truth (`expressible` then says whether the
ground truth can be written with them):

* ``boolean``: ``True``, ``False``;
* a parameter with an enum in the doc (``enum``, or ``[Enum]: [...]`` in its description, as BFCL
  writes most): the enum values; an array whose items have one: the
  whole list, then each value alone;
* ``string``: the quoted strings and ``A/B`` alternatives of a parameter's own description (``'l'``
  of ``wc``'s mode, ``Buy/Sell`` of ``place_order``'s order type), the
  quoted strings of the user turns (``'final_report.pdf'``), in order of
  appearance; for a path-like parameter (``folder``, ``path``) also ``..`` and ``.``; then, for a
  file-like parameter (``file_name``, ``source``, ``folder``, ...) the file and folder names of the
  scenario's file system, for any other the capitalised names of the user turns (``San
  Francisco``, ``Tesla``), the strings tools returned (below), and the names and short strings of
  the other classes' scenarios (``initial_config``: user names, ids, passwords, symbols; at most `MAX_CHARS`
  characters, in the config's order);
* ``integer`` / ``float``: the numbers written in the user turns, then the numbers tools returned
  (below), then the integers of the scenario;
* ``array``: ``['x']`` for each ``#tag`` / ``@user`` word of the user turns, and per user turn the
  list of its numbers;
* ``dict``: none (such a function is only callable without it when it is optional).

"What tools returned" is, when the environment's ``returned_values`` knob is on (the default), the
strings and numbers in the results of the ground truth's calls: the names a policy sees when it
makes those calls (a stock symbol ``get_symbol_by_name`` returns, an airport code, a booking id).
They are drawn from the results, not from the ground truth's arguments; a computed argument (a
fuel amount the user never wrote) stays out of reach.

An optional parameter also takes `OMIT` (the call leaves it out).  Each set keeps its first
``max_values`` candidates, and a function's sets are trimmed (largest first) until it has at most
``max_tool_calls`` calls (the product of its set sizes).
"""

from __future__ import annotations

import json
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
_ALTERNATIVES = re.compile(r"\b[A-Z]\w*(?:/[A-Z]\w*)+")
_ENUM = re.compile(r"\[Enum\]:\s*(\[[^\]]*\])")
_PROPER = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){0,2}\b")
_PATHLIKE = {"folder", "path", "dir_name"}
_FILELIKE = {"file_name", "file_name1", "file_name2", "source", "destination", "folder", "path", "dir_name", "name"}


def value_text(value: Any) -> str:
    """A value as its text in a value set (``True``, ``20``, ``5.5``, ``['@Julia']``)."""
    return value if isinstance(value, str) else repr(value)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i and i.strip() == i and len(i) <= 80))


def _file_names(node: Any) -> list[str]:
    """The file and folder names of a GorillaFileSystem scenario (``{name: {"type", "contents"}}``)."""
    out: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop(0)
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if isinstance(value, dict) and value.get("type") in ("file", "directory"):
                out.append(key)
                stack.append(value.get("contents", {}))
            elif isinstance(value, dict):
                stack.append(value)
    return _unique(out)


def _config_items(config: Any, keys: bool = True) -> tuple[list[str], list[str]]:
    """(short strings and names, integers) of a scenario, in order (``keys``: dict keys count as names)."""
    strings: list[str] = []
    numbers: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if keys and isinstance(key, str) and len(key) <= MAX_CHARS:
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


def _described_enum(description: str) -> list[Any]:
    """The values of a description's ``[Enum]: ["a", "b"]`` (BFCL writes most enums so), or []."""
    match = _ENUM.search(description)
    if match is None:
        return []
    try:
        values = json.loads(match.group(1))
    except ValueError:
        return []
    return values if isinstance(values, list) else []


def _starts_sentence(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?:;\n"


def _returned(outputs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(strings, numbers) in tool outputs: each output read as JSON when it is JSON, else as one string."""
    strings: list[str] = []
    numbers: list[str] = []
    for text in outputs:
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        found, ints = _config_items(data, keys=False)
        strings += found
        numbers += ints
        stack = [data]
        while stack:  # floats too (prices, balances)
            node = stack.pop()
            if isinstance(node, dict):
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, float):
                numbers.append(repr(node))
    return _unique(strings), _unique(numbers)


def task_candidates(turns: Iterable[str], config: Any, outputs: Iterable[str] = ()) -> dict[str, list[str]]:
    """The candidate pools of a task: ``quoted``, ``numbers``, ``marked``, ``proper``, ``files``, ``config``,
    ``config_numbers``, ``returned``, ``returned_numbers``, ``turn_lists`` (per user turn, the list of its
    numbers)."""
    turns = list(turns)
    text = "\n".join(turns)
    quoted = _unique(a or b for a, b in _QUOTED.findall(text))
    numbers = _unique(_NUMBER.findall(text))
    marked = _unique(m.rstrip(".") for m in _MARKED.findall(text))
    proper = _unique(
        m.group(0) for turn in turns for m in _PROPER.finditer(turn) if not _starts_sentence(turn, m.start())
    )
    files = _file_names(config.get("GorillaFileSystem", {}))
    strings, ints = _config_items([v for k, v in config.items() if k != "GorillaFileSystem"])
    returned = _returned(outputs)
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
        "returned": returned[0],
        "returned_numbers": returned[1],
    }


def param_values(name: str, prop: dict[str, Any], required: bool, pools: dict[str, list[str]], cap: int) -> list[str]:
    """The value set of one parameter (see the module docstring)."""
    kind = prop.get("type", "string")
    items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
    enum = prop.get("enum") or items.get("enum") or _described_enum(str(prop.get("description", "")))
    if enum and kind == "array":
        values = [repr(list(enum))] + [repr([v]) for v in enum]
    elif enum:
        values = [value_text(v) for v in enum]
    elif kind == "boolean":
        values = ["True", "False"]
    elif kind == "string":
        extra = ["..", "."] if name in _PATHLIKE else []
        description = str(prop.get("description", ""))
        doc_quoted = _unique(
            [a or b for a, b in _QUOTED.findall(description)]
            + [w for m in _ALTERNATIVES.findall(description) for w in m.split("/")]
        )
        if name in _FILELIKE:
            values = pools["quoted"] + extra + pools["files"]
        else:
            values = doc_quoted + pools["quoted"] + pools["proper"] + pools["returned"] + pools["config"]
    elif kind in ("integer", "float"):
        values = pools["numbers"] + pools["returned_numbers"] + pools["config_numbers"]
        if kind == "integer":
            values = [v for v in values if re.fullmatch(r"-?\d+", v)]
    elif kind == "array":
        values = [repr([m]) for m in pools["marked"]] + pools["turn_lists"]
    else:
        values = []
    values = [v for v in _unique(values) if v != OMIT][:cap]
    return values if required else [OMIT, *values]


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
