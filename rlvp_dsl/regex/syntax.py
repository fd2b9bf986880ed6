"""The syntax of rule-file regexes: pattern text -> a tree of tuples (see `rlvp_dsl.regex`).

Nodes: ``("empty",)``, ``("char", test[, literal])``, ``("assert", kind)``, ``("cat", items)``,
``("alt", branches)``, ``("rep", node, m, n_or_None, offset_of_quantifier)``.  Everything outside
the supported subset raises `RegexSyntaxError` with a 0-based offset and a hint.
"""

from __future__ import annotations

from typing import Callable, Literal, NoReturn, Optional, Union, overload

MAX_REPEAT = 1000  # largest m or n in {m,n}
MAX_DEPTH = 100  # deepest group nesting
_BOL, _BOL_M, _EOL, _EOL_M, _WORDB, _NWORDB = range(6)  # assertions

_BACKREF_HINT = "backreferences are not supported: rule files must run in bounded time"
_REJECTED_GROUPS: list[tuple[str | tuple[str, ...], str, str]] = [  # (?<prefix> ... : message, hint; checked in order
    ("P=", "backreferences (?P=name) are not supported", _BACKREF_HINT),
    (("=", "!"), "lookahead (?=...) (?!...) is not supported", "use (?:...) instead of lookahead, or 'unless'"),
    (("<=", "<!"), "lookbehind (?<=...) (?<!...) is not supported", "use (?:...) instead of lookbehind"),
    ("<", "named groups are written (?P<name>...)", "or use a plain group (...)"),
    ("(", "conditional groups (?(...)...) are not supported", _BACKREF_HINT),
    (">", "atomic groups (?>...) are not supported", "use (?:...): matching is already linear-time"),
    ("#", "comments (?#...) are not supported", "put comments on their own line starting with #"),
]

Test = Callable[[str], bool]

#: A node of the tree, tagged by its first item (see the module docstring); ``m``, ``n`` and the
#: offset of a ``rep`` are ints, ``n`` None for no upper bound; an ``assert``'s kind one of `_BOL` ...
Node = Union[
    tuple[Literal["empty"]],
    tuple[Literal["char"], Test],
    tuple[Literal["char"], Test, str],
    tuple[Literal["assert"], int],
    tuple[Literal["cat"], list["Node"]],
    tuple[Literal["alt"], list["Node"]],
    tuple[Literal["rep"], "Node", int, Optional[int], int],
]


class RegexSyntaxError(ValueError):
    """A pattern outside the supported subset; ``offset`` is 0-based in ``pattern + '/' + flags``."""

    def __init__(self, message: str, offset: int, hint: Optional[str] = None) -> None:
        self.message, self.offset, self.hint = message, offset, hint
        super().__init__(f"{message} (at offset {offset})" + (f"; hint: {hint}" if hint else ""))


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


_CLASS_TESTS: dict[str, Test] = {
    "d": str.isdecimal,
    "D": lambda c: not c.isdecimal(),
    "w": _is_word,
    "W": lambda c: not _is_word(c),
    "s": str.isspace,
    "S": lambda c: not c.isspace(),
}
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


def _literal_test(ch: str, icase: bool) -> Test:
    low = ch.lower()
    return (lambda c: c.lower() == low) if icase and (low != ch or ch.upper() != ch) else ch.__eq__


def _set_test(
    chars: frozenset[str], ranges: tuple[tuple[str, str], ...], preds: tuple[Test, ...], negate: bool, icase: bool
) -> Test:
    def raw(c: str) -> bool:
        return c in chars or any(lo <= c <= hi for lo, hi in ranges) or any(p(c) for p in preds)

    def inner(c: str) -> bool:
        return raw(c) or (icase and any(len(v) == 1 and raw(v) for v in (c.lower(), c.upper())))

    return (lambda c: not inner(c)) if negate else inner


# ---- parser: pattern -> AST; nodes are tuples ("empty",) ("char", test) ("assert", kind) -------------
# ("cat", [nodes]) ("alt", [nodes]) ("rep", node, m, n_or_None, offset_of_quantifier).


