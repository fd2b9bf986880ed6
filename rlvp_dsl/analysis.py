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

from typing import Iterable, Mapping

from . import ast
from .events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, OK, STATUSES, USER
from .tools import ToolSpec

UNKNOWN = "\x00unknown-tool"

EventClass = tuple[str, str | None, str]

#: The key of a memoised set of classes: a tag (``"tag"``, ``"and"``, ...), then names or the ids of
#: the shared sets combined.
_MemoKey = tuple[str | int, ...]


class Universe:
    """All event classes of one tool table."""

    def __init__(self, tools: Mapping[str, ToolSpec]) -> None:
        self.tools = tools
        self.tool_names = tuple(sorted(tools)) + (UNKNOWN,)
        self.messages: frozenset[EventClass] = frozenset({(USER, None, OK), (ASSISTANT, None, OK)})
        self.calls: frozenset[EventClass] = frozenset((CALL, t, s) for t in self.tool_names for s in STATUSES)
        self.all: frozenset[EventClass] = self.messages | self.calls
        # Atoms that test only a status, a tag, an argument name or a text field give the same set
        # every time, and so does an `and` of such sets: each is built once (not once per atom of
        # every rule: 10,000 tools x 10,000 rules), while the sets kept hold at most _MEMO_BUDGET
        # classes in all (past it they are built each time again: memory stays bounded).
        self._memo: dict[_MemoKey, frozenset[EventClass]] = {}
        self._memo_size = 0
        self._by_param: dict[str, list[str]] | None = None
        self._shared: dict[int, frozenset[EventClass]] = {id(x): x for x in (self.all, self.calls, self.messages)}

    def calls_of(self, tools: Iterable[str], statuses: Iterable[str] = STATUSES) -> frozenset[EventClass]:
        return frozenset((CALL, t, s) for t in tools for s in statuses)

    def possible(self, expr: ast.Expr) -> frozenset[EventClass]:
        """The classes of event that may satisfy `expr` (iterative; long chains are fine)."""
        return ast.fold(expr, self._atom)

    def _atom(self, node: ast.Expr, kids: list[frozenset[EventClass]]) -> frozenset[EventClass]:
        if isinstance(node, ast.And):
            shared = sorted({id(k) for k in kids if id(k) in self._shared and k is not self.all})
            own = [k for k in kids if id(k) not in self._shared]
            if len(shared) > 1:
                key: _MemoKey = ("and", *shared)
                found = self._memo.get(key)
                if found is None:
                    found = self._keep(key, _intersect([self._shared[i] for i in shared]))
                own.append(found)
            elif shared:
                own.append(self._shared[shared[0]])
            return _intersect(own) if own else self.all
        if isinstance(node, ast.Or):
            if kids and all(id(k) in self._shared for k in kids):
                key = ("or", *sorted({id(k) for k in kids}))
                found = self._memo.get(key)
                return found if found is not None else self._keep(key, frozenset().union(*kids))
            return frozenset().union(*kids)
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
        atom_key = self._memo_key(node)
        if atom_key is None:
            raise TypeError(f"not a condition node: {node!r}")
        found = self._memo.get(atom_key)
        return found if found is not None else self._keep(atom_key, self._shared_atom(node))

    def possible_each(self, expr: ast.Expr) -> dict[int, frozenset[EventClass]]:
        """`possible` of every node of `expr` (`seen` conditions included), by ``id(node)``: one
        pass, for a caller that needs the classes of the parts as well as of the whole."""
        out: dict[int, frozenset[EventClass]] = {}

        def keep(node: ast.Expr, kids: list[frozenset[EventClass]]) -> frozenset[EventClass]:
            out[id(node)] = found = self._atom(node, kids)
            return found

        ast.fold(expr, keep)
        return out

    def carriers(self, binding: ast.Binding, classes: frozenset[EventClass]) -> frozenset[EventClass]:
        """The classes among `classes` whose events may have a value for `binding`, as the scorer
        reads one (`rlvp_dsl.predicates.binding_key`): `same message`, any class; `same call`,
        the calls; `same target`, the calls of declared tools that declare a target (an
        undeclared tool has none); `same ARG`, the calls of tools that take ARG or whose
        parameters are unknown, and of undeclared tools.  A message turn carries only `message`.
        Empty means the binding can never hold on an event of `classes` (RV205/RV206)."""
        if binding.kind == "message":
            return classes
        calls = frozenset(c for c in classes if c[0] == CALL)
        if binding.kind == "call":
            return calls
        arg = binding.arg.text if binding.kind == "arg" and binding.arg is not None else None
        out = []
        for c in calls:  # linear in the classes, as `tools_of` is
            spec = self.tools.get(c[1] or "") if c[1] != UNKNOWN else None
            if binding.kind == "target":
                carries = spec is not None and bool(spec.target)
            else:
                carries = spec is None or spec.params is None or arg in spec.params
            if carries:
                out.append(c)
        return frozenset(out)

    def _params(self) -> dict[str, list[str]]:
        """Parameter name -> the declared tools whose parameter list holds it (built once)."""
        if self._by_param is None:
            self._by_param = {}
            for t in self.tool_names[:-1]:
                for p in dict.fromkeys(self.tools[t].params or ()):
                    self._by_param.setdefault(p, []).append(t)
        return self._by_param

    def _keep(self, key: _MemoKey, value: frozenset[EventClass]) -> frozenset[EventClass]:
        """`value`, memoised under `key` while the budget lasts."""
        if self._memo_size + len(value) <= _MEMO_BUDGET:
            self._memo[key] = value
            self._memo_size += len(value)
            self._shared[id(value)] = value  # kept alive by the memo, so its id stays its own
        return value

    def _memo_key(self, node: ast.Expr) -> _MemoKey | None:
        if isinstance(node, ast.TagAtom):
            return ("tag", node.tag.text)
        if isinstance(node, ast.StatusAtom):
            return ("status", node.status)
        if isinstance(node, ast.TextTest):
            return ("text", node.field)
        if isinstance(node, ast.ArgTest):  # one set for every name no declared parameter list holds
            return ("arg", node.arg.text) if node.arg.text in self._params() else ("arg",)
        if isinstance(node, ast.SignalTest):
            return ("signal",)
        return None

    def _shared_atom(self, node: ast.Expr) -> frozenset[EventClass]:
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
        if isinstance(node, ast.ArgTest):  # the tools without a parameter list, and those that take it
            untyped = [t for t in self.tool_names if t == UNKNOWN or self.tools[t].params is None]
            return self.calls_of(untyped + self._params().get(node.arg.text, []), (OK, ERROR, NO_RESULT))
        return self.calls  # ast.SignalTest


#: The most event classes `Universe` keeps in memoised sets (about 100 MB).
_MEMO_BUDGET = 1_000_000


def _intersect(sets: list[frozenset[EventClass]]) -> frozenset[EventClass]:
    """The intersection, smallest set first (each `&` then costs the size of the result so far)."""
    sets = sorted(sets, key=len)
    out = sets[0]
    for k in sets[1:]:
        if not out:
            break
        out = out & k
    return out


def tools_of(classes: frozenset[EventClass]) -> set[str]:
    """Declared tool names among the classes (UNKNOWN left out)."""
    return {t for kind, t, _ in classes if kind == CALL and t is not None and t != UNKNOWN}


def has_unknown(classes: frozenset[EventClass]) -> bool:
    return any((CALL, UNKNOWN, s) in classes for s in STATUSES)


walk = ast.walk
