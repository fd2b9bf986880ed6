"""Lints about how a rule file is written, not about the credit it gives (`lints.py` has
those); `rlvp-compile` runs both on a file without errors:

RV306  a rule set with no rules (an empty file, only comments, only declarations): it
       compiles, and gives no credit to any episode.
RV307  an argument name (``arg X ...``, ``same X``) that no tool is known to take and that
       is close to a name some tool is known to take: a likely typo.  What a tool is known
       to take: its declared ``target``, its parameters where a manifest gives them, and the
       arguments the file's ``test`` episodes pass it.  With parameters known for every tool
       a condition can match, the checker already rejects an unknown name (RV205); this lint
       covers tools declared inline, whose parameters are not known, so it only warns, and
       only when a known name is close (``difflib``, as every did-you-mean here).
RV308  ``same message`` (the source message the events came in) in a file where some tool is
       known to take an argument called ``message``: before ``message`` was a keyword, ``same
       message`` bound that argument, so a file written then now means something else.  Writing
       the argument in backticks (`` same `message` ``) binds the argument and silences this.
"""

from __future__ import annotations

from typing import Any

import attrs

from . import ast
from .diagnostics import WARNING, Diagnostic, counted, did_you_mean, quoted
from .ir import ObligationRule, RuleSet, conditions
from .source import Span


def usage_lint(ruleset: RuleSet, path: str) -> list[Diagnostic]:
    """The RV306/RV307/RV308 warnings of a checked rule set read from `path`."""
    if not ruleset.rules:
        what = "no rules" if not ruleset.tools else f"no rules, only {counted(len(ruleset.tools), 'tool declaration')}"
        return [
            Diagnostic(
                "RV306",
                f"the rule set has {what}: it gives no credit to any episode",
                Span(path, 0, 0),
                "add a rule (docs/language.md), or check the file is the one you meant; a file "
                "that only declares tools for others to include is fine",
                WARNING,
            )
        ]
    return _argument_typos(ruleset) + _message_bindings(ruleset)


def _known_names(ruleset: RuleSet) -> set[str]:
    known: set[str] = set()
    for tool in ruleset.tools.values():
        if tool.target:
            known.add(tool.target)
        known.update(tool.params or ())
    for test in ruleset.tests:
        for event in test.block.events or ():
            known.update(key for key, _ in event.arguments)
    return known


def _argument_names(node: object) -> list[ast.Name]:
    """Every argument name a condition tests or binds (`arg X`, `same X`, `returned X`)."""
    out: list[ast.Name] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, ast.ArgTest):
            out.append(item.arg)
        elif isinstance(item, ast.Binding):
            if item.kind == "arg" and item.arg is not None:
                out.append(item.arg)
        elif attrs.has(type(item)) and not isinstance(item, (ast.Name, Span)):
            node_type: Any = type(item)  # an attrs class (checked above)
            stack.extend(getattr(item, f.name) for f in attrs.fields(node_type))
    return out


def _bindings(node: object) -> list[ast.Binding]:
    """Every `same`/`returned` binding inside a rule's conditions."""
    out: list[ast.Binding] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, ast.Binding):
            out.append(item)
        elif attrs.has(type(item)) and not isinstance(item, (ast.Name, Span)):
            node_type: Any = type(item)
            stack.extend(getattr(item, f.name) for f in attrs.fields(node_type))
    return out


def _message_bindings(ruleset: RuleSet) -> list[Diagnostic]:
    if "message" not in _known_names(ruleset):
        return []
    out: list[Diagnostic] = []
    for rule in ruleset.rules:
        same = [rule.same] if isinstance(rule, ObligationRule) and rule.same is not None else []
        for binding in _bindings([*conditions(rule), *same]):
            if binding.kind == "message":
                out.append(
                    Diagnostic(
                        "RV308",
                        "`same message` binds the source message the events came in, not the argument "
                        "'message' that a tool of this file takes",
                        binding.span,
                        "for the argument write it in backticks: same `message`; for the source message "
                        "the rule is right as written",
                        WARNING,
                    )
                )
    return sorted(out, key=lambda d: (d.span.line, d.span.column))


def _argument_typos(ruleset: RuleSet) -> list[Diagnostic]:
    if all(tool.params is not None for tool in ruleset.tools.values()):
        return []  # every parameter is known: RV205 already reports unknown names
    known = _known_names(ruleset)
    out: list[Diagnostic] = []
    seen: set[tuple[str, Span]] = set()
    for rule in ruleset.rules:
        same = [rule.same] if isinstance(rule, ObligationRule) and rule.same is not None else []
        for name in _argument_names([*conditions(rule), *same]):
            if name.text in known or (name.text, name.span) in seen:
                continue
            seen.add((name.text, name.span))
            hint = did_you_mean(name.text, known)
            if hint:
                out.append(
                    Diagnostic(
                        "RV307",
                        f"argument {quoted(name.text)} is not known to be taken by any tool (not a declared "
                        "target, not in a manifest, not passed by a test episode)",
                        name.span,
                        f"{hint} (if {quoted(name.text)} is right, declare the tools with `tools from` a manifest, "
                        "or pass it in a test episode)",
                        WARNING,
                    )
                )
    return out
