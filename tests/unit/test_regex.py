"""Tests for rlvp_dsl.regex: agreement with Python re, linear time, and rejections with offsets."""

from __future__ import annotations

import random
import re
import sys
import threading

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlvp_dsl.regex import matcher as rx_mod, syntax as rx_syntax
from rlvp_dsl.regex import MAX_STATES, RegexSyntaxError, compile_regex

from op_count import assert_linear

# Before Python 3.14 (gh-124130) re's \B never matched the empty text; we follow 3.14.
OLD_EMPTY_NON_BOUNDARY = sys.version_info < (3, 14)
RE_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def re_flags(flags: str) -> int:
    value = 0
    for f in flags:
        value |= RE_FLAGS[f]
    return value


# ---- strategies: patterns built constructively from the supported subset -----------

ALPHABET = "abA \n_1"  # small, so that generated patterns often hit or barely miss
UNICODE_ALPHABET = "abAB1 _\n.Ωω中٣\u2003"
LITERALS = ["a", "b", "A", "B", "1", " ", "_", "ω", "Ω", r"\.", r"\n", r"\ ", r"\x61", "."]
SETS = [
    r"\d",
    r"\D",
    r"\w",
    r"\W",
    r"\s",
    r"\S",
    "[ab]",
    "[^a]",
    "[a-c]",
    "[A-Z_]",
    r"[\d\s]",
    r"[^\w]",
    "[.]",
    "[]a]",
    "[a-]",
    "[-b]",
    r"[^\n]",
    "[α-ω]",
    r"[\W1]",
    "[^A-Za-z]",
]
ANCHORS = ["^", "$", r"\b", r"\B"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{1,3}", "{0,}", "{,2}", "{0}", "{2,}"]

quantifier = st.builds(lambda q, lazy: q + lazy, st.sampled_from(QUANTIFIERS), st.sampled_from(["", "?"]))
char_atom = st.sampled_from(LITERALS + SETS)
atom = st.one_of(
    char_atom,
    st.builds(lambda a, q: a + q, char_atom, quantifier),
    st.sampled_from(ANCHORS),
    st.just(""),
)


def _extend(inner):
    return st.one_of(
        st.builds(lambda x, g: g.format(x), inner, st.sampled_from(["({})", "(?:{})"])),
        st.lists(inner, min_size=2, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
        st.builds(lambda x, q: f"(?:{x}){q}", inner, quantifier),
    )


patterns = st.recursive(atom, _extend, max_leaves=8)
texts = st.text(alphabet=ALPHABET, max_size=12)
unicode_texts = st.text(alphabet=UNICODE_ALPHABET, max_size=24)
flag_sets = st.sampled_from(["", "i", "m", "s", "im", "ms", "is", "ims"])


def check_against_re(pattern: str, text: str, flags: str) -> None:
    assume(not (text == "" and r"\B" in pattern and OLD_EMPTY_NON_BOUNDARY))
    expected = re.search(pattern, text, re_flags(flags)) is not None
    assert compile_regex(pattern, flags).search(text) == expected, (pattern, text, flags)


@settings(max_examples=2500, deadline=None)
@given(patterns, texts, flag_sets)
def test_search_agrees_with_python_re(pattern, text, flags):
    """On generated patterns and short texts over a small alphabet, search() has re.search()'s truth value."""
    check_against_re(pattern, text, flags)


@settings(max_examples=500, deadline=None)
@given(patterns, unicode_texts, flag_sets)
def test_search_agrees_with_python_re_on_unicode(pattern, text, flags):
    """The same holds on texts with Greek, Chinese, Arabic-Indic digits and Unicode spaces."""
    check_against_re(pattern, text, flags)


@settings(max_examples=150, deadline=None)
@given(patterns)
def test_state_count_matches_size_estimate(pattern):
    """The size check predicts exactly the number of NFA states the builder emits."""
    tree = rx_syntax.parse_pattern(pattern)
    assert compile_regex(pattern).n_states == rx_mod._size(tree) + 1


# ---- concrete cases --------------------------------------------------------------------

CASES = [
    # pattern, flags, text, expected
    (r"\b(yes|confirm)\b", "", "yes, do it", True),
    (r"\b(yes|confirm)\b", "", "yesterday", False),
    (r"\b(yes|confirm)\b", "", "I confirm.", True),
    (r"\b(yes|confirm)\b", "i", "YES!", True),
    (r"\b(yes|confirm)\b", "", "YES!", False),
    (r"\bcat\b", "", "concatenate", False),
    (r"\Bcat\B", "", "concatenate", True),
    (r"\b", "", "", False),
    (r"\bλόγος\b", "", "ο λόγος είναι", True),
    (r"\bλόγ\b", "", "ο λόγος", False),
    (r"^\w+$", "", "中文字符", True),
    (r"^\w+$", "", "中文 字符", False),
    (r"\d", "", "٣", True),
    (r"\s", "", "\u2003", True),
    ("not found", "", "Error: reservation not found", True),
    ("NOT FOUND", "i", "Error: reservation not found", True),
    ("ΣΟΦΊΑ", "i", "σοφία", True),
    ("[Α-Ω]+", "i", "αβγ", True),
    ("[^a-z]", "i", "ABC", False),
    ("^b", "", "a\nb", False),
    ("^b", "m", "a\nb", True),
    ("a$", "", "a\nb", False),
    ("a$", "", "a\n", True),
    ("a$", "", "a\n\n", False),
    ("a$", "m", "a\nb", True),
    ("a.b", "", "a\nb", False),
    ("a.b", "s", "a\nb", True),
    (r"a\/b", "", "a/b", True),
    (r"\$\d+\.\d{2}", "", "total $12.50", True),
    (r"x{2,3}", "", "axxb", True),
    (r"^x{2,3}$", "", "xxxx", False),
    ("(?P<name>ab)+c", "", "ababc", True),
    ("a|", "", "zzz", True),
    ("", "", "", True),
]


@pytest.mark.parametrize("pattern,flags,text,expected", CASES)
def test_concrete_cases(pattern, flags, text, expected):
    """Each table row gives the expected answer, which Python re also gives."""
    assert compile_regex(pattern, flags).search(text) is expected
    assert (re.search(pattern, text, re_flags(flags)) is not None) is expected


def test_non_boundary_on_empty_text_follows_python_3_14():
    """\\B matches the empty text (no word boundary there), as re does from Python 3.14."""
    assert compile_regex(r"\B").search("")
    assert not compile_regex(r"\b").search("")


# ---- linear time ---------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["(a|a)*b", "(a*)*b", "(a+)+$", "(a|aa)+$", "(?:a?){30}a{30}$", r"(\w+\s?)+$"])
def test_pathological_patterns_run_in_linear_steps(pattern):
    """Patterns that make backtracking matchers exponential take linear work: doubling the text at most
    ~doubles the steps (counted, `op_count`; not timed -- timings are in benchmarks/)."""
    regex = compile_regex(pattern)
    assert regex.search("a" * 5000 + "!") is False
    assert_linear(lambda n: regex.search("a" * n + "!"), 1000)


def test_dfa_cache_restarts_and_stays_correct(monkeypatch):
    """A pattern with an exponential DFA overflows the cache, which starts afresh without changing answers."""
    monkeypatch.setattr(rx_mod, "_CACHE_STATES", 50)
    pattern = "(a|b)*a(a|b){8}c"
    rng = random.Random(7)
    regex = compile_regex.__wrapped__(pattern)  # a fresh instance, not the shared cached one
    for _ in range(40):
        text = "".join(rng.choice("ab") for _ in range(300)) + rng.choice(["c", ""])
        assert regex.search(text) == (re.search(pattern, text) is not None)
    assert len(regex._cache) <= 50


def test_shared_between_threads():
    """Concurrent searches on one Regex, with cache restarts, give re's answers."""
    pattern = "(a|b)*a(a|b){10}$"
    regex = compile_regex.__wrapped__(pattern)
    rng = random.Random(3)
    inputs = ["".join(rng.choice("ab") for _ in range(400)) for _ in range(24)]
    expected = [re.search(pattern, t) is not None for t in inputs]
    failures = []

    def work(offset):
        for k in range(len(inputs)):
            j = (k + offset) % len(inputs)
            if regex.search(inputs[j]) != expected[j]:
                failures.append(j)

    threads = [threading.Thread(target=work, args=(n * 5,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_compile_is_cached():
    """Compiling the same pattern twice returns the same object."""
    assert compile_regex(r"\bok\b", "i") is compile_regex(r"\bok\b", "i")


# ---- rejections ------------------------------------------------------------------------------

REJECTIONS = [
    # pattern, flags, offset, words expected in message or hint
    (r"(a)\1", "", 3, "backreference"),
    (r"(?P<x>a)(?P=x)", "", 8, "backreference"),
    ("a(?=b)", "", 1, "lookahead"),
    ("a(?!b)", "", 1, "lookahead"),
    ("(?<=a)b", "", 0, "lookbehind"),
    ("(?<!a)b", "", 0, "lookbehind"),
    ("a*+", "", 2, "possessive"),
    ("a{2}+", "", 4, "possessive"),
    ("x(?i)a", "", 1, "inline flags"),
    ("(?i:a)", "", 0, "inline flags"),
    ("(?(1)a|b)", "", 0, "conditional"),
    ("(?>a)", "", 0, "atomic"),
    ("(?#note)", "", 0, "comments"),
    ("ab{1,1001}", "", 2, "1001"),
    ("a{5,2}", "", 1, "greater"),
    ("(?:a{1000}){30}", "", 11, "too large"),
    ("a{1000}|b{1000}", "", 9, "too large"),
    ("*a", "", 0, "nothing to repeat"),
    ("a|?", "", 2, "nothing to repeat"),
    ("^*", "", 1, "nothing to repeat"),
    ("a**", "", 2, "multiple repeat"),
    ("a{2}{3}", "", 4, "multiple repeat"),
    ("a{x}", "", 1, "repeat"),
    ("[z-a]", "", 1, "bad character range"),
    (r"[\d-z]", "", 1, "bad character range"),
    ("[abc", "", 0, "unterminated"),
    ("ab(c", "", 2, "unterminated group"),
    ("ab)", "", 2, "unbalanced"),
    ("ab\\", "", 2, "lone backslash"),
    (r"a\e", "", 1, "unknown escape"),
    (r"\Z", "", 0, "\\Z"),
    (r"a\0", "", 1, "octal"),
    (r"\xZZ", "", 0, "hex"),
    (r"[\b]", "", 1, "inside"),
    ("(?<n>a)", "", 0, "(?P<name>"),
    ("(?P<1>a)", "", 4, "group name"),
    ("(?P<n>a)(?P<n>b)", "", 12, "twice"),
    ("(" * 101 + ")" * 101, "", 100, "nested"),
    ("abc", "x", 4, "verbose"),
    ("abc", "iq", 5, "unknown regex flag 'q'"),
]


@pytest.mark.parametrize("pattern,flags,offset,words", REJECTIONS)
def test_rejections_have_offset_and_explanation(pattern, flags, offset, words):
    """Each unsupported construct raises RegexSyntaxError at the right offset with an explanation."""
    with pytest.raises(RegexSyntaxError) as info:
        compile_regex(pattern, flags)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.offset == offset, (err.offset, str(err))
    assert words in err.message + " " + (err.hint or "")


def test_rejection_hints_explain_why():
    """Backreferences and lookarounds come with a hint on what to write instead."""
    with pytest.raises(RegexSyntaxError) as info:
        compile_regex(r"(a)\1")
    assert info.value.hint == "backreferences are not supported: rule files must run in bounded time"
    with pytest.raises(RegexSyntaxError) as info:
        compile_regex("(?=a)")
    assert "(?:...)" in info.value.hint


def test_largest_allowed_pattern_compiles():
    """A pattern just under the state limit compiles and matches."""
    regex = compile_regex("(?:ab){500}" + "c{900}")
    assert regex.n_states <= MAX_STATES
    assert regex.search("ab" * 500 + "c" * 900)
    assert not regex.search("ab" * 499 + "c" * 900)


def test_search_rejects_non_str():
    """search() raises TypeError on bytes instead of silently misbehaving."""
    with pytest.raises(TypeError):
        compile_regex("a").search(b"a")
