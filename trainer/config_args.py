"""The checks of a config's ``gen_args`` and ``model_args`` tables, before anything is built.

``gen_args`` holds `trainer.sampling.generation.GenConfig` fields, ``model_args`` the tiny model's
`trainer.model.TinyModelConfig` fields.  Each problem is a `Problem`: the dotted setting at fault
(``gen_args.call_style``, whose line `trainer.config_text.setting_line` finds) and a message that
names it, says what was expected and what was given, and offers a did-you-mean for a misspelt
name, as the config's own keys and ``env_args`` do.  The token ids of ``think_token_ids`` are
checked against the model's vocabulary once the model is built (`token_ids_problem`).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import attrs

from trainer.config_text import type_error

#: Sampling settings that are top-level config keys: passing them in gen_args too would give
#: GenConfig the same argument twice.
TOP_LEVEL_GEN = ("temperature", "max_new_tokens", "max_turns")


@attrs.frozen
class Problem:
    """What is wrong with one setting of a ``*_args`` table.

    Attributes:
        key: the dotted setting (``gen_args.call_style``), or the table (``model_args``).
        detail: the message, without the file and line.
    """

    key: str
    detail: str


def _toml(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _unknown(table: str, name: str, known: list[str], what: str = "") -> Problem:
    hint = difflib.get_close_matches(name, known, n=1)
    return Problem(
        f"{table}.{name}",
        f"{table}: unknown setting '{name}'{what}"
        + (f"; did you mean '{hint[0]}'?" if hint else "")
        + f" (known: {', '.join(known)})",
    )


def gen_args_problem(gen_args: dict[str, Any]) -> Problem | None:
    """The first problem of a ``gen_args`` table, or None: a name GenConfig does not have (with a
    did-you-mean), a top-level setting (``temperature``, ``max_new_tokens``, ``max_turns``), a value
    of the wrong TOML type, a ``call_style`` other than plain / json, a negative count or token id,
    or whatever else GenConfig refuses."""
    from trainer.sampling.generation import GenConfig

    fields = {f.name: f for f in attrs.fields(GenConfig)}
    known = sorted(n for n in fields if n not in TOP_LEVEL_GEN)
    for name, value in gen_args.items():
        key = f"gen_args.{name}"
        if name in TOP_LEVEL_GEN:
            return Problem(
                key,
                f"'{name}' is a top-level setting, not a gen_args one: set it at the top level, "
                f"{name} = {_toml(value)}",
            )
        if name not in fields:
            return _unknown("gen_args", name, known)
        if name == "think_token_ids":
            ok = isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
            if not ok:
                return Problem(
                    key, f"'{key}' must be an array of token ids (whole numbers), e.g. [5, 6] (got {_toml(value)})"
                )
            if negative := [i for i in value if i < 0]:
                return Problem(key, f"'{key}' must hold token ids >= 0 (got {negative[0]})")
            continue
        want = {"think_max_tokens": "int", "call_style": "str", "system_prompt": "bool"}.get(name)
        if want and (detail := type_error(key, value, want)):
            return Problem(key, detail)
        if name == "think_max_tokens" and value < 0:
            return Problem(key, f"'{key}' must be a whole number >= 0 (0: no reasoning segment) (got {value})")
    from trainer.sampling.call_grammar import CALL_STYLES

    style = gen_args.get("call_style", "plain")
    if style not in CALL_STYLES:
        hint = difflib.get_close_matches(style, CALL_STYLES, n=1)
        return Problem(
            "gen_args.call_style",
            f"'gen_args.call_style' must be one of {', '.join(CALL_STYLES)} (got {json.dumps(style)})"
            + (f"; did you mean {hint[0]!r}?" if hint else ""),
        )
    try:
        GenConfig(**gen_args)
    except (TypeError, ValueError) as exc:  # GenConfig's own range checks name the field
        name = next((n for n in gen_args if f"'{n}'" in str(exc)), None)
        return Problem(f"gen_args.{name}" if name else "gen_args", f"gen_args: {exc}")
    return None


def token_ids_problem(gen_args: dict[str, Any], vocab_size: int) -> Problem | None:
    """``think_token_ids`` past the model's vocabulary (``vocab_size`` ids, 0 to vocab_size - 1), or None."""
    ids = gen_args.get("think_token_ids") or []
    outside = [i for i in ids if not 0 <= i < vocab_size]
    if not outside:
        return None
    return Problem(
        "gen_args.think_token_ids",
        f"'gen_args.think_token_ids' must be ids of the model's vocabulary, 0 to {vocab_size - 1} "
        f"(got {outside[0]}" + (f" and {len(outside) - 1} more" if len(outside) > 1 else "") + ")",
    )


def model_args_problem(model: str, model_args: dict[str, Any]) -> Problem | None:
    """The first problem of a ``model_args`` table, or None: any setting for a model other than
    ``tiny``; for the tiny model a name `TinyModelConfig` does not have (with a did-you-mean) or a
    value it refuses."""
    from trainer.model import TinyModelConfig

    if not model_args:
        return None
    if model != "tiny":
        return Problem(
            "model_args",
            f"'model_args' ({', '.join(sorted(model_args))}) is only used by the tiny model (model = {model!r})",
        )
    known = sorted(f.name for f in attrs.fields(TinyModelConfig))
    for name in model_args:
        if name not in known:
            return _unknown("model_args", name, known, " for the tiny model")
    try:
        TinyModelConfig(**model_args)
    except (TypeError, ValueError) as exc:
        name = next((n for n in model_args if f"'{n}'" in str(exc)), None)
        return Problem(f"model_args.{name}" if name else "model_args", f"model_args: {exc}")
    return None
