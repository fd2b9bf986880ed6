"""Issue 2, "Cases from the field that must pass", for the language (case 7 lives with attach.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from lark import Lark

from rlvp_dsl import check_text, loads
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.syntax import get_parser, grammar_text, keywords, parse_tree
from rlvp_dsl.readers import read_episodes

from op_count import assert_linear

REPO = Path(__file__).resolve().parents[2]
TREES = REPO / "tests" / "golden" / "trees"

RULES = """\
tool get_item : read target item_id
tool update_item : write target item_id
violation errored_call (-0.1) { on call error }
violation ok_call (-0.01) { on call ok }
violation every_call (-0.001) { on call }
obligation verify_after_write (+0.5, expire -0.5) {
  open on call update_item
  discharge on call get_item same item_id
}
"""


def _call(cid, name, arguments):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def _write_jsonl(tmp_path, messages) -> str:
    path = tmp_path / "episode.jsonl"
    path.write_text(json.dumps({"id": "e", "messages": messages}) + "\n", encoding="utf-8")
    return str(path)


def _by_event(credits):
    out = {}
    for c in credits:
        out.setdefault(c.event_index, set()).add((c.rule, c.trigger))
    return out


# ---- case 1 -------------------------------------------------------------------


def test_truncated_arguments_are_malformed_and_failed(tmp_path):
    """A second call with arguments cut mid-JSON is malformed, matches `error`, never `ok`, never discharges."""
    path = _write_jsonl(
        tmp_path,
        [
            {"role": "user", "content": "update A"},
            _call("c0", "update_item", '{"item_id": "A"}'),
            {"role": "tool", "tool_call_id": "c0", "content": "done"},
            _call("c1", "get_item", '{"item_id": "A'),
            {"role": "tool", "tool_call_id": "c1", "content": '{"id": "A"}'},
            _call("c2", "get_item", '{"item_id": "A"}'),
            {"role": "tool", "tool_call_id": "c2", "content": '{"id": "A"}'},
        ],
    )
    (episode,) = read_episodes(path)
    calls = episode.calls
    assert [c.status for c in calls] == ["ok", "malformed", "ok"]
    assert calls[1].raw_arguments == '{"item_id": "A'
    got = _by_event(loads(RULES).score(episode))
    assert got[calls[1].index] == {("errored_call", "fire"), ("every_call", "fire")}
    assert got[calls[0].index] == {("ok_call", "fire"), ("every_call", "fire")}
    # the malformed read did not discharge; the next, well-formed one did
    assert got[calls[2].index] == {("ok_call", "fire"), ("every_call", "fire"), ("verify_after_write", "discharge")}


# ---- case 2 -------------------------------------------------------------------


def test_episode_ending_without_result(tmp_path):
    """The last call has no observation: it still gets its credits, is no_result, and is not an error."""
    path = _write_jsonl(
        tmp_path,
        [
            _call("c0", "get_item", '{"item_id": "A"}'),
            {"role": "tool", "tool_call_id": "c0", "content": "Error: busy"},
            _call("c1", "update_item", '{"item_id": "A"}'),
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
            _call("c2", "get_item", '{"item_id": "A"}'),
        ],
    )
    (episode,) = read_episodes(path)
    assert [c.status for c in episode.calls] == ["error", "ok", "no_result"]
    got = _by_event(loads(RULES).score(episode))
    last = episode.calls[-1].index
    assert got[last] == {("every_call", "fire")}  # no error, no ok, no discharge
    assert all(c.index in got for c in episode.calls)
    assert ("errored_call", "fire") in got[episode.calls[0].index]
    assert ("verify_after_write", "expire") in got[episode.calls[1].index]


# ---- case 3 -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "discharge_check",
        "whenever_x",
        "opener",
        "calls_max",
        "ok_then",
        "tools2",
        "seen_it",
        "error_rate",
        "user_id",
        "target_id",
    ],
)
def test_names_beginning_with_a_keyword_lex_as_names(name):
    """A name that begins with a keyword is one NAME token, not a keyword and a rest."""
    text = f"tool {name} : read target item_id\nviolation r_{name} (-1) {{ on call {name} error }}\n"
    result = check_text(text)
    assert result.ok, result.diagnostics
    assert name in result.ruleset.tools
    tokens = [t for t in get_parser().lex(text) if t.value == name]
    assert tokens and all(t.type == "NAME" for t in tokens)


def test_golden_parse_tree():
    """The lark tree of a fixed file equals the checked-in golden (grammar edits must not change it)."""
    source = (TREES / "keyword_prefixed.rlvp").read_text(encoding="utf-8")
    actual = parse_tree(source).pretty()
    golden = TREES / "keyword_prefixed.tree"
    if os.environ.get("RLVP_UPDATE_GOLDEN") == "1":
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")
    assert check_text(source).ok


# ---- case 4 -------------------------------------------------------------------


@pytest.mark.parametrize("word", ["open", "call", "discharge", "violation", "seen", "end", "target", "max"])
def test_keyword_as_tool_name_is_rv102_at_its_position(word):
    """A keyword used as a tool name gets RV102 exactly at the keyword."""
    text = f"tool get_item : read\n  tool {word} : read\n"
    result = check_text(text, "k.rlvp")
    codes = [(d.code, d.span.line, d.span.column) for d in result.diagnostics]
    assert ("RV102", 2, 8) in codes, codes
    assert not result.ok


@pytest.mark.parametrize("word", ["open", "violation", "within", "ok"])
def test_keyword_as_rule_name_is_rv102_at_its_position(word):
    """A keyword used as a rule name gets RV102 at its own line and column."""
    text = f"tool get_item : read\n\nviolation {word} (-1) {{ on call get_item error }}\n"
    result = check_text(text, "k.rlvp")
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics][:1] == [("RV102", 3, 11)]


def test_backticks_quote_keywords():
    """`open` in backticks is an ordinary name for tools, tags, rules and arguments."""
    program = loads(
        'tool `open` : `call` target `end`\nviolation `discharge` (-1) { on call `open` tag `call` arg `end` == "x" }\n'
    )
    assert set(program.tools) == {"open"}
    assert program.tools["open"].tags == frozenset({"call"})
    event = Event(0, "call", tool="open", arguments={"end": "x"})
    (credit,) = program.score(Episode("e", (event,)))
    assert credit.rule == "discharge"


def test_every_keyword_is_reserved():
    """The grammar's words are the reserved words (and plain names are not)."""
    assert {"violation", "obligation", "open", "discharge", "seen", "since", "same", "call"} <= keywords()
    assert "discharge_check" not in keywords()


