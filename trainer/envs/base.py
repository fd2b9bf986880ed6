"""The tool-environment protocol shared by the rollout code and the environments.

An environment is a small, deterministic tool world.  One episode is:

    obs = env.reset(task)           # the task text shown to the policy
    while not done and turns < env.max_turns:
        result = env.step(ToolCall(tool, {"arg": value}))   # a ToolResult
    reward = env.outcome()          # 1.0 on success, 0.0 otherwise

`env.schema()` lists every tool with the finite set of values each argument may
take; the constrained decoder enumerates tool names x argument values from it, so
even an untrained policy emits only well-formed calls.  `env.manifest()` is the
tool manifest (`rlvp-tools/1` JSON, tags per tool) the rule files are written
against.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import attrs

MANIFEST_FORMAT = "rlvp-tools/1"


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


@attrs.frozen
class ToolSpec:
    """One tool of an environment's schema.

    Attributes:
        name: the tool name the policy writes.
        tags: category tags (``read``, ``write``, ``verify``, ``submit``, ``destructive``).
        parameters: ``(argument name, allowed values)`` in call order; the values are
            the closed set the constrained decoder may emit.
        target: the argument naming the object the tool acts on (for ``same target``
            bindings and blind-destructive rules), or None.
    """

    name: str
    tags: tuple[str, ...]
    parameters: tuple[tuple[str, tuple[str, ...]], ...]
    target: str | None = None

    def calls(self) -> list[ToolCall]:
        """Every well-formed call of this tool (the cartesian product of argument values)."""
        names = [p for p, _ in self.parameters]
        value_sets = [values for _, values in self.parameters]
        return [ToolCall(self.name, dict(zip(names, combo))) for combo in itertools.product(*value_sets)]


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


def manifest_from_schema(schema: Sequence[ToolSpec]) -> dict[str, Any]:
    """The `rlvp-tools/1` manifest of a schema: names, tags, target and typed parameters."""
    return {
        "format": MANIFEST_FORMAT,
        "tools": [
            {
                "name": spec.name,
                "tags": list(spec.tags),
                "target": spec.target,
                "parameters": [{"name": p, "type": "string"} for p, _ in spec.parameters],
            }
            for spec in schema
        ],
    }


def write_manifest(env: ToolEnv, path: str | Path) -> Path:
    """Write `env.manifest()` as indented JSON to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(env.manifest(), indent=2) + "\n", encoding="utf-8")
    return path
