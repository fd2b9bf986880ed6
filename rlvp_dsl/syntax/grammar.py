"""The grammar of the language, built once: the cached LALR parser and its reserved words.

The grammar is the data file ``grammars/rlvp.lark`` (shipped inside the wheel as
``rlvp_dsl/grammars/rlvp.lark``), built as an LALR(1) parser with ``strict=True`` so
that any grammar conflict fails loudly.  Both the parser stage and the syntax-error
module read it from here.

Building the LALR tables takes about a quarter of a second, so the built parser is kept
in the user's cache folder (``$XDG_CACHE_HOME/rlvp`` or ``~/.cache/rlvp``; the
``RLVP_CACHE_DIR`` environment variable overrides it) under a name made from the hash of
the grammar, the parser options and the lark and Python versions: a changed grammar or
upgraded lark gets a new file, never a stale one (lark's ``cache=`` option, which also
checks the hash written inside the file).  A new file is written atomically (a temporary
file, then a rename); a folder that cannot be written, or a file that cannot be read back,
only means the tables are built in memory as before; ``RLVP_NO_CACHE=1`` turns the cache off.
The folder is shared with the checked rule sets (`rlvp_dsl.check_cache`).

lark is imported by the functions that build or use the parser, not by this module: a run whose
rule set comes from `rlvp_dsl.check_cache` never imports it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..user_cache import cache_dir as cache_dir  # where the tables are kept (re-exported)
from ..user_cache import disabled, discard

if TYPE_CHECKING:
    from lark import Lark, Token, Tree


#: The options of the LALR parser (part of the cache key).
PARSER_OPTIONS = {
    "parser": "lalr",
    "lexer": "contextual",
    "strict": True,
    "propagate_positions": True,
    "maybe_placeholders": True,
}


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    """The grammar source, read from the installed package data."""
    import importlib.resources

    return importlib.resources.files("rlvp_dsl.grammars").joinpath("rlvp.lark").read_text(encoding="utf-8")


def cache_key(text: str) -> str:
    """The hash naming the cached parser: grammar text, options, lark and Python versions."""
    import lark

    options = ",".join(f"{k}={v}" for k, v in sorted(PARSER_OPTIONS.items()))
    seed = "\x00".join((text, options, lark.__version__, "%d.%d" % sys.version_info[:2]))
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]


def _with_cache(path: Path) -> Lark:
    """The parser through lark's own cache file at `path` (``cache_grammar``: the analysed grammar
    is kept too, so tools that need ``Lark.grammar`` -- hypothesis's ``from_lark`` -- work on a
    loaded parser).  Lark checks the hash written in the file and rebuilds on any mismatch."""
    from lark import Lark

    return Lark(grammar_text(), cache=str(path), cache_grammar=True, **PARSER_OPTIONS)


def build_parser() -> Lark:
    """A freshly built LALR parser, no cache (raises lark.GrammarError on a grammar conflict)."""
    from lark import Lark

    return Lark(grammar_text(), **PARSER_OPTIONS)


@functools.lru_cache(maxsize=1)
def get_parser() -> Lark:
    """The LALR parser, built once per process, its tables loaded from the user's cache
    folder when a parser of this exact grammar was saved there (see the module docstring).

    Raises:
        lark.GrammarError: a grammar conflict (only when the tables are built).
    """
    if disabled():
        return build_parser()
    path = cache_dir() / f"grammar-{cache_key(grammar_text())}.lark"
    if path.is_file():
        return _with_cache(path)
    try:  # build into a temporary file beside it, then rename: a reader never sees half a file
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError:  # no cache folder to be had: build in memory
        return build_parser()
    try:
        parser = _with_cache(Path(tmp))  # the empty file holds no hash: lark builds and saves there
        if os.path.getsize(tmp):
            os.replace(tmp, path)
        return parser
    finally:
        discard(tmp)


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


def parse_tree(text: str) -> Tree[Token]:
    """The raw lark tree (for golden-tree tests and tooling); raises lark's UnexpectedInput."""
    return get_parser().parse(text)
