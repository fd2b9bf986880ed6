"""tau2-bench simulation results (``Results`` JSON): one episode per ``simulations[i]``.

Shape (data README section 2)::

    {info: {agent_info: {llm}, user_info: {llm}, environment_info: {domain_name, policy}},
     tasks: [...],
     simulations: [{id, task_id, trial, termination_reason, reward_info: {reward, ...},
                    messages: [{role: "assistant"|"user", content, raw_data?: {finish_reason},
                                tool_calls: [{id, name, arguments: {...}, requestor}] | null},
                               {role: "tool", id, content, requestor, error: bool}, ...]}]}

* ``outcome = reward_info.reward`` (``None`` when absent); ``id = "<file name>#simulations[i]"``.
* Calls in a ``user`` message (telecom's phone tools, ``requestor == "user"``) are call
  events with ``requestor="user"``; the user's text, if any, comes first as a ``user`` event.
* A tool message answers the call whose ``id`` it carries; ``error: true`` marks an error
  (default :class:`ErrorSignal` ``flags=("error",)``).
* ``raw_data.finish_reason == "length"`` marks the message's last call malformed (cut off).
"""

from __future__ import annotations

from typing import Any

from rlvp_dsl.events import ASSISTANT, USER, Episode, trusted_episode

from .arguments import message_text, tool_result
from .builder import EpisodeBuilder, is_reward
from .error_signals import BAD_ERROR_FLAGS, ErrorSignal
from .errors import ReaderError, each_record, expected_field, expected_got
from .tau2_fast import ErrorTest, error_test, fast_events

ROLES = ("assistant", "user", "tool", "system")
_CONTENT_TYPES = (str, list, dict, type(None))


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def read_tau2(
    data: Any,
    file: str,
    name: str,
    signal: ErrorSignal,
    *,
    record_errors: list[ReaderError] | None = None,
    shallow: set[int] | None = None,
    owned: bool = False,
) -> list[Episode]:
    """Episodes of a parsed tau2 ``Results`` file.

    With a `record_errors` list, a malformed simulation is appended to it and the other
    simulations are still read (one bad message loses its simulation, not the file).

    A simulation of the common shape is read by one tight loop (`rlvp_dsl.readers.tau2_fast`),
    any other through `EpisodeBuilder`: the same episodes either way.  With a `shallow` set,
    the ``id`` of each episode the tight loop read -- whose call arguments it found no deeper
    than `MAX_DEPTH` levels -- is added to it (the depth guard of `read_report` skips those).
    `owned`: the caller hands `data` over (parsed for this read and dropped after it), so the
    episodes may keep its call-argument objects instead of copies.

    Raises:
        ReaderError: ``simulations`` is missing, or (without `record_errors`) a
            simulation/message is malformed.
    """
    if not isinstance(data, dict):
        raise ReaderError(file, detail=expected_got("a tau2 Results object", data))
    simulations = data.get("simulations")
    if not isinstance(simulations, list):
        raise ReaderError(file, "", "simulations", expected_got("a list of simulations", simulations))
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    common = {
        "format": "tau2",
        "domain": _get(info, "environment_info", "domain_name"),
        "agent_llm": _get(info, "agent_info", "llm"),
        "user_llm": _get(info, "user_info", "llm"),
    }
    policy = _get(info, "environment_info", "policy")
    if isinstance(policy, str):
        common["policy"] = policy
    test = error_test(signal)
    return each_record(
        simulations,
        lambda i, sim: _simulation(sim, i, file, name, signal, common, test, shallow, owned),
        record_errors,
    )


def _simulation(
    sim: Any,
    i: int,
    file: str,
    name: str,
    signal: ErrorSignal,
    common: dict[str, Any],
    test: ErrorTest | None,
    shallow: set[int] | None = None,
    owned: bool = False,
) -> Episode:
    record = f"simulations[{i}]"
    if not isinstance(sim, dict):
        raise ReaderError(file, record, detail=expected_got("a simulation object", sim))
    messages = sim.get("messages")
    if not isinstance(messages, list):
        raise ReaderError(file, record, "messages", expected_got("a list of messages", messages))
    events = fast_events(messages, test, owned)
    builder, bad_flags = None, list[str]()
    if events is None:  # not the common shape: the general path, message by message
        builder, bad_flags = _general(messages, record, file, signal)
    reward_info = sim.get("reward_info")
    reward = reward_info.get("reward") if isinstance(reward_info, dict) else None
    if not is_reward(reward):
        raise ReaderError(file, f"{record}.reward_info", "reward", expected_got("a finite number or null", reward))
    meta = {
        **common,
        "simulation_id": sim.get("id"),
        "task_id": sim.get("task_id"),
        "trial": sim.get("trial"),
        "termination_reason": sim.get("termination_reason"),
    }
    if builder is not None:
        if bad_flags:  # `"error": "yes"`: no flag, and said (docs/readers.md, "When a tool result is an error")
            meta[BAD_ERROR_FLAGS] = bad_flags
        return builder.episode(f"{name}#{record}", outcome=reward, source=file, meta=meta)
    # as `EpisodeBuilder.episode` makes it: no orphan result, no ambiguous call, no bad tool name
    outcome = None if reward is None else float(reward)
    episode = trusted_episode(f"{name}#{record}", tuple(events or ()), outcome, file, meta)
    if shallow is not None:
        shallow.add(id(episode))
    return episode


