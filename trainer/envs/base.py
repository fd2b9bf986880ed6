"""The tool-environment protocol shared by the rollout code and the environments.

An environment is a small, deterministic tool world.  One episode is:

    obs = env.reset(task)           # the task text shown to the policy
    while not done and turns < env.max_turns:
        result = env.step(ToolCall(tool, {"arg": value}))   # a ToolResult
    reward = env.outcome()          # 1.0 on success, 0.0 otherwise

`env.schema()` lists every tool as a `rlvp_dsl.tools.ToolSpec` (the one tool type of
rlvp) whose ``values`` hold the finite set of values each argument may take; the
constrained decoder enumerates tool names x argument values from it (`all_calls`),
so even an untrained policy emits only well-formed calls.  `env.manifest()` is the
tool manifest (`rlvp-tools/1` JSON, tags per tool) the rule files are written
against.

A *conversation* (`ConversationEnv`, e.g. BFCL multi-turn, `trainer.envs.dialog`) has
scripted user turns: `reset` returns the first user message; per user turn the policy
calls tools (`step`) until it answers (the action `END_TURN`, never a tool of the
schema), and `end_turn` returns the next user message, or None when the conversation
is over.  The rollout forces `END_TURN` after `max_calls_per_turn` calls in one user
turn, and `max_turns` still caps the calls of the whole episode.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import attrs

from rlvp_dsl.events import CALL, ERROR, OK, Event
from rlvp_dsl.tools import ToolSpec

MANIFEST_FORMAT = "rlvp-tools/1"
# A manifest lists a tool's tags in this order (a ToolSpec's tags are a set); others follow, sorted.
TAG_ORDER = ("read", "write", "destructive", "verify", "submit")


@attrs.frozen
class Task:
    """One task: an id (unique within its task set) and the seed that fixes it."""

    task_id: str
    seed: int


@attrs.frozen
class ToolCall:
    """A call the policy made: tool name and arguments (argument name -> value text)."""

    tool: str
    arguments: Mapping[str, str] = attrs.field(factory=dict, converter=dict, hash=False)


@attrs.frozen
class ToolResult:
    """What the environment answered to one call.

    Attributes:
        ok: False when the environment signalled an error.
        text: the tool's output (shown to the policy); for errors the error message.
        done: True when the episode is over (the task is solved).
        signals: numeric environment signals after the call (``stages_remaining``).
    """

    ok: bool
    text: str
    done: bool = False
    signals: Mapping[str, float] = attrs.field(factory=dict, converter=dict, hash=False)

    def event(self, index: int, call: ToolCall, tags: frozenset[str] = frozenset()) -> Event:
        """The ``call`` event of `call` answered by this result, as rlvp scores it: status ``ok`` or
        ``error``, the text as the result or the error text, the signals, the tool's `tags`."""
        return Event(
            index=index,
            kind=CALL,
            tool=call.tool,
            arguments=dict(call.arguments),
            status=OK if self.ok else ERROR,
            error_text="" if self.ok else self.text,
            result=self.text if self.ok else "",
            tags=tags,
            signals=dict(self.signals),
        )


def all_calls(spec: ToolSpec) -> list[ToolCall]:
    """Every well-formed call of ``spec``: the cartesian product of its parameters' closed
    value sets (`ToolSpec.values_for`), parameters in declaration order."""
    names = list(spec.params or ())
    value_sets = [spec.values_for(p) for p in names]
    return [ToolCall(spec.name, dict(zip(names, combo, strict=True))) for combo in itertools.product(*value_sets)]


@runtime_checkable
class ToolEnv(Protocol):
    """What the rollout loop needs from an environment (see the module docstring)."""

    name: str
    max_turns: int

    def reset(self, task: Task) -> str: ...

    def step(self, call: ToolCall) -> ToolResult: ...

    def outcome(self) -> float: ...

    def schema(self) -> Sequence[ToolSpec]: ...

    def manifest(self) -> dict[str, Any]: ...

    def vocabulary(self) -> set[str]: ...


#: The action a policy takes to answer the user and end its turn in a `ConversationEnv`; never a tool of
#: `schema()`.  The call grammar offers it as a call with no arguments (rendered ``answer`` in the plain style).
END_TURN = "answer"


@runtime_checkable
class ConversationEnv(ToolEnv, Protocol):
    """Scripted user turns; per user turn the policy calls tools (`step`) until it answers (`end_turn`).

    The rules (shared with the BFCL environment, which implements them by duck typing):

    * `reset(task)` returns the FIRST user message; `schema()` is valid after `reset` and may
      differ per task (the task's tools, each parameter's closed value set drawn for this task);
      `vocabulary()` covers every word any episode of any task of the env can contain (task
      texts, tool outputs, values), for the tiny tokenizer.
    * The rollout (`trainer.sampling.rollout`) writes the episode's events in order: ``user``
      (each user message, with `signals()` then), ``call`` (each tool call: status ok / error /
      malformed, result text, tags from `manifest()`, the signals of its `ToolResult`) and
      ``assistant`` (each answer; text = the answer, or ``"answer"`` when it is empty).
    * After `max_calls_per_turn` calls in one user turn the rollout forces `END_TURN`; `max_turns`
      caps the calls of the episode; a `ToolResult` with ``done`` ends the episode too.
    * `outcome()` is 1.0 / 0.0, valid once `end_turn` returned None or the rollout stopped the
      episode (it then calls `outcome()` anyway: an unfinished conversation fails).
    """

    max_calls_per_turn: int  # the rollout forces END_TURN after this many calls in one user turn

    def end_turn(self, answer: str = "") -> str | None:
        """The policy answered the current user turn (`answer`: its text, may be empty).
        Returns the next user message, or None when the conversation is over (`outcome()` is then final)."""
        ...

    def signals(self) -> Mapping[str, float]:
        """The environment's numeric signals now (e.g. the progress signal); also on every ToolResult.signals."""
        ...


def is_conversation(env: object) -> bool:
    """Whether `env` plays scripted user turns (`ConversationEnv`, checked by duck typing)."""
    return isinstance(env, ConversationEnv)


def manifest_from_schema(schema: Sequence[ToolSpec], signals: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """The `rlvp-tools/1` manifest of a schema: names, tags, target and typed parameters,
    and the environment's signals: progress signals ``{"name", "direction", "description"}`` and
    per-call flags ``{"name", "kind": "violation" | "done", "description"}`` (docs/readers.md,
    "Manifest signals"; `rlvp_dsl.manifests.derive` turns each kind into rules)."""
    out: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "tools": [
            {
                "name": spec.name,
                "tags": _ordered_tags(spec.tags),
                "target": spec.target,
                "parameters": [{"name": p, "type": "string"} for p in spec.params or ()],
            }
            for spec in schema
        ],
    }
    if signals:
        out["signals"] = [dict(s) for s in signals]
    return out


def _ordered_tags(tags: frozenset[str]) -> list[str]:
    known = [t for t in TAG_ORDER if t in tags]
    return known + sorted(tags - set(TAG_ORDER))


def write_manifest(env: ToolEnv, path: str | Path) -> Path:
    """Write `env.manifest()` as indented JSON to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(env.manifest(), indent=2) + "\n", encoding="utf-8")
    return path