# ---- case 5 -------------------------------------------------------------------

HEAD = "tool a : read target x\ntool b : write target x\n"


def _and_chain(n):
    cond = " and ".join(["call a" if i % 2 else "ok" for i in range(n)])
    program = loads(HEAD + f"violation v (-1) {{ on {cond} }}\n")
    assert len(program.score(Episode("e", (Event(0, "call", tool="a"),)))) == 1


def _many_rules(n):
    text = HEAD + "\n".join(f'violation v{i} (-1) {{ on call a error and arg x == "{i}" }}' for i in range(n))
    assert len(loads(text).rules) == n


_LONG_PROGRAM = None


def _long_episode(n):
    global _LONG_PROGRAM
    if _LONG_PROGRAM is None:
        _LONG_PROGRAM = loads(
            HEAD + "repeat_error (-0.3)\nblind_destructive (-1)\n"
            "obligation o (+1, expire -1) { open on call b discharge on call a ok same x "
            "deadline within 3 calls }\n"
            "violation w (-0.5) { on call b unless seen (user says /yes/ since assistant) }\n"
        )
    events = []
    for i in range(n):
        kind = ("call", "call", "user", "assistant")[i % 4]
        if kind == "call":
            events.append(
                Event(i, "call", tool="ab"[i % 3 % 2], arguments={"x": str(i % 7)}, status=("ok", "error")[i % 5 == 0])
            )
        else:
            events.append(Event(i, kind, text="yes"))
    credits = _LONG_PROGRAM.score(Episode("e", events))
    assert credits


