"""Bad input to the Python API, replayed from tables (issue 17: a new user's mistakes).

Two kinds of rows:

* `CASES`: one call each (``rlvp_dsl.loads``/`load_program`/`check_text`, the readers,
  `Program.score`, `rlvp_dsl.attach`, the trainer's config), with the exception type the API
  documents and the words its message must say (the file, record or field at fault).  A row whose
  ``raises`` is None must return, and its ``check`` says what it must return.
* generated rows: every field of a real trajectory of each format (``examples/``) replaced by a
  value of the wrong type or removed, and every line of a real rule file removed or cut short.
  Each must give episodes (the same number: nothing silently dropped) or a `ReaderError` naming
  the file; a rule file must give diagnostics (`check_text` never raises) or a `RuleError`.

No row may end in AttributeError/KeyError/TypeError from deep inside, a RecursionError or a hang.
To replay a new bad input, add a row.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from mutation import HOWS, mutate
from trainer.config import ConfigError, load_config

from rlvp_dsl import Episode, ReaderError, RuleError, check_text, load_program, loads
from rlvp_dsl.attach import CreditCountError, call_credits, per_call_values, score_calls, token_credits
from rlvp_dsl.readers import (
    ErrorSignal,
    episode_from_messages,
    episode_from_text,
    error_signal,
    marked_calls,
    read_episodes,
    read_paths,
    read_report,
    reasoning_spans,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules" / "tau2_airline.rlvp"
CHAT = REPO / "examples" / "episodes" / "airline_chat.jsonl"
N_CHAT = len(read_episodes(CHAT))

#: A real trajectory of each format, and the format's name.
SAMPLES = {
    "tau2": REPO / "examples" / "episodes" / "airline_tau2_results.json",
    "tau_bench_v1": REPO / "examples" / "data" / "tau_bench_v1" / "gpt-4o-airline.sample.json",
    "swe_agent": REPO / "examples" / "data" / "swe_agent" / "demonstrations__function_calling_simple.traj",
    "openai": REPO / "examples" / "episodes" / "airline_chat.jsonl",
}

FIFO = object()


def _msgs(**assistant: Any) -> list[dict]:
    """A user turn, one assistant turn (its fields), one tool result."""
    turn = {"role": "assistant", "content": "", **assistant}
    return [{"role": "user", "content": "cancel A"}, turn, {"role": "tool", "tool_call_id": "1", "content": "ok"}]


def _call(name: Any = "get_reservation_details", arguments: Any = '{"reservation_id": "A"}', **extra) -> dict:
    return {"id": "1", "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


@functools.lru_cache(maxsize=1)
def _program():
    return load_program(str(RULES))


def _config(**values: Any) -> Callable[[Path], Any]:
    from trainer.config import TrainConfig

    return lambda d: TrainConfig(**values)


def _finished():
    scorer = _program().stream()
    scorer.finish()
    return scorer


def _episode() -> Episode:
    return episode_from_messages(_msgs(tool_calls=[_call()]))


@dataclasses.dataclass(frozen=True)
class ApiCase:
    """One call.  `call` gets the case's folder (with `files` written in it)."""

    id: str
    call: Callable[[Path], Any]
    raises: type[BaseException] | tuple[type[BaseException], ...] | None
    says: tuple[str, ...] = ()
    files: dict = dataclasses.field(default_factory=dict)
    check: Callable[[Any], bool] | None = None


def _reads(name: str, **kw) -> Callable[[Path], Any]:
    return lambda d: read_episodes(d / name, **kw)


def _text(name: str, **kw) -> Callable[[Path], Any]:
    return lambda d: load_program(str(d / name), **kw)


NAN, INF = float("nan"), float("inf")

