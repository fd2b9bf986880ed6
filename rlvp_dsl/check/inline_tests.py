"""The ``test`` blocks of rule files, collected for `rlvp-compile --test` (they are not part of
the program): test names unique (RV203), expectations naming a rule of the files (RV211), and
a warning for a test episode calling an undeclared tool (RV201)."""

from __future__ import annotations

from .. import ast
from ..diagnostics import did_you_mean, quoted
from ..ir import RuleTest
from ..source import Span
from .state import CheckState


def collect_tests(state: CheckState, rule_names: dict[str, Span]) -> tuple[RuleTest, ...]:
    """Every ``test`` block of the files, in order, checked against `rule_names` (name -> where)."""
    tests = []
    names: dict[str, Span] = {}
    for f, block in state.items(ast.InlineTest):
        if block.name in names:
            state.error(
                "RV203",
                f"duplicate test name {block.name!r} (first at {names[block.name].location})",
                block.span,
                "test names must be unique: the test runner reports by name",
            )
        names.setdefault(block.name, block.span)
        for expect in block.expects:
            if expect.rule is not None and expect.rule.text not in rule_names:
                state.error(
                    "RV211",
                    f"unknown rule {quoted(expect.rule.text)} in an expectation",
                    expect.rule.span,
                    did_you_mean(expect.rule.text, rule_names) or "name a rule of this file, or `total`",
                )
        for event in block.events or ():
            # (with a manifest unread, the tool table is incomplete: the error at `tools from` says so)
            if event.tool is not None and event.tool.text not in state.tools and state.unread_manifest is None:
                state.warn(
                    "RV201",
                    f"the test episode calls tool {quoted(event.tool.text)}, which is not declared",
                    event.tool.span,
                    did_you_mean(event.tool.text, state.tools)
                    or "undeclared tools carry no tags; declare it if the rules should see its tags",
                )
        tests.append(RuleTest(f.path, block))
    return tuple(tests)
