"""Parser: syntax tree shapes, literals, and syntax errors in the language's own words."""

from __future__ import annotations

import pytest

from rlvp_dsl import ast
from rlvp_dsl.parser import parse
from rlvp_dsl.syntax import get_parser
from rlvp_dsl.syntax.errors import describe_terminal
from rlvp_dsl.source import SourceFile

INTERNAL = ("__ANON", "$END", "LPAR", "RPAR", "LBRACE", "RBRACE", "LSQB", "SIGNED_NUMBER", "QUOTED_NAME")


def tree(text):
    result, diagnostics = parse(SourceFile("t.rlvp", text))
    assert result is not None and not diagnostics, diagnostics
    return result.items


def diags(text):
    _, diagnostics = parse(SourceFile("t.rlvp", text))
    return diagnostics


def on_of(text):
    (rule,) = [i for i in tree(text) if isinstance(i, ast.Violation)]
    return rule.on


def test_tool_declaration():
    """`tool NAME : TAGS target ARG` gives a ToolDecl with its tags and target."""
    (decl,) = tree("tool cancel : write, destructive target reservation_id")
    assert decl.name.text == "cancel"
    assert [t.text for t in decl.tags] == ["write", "destructive"]
    assert decl.target.text == "reservation_id"


def test_juxtaposition_means_and():
    """`a b` parses exactly like `a and b`."""
    assert on_of("violation v (-1) { on call x ok }") == on_of("violation v (-1) { on call x and ok }")


def test_precedence_not_and_or():
    """`not` binds tighter than `and`, which binds tighter than `or`."""
    on = on_of("violation v (-1) { on not ok and error or malformed }")
    assert isinstance(on, ast.Or)
    left, right = on.items
    assert isinstance(left, ast.And) and isinstance(left.items[0], ast.Not)
    assert right == ast.StatusAtom("malformed")


def test_long_and_chain_is_flat():
    """A chain of `and` is one node with every clause, not a nested tree."""
    on = on_of("violation v (-1) { on " + " and ".join(["ok"] * 50) + " }")
    assert isinstance(on, ast.And) and len(on.items) == 50


def test_string_escapes_and_regex_flags():
    """String escapes are decoded; a regex keeps its body and flags, with `\\/` unescaped."""
    on = on_of('violation v (-1) { on call error_text contains "a\\"b\\n" and result matches /x\\/y/im }')
    texts = [i for i in on.items if isinstance(i, ast.TextTest)]
    assert texts[0].value == 'a"b\n'
    assert (texts[1].value, texts[1].flags) == ("x/y", "im")


def test_bad_escape_is_rv104():
    """An unknown escape in a string is RV104 at the string."""
    (d,) = diags('violation v (-1) { on call error_text contains "a\\qb" }')
    assert d.code == "RV104" and d.span.column == 48


@pytest.mark.parametrize(
    "text,code",
    [
        ("obligation o (1, expire -1) { open on call discharge on call deadline within 0 calls }", "RV209"),
        ("obligation o (1, expire -1) { open on call discharge on call deadline within 1.5 calls }", "RV209"),
        ('violation v (-1) { on call result < "x" }', "RV209"),
        ('violation v (-1) { on call arg x > "x" }', "RV209"),
    ],
)
def test_invalid_values(text, code):
    """Counts and comparisons that make no sense are diagnosed while parsing."""
    assert code in {d.code for d in diags(text)}


def test_optional_names_default_to_the_kind():
    """`repeat_error (-0.3)` and `blind_destructive (-1)` are named after their kind."""
    items = tree("repeat_error (-0.3)\nblind_destructive (-1)")
    assert [i.name.text for i in items] == ["repeat_error", "blind_destructive"]


def test_obligation_default_deadline_is_end():
    """An obligation without `deadline` expires at the end of the episode."""
    (o,) = tree("obligation o (1, expire -1) { open on call discharge on call }")
    assert o.deadline.kind == "end"


@pytest.mark.parametrize(
    "text",
    [
        "violation v (-1) { on call",
        "violation v (-1) { on call and }",
        "violation v -1 { on call }",
        "violation v (-1) on call",
        "obligation o (1) { }",
        "obligation o (1, expire -1) { open on call discharge on call deadline within 3 }",
        "tool x : read,",
        "tool x : read target",
        "const X = ",
        "violation v (-1) { on call arg x in [1, ] }",
        "progress p (+1) { signal g sideways }",
        "include",
        "violation v (-1) { on seen call }",
        "violation v (-1) { on (call }",
        "}",
    ],
)
def test_syntax_errors_use_the_languages_words(text):
    """A syntax error is one RV1xx diagnostic that never names a parser-internal terminal."""
    ds = diags(text)
    assert ds and all(d.code.startswith("RV1") for d in ds)
    for d in ds:
        for name in INTERNAL:
            assert name not in d.message and name not in d.help, (d.message, d.help)
        assert d.span.line >= 1 and d.span.column >= 1


