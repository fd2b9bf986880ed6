"""BFCL call strings <-> (name, arguments), without ``eval``.

BFCL writes ground-truth calls as Python call expressions (``mv(source='a.txt', destination='temp')``,
``sort('final_report.pdf')``).  `parse_call` reads one with `ast.parse` and turns each argument node
into a value with `ast.literal_eval` (literals only: strings, numbers, booleans, None, lists, tuples,
dicts of literals); anything else -- a name, an attribute, a nested call -- is a ValueError naming
the call and the argument.  Positional arguments take the names of the function's parameters in
the doc's order.  `render_call` writes a parsed call back as ``name(key=repr(value), ...)``: the
only text the checker's helpers ever see is rendered from values, never a policy's text.
"""

from __future__ import annotations

import ast
from typing import Any, Sequence


def parse_call(text: str, param_order: Sequence[str] | None = None) -> tuple[str, dict[str, Any]]:
    """``"name(a=1, b='x')"`` -> ``("name", {"a": 1, "b": "x"})``.

    Args:
        text: one call expression.
        param_order: the function's parameter names, for positional arguments (None: none allowed).

    Raises:
        ValueError: the text is not one call of a plain name with literal arguments (the message
            names the call and the argument at fault).
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"call {text!r}: not a call expression ({exc.msg})") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"call {text!r}: expected name(argument=value, ...)")
    name = node.func.id
    args: dict[str, Any] = {}
    order = list(param_order or ())
    for i, arg in enumerate(node.args):
        if i >= len(order):
            raise ValueError(f"call {text!r}: positional argument {i + 1} has no parameter to bind to")
        args[order[i]] = _literal(text, order[i], arg)
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"call {text!r}: **arguments are not allowed")
        if kw.arg in args:
            raise ValueError(f"call {text!r}: argument {kw.arg!r} given twice")
        args[kw.arg] = _literal(text, kw.arg, kw.value)
    return name, args


def _literal(text: str, name: str, node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"call {text!r}: argument {name!r} is not a literal value") from None


def render_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(key=repr(value), ...)``: a parsed call written back as BFCL writes calls."""
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"
