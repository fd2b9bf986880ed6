"""Conditions in a canonical form, for the lints (`lints.py`): two conditions that differ only in
the order or repetition of their `and`/`or` operands, a double negation or a redundant bare
``call`` have the same form, so "the same condition" and "one condition's conjuncts are among
another's" are tests on keys (`CanonicalForms.normal`, `conjuncts`); and the event classes whose
every event surely satisfies a condition (`CanonicalForms.surely`), an under-approximation over
`analysis.Universe`."""

from __future__ import annotations

import json
from typing import Any

from . import ast
from .analysis import EventClass, Universe
from .ir import binding_to_json, expr_to_json


def form_key(j: Any) -> str:
    """The text of a canonical form (`CanonicalForms.normal`), a dict key: equal forms, equal keys."""
    return json.dumps(j, sort_keys=True, ensure_ascii=False)


def flatten(node: ast.Expr, kind: type[ast.And] | type[ast.Or]) -> list[ast.Expr]:
    """The operands of a chain of `kind` (And or Or), nested chains flattened, iteratively."""
    out: list[ast.Expr] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            stack.extend(reversed(n.items))
        else:
            out.append(n)
    return out


def _bare_call(node: ast.Expr) -> bool:
    return isinstance(node, ast.CallAtom) and not node.tools


class CanonicalForms:
    """Canonical forms of the conditions of one rule set, over its `Universe` of event classes."""

    def __init__(self, universe: Universe) -> None:
        self.universe = universe
        self._tagged: dict[str, frozenset[EventClass]] = {}

    def normal(self, expr: ast.Expr | None) -> Any:
        """A canonical s-expression: `and`/`or` flattened, deduplicated and sorted; `not not x` is x;
        a bare `call` dropped from a conjunction another operand already confines to calls."""
        if expr is None:
            return None
        if isinstance(expr, ast.And):
            return self._join("and", self.conjuncts(expr))
        if isinstance(expr, ast.Or):
            found: dict[str, Any] = {}
            for item in flatten(expr, ast.Or):
                j = self.normal(item)
                found[form_key(j)] = j
            return self._join("or", sorted(found.items()))
        if isinstance(expr, ast.Not):
            if isinstance(expr.item, ast.Not):
                return self.normal(expr.item.item)
            return ["not", self.normal(expr.item)]
        if isinstance(expr, ast.Seen):
            out = ["seen", self.normal(expr.cond), binding_to_json(expr.same), self.normal(expr.since)]
            return out + ["returned"] if expr.returned else out
        return expr_to_json(expr)

    @staticmethod
    def _join(op: str, items: list[tuple[str, Any]]) -> Any:
        if len(items) == 1:
            return items[0][1]
        return [op, *(j for _, j in items)]

    def conjuncts(self, expr: ast.Expr) -> list[tuple[str, Any]]:
        """The normalised conjuncts of a condition as sorted (key, json) pairs."""
        items = flatten(expr, ast.And)
        messages = self.universe.messages  # confined to calls = no message class (the test costs O(1))
        if any(self.universe.possible(i).isdisjoint(messages) for i in items if not _bare_call(i)):
            items = [i for i in items if not _bare_call(i)]
        found: dict[str, Any] = {}
        for item in items:
            j = self.normal(item)
            found[form_key(j)] = j
        return sorted(found.items())

    def conjunct_nodes(self, expr: ast.Expr) -> dict[str, ast.Expr]:
        """The conjuncts of a condition by canonical key (the nodes, for scope tests)."""
        return {form_key(self.normal(i)): i for i in flatten(expr, ast.And)}

    def surely(self, node: ast.Expr) -> frozenset[EventClass]:
        """The event classes whose every event satisfies `node` (an under-approximation)."""
        u = self.universe
        if isinstance(node, ast.And):
            out = u.all
            for k in node.items:
                out = out & self.surely(k)
            return out
        if isinstance(node, ast.Or):
            out = frozenset[EventClass]()
            for k in node.items:
                out = out | self.surely(k)
            return out
        if isinstance(node, (ast.CallAtom, ast.KindAtom, ast.StatusAtom)):
            return u.possible(node)  # exact: determined by the class
        if isinstance(node, ast.TagAtom):
            tag = node.tag.text
            if tag not in self._tagged:  # once per tag, not once per obligation
                self._tagged[tag] = u.calls_of([t for t, info in u.tools.items() if tag in info.tags])
            return self._tagged[tag]
        if isinstance(node, ast.Const):
            return u.all if node.value else frozenset()
        return frozenset()