@pytest.mark.parametrize(
    "fn,n",
    [(_and_chain, 3000), (_many_rules, 5000), (_long_episode, 2000)],
    ids=["and_chain_3000", "rules_5000", "calls_2000"],
)
def test_large_inputs_scale_linearly(fn, n):
    """No RecursionError at the issue's sizes, and doubling the size at most ~doubles the work: steps
    counted (Python calls + executed lines of rlvp_dsl, `op_count`), not timed -- timings are in benchmarks/."""
    fn(n)
    assert_linear(fn, n // 4)  # steps(n / 2) <= 2.5 * steps(n / 4); quadratic work gives ~4


@pytest.mark.parametrize(
    "body",
    [
        "call a and " + "not " * 3000 + "ok",
        "call a and " + "(ok or " * 3000 + "ok" + ")" * 3000,
        "call a and " + "seen (" * 500 + "ok" + ")" * 500,
    ],
    ids=["not_3000", "or_nest_3000", "seen_500"],
)
def test_deep_nesting_is_a_diagnostic(body):
    """Nesting deeper than the limit is RV106, not a RecursionError."""
    result = check_text(HEAD + f"violation v (-1) {{ on {body} }}\n")
    assert "RV106" in {d.code for d in result.diagnostics}


def test_redundant_parentheses_are_fine():
    """3,000 redundant parentheses around one atom parse and compile (they add no nesting)."""
    program = loads(HEAD + "violation v (-1) { on " + "(" * 3000 + "call a" + ")" * 3000 + " }\n")
    assert len(program.score(Episode("e", (Event(0, "call", tool="a"),)))) == 1


# ---- case 6 -------------------------------------------------------------------


def test_greek_and_chinese_names():
    """Greek and Chinese tool, tag, rule and argument names work end to end."""
    program = loads(
        "tool 读取 : 读 target 编号\ntool διαγραφή : γράψε target 编号\n"
        "blind_destructive τυφλό (-1) { on call tag γράψε inspected_by call tag 读 ok }\n"
        "violation 错误 (-0.1) { on call διαγραφή error }\n"
    )
    events = (
        Event(0, "call", tool="διαγραφή", arguments={"编号": "Α1"}, status="error"),
        Event(1, "call", tool="读取", arguments={"编号": "Α2"}),
        Event(2, "call", tool="διαγραφή", arguments={"编号": "Α2"}),
    )
    got = sorted((c.event_index, c.rule) for c in program.score(Episode("e", events)))
    assert got == [(0, "τυφλό"), (0, "错误")]


def test_nfc_and_nfd_spellings_are_one_identifier():
    """A tool declared in NFC and referenced in NFD (and vice versa) resolves to one identifier."""
    nfc = unicodedata.normalize("NFC", "café_ένα")
    nfd = unicodedata.normalize("NFD", "café_ένα")
    assert nfc != nfd
    text = (
        f"tool {nfc} : read\ntool b : write\nviolation v (-1) {{ on call {nfd} error }}\n"
        f"violation {nfd} (-1) {{ on call b }}\nviolation {nfc} (-1) {{ on call b }}\n"
    )
    result = check_text(text)
    assert [d.code for d in result.diagnostics] == ["RV203"]  # the two rule spellings collide
    program = loads(f"tool {nfc} : read\nviolation v (-1) {{ on call {nfd} error }}\n")
    assert list(program.tools) == [nfc]
    (credit,) = program.score(Episode("e", (Event(0, "call", tool=nfc, status="error"),)))
    assert credit.rule == "v"


# ---- case 8 -------------------------------------------------------------------


def test_lalr_parser_builds_strict_without_conflicts():
    """The grammar builds as LALR(1) with strict=True (a conflict would raise)."""
    parser = Lark(grammar_text(), parser="lalr", lexer="contextual", strict=True)
    assert parser.options.strict and parser.options.parser == "lalr"
    assert get_parser().options.strict


def test_parser_serialisation_is_stable():
    """Saving the cached parser twice gives the same bytes."""
    a, b = io.BytesIO(), io.BytesIO()
    get_parser().save(a)
    get_parser().save(b)
    assert a.getvalue() == b.getvalue()


_DUMP = (
    "import json, sys; from rlvp_dsl import load_program; "
    "print(json.dumps(load_program(sys.argv[1]).to_json(), sort_keys=True))"
)


def test_program_is_byte_identical_across_processes():
    """The same rule file compiled in two processes with different hash seeds gives identical JSON."""
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run(
            [sys.executable, "-c", _DUMP, "rules/tau2_airline.rlvp"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 1000
