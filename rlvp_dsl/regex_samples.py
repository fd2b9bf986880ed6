"""Short strings that match a rule-file regex, to seed generated episodes (`rlvp_dsl.testing`).

Test tooling only, never used to match: patterns are read with Python's own regex parser
(``re._parser``) and expanded into a few shortest matching strings; what cannot be expanded
(negated classes, lookaround) gives no sample.
"""

from __future__ import annotations

_MAX_SAMPLES = 8  # most samples per pattern


class _Unsupported(Exception):
    pass


def regex_samples(pattern: str, flags: str = "") -> list[str]:
    """A few short strings that the rule-language regex `pattern` matches (one per alternative
    of its first alternation, at most 8); an empty list when none can be built.

    Built from the regex's parse (shortest repetition, first character of each class) and
    checked with the rule language's own matcher, so every sample really matches."""
    from .regex import compile_regex

    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern)
        candidates = _variants(list(parsed), sre_parse)
        matcher = compile_regex(pattern, flags)
    except Exception:  # an unusual construct: no samples, never an error
        return []
    return [c for c in dict.fromkeys(candidates) if matcher.search(c)][:_MAX_SAMPLES]


def _variants(items, p) -> list[str]:
    out = [""]
    for op, av in items:
        options = _item(op, av, p)
        out = [o + options[0] for o in out] + [out[0] + extra for extra in options[1:]]
        out = out[:_MAX_SAMPLES]
    return out


def _item(op, av, c) -> list[str]:
    """Shortest strings for one parsed item; `c` is the regex parser module (it re-exports the opcodes)."""
    p = c
    if op is c.LITERAL:
        return [chr(av)]
    if op is c.NOT_LITERAL:
        return ["a" if av != ord("a") else "b"]
    if op is c.ANY:
        return ["a"]
    if op is c.AT:
        return [""]
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) or str(op) == "POSSESSIVE_REPEAT":
        low, _high, sub = av
        return [v * low for v in _variants(list(sub), p)] if low else [""]
    if op is c.SUBPATTERN:
        return _variants(list(av[-1]), p)
    if op is c.BRANCH:
        found: list[str] = []
        for alt in av[1]:
            found.extend(_variants(list(alt), p)[:1])
        return found[:_MAX_SAMPLES]
    if op is c.IN:
        return [_class_char(av, p)]
    if op is c.CATEGORY:
        return [_category(av, p)]
    raise _Unsupported(str(op))


def _category(cat, p) -> str:
    name = str(cat)
    if name.endswith("NOT_DIGIT") or name.endswith("NOT_SPACE"):
        return "a"
    if name.endswith("NOT_WORD"):
        return " "
    if name.endswith("DIGIT"):
        return "0"
    if name.endswith("SPACE"):
        return " "
    return "a"


def _class_char(items, p) -> str:
    if items and items[0][0] is p.NEGATE:
        raise _Unsupported("negated class")
    op, av = items[0]
    if op is p.LITERAL:
        return chr(av)
    if op is p.RANGE:
        return chr(av[0])
    if op is p.CATEGORY:
        return _category(av, p)
    raise _Unsupported(str(op))
