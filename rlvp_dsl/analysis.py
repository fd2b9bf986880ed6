"""Static analysis of conditions: which kinds of event can a condition match?

The universe of event *classes* is every ``(kind, tool, status)``: user and
assistant messages, and a call of each declared tool -- plus `UNKNOWN`, any tool
the rule file does not declare -- in each status (ok, error, malformed,
no_result).  `possible(expr)` over-approximates the classes that can satisfy
`expr` (``and`` intersects, ``or`` unions, ``not`` and history tests are
conservative).  The checker uses it to find rules that can never fire, credit
that would land on user text, and unbound arguments; the compiler uses it to
dispatch each event only to the rules that can match it.
"""

from __future__ import annotations

from typing import Mapping

from . import ast
from .events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, OK, STATUSES, USER
from .tools import ToolSpec

UNKNOWN = "\x00unknown-tool"

EventClass = tuple[str, str | None, str]


class Universe:
    """All event classes of one tool table."""

    def __init__(self, tools: Mapping[str, ToolSpec]):
        self.tools = tools
        self.tool_names = tuple(sorted(tools)) + (UNKNOWN,)
        self.messages = frozenset({(USER, None, OK), (ASSISTANT, None, OK)})
        self.calls = frozenset((CALL, t, s) for t in self.tool_names for s in STATUSES)
        self.all = self.messages | self.calls

    def calls_of(self, tools, statuses=STATUSES) -> frozenset[EventClass]:
        return frozenset((CALL, t, s) for t in tools for s in statuses)

    def possible(self, expr: ast.Expr) -> frozenset[EventClass]:
        """The classes of event that may satisfy `expr` (iterative; long chains are fine)."""
        return ast.fold(expr, self._atom)

    def _atom(self, node, kids: list[frozenset]) -> frozenset[EventClass]:
        if isinstance(node, ast.And):
            out = self.all
            for k in kids:
                out = out & k
            return out
        if isinstance(node, ast.Or):
            out: frozenset = frozenset()
            for k in kids:
                out = out | k
            return out
        if isinstance(node, (ast.Not, ast.Seen, ast.HasBinding)):
            return self.all
        if isinstance(node, ast.Const):
            return self.all if node.value else frozenset()
        if isinstance(node, ast.CallAtom):
            if not node.tools:
                return self.calls
            return self.calls_of([t.text for t in node.tools if t.text in self.tools])
        if isinstance(node, ast.KindAtom):
            return frozenset({(node.kind, None, OK)})
        if isinstance(node, ast.TagAtom):
            tagged = [t for t in self.tools if node.tag.text in self.tools[t].tags]
            return self.calls_of(tagged + [UNKNOWN])
        if isinstance(node, ast.StatusAtom):
            statuses = {"ok": (OK,), "error": (ERROR, MALFORMED), "malformed": (MALFORMED,), "no_result": (NO_RESULT,)}
            return self.calls_of(self.tool_names, statuses[node.status])
        if isinstance(node, ast.TextTest):
            if node.field == "text":
                return self.messages
            if node.field == "error_text":
                return self.calls_of(self.tool_names, (ERROR, MALFORMED))
            return self.calls
        if isinstance(node, ast.ArgTest):
            tools = [t for t in self.tool_names if t == UNKNOWN or self.tools[t].params is None
                     or node.arg.text in self.tools[t].params]
            return self.calls_of(tools, (OK, ERROR, NO_RESULT))
        if isinstance(node, ast.SignalTest):
            return self.calls
        raise TypeError(f"not a condition node: {node!r}")


def tools_of(classes: frozenset[EventClass]) -> set[str]:
    """Declared tool names among the classes (UNKNOWN left out)."""
    return {t for kind, t, _ in classes if kind == CALL and t is not None and t != UNKNOWN}


def has_unknown(classes: frozenset[EventClass]) -> bool:
    return any(t == UNKNOWN for _, t, _ in classes)


walk = ast.walk