CASES: list[ApiCase] = [
    # --- rule text: loads / load_program / check_text -------------------------------------------
    ApiCase("loads-int", lambda d: loads(5), TypeError, ("rule text must be a string",)),
    ApiCase("loads-bytes", lambda d: loads(b"tool get : read\n"), TypeError, ("rule text must be a string",)),
    ApiCase("loads-none", lambda d: loads(None), TypeError, ("rule text must be a string",)),
    ApiCase("loads-empty", lambda d: loads(""), None, check=lambda p: p is not None),
    ApiCase("loads-nul", lambda d: loads("tool get : read\x00\n"), RuleError, ("<string>:1:",)),
    ApiCase(
        "loads-unclosed-brace", lambda d: loads("violation v (-1) {\n on call tag write\n"), RuleError, ("<string>:",)
    ),
    ApiCase("loads-unknown-tag-construct", lambda d: loads("frobnicate x (-1)\n"), RuleError, ("<string>:1:1",)),
    ApiCase(
        "loads-bad-regex",
        lambda d: loads("tool t : read\nviolation v (-1) {\n on call t\n unless seen (user says /(/)\n}\n"),
        RuleError,
        ("<string>:4:",),
    ),
    ApiCase("loads-weight-nan", lambda d: loads("blind_destructive (nan)\n"), RuleError, ("<string>:1:",)),
    ApiCase("loads-weight-huge", lambda d: loads("blind_destructive (-1e400)\n"), RuleError, ("<string>:1:",)),
    ApiCase(
        "loads-unknown-tool",
        lambda d: loads("tool t : read\nviolation v (-1) {\n on call nope\n}\n"),
        RuleError,
        ("unknown tool 'nope'",),
    ),
    ApiCase("loads-path-not-str", lambda d: loads("tool t : read\n", path=3), TypeError, ("not int",)),
    ApiCase("check-text-int", lambda d: check_text(7), TypeError, ("rule text must be a string",)),
    ApiCase("check-text-garbage", lambda d: check_text("}}}{{{"), None, check=lambda r: not r.ok),
    ApiCase(
        "check-text-deep-parens",
        lambda d: check_text(
            "tool t : read\nviolation v (-1) {\n on call t\n"
            " unless seen " + "(" * 3000 + "call t" + ")" * 3000 + "\n}\n"
        ),
        None,
        check=lambda r: r is not None,
    ),
    ApiCase(
        "check-text-huge-line",
        lambda d: check_text("tool t : read  # " + "x" * 2_000_000 + "\n"),
        None,
        check=lambda r: r.ok,
    ),
    ApiCase("load-missing", lambda d: load_program(str(d / "nope.rlvp")), RuleError, ("nope.rlvp",)),
    ApiCase("load-a-folder", lambda d: load_program(str(d)), RuleError, ("is a directory",)),
    ApiCase("load-not-utf8", _text("r.rlvp"), RuleError, ("r.rlvp", "UTF-8"), {"r.rlvp": b"tool \xff : read\n"}),
    ApiCase("load-binary", _text("r.rlvp"), RuleError, ("r.rlvp",), {"r.rlvp": bytes(range(256)) * 4}),
    ApiCase("load-dev-zero", lambda d: load_program("/dev/zero"), RuleError, ("/dev/zero", "not a regular file")),
    ApiCase("load-fifo", _text("r.rlvp"), RuleError, ("r.rlvp", "FIFO"), {"r.rlvp": FIFO}),
    ApiCase(
        "load-include-cycle",
        _text("a.rlvp"),
        RuleError,
        ("a.rlvp",),
        {"a.rlvp": 'include "b.rlvp"\ntool t : read\n', "b.rlvp": 'include "a.rlvp"\n'},
    ),
    ApiCase("load-include-self", _text("a.rlvp"), RuleError, ("a.rlvp",), {"a.rlvp": 'include "a.rlvp"\n'}),
    ApiCase(
        "load-include-missing",
        _text("a.rlvp"),
        RuleError,
        ("a.rlvp:1:", "nope.rlvp"),
        {"a.rlvp": 'include "nope.rlvp"\n'},
    ),
    ApiCase("load-include-folder", _text("a.rlvp"), RuleError, ("a.rlvp:1:",), {"a.rlvp": 'include "."\n'}),
    ApiCase(
        "load-tools-from-missing",
        _text("a.rlvp"),
        RuleError,
        ("a.rlvp:1:", "m.json"),
        {"a.rlvp": 'tools from "m.json"\n'},
    ),
    ApiCase(
        "load-tools-from-bad-json",
        _text("a.rlvp"),
        RuleError,
        ("m.json",),
        {"a.rlvp": 'tools from "m.json"\n', "m.json": '{"tools": ['},
    ),
    ApiCase(
        "load-tools-from-wrong-shape",
        _text("a.rlvp"),
        RuleError,
        ("m.json",),
        {"a.rlvp": 'tools from "m.json"\n', "m.json": '{"tools": 5}'},
    ),
    ApiCase(
        "load-tools-from-empty",
        _text("a.rlvp"),
        RuleError,
        ("m.json",),
        {"a.rlvp": 'tools from "m.json"\n', "m.json": ""},
    ),
    ApiCase(
        "load-tools-from-dev-zero", _text("a.rlvp"), RuleError, ("/dev/zero",), {"a.rlvp": 'tools from "/dev/zero"\n'}
    ),
    ApiCase("load-path-none", lambda d: load_program(None), TypeError, ("NoneType",)),
    # --- the file readers ------------------------------------------------------------------------
    ApiCase("read-missing", _reads("nope.json"), ReaderError, ("nope.json",)),
    ApiCase("read-folder", lambda d: read_episodes(d), ReaderError, ("Is a directory",)),
    ApiCase("read-empty", _reads("e.json"), ReaderError, ("e.json", "empty"), {"e.json": ""}),
    ApiCase("read-whitespace", _reads("e.json"), ReaderError, ("e.json",), {"e.json": "  \n\n "}),
    ApiCase("read-not-utf8", _reads("e.json"), ReaderError, ("e.json",), {"e.json": b'{"a": "\xff"}'}),
    ApiCase("read-utf16", _reads("e.json"), ReaderError, ("e.json",), {"e.json": '{"messages": []}'.encode("utf-16")}),
    ApiCase("read-binary", _reads("e.json"), ReaderError, ("e.json",), {"e.json": bytes(range(256))}),
    ApiCase("read-gzip", _reads("e.json"), ReaderError, ("e.json", "gzip"), {"e.json": b"\x1f\x8b\x08\x00rest"}),
    ApiCase("read-dev-zero", lambda d: read_episodes("/dev/zero"), ReaderError, ("/dev/zero",)),
    ApiCase("read-dev-null", lambda d: read_episodes("/dev/null"), ReaderError, ("/dev/null",)),
    ApiCase("read-fifo", _reads("f.json"), ReaderError, ("f.json", "FIFO"), {"f.json": FIFO}),
    ApiCase("read-json-number", _reads("e.json"), ReaderError, ("e.json",), {"e.json": "5"}),
    ApiCase("read-json-string", _reads("e.json"), ReaderError, ("e.json",), {"e.json": '"hello"'}),
    ApiCase("read-json-null", _reads("e.json"), ReaderError, ("e.json",), {"e.json": "null"}),
    ApiCase("read-json-empty-list", _reads("e.json"), (ReaderError,), ("e.json",), {"e.json": "[]"}),
    ApiCase("read-json-empty-object", _reads("e.json"), ReaderError, ("e.json",), {"e.json": "{}"}),
    ApiCase("read-json-nan", _reads("e.json"), ReaderError, ("e.json",), {"e.json": "NaN"}),
    ApiCase(
        "read-json-trailing-garbage",
        _reads("e.json"),
        ReaderError,
        ("e.json:1:",),
        {"e.json": json.dumps({"messages": _msgs()}) + " }"},
    ),
    ApiCase(
        "read-json-truncated",
        _reads("e.json"),
        ReaderError,
        ("e.json:1:",),
        {"e.json": json.dumps({"messages": _msgs()})[:-3]},
    ),
    ApiCase(
        "read-json-deep",
        _reads("e.json"),
        ReaderError,
        ("e.json", "nested"),
        {"e.json": '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}"},
    ),
    ApiCase(
        "read-jsonl-bad-line",
        _reads("e.jsonl"),
        ReaderError,
        ("e.jsonl:2:",),
        {"e.jsonl": json.dumps({"messages": _msgs()}) + "\n{oops\n"},
    ),
    ApiCase(
        "read-jsonl-number-line",
        _reads("e.jsonl"),
        ReaderError,
        ("e.jsonl: line 2", "got 5"),
        {"e.jsonl": json.dumps({"messages": _msgs()}) + "\n5\n"},
    ),
    ApiCase(
        "read-jsonl-cut-last-line",
        _reads("e.jsonl"),
        ReaderError,
        ("e.jsonl:2:",),
        {"e.jsonl": json.dumps({"messages": _msgs()}) + "\n" + json.dumps({"messages": _msgs()})[:40]},
    ),
    ApiCase("read-bad-format", lambda d: read_episodes(CHAT, format="chat"), ValueError, ("chat",)),
    ApiCase("read-format-int", lambda d: read_episodes(CHAT, format=3), (ValueError, TypeError), ("format",)),
    ApiCase(
        "read-wrong-format-given", lambda d: read_episodes(CHAT, format="tau2"), ReaderError, ("airline_chat.jsonl",)
    ),
    ApiCase(
        "read-swe-as-tau2",
        lambda d: read_episodes(SAMPLES["swe_agent"], format="tau2"),
        ReaderError,
        ("function_calling_simple.traj",),
    ),
    ApiCase(
        "read-tau2-as-swe",
        lambda d: read_episodes(SAMPLES["tau2"], format="swe_agent"),
        ReaderError,
        ("airline_tau2_results.json",),
    ),
    ApiCase(
        "read-v1-as-openai",
        lambda d: read_episodes(SAMPLES["tau_bench_v1"], format="openai"),
        ReaderError,
        ("gpt-4o-airline.sample.json",),
    ),
    ApiCase(
        "read-signal-unknown",
        lambda d: read_episodes(CHAT, error_signal="opnai"),
        ValueError,
        ("did you mean 'openai'",),
    ),
    ApiCase("read-signal-int", lambda d: read_episodes(CHAT, error_signal=1), TypeError, ("error_signal",)),
    ApiCase(
        "read-path-int",
        lambda d: read_episodes(5),
        TypeError,
        (),
    ),
    ApiCase("read-path-none", lambda d: read_episodes(None), TypeError, ()),
    ApiCase("read-paths-empty-list", lambda d: read_paths([]), None, check=lambda eps: eps == []),
    ApiCase("read-paths-a-string", lambda d: read_paths(str(CHAT)), None, check=lambda eps: len(eps) == N_CHAT),
    ApiCase("read-paths-missing", lambda d: read_paths([d / "nope"]), ReaderError, ("nope",)),
    ApiCase("read-paths-empty-folder", lambda d: read_paths([d]), (None), check=lambda eps: eps == []),
    ApiCase(
        "read-paths-bad-file-in-folder",
        lambda d: read_paths([d]),
        ReaderError,
        ("bad.json",),
        {"bad.json": "{oops", "good.jsonl": json.dumps({"messages": _msgs()}) + "\n"},
    ),
    ApiCase(
        "read-paths-signal-name",
        lambda d: read_paths([CHAT], error_signal="mcp"),
        None,
        check=lambda eps: len(eps) == N_CHAT,
    ),
    ApiCase("read-paths-signal-bad", lambda d: read_paths([CHAT], error_signal="nope"), ValueError, ("nope",)),
    ApiCase("read-paths-format-bad", lambda d: read_paths([CHAT], format="x"), ValueError, ("x",)),
    ApiCase("read-paths-int-in-list", lambda d: read_paths([5]), TypeError, ("paths[0] is not one",)),
    ApiCase(
        "read-tau2-simulations-not-list",
        _reads("t.json"),
        ReaderError,
        ("t.json", "simulations"),
        {"t.json": json.dumps({"tasks": [], "simulations": 5})},
    ),
    ApiCase(
        "read-tau2-messages-not-list",
        _reads("t.json"),
        ReaderError,
        ("t.json", "simulations[0]"),
        {"t.json": json.dumps({"tasks": [], "simulations": [{"id": "s", "task_id": "1", "messages": 5}]})},
    ),
    ApiCase(
        "read-v1-traj-not-list",
        _reads("v.json"),
        ReaderError,
        ("v.json", "traj"),
        {"v.json": json.dumps([{"task_id": 1, "reward": 1.0, "info": {}, "traj": "x"}])},
    ),
    ApiCase(
        "read-swe-history-not-list",
        _reads("s.traj"),
        ReaderError,
        ("s.traj", "history"),
        {"s.traj": json.dumps({"history": {"a": 1}})},
    ),
    ApiCase("read-swe-empty-object", _reads("s.traj"), ReaderError, ("s.traj", "neither"), {"s.traj": "{}"}),
    ApiCase("read-swe-other-keys", _reads("s.traj"), ReaderError, ("s.traj", "'info'"), {"s.traj": '{"info": {}}'}),
    ApiCase(
        "read-chat-reward-nan",
        _reads("c.json"),
        (ReaderError,),
        ("c.json", "reward"),
        {"c.json": '{"reward": NaN, "messages": ' + json.dumps(_msgs()) + "}"},
    ),
    ApiCase(
        "read-chat-reward-text",
        _reads("c.json"),
        ReaderError,
        ("c.json", "reward"),
        {"c.json": json.dumps({"reward": "1", "messages": _msgs()})},
    ),
    ApiCase(
        "read-chat-reward-inf",
        _reads("c.json"),
        ReaderError,
        ("c.json", "reward"),
        {"c.json": '{"reward": Infinity, "messages": ' + json.dumps(_msgs()) + "}"},
    ),
    ApiCase(
        "read-chat-reward-huge",
        _reads("c.json"),
        ReaderError,
        ("c.json", "reward"),
        {"c.json": '{"reward": 1e999, "messages": ' + json.dumps(_msgs()) + "}"},
    ),
    # --- chat messages in memory -----------------------------------------------------------------
    ApiCase("messages-none", lambda d: episode_from_messages(None), ReaderError, ("messages",)),
    ApiCase("messages-a-string", lambda d: episode_from_messages("hello"), ReaderError, ("messages",)),
    ApiCase("messages-a-dict", lambda d: episode_from_messages({"role": "user"}), ReaderError, ("messages",)),
    ApiCase("messages-not-objects", lambda d: episode_from_messages([1, 2]), ReaderError, ("messages[0]",)),
    ApiCase(
        "messages-no-role", lambda d: episode_from_messages([{"content": "x"}]), ReaderError, ("messages[0]", "role")
    ),
    ApiCase(
        "messages-role-int",
        lambda d: episode_from_messages([{"role": 1, "content": "x"}]),
        ReaderError,
        ("messages[0]", "role"),
    ),
    ApiCase(
        "messages-unknown-role",
        lambda d: episode_from_messages([{"role": "robot", "content": "x"}]),
        ReaderError,
        ("messages[0]", "robot"),
    ),
    ApiCase(
        "messages-content-int",
        lambda d: episode_from_messages([{"role": "user", "content": 5}]),
        ReaderError,
        ("messages[0]", "content"),
    ),
    ApiCase(
        "messages-content-dict",
        lambda d: episode_from_messages([{"role": "user", "content": {"a": 1}}]),
        None,
        check=lambda e: e.events[0].text == '{"a": 1}',
    ),  # kept as its JSON text, not dropped
    ApiCase(
        "messages-tool-calls-not-list",
        lambda d: episode_from_messages(_msgs(tool_calls=5)),
        ReaderError,
        ("messages[1]", "tool_calls"),
    ),
    # a bad call is isolated to its call: a malformed call event, the rest of the episode kept
    ApiCase(
        "messages-tool-call-not-object",
        lambda d: episode_from_messages(_msgs(tool_calls=["x"])),
        None,
        check=lambda e: [c.status for c in e.calls] == ["malformed"],
    ),
    ApiCase(
        "messages-tool-call-no-function",
        lambda d: episode_from_messages(_msgs(tool_calls=[{"id": "1"}])),
        None,
        check=lambda e: [c.status for c in e.calls] == ["malformed"],
    ),
    ApiCase(
        "messages-tool-call-name-int",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(name=5)])),
        None,
        check=lambda e: "function.name" in e.calls[0].error_text,
    ),
    ApiCase(
        "messages-tool-call-name-none",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(name=None)])),
        None,
        check=lambda e: "no tool name" in e.calls[0].error_text,
    ),
    ApiCase(
        "messages-arguments-int",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(arguments=5)])),
        None,
        check=lambda e: e.calls[0].status == "malformed",
    ),
    ApiCase(
        "messages-arguments-list",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(arguments=[1])])),
        None,
        check=lambda e: e.calls[0].status == "malformed",
    ),
    ApiCase(
        "messages-arguments-bad-json",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(arguments="{")])),
        None,
        check=lambda e: e.calls[0].status == "malformed",
    ),
    ApiCase(
        "messages-arguments-null",
        lambda d: episode_from_messages(_msgs(tool_calls=[_call(arguments=None)])),
        None,
        check=lambda e: len(e.calls) == 1,
    ),
    ApiCase(
        "messages-arguments-deep",
        lambda d: episode_from_messages(
            _msgs(tool_calls=[_call(arguments='{"a": ' + "[" * 50_000 + "]" * 50_000 + "}")])
        ),
        None,
        check=lambda e: e.calls[0].status == "malformed",
    ),
    ApiCase(
        "messages-signal-bad",
        lambda d: episode_from_messages(_msgs(), error_signal="nope"),
        ValueError,
        ("unknown error signal 'nope'",),
    ),
    ApiCase(
        "messages-signal-object",
        lambda d: episode_from_messages(_msgs(), error_signal=object()),
        TypeError,
        ("error_signal",),
    ),
    ApiCase(
        "messages-markers-empty",
        lambda d: episode_from_messages(_msgs(), call_markers=("", "")),
        ValueError,
        ("non-empty",),
    ),
    ApiCase(
        "messages-markers-one",
        lambda d: episode_from_messages(_msgs(), call_markers=("<a>",)),
        ValueError,
        ("call_markers",),
    ),
    ApiCase(
        "messages-reasoning-markers-same",
        lambda d: episode_from_messages(_msgs(), reasoning_markers=("<t>", "<t>")),
        ValueError,
        ("different",),
    ),
    ApiCase("messages-outcome-text", lambda d: episode_from_messages(_msgs(), outcome="1"), ValueError, ("outcome",)),
    ApiCase("messages-outcome-nan", lambda d: episode_from_messages(_msgs(), outcome=NAN), ValueError, ("outcome",)),
    ApiCase("messages-tools-int", lambda d: episode_from_messages(_msgs(), tools=5), TypeError, ("tools",)),
    ApiCase("messages-tools-strings", lambda d: episode_from_messages(_msgs(), tools=["get"]), TypeError, ("tools",)),
    ApiCase(
        "messages-outcome-huge-int", lambda d: episode_from_messages(_msgs(), outcome=10**400), ValueError, ("outcome",)
    ),
    ApiCase("messages-outcome-bool", lambda d: episode_from_messages(_msgs(), outcome=True), ValueError, ("outcome",)),
    ApiCase(
        "messages-reasoning-markers-empty",
        lambda d: episode_from_messages(
            _msgs(content="<think><tool_call>{}</tool_call>"),
            call_markers=("<tool_call>", "</tool_call>"),
            reasoning_markers=("", ""),
        ),
        ValueError,
        ("reasoning_markers",),
    ),
    ApiCase(
        "reasoning-spans-empty-markers", lambda d: reasoning_spans("abc", ("", "")), ValueError, ("reasoning_markers",)
    ),
    ApiCase(
        "reasoning-spans-one-marker", lambda d: reasoning_spans("abc", ("<t>",)), ValueError, ("reasoning_markers",)
    ),
    ApiCase(
        "read-chat-reward-400-digits",
        _reads("c.json"),
        ReaderError,
        ("c.json", "reward"),
        {"c.json": '{"reward": 1' + "0" * 400 + ', "messages": ' + json.dumps(_msgs()) + "}"},
    ),
    ApiCase(
        "read-jsonl-reward-400-digits",
        _reads("c.jsonl"),
        ReaderError,
        ("c.jsonl", "reward"),
        {"c.jsonl": '{"reward": -1' + "0" * 400 + ', "messages": ' + json.dumps(_msgs()) + "}\n"},
    ),
    ApiCase("text-none", lambda d: episode_from_text(None), TypeError, ("text",)),
    ApiCase("text-bytes", lambda d: episode_from_text(b"<tool_call>{}</tool_call>"), TypeError, ("text",)),
    ApiCase(
        "text-unclosed-block",
        lambda d: episode_from_text('<tool_call>{"name": "get", "arguments": {}'),
        None,
        check=lambda e: len(e.calls) == 1 and e.calls[0].status == "malformed",
    ),
    ApiCase(
        "text-block-not-json",
        lambda d: episode_from_text("<tool_call>hello</tool_call>"),
        None,
        check=lambda e: len(e.calls) == 1 and e.calls[0].status == "malformed",
    ),
    ApiCase(
        "text-block-name-int",
        lambda d: episode_from_text('<tool_call>{"name": 5}</tool_call>'),
        None,
        check=lambda e: len(e.calls) == 1 and e.calls[0].status == "malformed",
    ),
    ApiCase(
        "text-block-deep",
        lambda d: episode_from_text("<tool_call>" + "[" * 50_000 + "</tool_call>"),
        None,
        check=lambda e: len(e.calls) == 1 and e.calls[0].status == "malformed",
    ),
    ApiCase(
        "text-many-blocks",
        lambda d: episode_from_text("<tool_call></tool_call>" * 20_000),
        None,
        check=lambda e: len(e.calls) == 20_000,
    ),
    ApiCase(
        "text-markers-same", lambda d: episode_from_text("x", call_markers=("<a>", "<a>")), ValueError, ("different",)
    ),
    ApiCase("text-markers-int", lambda d: episode_from_text("x", call_markers=(1, 2)), ValueError, ("call_markers",)),
    ApiCase("marked-calls-empty-markers", lambda d: marked_calls("<a>x</a>", ("", "")), ValueError, ("non-empty",)),
    ApiCase("marked-calls-none", lambda d: marked_calls(None), TypeError, ("text",)),
    ApiCase("marked-calls-markers-none", lambda d: marked_calls("x", None), ValueError, ("markers",)),
    ApiCase("error-signal-unknown", lambda d: error_signal("tau3"), ValueError, ("did you mean 'tau2'",)),
    ApiCase("error-signal-empty", lambda d: error_signal(""), ValueError, ("unknown error signal ''",)),
    ApiCase("error-signal-int", lambda d: error_signal(5), TypeError, ("error_signal",)),
    ApiCase("error-signal-list", lambda d: error_signal(["openai"]), TypeError, ("error_signal",)),
    ApiCase(
        "error-signal-prefixes-str",
        lambda d: ErrorSignal(prefixes="ERROR"),
        None,
        check=lambda s: s.prefixes == ("ERROR",),
    ),
    # --- Program.score ---------------------------------------------------------------------------
    ApiCase("score-none", lambda d: _program().score(None), TypeError, ("episode",)),
    ApiCase("score-a-string", lambda d: _program().score("episode"), TypeError, ("episode",)),
    ApiCase("score-a-dict", lambda d: _program().score({"messages": []}), TypeError, ("episode",)),
    ApiCase("score-events-of-ints", lambda d: _program().score([1, 2]), TypeError, ("event",)),
    ApiCase(
        "stream-step-int", lambda d: _program().stream().step(5), TypeError, ("an event must be an rlvp_dsl.Event",)
    ),
    ApiCase("stream-step-none", lambda d: _program().stream().step(None), TypeError, ("got NoneType",)),
    ApiCase("stream-step-dict", lambda d: _program().stream().step({"index": 0}), TypeError, ("got dict",)),
    ApiCase(
        "stream-step-out-of-order",
        lambda d: _program().stream().step(_episode().events[1]),
        ValueError,
        ("events must arrive in order: expected index 0, got 1",),
    ),
    ApiCase(
        "stream-step-after-finish",
        lambda d: _finished().step(_episode().events[0]),
        ValueError,
        ("has finished its episode",),
    ),
    ApiCase("read-report-a-number", lambda d: read_report(5), TypeError, ("paths is not one",)),
    ApiCase("read-report-bytes", lambda d: read_report(b"runs/"), TypeError, ("paths is not one",)),
    ApiCase("read-report-none-in-list", lambda d: read_report([CHAT, None]), TypeError, ("paths[1] is not one",)),
    ApiCase("read-report-missing", lambda d: read_report([d / "nope"]), ReaderError, ("nope: no such file or folder",)),
    ApiCase("read-report-empty", lambda d: read_report([]), None, check=lambda r: r.episodes == [] or not r.episodes),
    ApiCase("score-empty-events", lambda d: _program().score([]), None, check=lambda c: c == []),
    ApiCase(
        "score-malformed-call",
        lambda d: _program().score(episode_from_messages(_msgs(tool_calls=[_call(arguments="{")]))),
        None,
        check=lambda c: isinstance(c, list),
    ),
    ApiCase(
        "score-unknown-tool",
        lambda d: _program().score(episode_from_messages(_msgs(tool_calls=[_call(name="frob")]))),
        None,
        check=lambda c: isinstance(c, list),
    ),
    # --- rlvp_dsl.attach -------------------------------------------------------------------------
    ApiCase(
        "per-call-values-short", lambda d: per_call_values("f", _episode(), []), CreditCountError, ("'f'", "expected 1")
    ),
    ApiCase(
        "per-call-values-long", lambda d: per_call_values("f", _episode(), [0.0, 1.0, 2.0]), CreditCountError, ("f",)
    ),
    ApiCase(
        "per-call-values-nan",
        lambda d: per_call_values("f", _episode(), [NAN]),
        None,
        check=lambda c: all(math.isfinite(v) for v in c.values),
    ),
    ApiCase(
        "per-call-values-inf",
        lambda d: per_call_values("f", _episode(), [INF]),
        None,
        check=lambda c: all(math.isfinite(v) for v in c.values),
    ),
    ApiCase(
        "per-call-values-text",
        lambda d: per_call_values("f", _episode(), ["x"]),
        None,
        check=lambda c: all(math.isfinite(v) for v in c.values),
    ),
    ApiCase(
        "per-call-values-none-list",
        lambda d: per_call_values("f", _episode(), None),
        (TypeError, CreditCountError),
        ("f",),
    ),
    ApiCase("score-calls-not-callable", lambda d: score_calls(42, _episode()), TypeError, ("not callable",)),
    ApiCase(
        "score-calls-returns-none",
        lambda d: score_calls(lambda e: None, _episode()),
        (TypeError, CreditCountError),
        ("lambda",),
    ),
    ApiCase("score-calls-raises", lambda d: score_calls(lambda e: 1 / 0, _episode()), ZeroDivisionError, ()),
    ApiCase("call-credits-not-credits", lambda d: call_credits(_episode(), [1, 2]), TypeError, ("credit",)),
    ApiCase("token-credits-count", lambda d: token_credits([1.0], [], 4), CreditCountError, ("call span",)),
    ApiCase("token-credits-outside", lambda d: token_credits([1.0], [(2, 9)], 4), ValueError, ("outside",)),
    ApiCase("token-credits-negative", lambda d: token_credits([1.0], [(-1, 2)], 4), ValueError, ("outside",)),
    ApiCase("token-credits-reversed", lambda d: token_credits([1.0], [(3, 1)], 4), ValueError, ("span",)),
    # --- the trainer's config (trainer.config; the train extra) ------------------------------------
    *[
        ApiCase(f"train-config-{name}", _config(**kw), ConfigError, (says,))
        for name, kw, says in [
            ("lr-inf", {"learning_rate": float("inf")}, "'learning_rate' must be a finite number"),
            ("lr-text", {"learning_rate": "x"}, "'learning_rate' must be a number"),
            ("iterations-float", {"iterations": 1.5}, "'iterations' must be a whole number"),
            ("iterations-bool", {"iterations": True}, "'iterations'"),
            ("method-unknown", {"method": "nope"}, "'method' must be one of"),
            ("out-dir-empty", {"out_dir": ""}, "'out_dir' must be a folder name"),
            ("env-args-list", {"env_args": [1]}, "'env_args' must be a table"),
            ("lora-alpha-zero", {"lora_alpha": 0.0}, "'lora_alpha' must be positive"),
            ("lora-dropout-one", {"lora_dropout": 1.0}, "'lora_dropout' must be a probability"),
            ("seed-negative", {"seed": -1}, "'seed' must be at least 0"),
            ("targets-empty", {"lora_target_modules": []}, "'lora_target_modules'"),
        ]
    ],
    ApiCase(
        "load-config-missing",
        lambda d: load_config(d / "nope.toml"),
        ConfigError,
        ("nope.toml: config file not found",),
    ),
    ApiCase("load-config-folder", lambda d: load_config(d), ConfigError, ("is a folder, not a config file",)),
    ApiCase("load-config-dev-zero", lambda d: load_config("/dev/zero"), ConfigError, ("/dev/zero", "character device")),
    ApiCase("load-config-fifo", lambda d: load_config(d / "c.toml"), ConfigError, ("c.toml", "FIFO"), {"c.toml": FIFO}),
    ApiCase(
        "load-config-empty", lambda d: load_config(d / "c.toml"), ConfigError, ("the config is empty",), {"c.toml": ""}
    ),
    ApiCase(
        "load-config-bad-toml",
        lambda d: load_config(d / "c.toml"),
        ConfigError,
        ("c.toml:1:",),
        {"c.toml": "method = \n"},
    ),
    ApiCase(
        "load-config-override-unknown",
        lambda d: load_config(d / "c.toml", lerning_rate=0.1),
        ConfigError,
        ("unknown setting 'lerning_rate'; did you mean 'learning_rate'?",),
        {"c.toml": 'method = "rlvp"\n'},
    ),
    ApiCase(
        "load-config-override-text",
        lambda d: load_config(d / "c.toml", learning_rate="x"),
        ConfigError,
        ("load_config: 'learning_rate' must be a number",),
        {"c.toml": 'method = "rlvp"\n'},
    ),
    ApiCase(
        "load-config-override-nan",
        lambda d: load_config(d / "c.toml", temperature=NAN),
        ConfigError,
        ("'temperature' must be a finite number",),
        {"c.toml": 'method = "rlvp"\n'},
    ),
    ApiCase("token-credits-n-negative", lambda d: token_credits([1.0], [(0, 1)], -1), ValueError, ("outside",)),
]


