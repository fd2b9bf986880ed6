"""`same message` (docs/language.md, "History"): the binding for the source message an event
belongs to, and `message { ... }` groups in inline test episodes -- parsed, printed, checked,
compiled, and scored equal by the compiled program, the streaming scorer and the reference
interpreter."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvp_dsl import ast, check_file, load_program, loads
from rlvp_dsl.events import ASSISTANT, CALL, USER, Episode, Event
from rlvp_dsl.parser import parse
from rlvp_dsl.reference import score_reference
from rlvp_dsl.source import SourceFile
from rlvp_dsl.syntax import keywords
from rlvp_dsl.syntax.fmt import format_source
from rlvp_dsl.syntax.printer import print_rule_file
from rlvp_dsl.pipeline import check_text
from rlvp_dsl.testing.rule_tests import run_tests

TOOLS = "tool get : read target id\ntool put : write target id\n"
ONE_CALL = TOOLS + "violation one_call (-0.1) {\n  on call and seen (call or assistant same message)\n}\n"


def _tree(text: str) -> ast.RuleFile:
    tree, diagnostics = parse(SourceFile("t.rlvp", text))
    assert tree is not None and diagnostics == [], diagnostics
    return tree


def _seen(tree: ast.RuleFile) -> ast.Seen:
    rule = tree.items[-1]
    assert isinstance(rule, ast.Violation)
    return next(n for n in ast.walk(rule.on) if isinstance(n, ast.Seen))


def _call(i: int, target: str, message: int | None) -> Event:
    return Event(i, CALL, tool="get", arguments={"id": target}, result=f"item {target}", message=message)


# ---- syntax ---------------------------------------------------------------------------


def test_message_is_a_binding_keyword_and_an_argument_called_message_stays_reachable():
    assert "message" in keywords()
    assert _seen(_tree(ONE_CALL)).same == ast.Binding("message")
    quoted = TOOLS + "violation v (-0.1) {\n  on call and arg `message` exists and seen (call same `message`)\n}\n"
    seen = _seen(_tree(quoted))
    assert seen.same is not None and (seen.same.kind, seen.same.describe()) == ("arg", "message")
    # the printer writes the argument in backticks, the binding bare; both round-trip
    printed = print_rule_file(_tree(quoted))
    assert "same `message`" in printed and "arg `message` exists" in printed
    bare, diagnostics = parse(SourceFile("t.rlvp", quoted.replace("arg `message`", "arg message")))
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics] == [("RV102", 4, 19)]
    assert "write it in backticks" in diagnostics[0].help
    assert _tree(printed) == _tree(quoted)
    assert "same message)" in print_rule_file(_tree(ONE_CALL))


def test_message_groups_of_an_inline_episode_parse_number_and_print_back():
    text = ONE_CALL + (
        'test "t" {\n  episode {\n    user "hi"\n    message {\n      assistant "looking"  # speaks\n'
        '      call get {"id": "A"} ok\n    }\n    message {\n      call get {"id": "B"} ok\n'
        '      call get {"id": "C"} ok\n    }\n    call get {"id": "D"} ok\n  }\n  expect one_call == -0.2\n}\n'
    )
    block = _tree(text).items[-1]
    assert isinstance(block, ast.InlineTest) and block.events is not None
    assert [e.message for e in block.events] == [None, 0, 0, 1, 1, None]
    formatted = format_source(text)  # the groups, their indentation and the comment kept
    assert '    message {\n      assistant "looking"  # speaks\n' in formatted and format_source(formatted) == formatted
    assert _tree(print_rule_file(_tree(text))) == _tree(text)


def test_an_empty_message_group_is_a_syntax_error():
    text = ONE_CALL + 'test "t" {\n  episode {\n    message {\n    }\n  }\n  expect total == 0\n}\n'
    tree, diagnostics = parse(SourceFile("t.rlvp", text))
    [d] = diagnostics
    assert (d.code, d.span.line, d.span.column) == ("RV101", 9, 5)
    assert "expected 'assistant', 'call' or 'user'" in d.message


# ---- checker --------------------------------------------------------------------------


def test_returned_message_is_an_error_at_the_binding(tmp_path):
    path = tmp_path / "r.rlvp"
    path.write_text(TOOLS + "violation v (-0.1) {\n  on call and seen (call returned message)\n}\n")
    result = check_file(str(path))
    [d] = result.diagnostics
    assert (d.code, d.severity, d.span.line, d.span.column) == ("RV205", "error", 4, 35)
    assert "`returned message`" in d.message and "`same message`" in d.help


def test_an_obligation_may_bind_the_message():
    program = loads(
        TOOLS + "obligation o (+0.1, expire -0.1) {\n  open on call put\n  discharge on call get same message\n}\n"
    )
    put = Event(0, CALL, tool="put", arguments={"id": "A"}, message=0)
    same = [put, _call(1, "A", 0), _call(2, "A", 1)]
    later = [put, _call(1, "A", 1)]
    assert [(c.event_index, c.value) for c in program.score(Episode("same", tuple(same)))] == [(1, 0.1)]
    assert [(c.event_index, c.value) for c in program.score(Episode("later", tuple(later)))] == [(0, -0.1)]


# ---- meaning --------------------------------------------------------------------------


def test_calls_without_message_indices_never_share_a_message():
    """Event.message None (inline events, the trainer's rollouts, readers that do not say): a
    message of its own, so no two such events are in one message."""
    program = loads(ONE_CALL)
    events = (Event(0, ASSISTANT, text="looking"), _call(1, "A", None), _call(2, "B", None))
    assert program.score(Episode("none", events)) == []
    grouped = tuple(attrs.evolve(e, message=0) for e in events)
    assert [(c.event_index, c.value) for c in program.score(Episode("one", grouped))] == [(1, -0.1), (2, -0.1)]


def test_seen_same_message_looks_only_at_the_earlier_events_of_the_message():
    program = loads(TOOLS + "violation second (-0.1) {\n  on call and seen (call same message)\n}\n")
    events = (
        _call(0, "A", 0),  # first of message 0
        _call(1, "B", 0),  # second of message 0
        Event(2, USER, text="ok", message=1),
        _call(3, "C", 2),  # first of message 2: message 0's calls are observed, not siblings
        _call(4, "D", 3),
    )
    assert [c.event_index for c in program.score(Episode("e", events))] == [1]


def test_since_inside_a_message_counts_in_event_order():
    program = loads(TOOLS + "violation v (-0.1) {\n  on call get and seen (call put same message since call get)\n}\n")
    put = Event(0, CALL, tool="put", arguments={"id": "A"}, message=0)
    events = (put, _call(1, "A", 0), _call(2, "B", 0))  # the second read follows the first: reset
    assert [c.event_index for c in program.score(Episode("e", events))] == [1]


def test_the_message_binding_does_not_change_what_other_seen_conditions_observe():
    """A `same message` slot is updated at once; every other `seen` still waits for the message
    to be complete (information order): a read in the write's message does not inspect it."""
    rules = TOOLS + (
        "violation blind (-0.3) {\n  on call put and not seen (call get ok same target)\n}\n"
        "violation batched (-0.1) {\n  on call and seen (call same message)\n}\n"
    )
    program = loads(rules)
    events = (_call(0, "A", 0), Event(1, CALL, tool="put", arguments={"id": "A"}, message=0))
    assert sorted((c.rule, c.event_index) for c in program.score(Episode("e", events))) == [
        ("batched", 1),
        ("blind", 1),
    ]


def test_an_inline_message_group_runs_under_rlvp_compile_test(tmp_path):
    path = tmp_path / "t.rlvp"
    path.write_text(
        ONE_CALL
        + 'test "grouped" {\n  episode {\n    message {\n      assistant "looking"\n      call get {"id": "A"} ok\n'
        + '      call get {"id": "B"} ok\n    }\n    call get {"id": "C"} ok\n  }\n'
        + "  expect one_call at call 0 == -0.1\n  expect one_call at call 1 == -0.1\n  expect one_call == -0.2\n}\n"
    )
    results = run_tests(load_program(str(path)))
    assert [(r.name, r.passed) for r in results] == [("grouped", True)]


_events = st.lists(
    st.tuples(st.sampled_from(("call", "call", "assistant", "user")), st.sampled_from("AB"), st.booleans()),
    max_size=10,
)


@settings(max_examples=150, deadline=None)
@given(_events, st.booleans())
def test_compiled_streamed_and_reference_agree(drafts, with_messages):
    rules = TOOLS + (
        "violation one_call (-0.1) {\n  on call and seen (call or assistant same message)\n}\n"
        "violation again_in_message (-0.2) {\n  on call get and seen (call get same message since user or call put)\n}\n"
        "obligation pair (+0.1, expire -0.1) {\n  open on call put\n  discharge on call get same message\n}\n"
    )
    program = loads(rules)
    ruleset = check_text(rules).ruleset
    assert ruleset is not None
    events, message = [], 0
    for i, (kind, target, join) in enumerate(drafts):
        if kind == USER or not join:
            message += 1
        m = message if with_messages else None
        if kind == "call":
            tool = "put" if target == "B" and join else "get"
            events.append(Event(i, CALL, tool=tool, arguments={"id": target}, result="x", message=m))
        else:
            events.append(Event(i, kind, text="t", message=m))
    episode = Episode("g", tuple(events))
    batch = program.score(episode)
    stream = program.stream()
    streamed = [c for e in episode.events for c in stream.step(e)] + stream.finish()
    key = lambda c: (c.event_index, c.rule, c.value, c.trigger)  # noqa: E731
    assert sorted(map(key, streamed)) == sorted(map(key, batch))
    assert sorted(map(key, score_reference(ruleset, episode))) == sorted(map(key, batch))
    if not with_messages:
        assert not [c for c in batch if c.rule in ("one_call", "again_in_message") or c.value > 0]


@pytest.mark.parametrize("binding", ["call", "target", "message"])
def test_every_binding_keyword_prints_bare(binding):
    text = TOOLS + f"violation v (-0.1) {{\n  on call and seen (call same {binding})\n}}\n"
    assert f"same {binding})" in print_rule_file(_tree(text))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_generated_episodes_share_messages_only_when_the_rules_bind_them(data):
    """`--check`'s episodes (rlvp_dsl.testing.episodes) group events into messages for rules that
    bind `same message`, so such a rule can fire there; other rule files get the episodes as before."""
    from rlvp_dsl.testing import episodes

    grouped = data.draw(episodes(loads(ONE_CALL), min_events=1, max_events=8)).events
    assert all(e.message is not None for e in grouped)
    assert [e.message for e in grouped] == sorted(e.message for e in grouped)  # contiguous, in order
    for a, b in zip(grouped, grouped[1:]):
        if USER in (a.kind, b.kind):
            assert a.message != b.message  # a user turn is a message of its own
    plain = data.draw(episodes(loads(TOOLS + "violation v (-0.1) {\n  on call get error\n}\n"), max_events=8))
    assert all(e.message is None for e in plain.events)


def test_in_messages_joins_assistant_turns_and_calls_never_user_turns():
    from rlvp_dsl.testing.strategies import in_messages

    events = (Event(0, USER, text="u"), Event(1, ASSISTANT, text="a"), _call(2, "A", None), Event(3, USER, text="u"))
    events += (_call(4, "B", None), _call(5, "C", None))
    assert [e.message for e in in_messages(events, [True] * 6)] == [0, 1, 1, 2, 3, 3]
    assert [e.message for e in in_messages(events, [False] * 6)] == [0, 1, 2, 3, 4, 5]


def test_same_message_warns_where_a_tool_takes_an_argument_called_message(tmp_path):
    """RV308: a file where `message` is a known argument (a target, a manifest parameter, a test
    episode's argument) gets a warning at each bare `same message`; the backticked argument and a file
    with no such argument get none."""
    rule = "violation resend (-0.1) {\n  on call send and seen (call send ok same message)\n}\n"
    path = tmp_path / "r.rlvp"
    for tools in ("tool send : write target `message`\n", "tool send : write\n"):
        path.write_text(tools + rule)
        found = [
            (d.code, d.severity, d.span.line, d.span.column) for d in check_file(str(path), lints=True).diagnostics
        ]
        assert found == ([("RV308", "warning", 3, 44)] if "target" in tools else [])
    path.write_text("tool send : write target `message`\n" + rule.replace("same message", "same `message`"))
    assert check_file(str(path), lints=True).diagnostics == []
    with_test = (
        "tool send : write\n"
        + rule
        + 'test "t" {\n  episode { call send {"message": "hi"} ok }\n  expect resend == 0\n}\n'
    )
    path.write_text(with_test)
    [d] = check_file(str(path), lints=True).diagnostics
    assert d.code == "RV308" and "same `message`" in d.help
