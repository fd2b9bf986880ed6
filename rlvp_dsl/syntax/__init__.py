"""The concrete syntax of `.rlvp` files: everything between text and `rlvp_dsl.ast`.

* `grammar` -- the cached LALR parser over ``grammars/rlvp.lark``, the reserved words;
* `transform` -- lark tree -> `ast` (iterative), with `inline_tests` for `test` blocks;
* `errors` -- syntax errors in the language's words (expected tokens, unclosed blocks);
* `hints` -- targeted help for a newcomer's mistakes (``||``, ``/re/g``, ``call "name"``, ...);
* `printer` -- `ast` -> canonical `.rlvp` text (round-trips through the parser).

The parse stage itself is `rlvp_dsl.parser.parse`; `rlvp_dsl.loader` reads files and includes.
"""

from .grammar import SOFT_KEYWORDS, get_parser, grammar_text, keywords, parse_tree

__all__ = ["SOFT_KEYWORDS", "get_parser", "grammar_text", "keywords", "parse_tree"]
