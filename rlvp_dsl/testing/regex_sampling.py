"""Short strings that match a rule-file regex, to seed generated episodes (`rlvp_dsl.testing`).

Test tooling only, never used to match.  The pattern is read with the rule language's own
regex syntax (`rlvp_dsl.regex.parse_pattern`) and expanded into a few shortest strings:
the shortest repetition of each item, one string per alternative of an alternation, and
for a character class the first character of a fixed pool that the class accepts.  Every
candidate is checked with the rule language's matcher, so every sample really matches; a
pattern outside the supported syntax gives no sample.
"""

from __future__ import annotations

from ..regex import RegexSyntaxError, compile_regex, parse_pattern
from ..regex.syntax import Node, Test

_MAX_SAMPLES = 8  # most samples per pattern
#: Characters tried, in order, for a class or a negated class (`[^a]` -> "b").
_POOL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;!?/@#\n\t"


class _Unsampleable(Exception):
    pass


def regex_samples(pattern: str, flags: str = "") -> list[str]:
    """A few short strings that the rule-language regex `pattern` matches (one per
    alternative of each alternation, at most 8); an empty list when none can be built."""
    try:
        tree = parse_pattern(pattern, flags)
        candidates = _strings(tree)
        matcher = compile_regex(pattern, flags)
    except (RegexSyntaxError, _Unsampleable):
        return []
    return [c for c in dict.fromkeys(candidates) if matcher.search(c)][:_MAX_SAMPLES]


def _strings(node: Node) -> list[str]:
    if node[0] in ("empty", "assert"):
        return [""]
    if node[0] == "char":
        return [node[2] if len(node) > 2 else _first_accepted(node[1])]
    if node[0] == "cat":
        out = [""]
        for item in node[1]:
            options = _strings(item)
            out = ([o + options[0] for o in out] + [out[0] + extra for extra in options[1:]])[:_MAX_SAMPLES]
        return out
    if node[0] == "alt":
        return [_strings(branch)[0] for branch in node[1]][:_MAX_SAMPLES]
    if node[0] == "rep":
        low = node[2]
        return [s * low for s in _strings(node[1])] if low else [""]
    raise _Unsampleable(node[0])  # pragma: no cover - every node kind of the syntax is handled


def _first_accepted(test: Test) -> str:
    for ch in _POOL:
        if test(ch):
            return ch
    raise _Unsampleable("no pool character matches the class")
