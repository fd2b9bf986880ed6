"""ATIF v1.7 (Harbor's Agent Trajectory Interchange Format): read trajectories, write them back with credits.

The format (Harbor RFC 0001, ``schema_version: "ATIF-v1.7"``; the `atif` package on PyPI has its
pydantic models) is one JSON object per trajectory: ``agent``, ``steps[]`` numbered from 1, and
optional ``final_metrics``.  A file holds one trajectory or a JSON list of them.

Reading (:func:`read_atif`), one episode per trajectory:

* a ``system`` step is no event; the first one's text is ``meta["policy"]``;
* a ``user`` step is a ``user`` event (its ``message`` text);
* an ``agent`` step is an ``assistant`` event for non-blank ``message`` text, then one call per
  ``tool_calls[]`` entry (``tool_call_id``, ``function_name``, ``arguments``); its
  ``observation.results[]`` are paired with calls by ``source_call_id`` (a result whose
  ``source_call_id`` is null answers no tool call -- a terminal's output, say -- and is counted in
  ``meta["atif_unpaired_results"]``).  A result whose ``extra`` has ``error``/``is_error`` true, or
  whose text starts ``Error``, is a tool error (the ``openai`` error signal);
* the steps that give events are the episode's messages (`Event.message`: 0, 1, 2 ...);
* ``metrics.completion_token_ids`` of an agent step are kept as they are, never retokenised:
  ``meta["completion_token_ids"]`` is a list of ``{"message": int, "token_ids": [int, ...]}``
  (`rlvp_dsl.token_data` joins them into the ids per-token credit lands on: ``POST /score``'s
  ``token_credits``);
* the id is ``trajectory_id`` (else ``session_id``, else the file name); the outcome is
  ``extra.reward`` (a number or null); ``agent`` is kept as ``meta["atif_agent"]``.

Writing (:func:`trajectory_from_episode`, :func:`write_atif`): the events grouped by message into
steps, each call with a ``tool_call_id`` (``call_<event index>`` when it had none) and its result as
an observation on the same step (as the format requires); credits on ``steps[].extra.rlvp`` (the
credits of that step's events, `Credit.to_json`), totals on ``final_metrics.extra.rlvp``
(``total`` and ``rule_totals``).  What the format has no field for is kept under ``extra``
(``rlvp_event`` on a call: its status, raw arguments, error text, requestor, signals; ``rlvp_meta``
and ``reward`` on the trajectory), so reading a written file gives the same episode back.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import attrs

from rlvp_dsl.events import ASSISTANT, CALL, ERROR, MALFORMED, NO_RESULT, USER, Credit, Episode, Event

from .arguments import message_text
from .builder import EpisodeBuilder, is_reward
from .error_signals import ErrorSignal
from .errors import ReaderError, each_record, expected_field, expected_got
from .loading import is_atif  # detection lives with the other formats' (loading imports this module lazily)

#: The version `trajectory_from_episode` writes.
SCHEMA_VERSION = "ATIF-v1.7"
_SOURCES = ("system", "user", "agent")
#: Meta keys the writer puts in fields of their own (not in ``extra.rlvp_meta``).
_OWN_META = ("policy", "completion_token_ids", "atif_agent")


def read_atif(
    data: Any, file: str, name: str, signal: ErrorSignal, *, record_errors: list[ReaderError] | None = None
) -> list[Episode]:
    """Episodes of a parsed ATIF file: one trajectory object, or a list of them (with a `record_errors`
    list, a bad trajectory of a list is appended to it and the others are still read: `each_record`).

    Args:
        data: the parsed JSON.
        file: the file name, for error messages.
        name: the default episode id (``name``, ``name#[i]`` in a list).
        signal: how a tool result is recognised as an error.

    Raises:
        ReaderError: a record is malformed (names the record, ``[2].steps[4]``, and the field; in a
            list, without `record_errors`).
    """
    if isinstance(data, list):
        return each_record(
            data, lambda i, item: _trajectory(item, file, f"[{i}]", f"{name}#[{i}]", signal), record_errors
        )
    return [_trajectory(data, file, "", name, signal)]


def _trajectory(data: Any, file: str, record: str, default_id: str, signal: ErrorSignal) -> Episode:
    if not isinstance(data, dict):
        raise ReaderError(file, record, detail=expected_got("an ATIF trajectory object", data))
    version = data.get("schema_version")
    if not isinstance(version, str) or not version.startswith("ATIF-"):
        raise ReaderError(file, record, "schema_version", expected_got('an ATIF version ("ATIF-v1.7")', version))
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise ReaderError(file, record, "steps", expected_got("a list of steps", steps))
    extra = _object(data.get("extra"), file, record, "extra")
    reward = extra.get("reward")
    if not is_reward(reward):
        raise ReaderError(file, record, "extra.reward", expected_got("a finite number or null", reward))
    builder = EpisodeBuilder(signal)
    meta: dict[str, Any] = {}
    tokens: list[dict[str, Any]] = []
    restore: list[tuple[str, dict[str, Any]]] = []  # per call: where it is, its rlvp_event
    unpaired = 0
    message = -1  # the index of the last step that gave events
    prefix = f"{record}.steps" if record else "steps"
    for position, step in enumerate(steps):
        where = f"{prefix}[{position}]"
        if not isinstance(step, dict):
            raise ReaderError(file, where, detail=expected_got("a step object", step))
        source = step.get("source")
        if source not in _SOURCES:
            raise ReaderError(file, where, "source", expected_field("one of system/user/agent", step, "source"))
        content = step.get("message")
        if not isinstance(content, (str, list)):
            raise ReaderError(file, where, "message", expected_got("text or a list of content parts", content))
        text = message_text(content)
        if source == "system":
            meta.setdefault("policy", text)
            continue
        calls = step.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise ReaderError(file, where, "tool_calls", expected_got("a list of tool calls or null", calls))
        step_extra = _object(step.get("extra"), file, where, "extra")
        signals = step_extra.get("rlvp_signals")
        if not text.strip() and not calls and not signals:
            unpaired += _observation(step, builder, file, where, signal)
            continue
        builder.begin_message()
        message += 1
        kind = USER if source == "user" or step_extra.get("rlvp_source") == "user" else ASSISTANT
        builder.message(kind, text, signals if isinstance(signals, dict) else None)
        for k, entry in enumerate(calls or []):
            if not isinstance(entry, dict):
                raise ReaderError(file, f"{where}.tool_calls[{k}]", detail=expected_got("a tool call object", entry))
            call_extra = _object(entry.get("extra"), file, f"{where}.tool_calls[{k}]", "extra")
            saved = call_extra.get("rlvp_event")
            restore.append((f"{where}.tool_calls[{k}]", saved if isinstance(saved, dict) else {}))
            raw = saved.get("raw_arguments") if isinstance(saved, dict) and "raw_arguments" in saved else None
            builder.call(
                entry.get("function_name"),
                raw if raw is not None else entry.get("arguments"),
                call_id=entry.get("tool_call_id"),
                where=f"{where}.tool_calls[{k}]",
                name_field="function_name",
            )
        unpaired += _observation(step, builder, file, where, signal)
        ids = _token_ids(step, file, where)
        if ids is not None:
            tokens.append({"message": message, "token_ids": ids})
    saved_meta = extra.get("rlvp_meta")
    if isinstance(saved_meta, dict):
        meta.update(saved_meta)
    if tokens:
        meta["completion_token_ids"] = tokens
    if isinstance(data.get("agent"), dict):
        meta["atif_agent"] = data["agent"]
    if unpaired:
        meta["atif_unpaired_results"] = unpaired
    given = data.get("trajectory_id") or data.get("session_id")
    episode = builder.episode(str(given) if given else default_id, outcome=reward, source=file, meta=meta)
    return _restored(episode, restore, file)


def _object(value: Any, file: str, record: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReaderError(file, record, field, expected_got("an object or null", value))
    return value


def _observation(step: dict[str, Any], builder: EpisodeBuilder, file: str, where: str, signal: ErrorSignal) -> int:
    """Feed a step's observation results to `builder`; the number of results with no ``source_call_id``."""
    observation = step.get("observation")
    if observation is None:
        return 0
    if not isinstance(observation, dict) or not isinstance(observation.get("results"), list):
        raise ReaderError(file, where, "observation", expected_got('an object {"results": [...]}', observation))
    unpaired = 0
    for k, result in enumerate(observation["results"]):
        at = f"{where}.observation.results[{k}]"
        if not isinstance(result, dict):
            raise ReaderError(file, at, detail=expected_got("an observation result object", result))
        call_id = result.get("source_call_id")
        if call_id is None:
            unpaired += 1
            continue
        if not isinstance(call_id, str):
            raise ReaderError(file, at, "source_call_id", expected_got("a tool_call_id (text) or null", call_id))
        content = result.get("content")
        if not isinstance(content, (str, list, type(None))):
            raise ReaderError(file, at, "content", expected_got("text, a list of content parts or null", content))
        extra = _object(result.get("extra"), file, at, "extra")
        builder.result(message_text(content), call_id=call_id, records=[extra])
    return unpaired


def _token_ids(step: dict[str, Any], file: str, where: str) -> list[int] | None:
    metrics = _object(step.get("metrics"), file, where, "metrics")
    ids = metrics.get("completion_token_ids")
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise ReaderError(file, where, "metrics.completion_token_ids", expected_got("a list of token ids", ids))
    return list(ids)


def _restored(episode: Episode, restore: Sequence[tuple[str, Mapping[str, Any]]], file: str) -> Episode:
    """`episode` with each call's fields that rlvp wrote under ``extra.rlvp_event`` put back."""
    if not any(saved for _, saved in restore):
        return episode
    events, calls = [], iter(restore)
    for event in episode.events:
        if event.kind == CALL:
            where, saved = next(calls)
            if saved:
                event = _apply(event, saved, file, where)
        events.append(event)
    return attrs.evolve(episode, events=events)


#: The fields of ``extra.rlvp_event`` and the JSON types each takes.
_SAVED_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "error_text": (str,),
    "raw_arguments": (str, type(None)),
    "requestor": (str,),
    "ambiguous": (bool,),
    "tags": (list,),
    "signals": (dict,),
    "call_id_generated": (bool,),
}


