"""Syntax hints for a newcomer's mistakes (rlvp_dsl/syntax/hints.py): the exact rendered diagnostic
(file:line:col, the source line, the caret, the help), and the file the help suggests parses."""

from __future__ import annotations

import pytest

from rlvp_dsl.diagnostics import render_text
from rlvp_dsl.parser import parse
from rlvp_dsl.source import SourceFile
from rlvp_dsl.syntax import hints


def rendered(text: str) -> str:
    source = SourceFile("t.rlvp", text)
    tree, diagnostics = parse(source)
    assert tree is None
    return render_text(diagnostics, {"t.rlvp": source})


def parses(text: str) -> bool:
    tree, diagnostics = parse(SourceFile("t.rlvp", text))
    return tree is not None and not diagnostics


# (the mistake, its rendered diagnostic, the file as the help says to write it)
MISTAKES = {
    "or": (
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel || call cancel error\n}\n",
        """\
t.rlvp:3:18: error[RV101]: unexpected character '|'
 3 |   on call cancel || call cancel error
   |                  ^
  = help: conditions are joined with the word `or`, not `||`: `call a or call b`""",
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel or call cancel error\n}\n",
    ),
    "and": (
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel && ok\n}\n",
        """\
t.rlvp:3:18: error[RV101]: unexpected character '&'
 3 |   on call cancel && ok
   |                  ^
  = help: conditions are joined with the word `and` (or written side by side), not `&&`: `call a and ok`""",
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel and ok\n}\n",
    ),
    "not": (
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel and !ok\n}\n",
        """\
t.rlvp:3:22: error[RV101]: unexpected character '!'
 3 |   on call cancel and !ok
   |                      ^
  = help: a condition is negated with the word `not`, not `!`: `not ok`, `not (call a or call b)`""",
        "tool cancel : write\nviolation v (-0.5) {\n  on call cancel and not ok\n}\n",
    ),
    "regex flag g": (
        "tool a : read\nviolation v (-0.5) { on assistant says /yes/g }\n",
        """\
t.rlvp:2:45: error[RV101]: unknown regular expression flag 'g'
 2 | violation v (-0.5) { on assistant says /yes/g }
   |                                             ^
  = help: the flags are `i` (ignore case: `/yes/i`), `m` (`^` and `$` at each line) and `s` \
(`.` matches a newline); a regex matches anywhere in the text, so there is no `g`; see docs/language.md""",
        "tool a : read\nviolation v (-0.5) { on assistant says /yes/i }\n",
    ),
    "regex flag after a good one": (
        'tool a : read\nviolation v (-0.5) { on user says "a/b" and assistant says /yes/iu }\n',
        """\
t.rlvp:2:66: error[RV101]: unknown regular expression flag 'u'
 2 | violation v (-0.5) { on user says "a/b" and assistant says /yes/iu }
   |                                                                  ^
  = help: the flags are `i` (ignore case: `/yes/i`), `m` (`^` and `$` at each line) and `s` \
(`.` matches a newline); see docs/language.md""",
        'tool a : read\nviolation v (-0.5) { on user says "a/b" and assistant says /yes/i }\n',
    ),
    "since after seen": (
        "tool cancel : write target id\nviolation v (-0.5) {\n  on call cancel\n"
        '  unless seen (user says "yes") since assistant\n}\n',
        """\
t.rlvp:4:33: error[RV101]: unexpected keyword 'since' after `seen (...)`
 4 |   unless seen (user says "yes") since assistant
   |                                 ^^^^^
  = help: `since` goes inside the parentheses of `seen`, before its ')': `seen (user says "yes" since assistant)`""",
        "tool cancel : write target id\nviolation v (-0.5) {\n  on call cancel\n"
        '  unless seen (user says "yes" since assistant)\n}\n',
    ),
    "tool set without comma": (
        "tool a : read\ntool b : read\nviolation v (-0.5) { on call {a b} }\n",
        """\
t.rlvp:3:33: error[RV101]: unexpected name 'b'; expected ',' or '}'
 3 | violation v (-0.5) { on call {a b} }
   |                                 ^
  = help: tool names in braces are separated by commas: `call {a, b}`""",
        "tool a : read\ntool b : read\nviolation v (-0.5) { on call {a, b} }\n",
    ),
    "quoted tool name": (
        'tool cancel : write target id\nviolation v (-0.5) {\n  on call "cancel"\n}\n',
        """\
t.rlvp:3:11: error[RV101]: unexpected string "cancel"; expected a name
 3 |   on call "cancel"
   |           ^^^^^^^^
  = help: names are written without quotes: `call cancel`""",
        "tool cancel : write target id\nviolation v (-0.5) {\n  on call cancel\n}\n",
    ),
    "quoted keyword name": (
        'tool "open" : read\n',
        """\
t.rlvp:1:6: error[RV101]: unexpected string "open"; expected a name
 1 | tool "open" : read
   |      ^^^^^^
  = help: names are written without quotes; 'open' is a reserved word, so write it in backticks: `open`""",
        "tool `open` : read\n",
    ),
    "unquoted JSON key": (
        'tool get : read target id\nrepeat_error (-0.3)\ntest "bad args" {\n'
        '  episode { call get {id: "A"} ok }\n  expect total == 0\n}\n',
        """\
t.rlvp:4:23: error[RV101]: unexpected name 'id'; expected a string
 4 |   episode { call get {id: "A"} ok }
   |                       ^^
  = help: the arguments are JSON: a key is a string in double quotes, `{"id": ...}`""",
        'tool get : read target id\nrepeat_error (-0.3)\ntest "bad args" {\n'
        '  episode { call get {"id": "A"} ok }\n  expect total == 0\n}\n',
    ),
    "unquoted JSON value": (
        'tool get : read target id\nrepeat_error (-0.3)\ntest "bad args" {\n'
        '  episode { call get {"id": A} ok }\n  expect total == 0\n}\n',
        """\
t.rlvp:4:29: error[RV101]: unexpected name 'A'; expected a value (a string, a number, true, false or null)
 4 |   episode { call get {"id": A} ok }
   |                             ^
  = help: the arguments are JSON: a string value is written in double quotes: `"A"`""",
        'tool get : read target id\nrepeat_error (-0.3)\ntest "bad args" {\n'
        '  episode { call get {"id": "A"} ok }\n  expect total == 0\n}\n',
    ),
    "Python's None in JSON": (
        'tool get : read\nrepeat_error (-0.3)\ntest "t" {\n  episode { call get {"id": None} ok }\n'
        "  expect total == 0\n}\n",
        """\
t.rlvp:4:29: error[RV101]: unexpected name 'None'; expected a value (a string, a number, true, false or null)
 4 |   episode { call get {"id": None} ok }
   |                             ^^^^
  = help: JSON writes `true`, `false` and `null` in lower case: `null`""",
        'tool get : read\nrepeat_error (-0.3)\ntest "t" {\n  episode { call get {"id": null} ok }\n'
        "  expect total == 0\n}\n",
    ),
    "expires": (
        "tool a : read\nobligation o (+0.5, expires -0.5) {\n  open on call a\n  discharge on assistant\n}\n",
        """\
t.rlvp:2:21: error[RV101]: unexpected name 'expires'; did you mean 'expire'?
 2 | obligation o (+0.5, expires -0.5) {
   |                     ^^^^^^^
  = help: 'expires' was read as 'expire' followed by the name 's', so number -0.5 could not follow; \
'expire' is expected here""",
        "tool a : read\nobligation o (+0.5, expire -0.5) {\n  open on call a\n  discharge on assistant\n}\n",
    ),
    "comma before target": (
        "tool cancel: write, target id\nviolation v (-0.5) { on call cancel }\n",
        """\
t.rlvp:1:19: error[RV101]: a ',' before 'target' makes it a tag name
 1 | tool cancel: write, target id
   |                   ^
  = help: tags are separated by commas, and `target ARG` follows the last tag without one: \
`tool cancel: write target id`""",
        "tool cancel: write target id\nviolation v (-0.5) { on call cancel }\n",
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_a_newcomers_mistake_gets_its_own_hint(case):
    """The rendered diagnostic is exactly the expected one, and the mistake fixed as the help says parses."""
    text, expected, fixed = MISTAKES[case]
    assert rendered(text) == expected
    assert parses(fixed), fixed


def test_not_equal_is_still_a_comparison():
    """`!=` stays a comparison: the `not` hint is for a lone `!`."""
    assert parses('tool a : read target id\nviolation v (-1) { on call a arg id != "x" }\n')
    assert hints.operator_hint("!", "=") is None


def test_since_after_a_plain_parenthesis_is_not_called_a_seen_clause():
    """`(C) since D` without `seen` keeps the generic hint: no `seen (...)` is invented."""
    out = rendered('tool a : read\nviolation v (-1) { on call a unless (user says "x") since assistant }\n')
    assert "after `seen" not in out and "expected '}'" in out


def test_a_slash_inside_a_string_does_not_hide_the_regex_a_flag_is_glued_to():
    """Strings are skipped when looking for the regex a name is glued to: in `"a/" ... /b/g` the
    regex is `/b/`, not `/" and text matches /`."""
    out = rendered('tool a : read\nviolation v (-1) { on user says "a/" and text matches /b/g }\n')
    assert out.startswith("t.rlvp:2:58: error[RV101]: unknown regular expression flag 'g'\n"), out
    assert "(ignore case: `/b/i`)" in out


def test_keyword_before_needs_the_token_to_fit_after_the_keyword():
    """`keyword_before` suggests a keyword only when the unexpected token may follow it: `within` for
    `withn 3`, nothing for a tool named `calls` followed by a number (a number cannot follow `call`)."""
    text = "obligation o (1, expire -1) { open on call discharge on call deadline withn 3 calls }"
    assert hints.keyword_before(text, text.index("withn"), "withn", "SIGNED_NUMBER") == ("within", False)
    text = "tool calls : read\nviolation v (-1) { on user calls 5 }"
    assert hints.keyword_before(text, text.index("calls 5"), "calls", "SIGNED_NUMBER") == (None, False)


def test_keyword_before_does_not_reparse_a_huge_prefix(monkeypatch):
    """Past `_REPARSED` characters the text before the word is not parsed again."""
    monkeypatch.setattr(hints, "_accepts", lambda prefix: pytest.fail("reparsed"))
    text = "#" + "x" * hints._REPARSED + "\nobligation o (+0.5, expires -0.5) { }"
    assert hints.keyword_before(text, text.index("expires"), "expires", "SIGNED_NUMBER") == (None, False)