class _Parser:
    def __init__(self, pattern: str, flags: str) -> None:
        self.p, self.i = pattern, 0
        self.icase, self.multi, self.dotall = "i" in flags, "m" in flags, "s" in flags
        self.names: set[str] = set()

    def fail(self, message: str, offset: int, hint: Optional[str] = None) -> NoReturn:
        raise RegexSyntaxError(message, offset, hint)

    def peek(self, k: int = 0) -> str:
        return self.p[self.i + k : self.i + k + 1]

    def parse(self) -> Node:
        node = self.alternation(0)
        if self.i < len(self.p):
            self.fail("unbalanced parenthesis: ')' has no matching '('", self.i, r"escape a literal ')' as \)")
        return node

    def alternation(self, depth: int) -> Node:
        branches = [self.concat(depth)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.concat(depth))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concat(self, depth: int) -> Node:
        items: list[Node] = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            items.append(self.quantified(self.atom(depth)))
        return ("empty",) if not items else items[0] if len(items) == 1 else ("cat", items)

    def brace(self) -> Optional[tuple[int, Optional[int], int]]:
        """Parse ``{m}``, ``{m,}``, ``{,n}`` or ``{m,n}`` at self.i; None if there is none."""
        start, end = self.i, self.p.find("}", self.i)
        if self.peek() != "{" or end < 0:
            return None
        lo, comma, hi = self.p[start + 1 : end].partition(",")
        if not all(x == "" or (x.isascii() and x.isdigit()) for x in (lo, hi)) or not (lo or hi):
            return None
        m, text = int(lo or 0), self.p[start : end + 1]
        n = (int(hi) if hi else None) if comma else m
        if max(m, n or 0) > MAX_REPEAT:
            self.fail(
                f"repeat count in {text} exceeds the maximum {MAX_REPEAT}",
                start,
                "rule files must run in bounded time; use * or + for 'any number'",
            )
        if n is not None and m > n:
            self.fail(f"repeat {text} has min {m} greater than max {n}", start)
        self.i = end + 1
        return m, n, start

    def quantifier(self) -> Optional[tuple[int, Optional[int], int]]:
        c, start = self.peek(), self.i
        if c in ("*", "+", "?"):
            self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c] + (start,)
        return self.brace() if c == "{" else None

    def quantified(self, atom: Node) -> Node:
        q = self.quantifier()
        if q is None:
            return atom
        if atom[0] == "assert":
            self.fail("nothing to repeat", q[2], "an anchor (^ $ \\b \\B) matches a position, not a character")
        if self.peek() == "?":
            self.i += 1
        elif self.peek() == "+":
            self.fail("possessive quantifiers are not supported", self.i, "drop the '+': matching is linear-time")
        again = self.i
        if self.quantifier() is not None:
            self.fail("multiple repeat", again, "wrap the repeated item in (?:...) to repeat it again")
        return ("rep", atom, q[0], q[1], q[2])

    def atom(self, depth: int) -> Node:
        c, start = self.p[self.i], self.i
        if c == "(":
            return self.group(depth)
        if c == "[":
            return ("char", self.char_set())
        if c == "\\":
            return self.escape(in_set=False)
        if c in "*+?" or (c == "{" and self.brace() is not None):
            self.fail("nothing to repeat", start, r"escape a literal quantifier character, e.g. \* or \{")
        if c == "{":
            self.fail("'{' does not start a repeat {m}, {m,}, {,n} or {m,n}", start, r"escape a literal brace as \{")
        self.i += 1
        if c == ".":
            return ("char", (lambda ch: True) if self.dotall else (lambda ch: ch != "\n"))
        if c in "^$":
            return ("assert", (_BOL_M if self.multi else _BOL) if c == "^" else (_EOL_M if self.multi else _EOL))
        return ("char", _literal_test(c, self.icase), c)

    def group(self, depth: int) -> Node:
        start = self.i
        if depth >= MAX_DEPTH:
            self.fail(f"groups are nested more than {MAX_DEPTH} deep", start)
        self.i += 1
        if self.peek() == "?":
            self.group_extension(start)
        body = self.alternation(depth + 1)
        if self.peek() != ")":
            self.fail("missing ')': unterminated group", start, r"close the group, or escape a literal '(' as \(")
        self.i += 1
        if body[0] == "assert":  # (^)* is allowed, as in re
            wrapped: list[Node] = [body]
            return ("cat", wrapped)
        return body

    def group_extension(self, start: int) -> None:
        rest = self.p[self.i + 1 :]
        if rest.startswith(":"):
            self.i += 2
            return
        if rest.startswith("P<"):
            end = self.p.find(">", self.i)
            name = self.p[self.i + 3 : end] if end >= 0 else ""
            if not name.isidentifier():
                self.fail("bad group name in (?P<name>...)", self.i + 3, "a group name is an identifier")
            if name in self.names:
                self.fail(f"group name '{name}' is defined twice", self.i + 3)
            self.names.add(name)
            self.i = end + 1
            return
        for prefix, message, hint in _REJECTED_GROUPS:
            if rest.startswith(prefix):
                self.fail(message, start, hint)
        if rest[:1] and rest[0] in "aiLmsux-":
            self.fail("inline flags (?...) are not supported", start, "write flags after the closing slash: /yes/i")
        self.fail(f"unknown group extension '(?{rest[:1]}'", start)

    @overload
    def escape(self, in_set: Literal[True]) -> str | Test: ...

    @overload
    def escape(self, in_set: Literal[False]) -> Node: ...

    def escape(self, in_set: bool) -> str | Test | Node:
        """Parse ``\\x`` at self.i: a ("char", test) or ("assert", kind) node; in a set a char or a test."""
        start, e = self.i, self.peek(1)
        self.i += 2
        if e == "":
            self.fail("pattern ends with a lone backslash", start, r"write a literal backslash as \\")
        if e in _CLASS_TESTS:
            return _CLASS_TESTS[e] if in_set else ("char", _CLASS_TESTS[e])
        if e in "bB":
            if in_set:
                self.fail(f"\\{e} is not allowed inside [...]", start, "use \\b as a word boundary outside the set")
            return ("assert", _WORDB if e == "b" else _NWORDB)
        if e in _SIMPLE_ESCAPES:
            ch = _SIMPLE_ESCAPES[e]
        elif e in "xu":
            width = 2 if e == "x" else 4
            digits = self.p[self.i : self.i + width]
            if len(digits) < width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                self.fail(f"\\{e} needs exactly {width} hex digits", start)
            self.i += width
            ch = chr(int(digits, 16))
        elif e.isascii() and e.isdigit():
            if e == "0":
                self.fail("octal escapes are not supported", start, "write the character as \\xhh")
            self.fail(f"backreference \\{e} is not supported", start, _BACKREF_HINT)
        elif e.isascii() and e.isalpha():
            hint = "use ^ or $ without the m flag" if e in "AZz" else r"escape only punctuation, e.g. \. or \/"
            self.fail(f"unknown escape \\{e}", start, hint)
        else:
            ch = e
        return ch if in_set else ("char", _literal_test(ch, self.icase), ch)

    def char_set(self) -> Test:
        start, self.i = self.i, self.i + 1
        negate = self.peek() == "^"
        self.i += negate
        chars: set[str] = set()
        ranges: list[tuple[str, str]] = []
        preds: list[Test] = []
        first = True
        while first or self.peek() != "]":
            if self.i >= len(self.p):
                self.fail("unterminated character set '['", start, r"close it with ], or escape a literal '[' as \[")
            first, item_start = False, self.i
            lo = self.set_item()  # a character, or the test of \d \w \s ...
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.set_item()
                if not isinstance(lo, str) or not isinstance(hi, str) or lo > hi:
                    self.fail(
                        f"bad character range {self.p[item_start : self.i]}", item_start, r"write a literal '-' as \-"
                    )
                ranges.append((lo, hi))
            elif isinstance(lo, str):
                chars.add(lo)
            else:
                preds.append(lo)
        self.i += 1
        return _set_test(frozenset(chars), tuple(ranges), tuple(preds), negate, self.icase)

    def set_item(self) -> str | Test:
        if self.p[self.i] == "\\":
            return self.escape(in_set=True)
        self.i += 1
        return self.p[self.i - 1]


def parse_pattern(pattern: str, flags: str = "") -> Node:
    """Parse a rule-file regex into its tree (the node tuples of this module's docstring).

    Raises:
        RegexSyntaxError: outside the supported subset, with a 0-based offset and a hint.
    """
    return _Parser(pattern, flags).parse()