def _general(messages: list[Any], record: str, file: str, signal: ErrorSignal) -> tuple[EpisodeBuilder, list[str]]:
    """The builder of a simulation's `messages`, read message by message (any shape), and the
    tool results whose error flag is not a boolean (``simulations[i].messages[k]: field 'error':
    ...``, `ErrorSignal.odd_flags`: for the episode's ``meta["bad_error_flags"]``)."""
    builder = EpisodeBuilder(signal)
    begin, turn, result = builder.begin_message, builder.turn, builder.result
    odd = signal.odd_flags if signal.flags else None
    bad: list[str] = []
    for position, message in enumerate(messages):
        # the two commonest messages first, as `_message` reads them: a turn of text without
        # calls, and a tool's text result (no MCP result inside); everything else goes there
        if type(message) is dict:
            content = message.get("content")
            if type(content) is str:
                role = message.get("role")
                if role == "tool":
                    if not ('"isError"' in content and content.lstrip().startswith("{")):
                        begin()
                        result(content, call_id=message.get("id"), records=(message,))
                        if odd is not None and (problems := odd(message)):
                            bad.extend(f"{_where(record, position)}: {p}" for p in problems)
                        continue
                elif (role == "assistant" or role == "user") and message.get("tool_calls") is None:
                    turn(ASSISTANT if role == "assistant" else USER, content)
                    continue
        begin()
        records = _message(message, record, position, file, builder)
        if odd is not None and records and (problems := odd(*records)):
            bad.extend(f"{_where(record, position)}: {p}" for p in problems)
    return builder, bad


def _message(message: Any, record: str, position: int, file: str, builder: EpisodeBuilder) -> list[Any] | None:
    """One message of ``record`` (``simulations[i]``) at `position`; for a tool result, its
    records (the message, then an MCP result inside it), else None.  Its place,
    ``simulations[i].messages[k]``, is worded only when a problem needs it: most messages
    have none, and this runs once per message of every file."""
    if type(message) is not dict:
        if not isinstance(message, dict):
            raise ReaderError(file, _where(record, position), detail=expected_got("a message object", message))
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        if not isinstance(content, _CONTENT_TYPES):
            raise ReaderError(file, _where(record, position), "content", expected_got("text or null", content))
        text, inner = tool_result(content)
        records = [message, *inner]
        builder.result(text, call_id=message.get("id"), records=records)
        return records
    if role not in ROLES:
        raise ReaderError(
            file, _where(record, position), "role", expected_field("one of " + "/".join(ROLES), message, "role")
        )
    if type(content) is not str and not isinstance(content, _CONTENT_TYPES):
        raise ReaderError(file, _where(record, position), "content", expected_got("text or null", content))
    if role == "system":
        return None
    builder.message(
        ASSISTANT if role == "assistant" else USER, content if type(content) is str else message_text(content)
    )
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        raise ReaderError(
            file, _where(record, position), "tool_calls", expected_got("a list of tool calls or null", calls)
        )
    cut = ""
    if _get(message, "raw_data", "finish_reason") == "length":
        cut = "call cut off by the length limit (finish_reason 'length')"
    last = len(calls) - 1
    for k, entry in enumerate(calls):
        if not isinstance(entry, dict):
            builder.call(None, None, problem=f"tool call must be a JSON object, got {type(entry).__name__}")
            continue
        requestor = entry.get("requestor") or role
        if requestor != "assistant" and requestor != "user":
            requestor = role
        name = entry.get("name")
        builder.call(
            name,
            entry.get("arguments"),
            call_id=entry.get("id"),
            requestor=requestor,
            problem=cut if k == last else "",  # the length limit cuts the last call only
            # the call's place is worded only for a name that is not a tool name (its one use)
            where="" if type(name) is str and name.strip() else f"{_where(record, position)}.tool_calls[{k}]",
        )
    return None


def _where(record: str, position: int) -> str:
    """``simulations[i].messages[k]``: a message's place, for an error or a problem."""
    return f"{record}.messages[{position}]"