def _apply(event: Event, saved: Mapping[str, Any], file: str, where: str) -> Event:
    for field, types in _SAVED_TYPES.items():
        if field in saved and not isinstance(saved[field], types):
            raise ReaderError(file, where, f"extra.rlvp_event.{field}", expected_got(types[0].__name__, saved[field]))
    changes: dict[str, Any] = {
        f: saved[f] for f in ("status", "error_text", "raw_arguments", "requestor", "ambiguous") if f in saved
    }
    if "tags" in saved:
        changes["tags"] = frozenset(saved["tags"])
    if "signals" in saved:
        changes["signals"] = saved["signals"]
    if saved.get("call_id_generated"):
        changes["call_id"] = None
    if changes.get("status") == MALFORMED:
        changes["arguments"] = {}
    try:
        return attrs.evolve(event, **changes)
    except (TypeError, ValueError) as exc:
        raise ReaderError(file, where, "extra.rlvp_event", str(exc)) from None


# -- writing -------------------------------------------------------------------------------------


def trajectory_from_episode(
    episode: Episode,
    credits: Sequence[Credit] = (),
    *,
    rule_names: Iterable[str] = (),
    agent: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An episode as one ATIF v1.7 trajectory (a JSON-ready dict), its credits attached.

    Args:
        episode: the episode.
        credits: its credits (`Program.score`); each lands on ``steps[].extra.rlvp`` of the step
            holding its event (a credit on no event of the episode lands on the last step).
        rule_names: the rules of the program, so that ``final_metrics.extra.rlvp.rule_totals`` has
            an entry (0.0) for a rule that gave nothing.
        agent: the ATIF ``agent`` object (default: the one the episode was read with, else
            ``{"name": "rlvp", "version": "1"}``).

    Returns:
        The trajectory; it validates against the `atif` package's ``Trajectory`` (v1.7).
    """
    groups = _groups(episode.events)
    steps: list[dict[str, Any]] = []
    policy = episode.meta.get("policy")
    if isinstance(policy, str):
        steps.append({"step_id": 1, "source": "system", "message": policy})
    tokens = {
        t["message"]: t["token_ids"]
        for t in episode.meta.get("completion_token_ids", ())
        if isinstance(t, Mapping) and "message" in t
    }
    by_event: dict[int, list[dict[str, Any]]] = {}
    known = {e.index for e in episode.events}
    last = episode.events[-1].index if episode.events else -1
    for credit in credits:
        by_event.setdefault(credit.event_index if credit.event_index in known else last, []).append(credit.to_json())
    for message, events in groups:
        step = _step(events, len(steps) + 1)
        ids = tokens.get(message)
        if ids is not None and step["source"] == "agent":
            step["metrics"] = {"completion_token_ids": list(ids)}
        attached = [c for e in events for c in by_event.get(e.index, [])]
        if attached:
            step.setdefault("extra", {})["rlvp"] = attached
        steps.append(step)
    if not steps:  # the format needs a step
        steps.append({"step_id": 1, "source": "user", "message": ""})
        if by_event.get(-1):
            steps[0]["extra"] = {"rlvp": by_event[-1]}
    totals = {name: 0.0 for name in rule_names}
    for credit in credits:
        totals[credit.rule] = totals.get(credit.rule, 0.0) + credit.value
    extra: dict[str, Any] = {"reward": episode.outcome}
    rest = {k: v for k, v in episode.meta.items() if k not in _OWN_META}
    if rest:
        extra["rlvp_meta"] = _plain(rest)
    return {
        "schema_version": SCHEMA_VERSION,
        "trajectory_id": episode.id,
        "agent": dict(agent or episode.meta.get("atif_agent") or {"name": "rlvp", "version": "1"}),
        "steps": steps,
        "final_metrics": {
            "total_steps": len(steps),
            "extra": {"rlvp": {"total": sum(c.value for c in credits), "rule_totals": totals}},
        },
        "extra": extra,
    }


def _groups(events: Sequence[Event]) -> list[tuple[int | None, list[Event]]]:
    """Consecutive events of one message (an event without one is a group of its own)."""
    out: list[tuple[int | None, list[Event]]] = []
    for event in events:
        if out and event.message is not None and out[-1][0] == event.message:
            out[-1][1].append(event)
        else:
            out.append((event.message, [event]))
    return out


def _step(events: Sequence[Event], step_id: int) -> dict[str, Any]:
    texts = [e for e in events if e.kind in (USER, ASSISTANT)]
    calls = [e for e in events if e.kind == CALL]
    user_text = any(e.kind == USER for e in texts)
    step: dict[str, Any] = {
        "step_id": step_id,
        "source": "user" if user_text and not calls else "agent",
        "message": "\n".join(e.text for e in texts),
    }
    signals = {k: v for e in texts for k, v in e.signals.items()}
    extra: dict[str, Any] = {}
    if signals:
        extra["rlvp_signals"] = _plain(signals)
    if user_text and calls:
        extra["rlvp_source"] = "user"
    if calls:
        step["tool_calls"] = [_tool_call(e) for e in calls]
        results = [
            {
                "source_call_id": _call_id(e),
                "content": e.result,
                **({"extra": {"is_error": True}} if e.status == ERROR else {}),
            }
            for e in calls
            if e.status not in (MALFORMED, NO_RESULT) or e.result
        ]
        if results:
            step["observation"] = {"results": results}
    if extra:
        step["extra"] = extra
    return step


def _call_id(event: Event) -> str:
    return event.call_id or f"call_{event.index}"


def _tool_call(event: Event) -> dict[str, Any]:
    saved: dict[str, Any] = {"status": event.status}
    if event.error_text:
        saved["error_text"] = event.error_text
    if event.raw_arguments is not None:
        saved["raw_arguments"] = event.raw_arguments
    if event.requestor != "assistant":
        saved["requestor"] = event.requestor
    if event.tags:
        saved["tags"] = sorted(event.tags)
    if event.signals:
        saved["signals"] = _plain(event.signals)
    if event.ambiguous:
        saved["ambiguous"] = True
    if event.call_id is None:
        saved["call_id_generated"] = True
    return {
        "tool_call_id": _call_id(event),
        "function_name": event.tool or "",
        "arguments": _plain(event.arguments) if event.status != MALFORMED else {},
        "extra": {"rlvp_event": saved},
    }


def _plain(value: Any) -> Any:
    """Frozen mappings and tuples as JSON's objects and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def atif_file_name(episode_id: str, taken: set[str]) -> str:
    """A file name for an episode (its id with characters other than letters, digits, ``._-`` as
    ``_``; ``-2``, ``-3`` ... added when two ids give the same name); the name is added to `taken`."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", episode_id).strip("._") or "episode"
    name, k = f"{stem}.json", 1
    while name in taken:
        k += 1
        name = f"{stem}-{k}.json"
    taken.add(name)
    return name


def write_atif(
    folder: str | os.PathLike[str],
    scored: Iterable[tuple[Episode, Sequence[Credit]]],
    *,
    rule_names: Iterable[str] = (),
    keep: Iterable[str | os.PathLike[str]] = (),
) -> list[Path]:
    """Write each episode with its credits as one ATIF file, ``FOLDER/<episode id>.json`` (the folder is created).

    Args:
        folder: where the files go.
        scored: each episode with its credits.
        rule_names: the program's rules (a total of 0.0 for a rule that gave nothing).
        keep: files that must not be written over (the inputs); checked before anything is written.

    Returns:
        The files written, in episode order.

    Raises:
        FileExistsError: a file would be written over one of `keep` (nothing was written).
        OSError: the folder or a file cannot be written.
    """
    out = Path(folder)
    names = list(rule_names)
    taken: set[str] = set()
    pairs = [(out / atif_file_name(episode.id, taken), episode, credits) for episode, credits in scored]
    kept = {os.path.realpath(p) for p in keep}
    clash = next((path for path, _, _ in pairs if os.path.realpath(path) in kept), None)
    if clash is not None:
        raise FileExistsError(17, "it would write over the input file", str(clash))
    out.mkdir(parents=True, exist_ok=True)
    for path, episode, credits in pairs:
        document = trajectory_from_episode(episode, credits, rule_names=names)
        path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return [path for path, _, _ in pairs]


__all__ = ["SCHEMA_VERSION", "atif_file_name", "is_atif", "read_atif", "trajectory_from_episode", "write_atif"]
