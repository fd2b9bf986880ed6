"""Tests for rlvp_dsl.syntax.printer: parse(print(tree)) == tree, on written texts and generated trees."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvp_dsl import ast
from rlvp_dsl.parser import parse
from rlvp_dsl.syntax import keywords
from rlvp_dsl.syntax.printer import print_expr, print_number, print_regex, print_rule_file, print_string
from rlvp_dsl.source import SourceFile

PATH = "t.rlvp"


def reparse(text: str) -> ast.RuleFile:
    tree, diagnostics = parse(SourceFile(PATH, text))
    assert tree is not None and diagnostics == [], (text, diagnostics)
    return tree


def roundtrip(text: str) -> tuple[ast.RuleFile, str]:
    tree = reparse(text)
    printed = print_rule_file(tree)
    assert reparse(printed) == tree, printed
    assert print_rule_file(reparse(printed)) == printed  # printing is canonical: a fixed point
    return tree, printed


# ---- written rule texts ---------------------------------------------------------------

TEXTS = [
    # the brief's example file
    r"""
tool cancel_reservation : write, destructive target reservation_id
tool get_reservation_details : read target reservation_id
const BLIND = -1.0
violation write_unconfirmed (-0.5) {
  on call tag write
  unless seen (user says /\b(yes|confirm)\b/ since assistant)
}
obligation verify_after_write (+0.5, expire -0.5) {
  open on call tag write
  discharge on call tag read ok same reservation_id
  deadline before call submit          # or: within 3 calls | at end
}
repeat_error (-0.3)
blind_destructive (BLIND) { inspected_by call tag read ok }
progress proof (+0.2 per unit, max 1.0) { signal goals_remaining decreasing }
""",
    'include "base.rlvp"\ntools from "manifests/fs.json"\ntool `open` : `tag`, read target `target`\n',
    "violation v (-1) { on (call a or call b) tag c and not (tag d or error) unless not not ok }",
    'violation v (-1) { on call {a, b, `call`} arg x in ["a\\"b\\\\", 1.5, true, false, null] }',
    r'violation v (-1) { on arg p matches /a\/b\d+/is and error_text startswith "E:" and result == "x\n\t" }',
    'violation v (-1) { on text != "" or text contains "\\u00e9" or signal s >= -2.5e-3 or arg n < 3 }',
    'violation v (-1) { on seen (call tag read ok same target since user says "go") and seen (error same call) }',
    "violation v (-1) { on (tag a and tag b) and tag c }",
    'violation v (-1) { on ((tag a or tag b) or tag c) and (user says "x" and assistant says /y/m) }',
    "obligation o (1, expire -1) { open on call discharge on call x ok same `arg` deadline within 3 calls }",
    "obligation o (W, expire X) { open on malformed or no_result discharge on arg f exists }",
    "repeat_error r (-0.3) { reset on call tag write }\nblind_destructive b (-1) { on tag destructive inspected_by tag read }",
    "progress p (+0.1) { signal goals increasing from 10 }\nprogress q (1 per unit) { signal g decreasing }",
    "tool δοκιμή : ανάγνωση\ntool 读取文件 : 读\nviolation 违规 (-1) { on call 读取文件 }",
    "tool discharge_check : whenever_x target open_file",
]


@pytest.mark.parametrize("text", TEXTS)
def test_written_texts_roundtrip(text):
    """Every written rule text prints to text that parses back to the same tree."""
    roundtrip(text)


def test_canonical_form():
    """The printed text is readable: juxtaposed phrases, signs on weights, backticked keywords."""
    _, printed = roundtrip(
        "tool `open` : read\nobligation o (1, expire -1) { open on call tag write discharge on call `open` ok }"
    )
    assert printed == (
        "tool `open` : read\n\n"
        "obligation o (+1, expire -1) {\n"
        "  open on call tag write\n"
        "  discharge on call `open` ok\n"
        "  deadline at end\n"
        "}\n"
    )


def test_or_inside_and_is_parenthesised():
    """An or inside an and, and an and inside a not, keep their parentheses."""
    a, b, c = (ast.TagAtom(ast.Name(n)) for n in "abc")
    assert print_expr(ast.And((ast.Or((a, b)), c))) == "(tag a or tag b) and tag c"
    assert print_expr(ast.Or((ast.And((a, b)), c))) == "tag a tag b or tag c"
    assert print_expr(ast.Not(ast.And((a, ast.Not(b))))) == "not (tag a and not tag b)"
    assert print_expr(ast.And((ast.And((a, b)), c))) == "(tag a tag b) and tag c"


def test_scalars():
    """Strings, regexes and numbers print so that they read back the same."""
    assert print_string('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\u0001"'
    assert print_regex("a/b\\d", "i") == "/a\\/b\\d/i"
    assert print_number(3.0) == "3" and print_number(0.1) == "0.1" and print_number(1e-5) == "1e-05"
    assert float(print_number(1e300)) == 1e300


@pytest.mark.parametrize(
    "expr",
    [
        ast.HasBinding(ast.Binding("target")),
        ast.Const(True),
        ast.And((ast.StatusAtom("ok"),)),
        ast.TagAtom(ast.Name("a`b")),
        ast.TextTest("text", "matches", ""),
        ast.TextTest("text", "matches", "ab\\"),
        ast.SignalTest(ast.Name("s"), "<", float("inf")),
    ],
)
def test_unprintable_trees_raise_value_error(expr):
    """A tree no text can produce raises ValueError instead of printing wrong text."""
    with pytest.raises(ValueError):
        print_expr(expr)


# ---- generated trees ---------------------------------------------------------------------

_KEYWORDS = sorted(keywords())
_SAFE_TEXT = st.characters(blacklist_categories=("Cs",))


def names() -> st.SearchStrategy[ast.Name]:
    plain = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
    other = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="`"), min_size=1, max_size=6)
    text = st.one_of(plain, plain, st.sampled_from(_KEYWORDS), st.sampled_from(["δοκιμή", "读取", "e\u0301"]), other)
    return text.map(lambda t: ast.Name(unicodedata.normalize("NFC", t)))


def strings() -> st.SearchStrategy[str]:
    return st.text(_SAFE_TEXT, max_size=8)


def regexes() -> st.SearchStrategy[str]:
    """Regex bodies as the parser produces them: plain characters (a `/` included) or escape pairs."""
    plain = st.characters(blacklist_categories=("Cs",), blacklist_characters="\\\n")
    pair = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n/").map(lambda c: "\\" + c)
    return st.lists(st.one_of(plain, pair), min_size=1, max_size=6).map("".join)


numbers = st.floats(allow_nan=False, allow_infinity=False)
flags = st.text(st.sampled_from("imsx"), max_size=3)
literals = st.one_of(strings(), numbers, st.booleans(), st.none())


def text_tests(field: str) -> st.SearchStrategy[ast.TextTest]:
    return st.one_of(
        st.builds(ast.TextTest, st.just(field), st.sampled_from(["contains", "startswith", "==", "!="]), strings()),
        st.builds(ast.TextTest, st.just(field), st.just("matches"), regexes(), flags),
    )


def arg_tests() -> st.SearchStrategy[ast.ArgTest]:
    n = names()
    return st.one_of(
        st.builds(ast.ArgTest, n, st.just("exists")),
        st.builds(ast.ArgTest, n, st.sampled_from(["contains", "startswith"]), strings()),
        st.builds(ast.ArgTest, n, st.just("matches"), regexes(), flags),
        st.builds(ast.ArgTest, n, st.sampled_from(["==", "!="]), literals),
        st.builds(ast.ArgTest, n, st.sampled_from(["<", "<=", ">", ">="]), numbers),
        st.builds(ast.ArgTest, n, st.just("in"), st.lists(literals, min_size=1, max_size=3).map(tuple)),
    )


def bindings() -> st.SearchStrategy[ast.Binding]:
    return st.one_of(
        st.builds(ast.Binding, st.just("arg"), names()), st.builds(ast.Binding, st.sampled_from(["target", "call"]))
    )


def says() -> st.SearchStrategy[ast.And]:
    test = st.one_of(
        st.builds(ast.TextTest, st.just("text"), st.just("contains"), strings()),
        st.builds(ast.TextTest, st.just("text"), st.just("matches"), regexes(), flags),
    )
    return st.builds(lambda kind, t: ast.And((ast.KindAtom(kind), t)), st.sampled_from(["user", "assistant"]), test)


def atoms() -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.CallAtom, st.lists(names(), max_size=3).map(tuple)),
        st.builds(ast.KindAtom, st.sampled_from(["user", "assistant"])),
        st.builds(ast.TagAtom, names()),
        st.builds(ast.StatusAtom, st.sampled_from(["ok", "error", "malformed", "no_result"])),
        text_tests("error_text"),
        text_tests("result"),
        text_tests("text"),
        arg_tests(),
        st.builds(ast.SignalTest, names(), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), numbers),
        says(),
    )


def exprs() -> st.SearchStrategy[ast.Expr]:
    def extend(inner):
        items = st.lists(inner, min_size=2, max_size=4).map(tuple)
        return st.one_of(
            st.builds(ast.And, items),
            st.builds(ast.Or, items),
            st.builds(ast.Not, inner),
            st.builds(ast.Seen, inner, st.none() | bindings(), st.none() | inner),
        )

    return st.recursive(atoms(), extend, max_leaves=10)


def weights() -> st.SearchStrategy[ast.Weight]:
    return st.one_of(st.builds(ast.Weight, numbers), st.builds(ast.Weight, st.none(), names()))


def deadlines() -> st.SearchStrategy[ast.Deadline]:
    return st.one_of(
        st.builds(ast.Deadline, st.just("before"), exprs()),
        st.builds(ast.Deadline, st.just("within"), st.none(), st.integers(1, 10**6)),
        st.just(ast.Deadline("end")),
    )


def items() -> st.SearchStrategy[ast.Item]:
    maybe = st.none() | exprs()
    blind_body = st.one_of(st.just((None, None)), st.tuples(st.none(), exprs()), st.tuples(exprs(), exprs()))
    return st.one_of(
        st.builds(ast.Include, strings()),
        st.builds(ast.ToolsFrom, strings()),
        st.builds(ast.ToolDecl, names(), st.lists(names(), max_size=3).map(tuple), st.none() | names()),
        st.builds(ast.ConstDecl, names(), numbers),
        st.builds(ast.Violation, names(), weights(), exprs(), maybe),
        st.builds(ast.Obligation, names(), weights(), weights(), exprs(), exprs(), st.none() | bindings(), deadlines()),
        st.builds(ast.RepeatError, names() | st.just(ast.Name("repeat_error")), weights(), maybe),
        st.builds(
            lambda n, w, body: ast.BlindDestructive(n, w, *body),
            names() | st.just(ast.Name("blind_destructive")),
            weights(),
            blind_body,
        ),
        st.builds(
            ast.Progress,
            names(),
            weights(),
            names(),
            st.sampled_from(["decreasing", "increasing"]),
            st.booleans(),
            st.none() | numbers,
            st.none() | numbers,
        ),
    )


rule_files = st.builds(ast.RuleFile, st.just(PATH), st.lists(items(), max_size=5).map(tuple))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_files)
def test_generated_trees_roundtrip(tree):
    """parse(print(tree)) == tree, with no diagnostics, for trees built constructively."""
    assert reparse(print_rule_file(tree)) == tree


@settings(max_examples=200, deadline=None)
@given(exprs())
def test_generated_conditions_roundtrip(expr):
    """A condition printed inside a violation parses back to the same condition."""
    tree = reparse(f"violation v (-1) {{ on {print_expr(expr)} }}")
    assert tree.items[0].on == expr
