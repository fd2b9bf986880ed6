"""Compiler: the exact order of effects within one event, streaming contract, bounds."""

from __future__ import annotations

import pytest

from rlvp_dsl import loads
from rlvp_dsl.events import Episode, Event

TOOLS = "tool get : read target id\ntool put : write target id\ntool submit : submit\ntool test : verify\n"


def C(i, tool, status="ok", **kw):
    return Event(i, "call", tool=tool, status=status, **kw)


def score(rules, *events):
    return sorted((c.event_index, c.rule, c.value, c.trigger) for c in loads(TOOLS + rules).score(Episode("e", events)))


def test_discharging_event_never_opens():
    """An event satisfying the discharge condition never opens; only a non-discharging opener does."""
    rules = "obligation o (+1, expire -0.5) { open on call test discharge on call test ok }"
    got = score(rules, C(0, "test"), C(1, "test"), C(2, "test", "error"))
    assert got == [(2, "o", -0.5, "expire")]
    got = score(rules, C(0, "test", "error"), C(1, "test"), C(2, "test"))
    assert got == [(1, "o", 1.0, "discharge")]


def test_before_deadline_spares_the_discharged_instance():
    """A deadline event that also discharges pays the discharge and expires only the others."""
    rules = (
        "obligation o (+1, expire -0.5) { open on call put discharge on call submit ok same id "
        "deadline before call submit }"
    )
    got = score(
        rules,
        C(0, "put", arguments={"id": "A"}),
        C(1, "put", arguments={"id": "B"}),
        C(2, "submit", arguments={"id": "B"}),
    )
    assert got == [(0, "o", -0.5, "expire"), (2, "o", 1.0, "discharge")]


def test_within_counts_calls_not_messages():
    """`within N calls` counts tool calls only: messages in between do not use up the window."""
    rules = "obligation o (+1, expire -0.5) { open on call put discharge on call test ok deadline within 1 calls }"
    ok = score(rules, C(0, "put"), Event(1, "user", text="hi"), Event(2, "assistant", text="x"), C(3, "test"))
    assert ok == [(3, "o", 1.0, "discharge")]
    late = score(rules, C(0, "put"), C(1, "get"), C(2, "test"))
    assert late == [(0, "o", -0.5, "expire")]


def test_instances_are_keyed_by_binding():
    """With `same id`, one instance per id value; reopening an open id does nothing."""
    rules = "obligation o (+1, expire -0.5) { open on call put discharge on call get ok same id }"
    got = score(
        rules,
        C(0, "put", arguments={"id": "A"}),
        C(1, "put", arguments={"id": "A"}),
        C(2, "put", arguments={"id": 1}),
        C(3, "get", arguments={"id": "1"}),
        C(4, "get", arguments={"id": "A"}),
        C(5, "get", arguments={"id": "A"}),
    )
    # 1 and "1" are the same target text (normalise_value)
    assert got == [(3, "o", 1.0, "discharge"), (4, "o", 1.0, "discharge")]


def test_open_without_binding_value_is_ignored():
    """A call lacking the bound argument neither opens nor discharges."""
    rules = "obligation o (+1, expire -0.5) { open on call put discharge on call get ok same id }"
    assert score(rules, C(0, "put"), C(1, "get", arguments={"id": "A"})) == []


def test_assistant_turn_discharges():
    """An obligation can be discharged by an assistant turn (credit lands on that turn)."""
    rules = 'obligation o (+1, expire -1) { open on call put ok discharge on assistant says "done" }'
    got = score(rules, C(0, "put"), Event(1, "user", text="done"), Event(2, "assistant", text="all done"))
    assert got == [(2, "o", 1.0, "discharge")]


def test_no_result_and_malformed_never_discharge():
    """Even a discharge condition without `ok` is not met by malformed or no_result calls."""
    rules = "obligation o (+1, expire -1) { open on call put discharge on call test }"
    got = score(rules, C(0, "put"), C(1, "test", "malformed"), C(2, "test", "no_result"))
    assert got == [(0, "o", -1.0, "expire")]


