"""Stage 1, parse: `.rlvp` text -> the syntax tree (`rlvp_dsl.ast`), with friendly syntax errors.

`parse(source)` never raises for bad input: it returns the tree (or None) and a list
of diagnostics phrased in the language's own words -- never a parser-internal
terminal name -- pointing at the unclosed block when the file ends inside one.

Its parts live in `rlvp_dsl.syntax`: the grammar (`grammar`), the tree -> AST
transformer (`transform`, `inline_tests`), the syntax errors (`errors`); the include
loader and the printer sit beside them.
"""

from __future__ import annotations

from lark.exceptions import UnexpectedInput

from . import ast
from .diagnostics import Diagnostic
from .gcpause import collector_paused
from .source import SourceFile
from .syntax.errors import syntax_diagnostic
from .syntax.grammar import get_parser
from .syntax.transform import to_ast


def parse(source: SourceFile) -> tuple[ast.RuleFile | None, list[Diagnostic]]:
    """Parse one file.

    Returns:
        (the tree, or None on a syntax error; diagnostics).  Never raises for bad input.
    """
    with collector_paused():  # the trees are acyclic: see rlvp_dsl.gcpause
        try:
            tree = get_parser().parse(source.text)
        except UnexpectedInput as exc:
            return None, syntax_diagnostic(exc, source)
        items, diagnostics = to_ast(tree, source)
    return ast.RuleFile(source.path, items), diagnostics
