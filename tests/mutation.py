"""One field of a real record made wrong, for the generated rows of the bad-input tables
(tests/e2e/test_bad_inputs.py, tests/unit/test_api_bad_inputs.py)."""

from __future__ import annotations

from typing import Any

#: The wrong values a field is given, by name; ``remove`` (in `HOWS`) deletes the field instead.
WRONG: dict[str, Any] = {"null": None, "number": -7, "text": "\u0000x", "list": [1], "object": {"k": {}}}

#: Every way a field is made wrong: removed, or each of `WRONG`.
HOWS = ("remove", *WRONG)


def mutate(root: Any, path: tuple, how: str) -> Any:
    """`root`, changed in place: the field at `path` (keys and list indices) removed (`how` =
    ``remove``) or set to ``WRONG[how]``.

    Raises:
        KeyError, IndexError: `path` is not a field of `root`.
    """
    node = root
    for key in path[:-1]:
        node = node[key]
    if how == "remove":
        del node[path[-1]]
    else:
        node[path[-1]] = WRONG[how]
    return root