def _write(folder: Path, files: dict) -> None:
    for name, content in files.items():
        path = folder / name
        if content is FIFO:
            os.mkfifo(path)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_api_input(case: ApiCase, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, case.files)
    if case.raises is None:
        result = case.call(tmp_path)
        assert case.check is None or case.check(result), result
        return
    with pytest.raises(Exception) as raised:
        case.call(tmp_path)
    exc = raised.value
    assert isinstance(exc, case.raises), f"{type(exc).__name__}: {exc}"
    for fragment in case.says:
        assert fragment in str(exc), str(exc)


# ---------------------------------------------------------------------------------------------
# generated: every field of a real trajectory of each format, of the wrong type or removed
# ---------------------------------------------------------------------------------------------
#: What replaces a field (by the kind of the value it replaces).
PATHS_PER_FORMAT = 20


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Each distinct field path (list indices: the first two elements only), breadth first."""
    out, queue, seen = [], [(prefix, value)], set()
    while queue:
        path, node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node[:2]) if isinstance(node, list) else ()
        for key, child in items:
            sub = (*path, key)
            shape = tuple(k if isinstance(k, str) else "#" for k in sub)
            if shape in seen and not isinstance(key, int):
                continue
            seen.add(shape)
            out.append(sub)
            queue.append((sub, child))
    return out


def _load(fmt: str) -> tuple[Any, bool]:
    text = SAMPLES[fmt].read_text()
    if fmt == "openai":
        return [json.loads(line) for line in text.splitlines() if line.strip()], True
    return json.loads(text), False


def _mutations() -> list[tuple[str, str, tuple, str]]:
    rows = []
    for fmt in SAMPLES:
        data, _ = _load(fmt)
        for path in _paths(data)[:PATHS_PER_FORMAT]:
            for how in HOWS:
                rows.append((f"{fmt}:{'.'.join(map(str, path))}:{how}", fmt, path, how))
    return rows


def _mutated(fmt: str, path: tuple, how: str) -> tuple[Any, bool]:
    data, jsonl = _load(fmt)
    return mutate(data, path, how), jsonl


MUTATIONS = _mutations()
#: Where each format's list of records is (removing one of them removes one episode).
RECORDS = {"tau2": ("simulations",), "tau_bench_v1": (), "openai": (), "swe_agent": None}
EXPECTED_EPISODES = {fmt: len(read_episodes(SAMPLES[fmt])) for fmt in SAMPLES}


@pytest.mark.parametrize("fmt,path,how", [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_a_mutated_trajectory_is_read_in_full_or_refused_by_name(fmt, path, how, tmp_path):
    """A trajectory with one field of the wrong type (or removed): its episodes, every one of them,
    or a ReaderError naming the file; nothing else."""
    data, jsonl = _mutated(fmt, path, how)
    file = tmp_path / SAMPLES[fmt].name
    file.write_text("\n".join(json.dumps(r) for r in data) + "\n" if jsonl else json.dumps(data))
    try:
        episodes = read_episodes(file, format=fmt)
    except ReaderError as exc:
        assert str(file) in str(exc), str(exc)
        return
    a_record_removed = how == "remove" and path[:-1] == RECORDS[fmt]
    assert len(episodes) == EXPECTED_EPISODES[fmt] - a_record_removed, "episodes silently dropped"
    program = _program()
    for episode in episodes:
        assert isinstance(program.score(episode), list)


# ---------------------------------------------------------------------------------------------
# generated: a real rule file with each line removed, or cut short in the middle of it
# ---------------------------------------------------------------------------------------------
RULE_FILES = [REPO / "rules" / "tau2_airline.rlvp", REPO / "examples" / "rules" / "chain4_dense.rlvp"]


def _rule_edits() -> list[tuple[str, Path, str, int]]:
    rows = []
    for file in RULE_FILES:
        lines = file.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            for how in ("drop", "cut"):
                rows.append((f"{file.name}:{i + 1}:{how}", file, how, i))
    return rows


RULE_EDITS = _rule_edits()


@pytest.mark.parametrize("file,how,line", [r[1:] for r in RULE_EDITS], ids=[r[0] for r in RULE_EDITS])
def test_a_broken_rule_file_gives_diagnostics_with_a_place(file, how, line, tmp_path):
    """`check_text` never raises; `loads` raises RuleError or compiles; an error points into the text."""
    lines = file.read_text().splitlines(keepends=True)
    if how == "drop":
        text = "".join(lines[:line] + lines[line + 1 :])
    else:
        text = "".join(lines[:line]) + lines[line][: max(1, len(lines[line].rstrip()) // 2)]
    name = str(tmp_path / file.name)
    result = check_text(text, name)
    n_lines = text.count("\n") + 1
    for diagnostic in result.diagnostics:
        span = diagnostic.span
        if getattr(span, "file", None) == name:
            assert 1 <= span.line <= n_lines, diagnostic
    try:
        loads(text, name)
    except RuleError as exc:
        assert name in str(exc) or exc.diagnostics, str(exc)
        assert not result.ok
    else:
        assert result.ok
