"""The grammar of the language, built once: the cached LALR parser and its reserved words.

The grammar is the data file ``grammars/rlvp.lark`` (shipped inside the wheel as
``rlvp_dsl/grammars/rlvp.lark``), built as an LALR(1) parser with ``strict=True`` so
that any grammar conflict fails loudly.  Both the parser stage and the syntax-error
module read it from here.
"""

from __future__ import annotations

import functools
import importlib.resources

from lark import Lark, Tree


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    """The grammar source, read from the installed package data."""
    return importlib.resources.files("rlvp_dsl.grammars").joinpath("rlvp.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def get_parser() -> Lark:
    """The cached LALR parser (raises lark.GrammarError on a grammar conflict)."""
    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
    )


#: Words of the `test` blocks that never stand where a name could: they stay usable as names
#: (a tool called `test` is common).
SOFT_KEYWORDS = frozenset({"test", "episode", "expect", "event"})


@functools.lru_cache(maxsize=1)
def keywords() -> frozenset[str]:
    """Reserved words: every literal word of the grammar (`violation`, `call`, `open`, ...)
    except the `SOFT_KEYWORDS`."""
    words = set()
    for term in get_parser().terminals:
        pattern = term.pattern
        if pattern.type == "str" and pattern.value.replace("_", "").isalpha():
            words.add(pattern.value)
    return frozenset(words - SOFT_KEYWORDS)


def parse_tree(text: str) -> Tree:
    """The raw lark tree (for golden-tree tests and tooling); raises lark's UnexpectedInput."""
    return get_parser().parse(text)