def test_error_matches_malformed_but_not_no_result():
    """`error` matches error and malformed calls; `no_result` only unanswered ones; `ok` only ok ones."""
    rules = (
        "violation e (-1) { on call error }\nviolation n (-1) { on call no_result }\n"
        "violation k (-1) { on call ok }\nviolation m (-1) { on call malformed }"
    )
    got = score(rules, C(0, "get"), C(1, "get", "error"), C(2, "get", "malformed"), C(3, "get", "no_result"))
    assert [(i, r) for i, r, _, _ in got] == [(0, "k"), (1, "e"), (2, "e"), (2, "m"), (3, "n")]


def test_seen_same_binding_and_since():
    """`seen (... same id since ...)` remembers values per id and forgets them at `since`."""
    rules = "violation v (-1) { on call put unless seen (call get ok same id since call submit) }"
    got = score(
        rules,
        C(0, "get", arguments={"id": "A"}),
        C(1, "put", arguments={"id": "A"}),
        C(2, "put", arguments={"id": "B"}),
        C(3, "submit"),
        C(4, "put", arguments={"id": "A"}),
    )
    assert [i for i, *_ in got] == [2, 4]


def test_seen_is_strictly_earlier():
    """A `seen` condition looks at earlier events only, not the current one."""
    got = score("violation v (-1) { on call get unless seen (call get) }", C(0, "get"), C(1, "get"))
    assert [i for i, *_ in got] == [0]


def test_progress_increasing_from_start_and_ignores_non_numbers():
    """Progress pays only new bests; booleans and missing signals are ignored."""
    rules = "progress p (+1) { signal s increasing from 0 }"
    got = score(
        rules,
        C(0, "get", signals={"s": 1}),
        C(1, "get", signals={"s": True}),
        C(2, "get"),
        C(3, "get", signals={"s": 0.5}),
        C(4, "get", signals={"s": 2}),
    )
    assert [(i, v) for i, _, v, _ in got] == [(0, 1.0), (4, 1.0)]


def _progress_credits(rules, values, start=None):
    """(event, value) of the progress credits, compiled and reference (they must agree), for one call per value."""
    from rlvp_dsl import check_text, reference

    events = [C(i, "get", signals={"left": v}) for i, v in enumerate(values)]
    if start is not None:
        events.insert(0, Event(0, "user", text="go", signals={"left": start}))
        events = [Event(i, e.kind, tool=e.tool, text=e.text, signals=e.signals) for i, e in enumerate(events)]
    episode = Episode("e", tuple(events))
    compiled = [(c.event_index, c.value) for c in loads(TOOLS + rules).score(episode)]
    checked = check_text(TOOLS + rules)
    assert checked.ok
    assert sorted((c.event_index, c.value) for c in reference.score_reference(checked.ruleset, episode)) == sorted(
        compiled
    )
    return compiled


def test_progress_max_caps_the_episode_not_each_step():
    """`max` is the most the rule pays in one episode: ten one-unit steps earn what one ten-unit step earns."""
    rules = "progress p (+0.25 per unit, max 0.75) { signal left decreasing }"
    small = _progress_credits(rules, list(range(9, -1, -1)), start=10)
    bulk = _progress_credits(rules, [0], start=10)
    assert small == [(1, 0.25), (2, 0.25), (3, 0.25)]  # nothing once the cap is reached
    assert bulk == [(1, 0.75)]
    assert sum(v for _, v in small) == sum(v for _, v in bulk) == 0.75
    # the last payment is what is left under the cap
    assert _progress_credits(rules, [8, 5], start=10) == [(1, 0.5), (2, 0.25)]


def test_progress_max_without_per_unit_caps_the_number_of_levels_paid():
    """Flat progress with `max`: at most max / weight new bests are paid; each payment is at most max."""
    assert _progress_credits("progress p (+0.5, max 1) { signal left decreasing }", [3, 2, 1, 0], start=4) == [
        (1, 0.5),
        (2, 0.5),
    ]
    assert _progress_credits("progress p (+2, max 0.5) { signal left decreasing }", [3, 2], start=4) == [(1, 0.5)]


