"""Pairing tool results with calls: by id, else by tool name and per-name order, else by position;
an out-of-order run whose same-name calls could be swapped is reported, and rules on errors skip them."""

from __future__ import annotations

from rlvp_dsl import episode_from_messages, loads

RULES = """
tool write_file  : write target path
tool read_file   : read target path
tool delete_file : write, destructive target path
violation errored_call (-0.1) { on call error }
repeat_error (-0.3)
"""
ERR = "{'error': 'disk on fire'}"


def _turn(*names, ids=None):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                **({"id": ids[k]} if ids else {}),
                "function": {"name": name, "arguments": {"path": f"f{k}"}},
            }
            for k, name in enumerate(names)
        ],
    }


def _result(name, content, **extra):
    return {"role": "tool", "name": name, "content": content, **extra}


def _read(messages):
    return episode_from_messages([{"role": "user", "content": "tidy up"}, *messages], error_signal="trl")


def test_trl_sync_results_first_are_paired_by_name():
    """TRL 1.16: sync write and delete answer before the async read: each result reaches its own call."""
    episode = _read(
        [
            _turn("write_file", "read_file", "delete_file"),
            _result("write_file", "written"),
            _result("delete_file", "deleted"),
            _result("read_file", ERR),
        ]
    )
    assert [(c.tool, c.status, c.result) for c in episode.calls] == [
        ("write_file", "ok", "written"),
        ("read_file", "error", ERR),
        ("delete_file", "ok", "deleted"),
    ]
    assert not any(c.ambiguous for c in episode.calls) and "ambiguous_results" not in episode.meta
    credits = loads(RULES).score(episode)
    assert [(episode.events[c.event_index].tool, c.rule, c.value) for c in credits] == [
        ("read_file", "errored_call", -0.1)
    ]


def test_an_id_wins_over_the_name_and_no_name_pairs_by_position():
    episode = _read(
        [
            _turn("read_file", "read_file", ids=["a", "b"]),
            _result("read_file", "B", tool_call_id="b"),
            _result("read_file", "A", tool_call_id="a"),
        ]
    )
    assert [c.result for c in episode.calls] == ["A", "B"]
    episode = _read(
        [_turn("write_file", "delete_file"), {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]
    )
    assert [c.result for c in episode.calls] == ["1", "2"]
    episode = _read([_turn("write_file", "delete_file"), _result("unknown_tool", "1"), _result("delete_file", "2")])
    assert [c.result for c in episode.calls] == ["1", "2"]  # a name no call has: the oldest unanswered call


def test_same_name_calls_that_could_be_swapped_are_ambiguous_and_skipped_by_error_rules():
    """[read (async, fails), read (async), write (sync)] comes back write, read, read: the two reads could
    be swapped.  Their statuses differ, so neither is ok nor error: errored_call / repeat_error skip them."""
    episode = _read(
        [
            _turn("read_file", "read_file", "write_file"),
            _result("write_file", "written"),
            _result("read_file", ERR),
            _result("read_file", "text"),
        ]
    )
    reads = [c for c in episode.calls if c.tool == "read_file"]
    assert [(c.status, c.result, c.ambiguous) for c in reads] == [("no_result", "", True)] * 2
    assert "could be another 'read_file' call's" in reads[0].error_text
    assert episode.calls[2].status == "ok" and not episode.calls[2].ambiguous
    assert episode.meta["ambiguous_results"] == 2
    assert episode.calls[0].to_json()["ambiguous"] is True
    assert loads(RULES).score(episode) == []


def test_same_name_results_in_call_order_are_not_ambiguous():
    """Results in call order: position and names agree, nothing is a guess."""
    episode = _read(
        [
            _turn("read_file", "read_file", "write_file"),
            _result("read_file", ERR),
            _result("read_file", "text"),
            _result("write_file", "written"),
        ]
    )
    assert [(c.status, c.ambiguous) for c in episode.calls] == [("error", False), ("ok", False), ("ok", False)]


def test_swappable_results_with_one_status_keep_it_and_are_still_reported():
    """Both reads ok with different texts: the status is certain (kept), the pairing of texts is not (reported)."""
    episode = _read(
        [
            _turn("read_file", "read_file", "write_file"),
            _result("write_file", "written"),
            _result("read_file", "one"),
            _result("read_file", "two"),
        ]
    )
    assert [(c.status, c.result, c.ambiguous) for c in episode.calls] == [
        ("ok", "one", True),
        ("ok", "two", True),
        ("ok", "written", False),
    ]
    assert episode.meta["ambiguous_results"] == 2
    same = _read(
        [
            _turn("read_file", "read_file", "write_file"),
            _result("write_file", "written"),
            _result("read_file", "same"),
            _result("read_file", "same"),
        ]
    )
    assert not any(c.ambiguous for c in same.calls)  # swapping identical results changes nothing


def test_each_run_of_results_is_judged_alone():
    """An out-of-order run in one turn does not make a later in-order turn's results ambiguous."""
    episode = _read(
        [
            _turn("read_file", "write_file"),
            _result("write_file", "w"),
            _result("read_file", "r"),
            _turn("read_file", "read_file"),
            _result("read_file", ERR),
            _result("read_file", "ok"),
        ]
    )
    assert [(c.status, c.ambiguous) for c in episode.calls] == [
        ("ok", False),
        ("ok", False),
        ("error", False),
        ("ok", False),
    ]
