"""Information order: what a call had seen is what came back before it was issued.

Events of one assistant message (its text and its calls) are issued together; none of
them has seen the others or their results (docs/language.md, "Information order")."""

from __future__ import annotations

import attrs
from hypothesis import given, strategies as st

from rlvp_dsl import loads
from rlvp_dsl.events import CALL, Episode, Event
from rlvp_dsl.reference import score_reference

RULES = """
tool get    : read target id
tool cancel : write, destructive target id
violation write_unconfirmed (-0.5) { on call tag write unless seen (user says /\\byes\\b/i since assistant) }
blind_destructive (-0.3)
repeat_error (-0.2)
"""
PROGRAM = loads(RULES)

calls = st.builds(
    lambda tool, id, status: ("call", tool, id, status),
    st.sampled_from(["get", "cancel"]),
    st.sampled_from(["A", "B"]),
    st.sampled_from(["ok", "ok", "error"]),
)
assistant_messages = st.tuples(
    st.sampled_from(["", "To confirm, I will cancel A.", "Done."]), st.lists(calls, min_size=0, max_size=3)
)
user_messages = st.sampled_from(["yes", "no", "cancel A please"])
conversations = st.lists(
    st.one_of(user_messages.map(lambda t: ("user", t)), assistant_messages.map(lambda m: ("assistant", m))), max_size=8
)


def build(messages) -> Episode:
    """Events with message ids from a list of ("user", text) / ("assistant", (text, calls))."""
    events: list[Event] = []
    for m, (role, body) in enumerate(messages):
        if role == "user":
            events.append(Event(len(events), "user", text=body, message=m))
            continue
        text, message_calls = body
        if text:
            events.append(Event(len(events), "assistant", text=text, message=m))
        for _, tool, id, status in message_calls:
            events.append(
                Event(
                    len(events),
                    CALL,
                    tool=tool,
                    arguments={"id": id},
                    status=status,
                    error_text="Error: no" if status == "error" else "",
                    message=m,
                )
            )
    return Episode("e", tuple(events))


def call_credits(episode: Episode) -> list[tuple[int, str, float]]:
    """(call number, rule, value) of every credit on a call, compiled == reference checked on the way."""
    compiled = PROGRAM.score(episode)
    assert sorted(map(_key, compiled)) == sorted(map(_key, score_reference(PROGRAM.ruleset, episode)))
    number = {e.index: k for k, e in enumerate(episode.calls)}
    return sorted((number[c.event_index], c.rule, c.value) for c in compiled if c.event_index in number)


def _key(c):
    return (c.event_index, c.rule, c.value, c.trigger, c.reason, c.related_event, c.deadline, c.location)


def _calls_of(episode: Episode, message: int) -> set[int]:
    return {k for k, e in enumerate(episode.calls) if e.message == message}


@given(conversations)
def test_text_in_the_issuing_message_never_changes_a_confirmation(messages):
    """Adding, removing or replacing the assistant text of a call's own message changes no credit on
    that message's calls; splitting a text into two, in its message, changes no credit at all."""
    episode = build(messages)
    base = call_credits(episode)
    for m, (role, body) in enumerate(messages):
        if role != "assistant" or not body[1]:
            continue
        mine = _calls_of(episode, m)
        for text in ("", "To confirm, I will cancel A.", "Done. Anything else?"):
            variant = messages[:m] + [("assistant", (text, body[1]))] + messages[m + 1 :]
            got = call_credits(build(variant))
            assert [c for c in got if c[0] in mine] == [c for c in base if c[0] in mine]
    split = []
    for e in episode.events:
        if e.kind == "assistant" and len(e.text) > 1:
            half = len(e.text) // 2
            split += [attrs.evolve(e, text=e.text[:half]), attrs.evolve(e, text=e.text[half:])]
        else:
            split.append(e)
    split_episode = Episode("e", tuple(attrs.evolve(e, index=i) for i, e in enumerate(split)))
    assert call_credits(split_episode) == base


def _observed(episode: Episode, i: int) -> list[Event]:
    """What the agent had seen when it issued event i: earlier events of earlier messages."""
    me = episode.events[i]
    return [e for e in episode.events[:i] if e.message != me.message]


@given(conversations)
def test_a_read_in_the_same_message_never_inspects(messages):
    """With a successful read of its target just before every write, in the write's own message,
    blind_destructive fires exactly on the writes with no successful read in an earlier message."""
    with_reads = [
        (
            role,
            (
                body[0],
                [
                    c
                    for call in body[1]
                    for c in ([("call", "get", call[2], "ok"), call] if call[1] == "cancel" else [call])
                ],
            ),
        )
        if role == "assistant"
        else (role, body)
        for role, body in messages
    ]
    episode = build(with_reads)
    fired = {k for k, rule, _ in call_credits(episode) if rule == "blind_destructive"}
    want = {
        k
        for k, e in enumerate(episode.calls)
        if e.tool == "cancel"
        and not any(
            o.kind == CALL and o.tool == "get" and o.status == "ok" and o.arguments == e.arguments
            for o in _observed(episode, e.index)
        )
    }
    assert fired == want


@given(conversations)
def test_a_duplicate_in_the_same_message_is_never_a_repeat(messages):
    """With a failing copy sent just before every call in its own message, repeat_error fires exactly
    on the calls that repeat a failure observed in an earlier message (no observed reset since)."""
    doubled = [
        (role, (body[0], [c for call in body[1] for c in (("call", call[1], call[2], "error"), call)]))
        if role == "assistant"
        else (role, body)
        for role, body in messages
    ]
    episode = build(doubled)
    fired = {k for k, rule, _ in call_credits(episode) if rule == "repeat_error"}
    want = set()
    for k, e in enumerate(episode.calls):
        seen = _observed(episode, e.index)
        for j in range(len(seen) - 1, -1, -1):
            o = seen[j]
            if o.kind == CALL and o.failed and o.argument_key() == e.argument_key():
                want.add(k)
                break
            if o.kind == CALL and o.status == "ok" and o.tool == "cancel":
                break  # a successful write since: the failure may no longer hold
    assert fired == want


def test_confirmation_in_the_same_message_as_the_write():
    """The false positive of the airline rules: 'yes', then 'To confirm, I will ...' + the write in one message."""
    messages = [
        ("user", "cancel A please"),
        ("assistant", ("Shall I cancel A?", [])),
        ("user", "yes"),
        ("assistant", ("To confirm, I will cancel A.", [("call", "get", "A", "ok"), ("call", "cancel", "A", "ok")])),
    ]
    credits = call_credits(build(messages))
    assert "write_unconfirmed" not in [rule for _, rule, _ in credits]
    assert credits == [(1, "blind_destructive", -0.3)]  # the read in the same message came back after the write