def test_progress_bound_is_the_largest_single_payment():
    """rule_bound: a flat progress rule pays at most min(weight, max) on one event; per unit, max."""
    from rlvp_dsl.ir import ProgressRule, rule_bound

    assert rule_bound(ProgressRule("p", 2.0, "s", "decreasing", max=0.5)) == 0.5
    assert rule_bound(ProgressRule("p", 0.25, "s", "decreasing", max=1.0)) == 0.25
    assert rule_bound(ProgressRule("p", 0.25, "s", "decreasing", per_unit=True, max=1.0)) == 1.0


def test_undeclared_tool_uses_event_tags():
    """A tool the rules do not declare is matched by the tags the source gave its event."""
    got = score("violation v (-1) { on call tag write }", Event(0, "call", tool="other", tags={"write"}))
    assert got == [(0, "v", -1.0, "fire")]


def test_event_bound_sums_rule_bounds():
    """event_bound is |violation| + |credit|+|expire| + the progress cap."""
    program = loads(
        TOOLS + "violation v (-0.5) { on call }\n"
        "obligation o (+1, expire -0.25) { open on call discharge on call }\n"
        "progress p (+0.2 per unit, max 0.7) { signal s decreasing }"
    )
    assert program.event_bound() == pytest.approx(0.5 + 1.25 + 0.7)


def test_scorer_rejects_out_of_order_and_after_finish():
    """A scorer needs events in index order and cannot be reused after finish()."""
    scorer = loads(TOOLS + "repeat_error (-1)").stream()
    with pytest.raises(ValueError, match="expected index 0"):
        scorer.step(C(1, "get"))
    scorer.step(C(0, "get"))
    scorer.finish()
    with pytest.raises(ValueError, match="finished"):
        scorer.step(C(1, "get"))


def test_credits_carry_location_and_kind():
    """Each credit names its rule's file:line:col and its kind."""
    program = loads(TOOLS + "\nviolation v (-1) { on call }", "x.rlvp")
    (credit,) = program.score(Episode("e", (C(0, "get"),)))
    assert (credit.location, credit.kind, credit.trigger) == ("x.rlvp:6:1", "violation", "fire")


def test_credits_carry_the_rule_span_and_keep_their_json_keys():
    """A credit's span is its rule's (file, line, column), and to_json adds the new keys to the old ones."""
    program = loads(TOOLS + "\nviolation v (-1) { on call }", "x.rlvp")
    (credit,) = program.score(Episode("e", (C(0, "get"),)))
    assert (credit.span.file, credit.span.line, credit.span.column) == ("x.rlvp", 6, 1)
    assert credit.span.location == credit.location
    doc = credit.to_json()
    assert list(doc)[:7] == ["event_index", "rule", "value", "location", "reason", "kind", "trigger"]
    assert (doc["related_event"], doc["deadline"], doc["span"]["line"]) == (None, None, 6)


@pytest.mark.parametrize(
    "deadline, events, expected",
    [
        ("deadline before call submit", (C(0, "put"), C(1, "get"), C(2, "submit")), (0, 2, "before")),
        ("deadline within 1 calls", (C(0, "put"), C(1, "get"), C(2, "get")), (0, 2, "within")),
        ("", (C(0, "put"), C(1, "get"), C(2, "get")), (0, 2, "end")),
    ],
)
def test_an_expiry_names_where_its_deadline_was_noticed(deadline, events, expected):
    """An expiry lands on the opening event and names the event where its deadline passed, and which deadline."""
    program = loads(TOOLS + f"obligation o (+1, expire -1) {{ open on call put discharge on call test ok {deadline} }}")
    (credit,) = program.score(Episode("e", events))
    assert (credit.event_index, credit.related_event, credit.deadline) == expected


def test_a_discharge_names_the_opening_event():
    """A discharge lands on the discharging event and names the event that opened the instance."""
    program = loads(TOOLS + "obligation o (+1, expire -1) { open on call put discharge on call test ok }")
    (credit,) = program.score(Episode("e", (C(0, "put"), C(1, "get"), C(2, "test"))))
    assert (credit.event_index, credit.trigger, credit.related_event, credit.deadline) == (2, "discharge", 0, None)