def test_file_ending_inside_a_block_points_at_the_opener():
    """When the file ends inside `{`, the error is RV103 at the `{`, not at end of file."""
    (d,) = diags("tool x : read\nviolation v (-1) {\n  on call x\n")
    assert (d.code, d.span.line, d.span.column) == ("RV103", 2, 18)


def test_known_mistake_gets_a_hint():
    """A missing deadline unit is explained by the table of known mistakes."""
    (d,) = diags("obligation x (1, expire -1) { open on call discharge on call deadline within 3 }")
    assert "within N calls" in d.help


KNOWN_MISTAKES = [
    ("obligation x (+0.1, -0.1) {\n  open on call\n  discharge on call\n}", "expire -0.5"),
    ("obligation x (+0.1) {\n  open on call\n  discharge on call\n}", "expire -0.5"),
    ("violation x (-0.1, -0.2) {\n  on call\n}", "this rule takes one weight"),
    ("repeat_error x (-0.1, -0.2)", "this rule takes one weight"),
    ("violation x -1 { on call }", "a weight is written in parentheses"),
    ('violation x (-0.1) {\n  on call tool a and text "cafe"\n}', "`call a` (no `tool` before the name)"),
    ("violation x (-1) { on call unless seen call }", "`seen` takes a parenthesised condition"),
    ("obligation x (1, expire -1) { open on call discharge on call deadline within 3 }", "within N calls"),
]


@pytest.mark.parametrize("rule,hint", KNOWN_MISTAKES, ids=[m[1] + " " + m[0][:14] for m in KNOWN_MISTAKES])
@pytest.mark.parametrize("before", ["", "tool a : read\ntool b : write\n\n"], ids=["first", "after tools"])
def test_a_known_mistake_is_recognised_wherever_the_rule_is(rule, hint, before):
    """The table of known mistakes matches by the parser state where the rule went wrong, so a rule
    after other declarations gets the same hint as a rule alone (lark's ``match_examples`` compares
    the stack's depth too, and matched only the first item of a file)."""
    (d,) = diags(before + rule)
    assert hint in d.help, d.help


def test_a_complete_condition_followed_by_a_name_is_not_taken_for_call_tool():
    """`call tag write x` stops in the parser state `call tool a` stops in: only the text `call tool`
    gets the `call NAME` hint."""
    (d,) = diags("tool a : read\nviolation x (-1) {\n  on call tag write x\n}")
    assert "`call NAME`" not in d.help and "block opened at 2:18" in d.help


def test_an_unclosed_weight_is_told_to_close_after_the_weight():
    """A weight's '(' left open: close it after the weight -- `and`/`or` are a condition's words."""
    (d,) = diags("tool a : read\nviolation v (-0.5 {\n  on call a\n}")
    assert d.help == "the '(' at 2:13 is not closed before this; add ')' after the weight"
    (d,) = diags("tool a : read\nviolation v (-0.5) {\n  on call a and (call a {\n}")
    assert "after the weight" not in d.help


def test_a_string_closed_by_a_typographic_quote_names_it():
    """`"yes”`: the string never closes; the help points at the curly quote that was meant to."""
    (d,) = diags('tool a : read\nviolation v (-0.5) {\n  on user says "yes\u201d\n}')
    assert (d.span.line, d.span.column) == (3, 16)
    assert d.help.endswith("the \u201d at 3:20 is a typographic quote")


def test_every_terminal_is_described_in_words():
    """describe_terminal never returns a parser-internal name."""
    for term in get_parser().terminals:
        words = describe_terminal(term.name)
        assert not any(name in words for name in INTERNAL), (term.name, words)
    assert describe_terminal("$END") == "end of file"


TYPOS = [
    ("violaton x (-1) { on call }", "violaton", "violation", (1, 1)),
    ("obligation x (1, expre -1) { open on call discharge on call }", "expre", "expire", (1, 18)),
    ("obligation x (1, expire -1) { opn on call discharge on call }", "opn", "open", (1, 31)),
    (
        "obligation x (1, expire -1) {\n  open on call\n  discharge on call deadine at end }",
        "deadine",
        "deadline",
        (3, 21),
    ),
    ("violation x (-1) { on call unless sen (call) }", "sen", "seen", (1, 35)),
    ("violation x (-1) { on cal }", "cal", "call", (1, 23)),
    ("violation x (-1) {\n  onn call }", "onn", "on", (2, 3)),
    ("violation x (-1) { on call arg p exist }", "exist", "exists", (1, 34)),
    ("tool x: read targte y", "targte", "target", (1, 14)),
    ('tols from "x.json"', "tols", "tools", (1, 1)),
    ("repeat_eror (-1)", "repeat_eror", "repeat_error", (1, 1)),
    ('tset "x" { episode { } expect total == 0 }', "tset", "test", (1, 1)),
]


