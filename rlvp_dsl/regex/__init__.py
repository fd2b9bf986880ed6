"""Linear-time regular expressions for rule files (``user says /\\b(yes|confirm)\\b/i``).

* `syntax` -- the supported subset of ``re`` syntax: pattern text -> a tree of tuples;
* `matcher` -- the tree -> a Thompson NFA, run as a lazily built DFA (`compile_regex`);
* `prefilter` -- literal strings every match must contain, checked before the automaton runs.

The supported syntax and its semantics are documented in `rlvp_dsl.regex.matcher`.
"""

from .matcher import MAX_REPEAT, MAX_STATES, Regex, RegexSyntaxError, compile_regex
from .syntax import parse_pattern

__all__ = ["MAX_REPEAT", "MAX_STATES", "Regex", "RegexSyntaxError", "compile_regex", "parse_pattern"]
