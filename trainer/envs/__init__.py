"""Tool environments for rollouts: chain-N, gated, dialog and bfcl (see `base` for the protocol).

`make_env(name, **knobs)` builds one by name: ``chain4``, ``chain6`` (any
``chainN``), ``gated`` / ``gatedN``, ``dialog`` / ``dialogN`` (a scripted conversation of N
user turns, `trainer.envs.dialog`), ``bfcl`` (BFCL v4 multi-turn conversations,
`trainer.envs.bfcl`; needs bfcl-eval); knobs are the fields of `ChainConfig` /
`GatedConfig` / `DialogConfig` / `BfclConfig`, checked by `checked_knobs`.  `make_tasks(count, seed)` gives a reproducible task list.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import random
import re
from typing import Any, Callable, Iterator

import attrs

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
    """Build an environment by name (``chain4``, ``chain6``, ``gated``, ``gated4``, ``dialog``, ``bfcl``).

    The digits give ``num_stages`` (gated defaults to 4); `knobs` override config
    fields.  Raises ValueError for an unknown name or knob; for ``bfcl`` without
    bfcl-eval installed, `trainer.envs.bfcl.BfclNotInstalled` (a ModuleNotFoundError
    whose message is the pip line; rlvp-train exits 2 on it).
    """
    if name.strip().lower() == "bfcl":
        return _make_bfcl(knobs)
    if re.fullmatch(r"dialog\d*", name.strip().lower()):  # dialog / dialogN: the scripted conversation
        return _make_dialog(name.strip().lower(), knobs)
    match = _NAME.match(name.strip().lower())
    if not match:
        raise ValueError(
            f"unknown environment {name!r}: expected 'chainN' (e.g. chain4), 'gated' / 'gatedN', 'dialog' / 'dialogN' or 'bfcl'"
        )
    kind, digits = match.groups()
    named = bool(digits) and "num_stages" not in knobs  # the name's digits give num_stages
    if digits:
        knobs.setdefault("num_stages", int(digits))
    config_cls = ChainConfig if kind == "chain" else GatedConfig
    with _named_by(name, "num_stages", named):
        config = config_cls(**checked_knobs(name, config_cls, knobs))
    return ChainEnv(config) if kind == "chain" else GatedEnv(config)


@contextlib.contextmanager
def _named_by(name: str, knob: str, named: bool) -> Iterator[None]:
    """A ValueError about `knob` that the environment's name set (``chain99``: ``num_stages = 99``)
    names what the user wrote, the name, not a knob they never set."""
    try:
        yield
    except ValueError as exc:
        if not named or f"'{knob}'" not in str(exc):
            raise
        raise ValueError(
            f"environment {name!r}: the number in its name is its {knob.replace('num_', 'number of ')}, and {exc}"
        ) from None


def _make_bfcl(knobs: dict[str, Any]) -> ToolEnv:
    from trainer.envs.bfcl import BfclConfig, BfclEnv
    from trainer.envs.bfcl.tasks import package_root

    package_root()  # the install line first, before any knob is judged
    return BfclEnv(BfclConfig(**checked_knobs("bfcl", BfclConfig, knobs)))


#: What a knob's declared type accepts (TOML values: an integer is not a bool, a float is not an int).
_KNOB_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "tuple[str, ...]": (
        "a list of strings",
        lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    ),
}


def checked_knobs(env: str, config_cls: type, knobs: dict[str, Any]) -> dict[str, Any]:
    """`knobs` checked against the fields of `config_cls` (an attrs class) before it is built.

    Returns:
        the knobs, a list for a tuple field turned into a tuple.

    Raises:
        ValueError: an unknown knob (with a did-you-mean and the known knobs), or a value whose
            type is not the field's (``vary_tokens = "no"`` is not false; ``max_turns = 12.7`` is
            not 12); the message names the knob in quotes, so rlvp-train blames ``env_args``.
    """
    fields = {f.name: f for f in attrs.fields(config_cls)}
    out = dict(knobs)
    for knob, value in knobs.items():
        if knob not in fields:
            close = difflib.get_close_matches(knob, list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"environment {env!r}: unknown knob {knob!r}{hint} (known knobs: {', '.join(fields)})")
        declared = str(fields[knob].type)
        options = [t.strip() for t in declared.split("|")]
        if value is None and ("None" in options or fields[knob].default is None):
            continue
        kinds = [_KNOB_TYPES[t] for t in options if t in _KNOB_TYPES]
        if kinds and not any(accepts(value) for _, accepts in kinds):
            wanted = " or ".join(what for what, _ in kinds)
            shown = json.dumps(value) if isinstance(value, bool) else repr(value)  # TOML's true, not True
            raise ValueError(f"environment {env!r}: knob {knob!r} must be {wanted} (got {shown})")
        if isinstance(value, list) and "tuple[str, ...]" in options:
            out[knob] = tuple(value)
    return out


def _make_dialog(name: str, knobs: dict[str, Any]) -> ToolEnv:
    from trainer.envs.dialog import DialogConfig, DialogEnv

    named = bool(name[len("dialog") :]) and "num_turns" not in knobs
    if name[len("dialog") :]:
        knobs.setdefault("num_turns", int(name[len("dialog") :]))
    with _named_by(name, "num_turns", named):
        return DialogEnv(DialogConfig(**checked_knobs(name, DialogConfig, knobs)))


def env_factory(name: str, **knobs: Any) -> Callable[[], ToolEnv]:
    """A zero-argument factory of fresh environments (validates the knobs once, now)."""
    make_env(name, **knobs)
    return lambda: make_env(name, **knobs)


def make_tasks(count: int, seed: int = 0, prefix: str = "task") -> list[Task]:
    """`count` tasks with distinct ids and seeds drawn reproducibly from `seed`."""
    rng = random.Random(seed)
    return [Task(f"{prefix}{i}", rng.randrange(2**31)) for i in range(count)]
