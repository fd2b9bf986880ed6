"""tau-bench (v1) historical trajectories: a JSON list of ``{task_id, trial, reward, info, traj}``.

``traj`` is an OpenAI chat message list (read by :func:`.openai_chat.read_messages`):
tool-call ``arguments`` are JSON text, tool messages carry ``tool_call_id``.  v1 has no
error flag: tools *return* ``"Error: ..."``, so the default :class:`ErrorSignal` is
``prefixes=("Error",)``.  ``outcome = reward``; ``id = "<file name>#[i]"``; meta keeps
``task_id``, ``trial``, ``user_id``, the policy (the system message) and the ``domain``,
which v1 records only in the policy's heading (``# Airline Agent Policy`` -> ``airline``,
``# Retail agent policy`` -> ``retail``; ``None`` without such a heading).
"""

from __future__ import annotations

import re
from typing import Any

from rlvp_dsl.events import Episode

from .builder import EpisodeBuilder, is_reward
from .error_signals import ErrorSignal
from .errors import ReaderError, each_record, expected_got
from .openai_chat import read_messages


_POLICY_HEADING = re.compile(r"\A\s*#\s*([A-Za-z][\w-]*)\s+agent\s+policy\b", re.IGNORECASE)


def policy_domain(policy: Any) -> str | None:
    """The domain a tau-bench policy names in its heading (``# Airline Agent Policy``), lower-case."""
    if not isinstance(policy, str):
        return None
    match = _POLICY_HEADING.match(policy)
    return match.group(1).lower() if match else None


def read_tau_bench_v1(
    data: Any, file: str, name: str, signal: ErrorSignal, *, record_errors: list[ReaderError] | None = None
) -> list[Episode]:
    """Episodes of a parsed tau-bench v1 results list; with a `record_errors` list, a bad entry is
    appended to it and the others are still read (`each_record`).

    Raises:
        ReaderError: the file is not a list, or (without `record_errors`) an entry lacks ``traj``
            or has a bad message.
    """
    if not isinstance(data, list):
        raise ReaderError(file, detail=expected_got("a list of {task_id, trial, reward, traj} entries", data))

    def entry_episode(i: int, entry: Any) -> Episode:
        record = f"[{i}]"
        if not isinstance(entry, dict):
            raise ReaderError(file, record, detail=expected_got("an entry object", entry))
        if "traj" not in entry:
            raise ReaderError(file, record, "traj", "missing (expected a list of chat messages)")
        builder = EpisodeBuilder(signal)
        meta = read_messages(entry["traj"], builder, file, record, "traj")
        reward = entry.get("reward")
        if not is_reward(reward):
            raise ReaderError(file, record, "reward", expected_got("a finite number or null", reward))
        task = entry.get("info", {}).get("task") if isinstance(entry.get("info"), dict) else None
        meta.update(
            format="tau_bench_v1",
            task_id=entry.get("task_id"),
            trial=entry.get("trial"),
            domain=policy_domain(meta.get("policy")),
        )
        if isinstance(task, dict) and "user_id" in task:
            meta["user_id"] = task["user_id"]
        return builder.episode(f"{name}#{record}", outcome=reward, source=file, meta=meta)

    return each_record(data, entry_episode, record_errors)
