"""A prefilter for `rlvp_dsl.regex`: literal strings that every match must contain.

Works on the regex parser's tree (tuples: ``("char", test[, literal])``, ``("assert", kind)``,
``("cat", items)``, ``("alt", branches)``, ``("rep", node, m, n, offset)``, ``("empty",)``).
A node's *required set* is a set of strings such that every match of the node contains one of
them; it is *exact* when every match equals one of them (a literal, an alternation of
literals, a concatenation of exact nodes).  Under ignore-case the strings are used only when
they and the text are ASCII, where ``str.lower`` agrees with the matcher's case mapping.
"""

from __future__ import annotations

from typing import Optional

from .syntax import Node

_MAX_FACTORS = 64  # largest set of alternative required strings kept


def _required(node: Node) -> tuple[Optional[frozenset[str]], bool]:
    """(strings, exact): every match of `node` contains one of `strings` (equals one, when `exact`);
    None when nothing useful is known."""
    if node[0] in ("empty", "assert"):
        return frozenset({""}), True
    if node[0] == "char":
        return (frozenset({node[2]}), True) if len(node) > 2 else (None, False)
    if node[0] == "alt":
        parts = [_required(b) for b in node[1]]
        known = [p for p, _ in parts if p is not None]
        if len(known) < len(parts):
            return None, False
        union = frozenset().union(*known)
        return (union, all(e for _, e in parts)) if len(union) <= _MAX_FACTORS else (None, False)
    if node[0] == "rep":
        body, exact = _required(node[1])
        if node[2] == 0 or body is None:
            return None, False
        return body, exact and node[2] == node[3] == 1
    assert node[0] == "cat"
    candidates: list[frozenset[str]] = []  # "cat": multiply runs of exact children
    run: frozenset[str] = frozenset({""})
    whole = True  # the run still covers every child so far
    for child in node[1]:
        strings, exact = _required(child)
        if strings is not None and exact and len(run) * len(strings) <= _MAX_FACTORS:
            run = frozenset(a + b for a in run for b in strings)
            continue
        whole = False
        candidates.append(run)
        if strings is not None:
            candidates.append(strings)
        run = strings if strings is not None and exact else frozenset({""})
    if whole:
        return run, True
    candidates.append(run)
    best = max(candidates, key=lambda c: min(map(len, c)), default=None)
    return best, False


def required_strings(tree: Node, icase: bool) -> Optional[tuple[str, ...]]:
    """Literal strings one of which every match contains (lower-cased under `icase`), or None.

    `Regex.search` first tests these with `str.__contains__` (C speed) and answers False at once
    when none occurs -- the usual case for a rule's pattern on a long message.
    """
    strings, _ = _required(tree)
    if not strings or min(map(len, strings)) < 1:
        return None
    if icase:
        if not all(x.isascii() for x in strings):
            return None
        strings = frozenset(x.lower() for x in strings)
    return tuple(sorted(strings))
