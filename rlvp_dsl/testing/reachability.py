"""Why a rule never fired on generated episodes (for `rlvp-compile --check`, property `reachable`).

Static reasons first (from `rlvp_dsl.analysis`: a tool the manifest lacks, a tag no tool
carries, two tests that never hold on one event), then the conditions that never held on
the sample of generated episodes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from .. import ast
from ..analysis import EventClass, Universe
from ..compile import Program, compile_ruleset
from ..diagnostics import did_you_mean
from ..events import CALL, STATUSES, USER, Episode
from ..ir import ObligationRule, RuleSet, ViolationRule
from ..tools import ToolSpec
from ..predicates import FALSE, build, specialise
from ..syntax.printer import print_expr
from .strategies import Vocabulary


class Reasons:
    """Static and dynamic explanations of an unreached rule outcome."""

    def __init__(self, program: Program, vocab: Vocabulary, source: str) -> None:
        self.program, self.source = program, source
        generated = {t.name for t in vocab.tools}
        table: dict[str, ToolSpec] = {}
        for t in vocab.tools:
            declared = program.tools.get(t.name)
            tags = t.tags | (declared.tags if declared else frozenset())
            table[t.name] = ToolSpec(t.name, tags, t.target, t.params)
        self.declared_only = sorted(set(program.tools) - generated)
        self.universe = Universe(table)
        self.generatable = self.universe.messages | self.universe.calls_of(sorted(generated))

    def possible(
        self, expr: ast.Expr, statuses: Iterable[str] = STATUSES, creditable: bool = False
    ) -> frozenset[EventClass]:
        out = self.universe.possible(expr) & self.generatable
        out = frozenset(c for c in out if c[0] != CALL or c[2] in statuses)
        return frozenset(c for c in out if c[0] != USER) if creditable else out

    def explain(self, name: str, outcome: str, sample: list[Episode]) -> tuple[bool, str]:
        rule = next(r for r in self.program.rules if r.name == name)
        parts: list[tuple[str, ast.Expr, tuple[str, ...]]]
        if isinstance(rule, ViolationRule):
            parts = [("its condition", rule.cond, STATUSES)]
        elif isinstance(rule, ObligationRule):
            parts = [("its open condition", rule.open, STATUSES)]
            if outcome == "discharge":
                parts.append(("its discharge condition", rule.discharge, ("ok", "error")))
        else:
            return False, (
                f"signal `{rule.signal}` never reached a new best {rule.direction} in {len(sample)} generated episodes"
            )
        for label, expr, statuses in parts:
            if not self.possible(expr, statuses, creditable=True):
                return True, f"{label} matches no event of {self.source}: {self._why(expr)}"
        if isinstance(rule, ObligationRule):
            opened, kept = self._opens(rule, sample[:300])
            if opened and not kept:
                return False, (
                    f"every one of the {opened} generated events that satisfied its open condition also "
                    "satisfied its discharge condition, and an event that satisfies the discharge "
                    "condition never opens an instance (docs/language.md): it can never open"
                )
        if isinstance(rule, ObligationRule) and rule.same is not None:
            opening = self.possible(rule.open, STATUSES, creditable=True)
            if not self.universe.carriers(rule.same, opening):
                return True, (
                    f"its open condition holds only on events with no value for `same {rule.same.describe()}` "
                    f"(no tool of {self.source} that it matches takes it): no instance can open"
                )
        label, expr, _ = parts[-1]
        never = self._never_held(expr, sample)
        detail = f"; never true on a generated event: {', '.join(never)}" if never else ""
        return False, (
            f"{label} held on no event of {len(sample)} generated episodes{detail} "
            f"(raise --examples, or add a test block that fires it)"
        )

    def _opens(self, rule: ObligationRule, sample: list[Episode]) -> tuple[int, int]:
        """(events satisfying the open condition, those of them not satisfying the discharge)."""
        probe = compile_ruleset(
            RuleSet(
                self.program.tools,
                (
                    ViolationRule("open", "violation", -1.0, rule.open),
                    ViolationRule("discharge", "violation", -1.0, rule.discharge),
                ),
            )
        )
        opened = kept = 0
        for episode in sample:
            fired: defaultdict[int, set[str]] = defaultdict(set)
            for c in probe.score(episode):
                fired[c.event_index].add(c.rule)
            opened += sum(1 for rules in fired.values() if "open" in rules)
            kept += sum(1 for rules in fired.values() if rules == {"open"})
        return opened, kept

    def _why(self, expr: ast.Expr) -> str:
        node = expr
        while True:
            if isinstance(node, ast.CallAtom) and node.tools:
                missing = [t.text for t in node.tools if t.text in self.declared_only]
                return f"`{_show(node)}`: " + ", ".join(f"tool `{t}` is not in {self.source}" for t in missing)
            if isinstance(node, ast.TagAtom):
                owners = [t for t in self.declared_only if node.tag.text in self.program.tools[t].tags]
                text = f"no tool of {self.source} is tagged `{node.tag.text}`"
                return text + (
                    f" (only {', '.join(f'`{t}`' for t in owners)}, which it does not have)" if owners else ""
                )
            if isinstance(node, ast.ArgTest):
                taken = {p for t in self.universe.tools.values() for p in (t.params or ())}
                close = did_you_mean(node.arg.text, taken)
                return f"no tool of {self.source} that can match takes argument `{node.arg.text}`" + (
                    f" ({close.replace(chr(39), '`')})" if close else ""
                )
            if isinstance(node, ast.Or):
                return "; ".join(self._why(k) for k in node.items)
            if isinstance(node, ast.And):
                empty = [k for k in node.items if not self.possible(k)]
                if empty:
                    node = empty[0]
                    continue
                for i, a in enumerate(node.items):
                    for b in node.items[i + 1 :]:
                        if not self.possible(ast.And((a, b))):
                            return f"`{_show(a)}` and `{_show(b)}` never hold on the same event"
                return f"`{_show(node)}` holds on no event"
            return f"`{_show(node)}` holds on no event"

    def _never_held(self, expr: ast.Expr, sample: list[Episode]) -> list[str]:
        leaves = _positive_leaves(expr)
        tools = self.program.tools
        held: Counter[int] = Counter()
        for episode in sample:
            for e in episode.events:
                info = tools.get(e.tool or "")
                tags = e.tags | (info.tags if info else frozenset())
                for k, leaf in enumerate(leaves):
                    folded = specialise(leaf, e.kind, e.tool if e.kind == CALL else None, tags)
                    if folded is not FALSE and build(folded, {}, tools)(e, []):
                        held[k] += 1
        return [f"`{_show(leaf)}`" for k, leaf in enumerate(leaves) if not held[k]]


def _positive_leaves(expr: ast.Expr) -> list[ast.Expr]:
    """Atoms reached through and/or only (not under `not`, not inside `seen`)."""
    out: list[ast.Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.And, ast.Or)):
            stack.extend(reversed(node.items))
        elif not isinstance(node, (ast.Not, ast.Seen, ast.Const, ast.HasBinding)):
            out.append(node)
    return out


def _show(expr: ast.Expr) -> str:
    try:
        return print_expr(expr)
    except (ValueError, TypeError):
        return type(expr).__name__