@pytest.mark.parametrize("text,typo,keyword,where", TYPOS, ids=[t[1] for t in TYPOS])
def test_a_misspelled_keyword_gets_a_did_you_mean_at_the_word(text, typo, keyword, where):
    """A misspelled keyword: `did you mean 'KEYWORD'?` with the caret on the misspelled word (a word the
    lexer split after a keyword prefix, `onn`, is named whole), not an unclosed-block hint."""
    (d,) = diags(text)
    assert d.code == "RV101"
    assert d.message == f"unexpected name '{typo}'; did you mean '{keyword}'?"
    assert (d.span.line, d.span.column, d.span.end_column - d.span.column) == (*where, len(typo))
    assert "not closed" not in d.help


def test_a_name_close_to_no_keyword_gets_no_did_you_mean():
    """A plain wrong name keeps the expected-token message (no invented suggestion)."""
    (d,) = diags("violation x (-1) { on call } zzzzzz")
    assert "did you mean" not in d.message and d.message.startswith("unexpected name 'zzzzzz'; expected")


def test_a_keyword_glued_to_a_name_is_an_error_but_a_name_starting_with_one_is_not():
    """`on callx` lexes as `call` + `x`: RV101 at the whole word; `call call_log` is a plain name."""
    (d,) = diags("tool x : read\nviolation v (-1) { on callx }")
    assert (d.code, d.message, d.span.column, d.span.end_column) == (
        "RV101",
        "'callx' reads as 'call' followed by the name 'x'",
        23,
        28,
    )
    assert diags("tool call_log : read\nviolation v (-1) { on call call_log }") == []
    assert diags("tool opener : read\nobligation o (1, expire -1) { open on call opener discharge on call }") == []


# ---- the cached parser tables (syntax/grammar.py) ---------------------------------------

STOCK_RULES = "violation v (-0.1) { on call error }\nrepeat_error (-0.3)\n"


def _cache_file(folder):
    from rlvp_dsl.syntax import grammar

    return folder / f"grammar-{grammar.cache_key(grammar.grammar_text())}.lark"


def _fresh_parser(monkeypatch, folder):
    from rlvp_dsl.syntax import grammar

    monkeypatch.setenv("RLVP_CACHE_DIR", str(folder))
    grammar.get_parser.cache_clear()
    try:
        return grammar.get_parser()
    finally:
        grammar.get_parser.cache_clear()


def test_cached_parser_is_saved_then_loaded_and_parses_alike(monkeypatch, tmp_path):
    from rlvp_dsl.syntax import grammar

    built = _fresh_parser(monkeypatch, tmp_path)
    assert _cache_file(tmp_path).is_file()
    loaded = _fresh_parser(monkeypatch, tmp_path)
    assert loaded is not built
    text = STOCK_RULES + "tool a : read target x\n"
    tree_loaded, tree_built = loaded.parse(text), grammar.build_parser().parse(text)
    assert tree_loaded == tree_built == built.parse(text)
    assert [(t.meta.line, t.meta.column, t.meta.end_column) for t in tree_loaded.iter_subtrees()] == [
        (t.meta.line, t.meta.column, t.meta.end_column) for t in tree_built.iter_subtrees()
    ]
    assert sorted(t.name for t in loaded.terminals) == sorted(t.name for t in built.terminals)
    assert loaded.grammar is not None  # kept in the cache: hypothesis's from_lark needs it


def test_unwritable_cache_folder_falls_back_to_building(monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    parser = _fresh_parser(monkeypatch, blocker / "rlvp")  # mkdir fails: a file stands in the way
    assert parser.parse(STOCK_RULES).data == "start"
    assert list(tmp_path.iterdir()) == [blocker]


def test_corrupt_cache_file_is_rebuilt_and_replaced(monkeypatch, tmp_path):
    _cache_file(tmp_path).write_bytes(b"\x80\x04 not a pickle")
    parser = _fresh_parser(monkeypatch, tmp_path)
    assert parser.parse(STOCK_RULES).data == "start"
    assert _fresh_parser(monkeypatch, tmp_path).parse(STOCK_RULES) == parser.parse(STOCK_RULES)
    assert not list(tmp_path.glob("*.tmp"))


def test_cache_key_changes_with_the_grammar():
    from rlvp_dsl.syntax import grammar

    text = grammar.grammar_text()
    assert grammar.cache_key(text) == grammar.cache_key(text)
    assert grammar.cache_key(text) != grammar.cache_key(text + "\n// changed\n")
