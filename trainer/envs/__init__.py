"""Tool environments for rollouts: chain-N and gated (see `base` for the protocol).

`make_env(name, **knobs)` builds one by name: ``chain4``, ``chain6`` (any
``chainN``), ``gated`` / ``gatedN``; knobs are the fields of `ChainConfig` /
`GatedConfig`.  `make_tasks(count, seed)` gives a reproducible task list.
"""

from __future__ import annotations

import random
import re
from typing import Any, Callable

from trainer.envs.base import (
    MANIFEST_FORMAT,
    Task,
    ToolCall,
    ToolEnv,
    ToolResult,
    all_calls,
    manifest_from_schema,
    write_manifest,
)
from trainer.envs.chain import SIGNAL, ChainConfig, ChainEnv
from trainer.envs.gated import GatedConfig, GatedEnv

__all__ = [
    "MANIFEST_FORMAT",
    "SIGNAL",
    "ChainConfig",
    "ChainEnv",
    "GatedConfig",
    "GatedEnv",
    "Task",
    "ToolCall",
    "ToolEnv",
    "ToolResult",
    "all_calls",
    "env_factory",
    "make_env",
    "make_tasks",
    "manifest_from_schema",
    "write_manifest",
]

_NAME = re.compile(r"^(chain|gated)(\d*)$")


def make_env(name: str, **knobs: Any) -> ToolEnv:
    """Build an environment by name (``chain4``, ``chain6``, ``gated``, ``gated4``).

    The digits give ``num_stages`` (gated defaults to 4); `knobs` override config
    fields.  Raises ValueError for an unknown name or knob.
    """
    if re.fullmatch(r"dialog\d*", name.strip().lower()):  # dialog / dialogN: the scripted conversation
        return _make_dialog(name.strip().lower(), knobs)
    match = _NAME.match(name.strip().lower())
    if not match:
        raise ValueError(f"unknown environment {name!r}: expected 'chainN' (e.g. chain4) or 'gated' / 'gatedN'")
    kind, digits = match.groups()
    if digits:
        knobs.setdefault("num_stages", int(digits))
    config_cls = ChainConfig if kind == "chain" else GatedConfig
    try:
        config = config_cls(**knobs)
    except TypeError as exc:
        fields = ", ".join(f.name for f in config_cls.__attrs_attrs__)
        raise ValueError(f"environment {name!r}: bad knob ({exc}); known knobs: {fields}") from None
    return ChainEnv(config) if kind == "chain" else GatedEnv(config)


def _make_dialog(name: str, knobs: dict[str, Any]) -> ToolEnv:
    from trainer.envs.dialog import DialogConfig, DialogEnv

    if name[len("dialog") :]:
        knobs.setdefault("num_turns", int(name[len("dialog") :]))
    try:
        return DialogEnv(DialogConfig(**knobs))
    except TypeError as exc:
        fields = ", ".join(f.name for f in DialogConfig.__attrs_attrs__)
        raise ValueError(f"environment {name!r}: bad knob ({exc}); known knobs: {fields}") from None


def env_factory(name: str, **knobs: Any) -> Callable[[], ToolEnv]:
    """A zero-argument factory of fresh environments (validates the knobs once, now)."""
    make_env(name, **knobs)
    return lambda: make_env(name, **knobs)


def make_tasks(count: int, seed: int = 0, prefix: str = "task") -> list[Task]:
    """`count` tasks with distinct ids and seeds drawn reproducibly from `seed`."""
    rng = random.Random(seed)
    return [Task(f"{prefix}{i}", rng.randrange(2**31)) for i in range(count)]