def test_the_conditions_of_a_rule_are_listed_once():
    """ir.conditions: a violation's condition; an obligation's open, discharge and before; none for progress."""
    from rlvp_dsl.ir import conditions

    program = loads(
        TOOLS + "violation v (-1) { on call put }\n"
        "obligation o (+1, expire -1) { open on call put discharge on call test ok deadline before call submit }\n"
        "obligation w (+1, expire -1) { open on call put discharge on call test ok }\n"
        "progress p (+0.1) { signal s decreasing }\n"
    )
    v, o, w, p = program.rules
    assert conditions(v) == (v.cond,)
    assert conditions(o) == (o.open, o.discharge, o.before)
    assert conditions(w) == (w.open, w.discharge)
    assert conditions(p) == ()


def test_progress_start_from_a_message_signal():
    """A signal on the task's user turn sets the start; the first stage then earns credit; messages never do."""
    from rlvp_dsl import loads
    from rlvp_dsl.events import Episode, Event

    program = loads("tool s : read\nprogress p (+1 per unit, max 1) { signal left decreasing }\n")
    events = (
        Event(0, "user", text="go", signals={"left": 4}),
        Event(1, "call", tool="s", signals={"left": 3}),
        Event(2, "assistant", text="x", signals={"left": 1}),
    )
    credits = program.score(Episode("e", events))
    assert [(c.event_index, c.value) for c in credits] == [(1, 1.0)]


def test_returned_binding_matches_whole_tokens_of_a_result():
    """`seen (C returned B)`: B's value is a whole token of an earlier result, never a substring."""
    rules = """
tool list_files : read
tool delete_file : write, destructive target path
violation blind (-1) { on call delete_file unless seen (call list_files ok returned target) }
"""
    program = loads(rules)

    def episode(result, path):
        return Episode(
            "e",
            (
                Event(0, "call", tool="list_files", result=result),
                Event(1, "call", tool="delete_file", arguments={"path": path}),
            ),
        )

    assert program.score(episode('["a.txt", "b.txt"]', "a.txt")) == []
    assert program.score(episode("Files: a.txt.", "a.txt")) == []
    assert [c.value for c in program.score(episode('["a.txt2"]', "a.txt"))] == [-1.0]
    assert [c.value for c in program.score(episode('["xa.txt"]', "a.txt"))] == [-1.0]


def test_blind_destructive_follows_values_a_read_returned():
    """A write whose target an earlier successful read returned is inspected (chain-4's transform)."""
    rules = """
tool fetch : read
tool transform : write, destructive target token
blind_destructive (-0.3)
"""
    program = loads(rules)
    ok = Episode(
        "e",
        (
            Event(0, "call", tool="fetch", result="token: K7"),
            Event(1, "call", tool="transform", arguments={"token": "K7"}),
        ),
    )
    blind = Episode(
        "e",
        (
            Event(0, "call", tool="fetch", result="token: K8"),
            Event(1, "call", tool="transform", arguments={"token": "K7"}),
        ),
    )
    failed_read = Episode(
        "e",
        (
            Event(0, "call", tool="fetch", result="token: K7", status="error"),
            Event(1, "call", tool="transform", arguments={"token": "K7"}),
        ),
    )
    assert program.score(ok) == []
    assert [c.event_index for c in program.score(blind)] == [1]
    assert [c.event_index for c in program.score(failed_read)] == [1]


def test_default_blind_destructive_spares_additive_writes():
    """The default `on` of blind_destructive: a write tagged additive (MCP destructiveHint false) is never blind;
    a destructive one is, even if also tagged additive; a bare write is."""
    rules = (
        "tool add : write, additive target id\ntool wipe : write, additive, destructive target id\n"
        "blind_destructive (-0.2)"
    )
    got = score(
        rules,
        C(0, "add", arguments={"id": "A"}),
        C(1, "wipe", arguments={"id": "B"}),
        C(2, "put", arguments={"id": "C"}),
    )
    assert got == [(1, "blind_destructive", -0.2, "fire"), (2, "blind_destructive", -0.2, "fire")]
