"""Linear-time regular expressions for rule files (``user says /\\b(yes|confirm)\\b/i``).

Rule files are data and every predicate must run in bounded time, but Python's ``re`` backtracks
(``(a|a)*b`` on a run of ``a`` takes exponential time).  So rule-file regexes use this matcher:
a documented subset of ``re`` syntax, compiled to a Thompson NFA.  API::

    rx = compile_regex(r"\\b(yes|confirm)\\b", "i")   # cached; raises RegexSyntaxError
    rx.search("Yes, please")  -> True                  # like re.search(...) is not None

Supported subset (semantics of Python ``re`` on ``str``):

* literal characters; escapes ``\\\\ \\/ \\. \\* \\+ \\? \\( \\) \\[ \\] \\{ \\} \\| \\^ \\$`` (any other
  escaped punctuation or non-ASCII character is itself), ``\\n \\t \\r \\f \\v \\xhh \\uhhhh``;
* ``\\d \\D \\w \\W \\s \\S`` with Unicode semantics: ``\\d`` is ``str.isdecimal``, ``\\w`` is
  ``str.isalnum`` or ``_``, ``\\s`` is ``str.isspace``; ``.`` (anything but ``\\n``; anything with ``s``);
* sets ``[abc] [a-z] [^...]`` with escapes and ``\\d \\w \\s`` (and negations) inside; a ``]`` first
  in the set, or a ``-`` first or last, is literal; ``\\b`` inside a set is rejected;
* anchors ``^ $ \\b \\B``: ``^`` is the start of the text, ``$`` the end or the position before a
  final newline; with flag ``m`` they also match after / before every ``\\n``.  ``\\B`` matches the
  empty text (as in Python >= 3.14).  A bare anchor cannot be quantified (as in re);
* groups ``(...)``, ``(?:...)``, ``(?P<name>...)``, all only grouping (``search`` answers yes/no);
  alternation ``|``; quantifiers ``* + ? {m} {m,} {,n} {m,n}`` (m, n <= 1000) and their lazy forms,
  which have the same truth value.

Flags: ``m`` multi-line anchors, ``s`` dot matches newline, ``i`` ignore case by simple case mapping
(a literal matches ``c`` when ``c.lower()`` equals its ``lower()``; a set, when it holds ``c``,
``c.lower()`` or ``c.upper()``; re's extra foldings such as long s ~ s are not applied).

Rejected with :class:`RegexSyntaxError` (``message``, 0-based ``offset``, ``hint``): backreferences,
lookaround, atomic groups, possessive quantifiers, inline flags, conditionals, comments, ``\\A \\Z``,
unknown or octal escapes, a ``{`` that is not a repeat, repeat counts over 1000, groups nested over
100 deep, NFAs over 2,000 states.  Offsets index ``pattern + "/" + flags`` (the literal after its
opening slash), so a flag error points at the flag letter.

Complexity.  The NFA has S <= 2,000 states: character tests, epsilon splits, and zero-width
assertions resolved in the epsilon-closure from the previous character's kind (start of text,
newline, word, other) and the next character.  Search keeps the set of live states, adds the start
state at every position and stops when a closure reaches the accepting state: O(S) per character,
O(len(text) * S) time in the worst case, whatever the pattern.  Steps are cached lazily as DFA
transitions ((live set, previous kind), next char) -> live set in a bounded cache (2,000 DFA
states, 100,000 transitions, 500,000 member ids, then it starts afresh), so common patterns cost
one dict lookup per character.  A Regex may be shared between threads (the cache fills under a lock).
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Optional, cast

from .prefilter import required_strings
from .syntax import (  # noqa: F401  (MAX_REPEAT, RegexSyntaxError are re-exported)
    _BOL,
    _BOL_M,
    _EOL,
    _EOL_M,
    _NWORDB,
    _WORDB,
    MAX_REPEAT,
    Node,
    RegexSyntaxError,
    Test,
    _is_word,
    parse_pattern,
)

__all__ = ["Regex", "RegexSyntaxError", "compile_regex", "MAX_REPEAT", "MAX_STATES"]

MAX_STATES = 2_000  # largest NFA
_CACHE_STATES = 2_000  # DFA states kept per cache generation
_CACHE_EDGES = 100_000  # DFA transitions kept per cache generation
_CACHE_MEMBERS = 500_000  # NFA state ids held by the DFA states of one generation

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)  # NFA state kinds
_START, _NL, _WORD, _OTHER = range(4)  # kinds of the previous character

# ---- NFA: AST -> states -------------------------------------------------------------------------


def _size(node: Node, offset: int = 0) -> int:
    """The exact number of states `_Builder.build` emits for ``node``, computed without building;
    raises RegexSyntaxError over MAX_STATES, at the quantifier (or sequence member) that crosses it."""
    if node[0] in ("empty", "char", "assert"):
        total = 0 if node[0] == "empty" else 1
    elif node[0] in ("cat", "alt"):
        alt = node[0] == "alt"
        total = -1 if alt else 0  # an alternation of k branches adds k - 1 splits
        for child in node[1]:
            total += _size(child, offset) + alt
            if total > MAX_STATES:
                offset = child[4] if child[0] == "rep" else offset
                break
    else:
        assert node[0] == "rep"
        body, m, n, offset = _size(node[1], offset), node[2], node[3], node[4]
        total = (m * body + 1 if m else body + 1) if n is None else m * body + (n - m) * (body + 1)
    if total > MAX_STATES:
        raise RegexSyntaxError(
            f"pattern is too large: its automaton would have over {MAX_STATES} states",
            offset,
            "use smaller repeat counts, or * / + instead of {m,n}",
        )
    return total


class _Builder:
    """Builds states backwards: ``build(node, nxt)`` returns the entry of ``node`` continuing to ``nxt``."""

    def __init__(self) -> None:
        # Columns indexed by state: kind; test (_CHAR) or assertion (_ASSERT); next; second next (_SPLIT).
        self.kind: list[int] = []
        self.arg: list[Test | int | None] = []
        self.out: list[int] = []
        self.out2: list[int] = []

    def new(self, kind: int, arg: Test | int | None = None, out: int = -1, out2: int = -1) -> int:
        self.kind.append(kind)
        self.arg.append(arg)
        self.out.append(out)
        self.out2.append(out2)
        return len(self.kind) - 1

    def build(self, node: Node, nxt: int) -> int:
        if node[0] == "empty":
            return nxt
        if node[0] in ("char", "assert"):
            return self.new(_CHAR if node[0] == "char" else _ASSERT, node[1], nxt)
        if node[0] == "cat":
            for child in reversed(node[1]):
                nxt = self.build(child, nxt)
            return nxt
        if node[0] == "alt":
            entry = self.build(node[1][-1], nxt)
            for child in reversed(node[1][:-1]):
                entry = self.new(_SPLIT, None, self.build(child, nxt), entry)
            return entry
        assert node[0] == "rep"
        body, m, n = node[1], node[2], node[3]
        if n is None:  # loop: split -> body -> split; with m >= 1 it is entered through the body
            loop = self.new(_SPLIT, None, -1, nxt)
            self.out[loop] = self.build(body, loop)
            entry, m = (loop, 0) if m == 0 else (self.out[loop], m - 1)
        else:  # (x(x(x)?)?)? for the n - m optional copies
            entry = nxt
            for _ in range(n - m):
                entry = self.new(_SPLIT, None, self.build(body, entry), nxt)
        for _ in range(m):
            entry = self.build(body, entry)
        return entry


# ---- matcher -------------------------------------------------------------------------------------

#: A lazy DFA state's key: the live NFA states (character tests passed) and the previous character's kind.
_Key = tuple[frozenset[int], int]


class _State(dict[object, "_State"]):
    """A lazy DFA state: its transitions so far, from the next character (or `_END`, `_LAST_NL`) to
    the next state; `key` says which live NFA states it stands for."""

    __slots__ = ("key",)

    def __init__(self, key: _Key | None = None) -> None:
        super().__init__()
        self.key = key


_END = object()  # transition key: the end of the text
_LAST_NL = object()  # transition key: a newline that is the last character
_HIT = _State()  # transition target meaning "the pattern has matched" (compared by identity)
_MISS_AT_END = _State()  # end-of-text target meaning "no match" (compared by identity)


class _Cache(dict[_Key, _State]):
    """One generation of lazy DFA states, by key; each is a dict char -> next state (its key at None)."""

    edges = members = 0  # counters, set on the instance as they grow


class Regex:
    """A compiled pattern; ``search(text)`` is True when it matches anywhere in ``text``."""

    def __init__(self, pattern: str, flags: str, builder: _Builder, start: int) -> None:
        self.pattern, self.flags, self.n_states = pattern, flags, len(builder.kind)
        self._kind, self._arg, self._out, self._out2 = builder.kind, builder.arg, builder.out, builder.out2
        asserts = {a for k, a in zip(builder.kind, builder.arg) if k == _ASSERT}
        word, newline = bool(asserts & {_WORDB, _NWORDB}), _BOL_M in asserts
        # Only the distinctions some assertion needs, so that the DFA stays small.
        self._kind_of: Callable[[str], int] = lambda c: (
            _NL if newline and c == "\n" else _WORD if word and _is_word(c) else _OTHER
        )
        self._start, self._plain_eol = start, _EOL in asserts
        self._cache = _Cache()
        self._lock = threading.Lock()
        self._factors: Optional[tuple[str, ...]] = None
        self._icase = "i" in flags

    def __repr__(self) -> str:
        return f"Regex(/{self.pattern}/{self.flags})"

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in ``text``; TypeError when it is not a str."""
        if not isinstance(text, str):
            raise TypeError(f"Regex.search expects str, got {type(text).__name__}")
        factors = self._factors
        if factors is not None:  # a match must contain one of these strings: skip texts without any
            if not self._icase:
                if not any(f in text for f in factors):
                    return False
            elif text.isascii():
                lowered = text.lower()
                if not any(f in lowered for f in factors):
                    return False
        last_nl = self._plain_eol and text.endswith("\n")
        d = self._intern(frozenset(), _START)
        for c in text[:-1] if last_nl else text:
            nd = d.get(c)
            if nd is None:
                nd = self._miss(d, c, c)
            if nd is _HIT:
                return True
            d = nd
        if last_nl:
            d = d[_LAST_NL] if _LAST_NL in d else self._miss(d, _LAST_NL, "\n")
            if d is _HIT:
                return True
        return (d[_END] if _END in d else self._miss(d, _END, None)) is _HIT

    def _intern(self, live: frozenset[int], prev: int) -> _State:
        key = (live, prev)
        d = self._cache.get(key)
        if d is None:
            with self._lock:
                cache = self._cache
                if max(len(cache) / _CACHE_STATES, cache.edges / _CACHE_EDGES, cache.members / _CACHE_MEMBERS) >= 1:
                    cache = self._cache = _Cache()
                d = cache.get(key)
                if d is None:
                    d = cache[key] = _State(key)
                    cache.members += len(live)
        return d

    def _miss(self, d: _State, key: object, c: Optional[str]) -> _State:
        """Compute, cache and return the transition of DFA state ``d`` on ``c`` (None: end of text)."""
        assert d.key is not None  # only the two sentinels have no key, and they have no transitions
        live, prev = d.key
        reached = self._closure(live, prev, c, key is _LAST_NL)
        if reached is None:
            result = _HIT
        elif c is None:
            result = _MISS_AT_END
        else:
            arg, out = cast("list[Test]", self._arg), self._out  # (tests: the arguments of the _CHAR states reached)
            result = self._intern(frozenset(out[s] for s in reached if arg[s](c)), self._kind_of(c))
        with self._lock:
            d[key] = result
            self._cache.edges += 1
        return result

    def _closure(self, live: frozenset[int], prev: int, c: Optional[str], last_nl: bool) -> Optional[list[int]]:
        """The character-test states reachable by epsilon moves here; None when the MATCH state is."""
        kind, out, out2 = self._kind, self._out, self._out2
        arg = cast("list[int]", self._arg)  # (read at _ASSERT states only: their assertion kinds)
        stack: list[int] = [*live, self._start]
        seen: set[int] = set()
        tests: list[int] = []
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            k = kind[s]
            if k == _CHAR:
                tests.append(s)
            elif k == _SPLIT:
                stack += (out2[s], out[s])
            elif k == _ASSERT:
                if _holds(arg[s], prev, c, last_nl):
                    stack.append(out[s])
            else:
                return None
        return tests


def _holds(assertion: int, prev: int, c: Optional[str], last_nl: bool) -> bool:
    """Whether an assertion holds between a previous character of kind ``prev`` and ``c`` (None: end)."""
    if assertion in (_BOL, _BOL_M):
        return prev == _START or (assertion == _BOL_M and prev == _NL)
    if assertion in (_EOL, _EOL_M):
        return c is None or (last_nl if assertion == _EOL else c == "\n")
    boundary = (prev == _WORD) != (c is not None and _is_word(c))
    return boundary if assertion == _WORDB else not boundary


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str, flags: str = "") -> Regex:
    """Compile ``pattern`` (the text between the slashes of a rule-file regex) with ``flags`` ("ims").

    Raises RegexSyntaxError outside the supported subset or on an unknown flag; TypeError on non-str.
    """
    if not isinstance(pattern, str) or not isinstance(flags, str):
        raise TypeError("compile_regex expects (pattern: str, flags: str)")
    for k, f in enumerate(flags):
        if f not in "ims":
            hint = "verbose mode (x) is not supported" if f == "x" else "the flags are i (ignore case), m, s"
            raise RegexSyntaxError(f"unknown regex flag '{f}'", len(pattern) + 1 + k, hint)
    canonical = "".join(f for f in "ims" if f in flags)
    tree = parse_pattern(pattern, canonical)
    _size(tree)
    builder = _Builder()
    start = builder.build(tree, builder.new(_MATCH))
    regex = Regex(pattern, canonical, builder, start)
    regex._factors = required_strings(tree, "i" in canonical)
    return regex
