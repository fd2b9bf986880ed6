"""rlvp's settings inside a verl config, and the compiled rule programs they name.

verl's Hydra config has no field for a plugin, so rlvp's settings are extra keys
added with ``+`` on the command line (or in the YAML).  Two places, because each
piece sees only part of the config:

* ``algorithm.rlvp`` -- read by the ``rlvp_token`` estimator, which verl hands only
  ``config.algorithm`` (a ``DictConfig`` in the trainer; an ``AlgoConfig`` dataclass or
  ``None`` when called by hand -- both give the defaults)::

      +algorithm.rlvp.process_weight=0.5     # w (default 1.0)
      +algorithm.rlvp.scale_rewards=group    # group | batch | none (default: from
                                             #   algorithm.norm_adv_by_std_in_grpo)
      +algorithm.rlvp.eps=1e-4               # added to the std (default 1e-4, as the compact trainer)

* ``reward.reward_kwargs.rlvp`` -- read by the ``rlvp`` reward manager and the
  ``rlvp_tool_agent`` agent loop, which see the whole config (verl's own ``dapo``
  reward manager reads its options from ``reward.reward_kwargs`` too)::

      +reward.reward_kwargs.rlvp.rules=/abs/path/tools.rlvp   # required
      +reward.reward_kwargs.rlvp.process_weight=0.5           # scalar mode's w (default 1.0)
      +reward.reward_kwargs.rlvp.error_signal=verl            # how tool errors read (default verl)

Unknown keys under either ``rlvp`` section are errors (a typo must not silently fall
back to a default).  A relative rule path is resolved in each Ray worker's working
directory: give an absolute path.
"""

from __future__ import annotations

import difflib
import math
import os
from functools import lru_cache
from typing import Any, Mapping

import attrs

from rlvp_dsl.compile import Program
from rlvp_dsl.pipeline import load_program
from rlvp_dsl.readers import HERMES_MARKERS, checked_markers, error_signal as resolve_signal

SCALE_REWARDS = ("group", "batch", "none")
ESTIMATOR_KEY = "algorithm.rlvp"
REWARD_KEY = "reward.reward_kwargs.rlvp"


class SettingsError(ValueError):
    """An rlvp setting in the verl config is missing or has a wrong value."""


def _get(config: Any, key: str) -> Any:
    """``config[key]`` for a DictConfig, an attrs/dataclass config (verl's BaseConfig), a dict or None."""
    if config is None:
        return None
    getter = getattr(config, "get", None)
    if getter is not None:
        try:
            return getter(key)
        except Exception:  # an OmegaConf struct config may raise for a missing key
            return None
    return getattr(config, key, None)


def _plain(section: Any, where: str) -> dict[str, Any]:
    """A config section as a plain dict (``{}`` when absent)."""
    if section is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(section, DictConfig):
            section = OmegaConf.to_container(section, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with verl
        pass
    if not isinstance(section, Mapping):
        raise SettingsError(f"'{where}' must be a mapping of settings (got {type(section).__name__})")
    return dict(section)


def _check_keys(values: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    """SettingsError for keys of ``values`` not in ``known``, with a did-you-mean for a near miss."""
    unknown = sorted(set(values) - set(known), key=str)
    if unknown:
        near = {k: close[0] for k in unknown if (close := difflib.get_close_matches(str(k), list(known), n=1))}
        hints = [f"{c!r}" if len(unknown) == 1 else f"{c!r} for {k!r}" for k, c in near.items()]
        did_you_mean = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise SettingsError(
            f"'{where}' has unknown key(s) {', '.join(map(repr, unknown))}{did_you_mean}; known keys: {', '.join(known)}"
        )


def _number(values: Mapping[str, Any], key: str, default: float, where: str, *, minimum: float | None = None) -> float:
    value = values.get(key, default)
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer beyond any float
        number = math.nan
    if not math.isfinite(number):
        raise SettingsError(f"'{where}.{key}' must be a finite number (got {value!r})")
    if minimum is not None and number < minimum:
        raise SettingsError(f"'{where}.{key}' must be >= {minimum:g} (got {value!r})")
    return number


@attrs.frozen
class EstimatorSettings:
    """What ``rlvp_token`` reads from ``algorithm.rlvp`` (and ``algorithm`` itself).

    Attributes:
        process_weight: w, the weight of the token-attached process credit.
        scale_rewards: ``group`` (std of each group), ``batch`` (std of all outcomes) or
            ``none``; default ``group`` when ``algorithm.norm_adv_by_std_in_grpo`` is true
            (verl's default), else ``none``.
        eps: added to the std (`rlvp_dsl.advantages.outcome_advantages`).
    """

    process_weight: float = 1.0
    scale_rewards: str = "group"
    eps: float = 1e-4


def estimator_settings(algorithm: Any) -> EstimatorSettings:
    """Read and check `EstimatorSettings` from verl's algorithm config (None: defaults).

    Raises:
        SettingsError: an unknown key, a wrong value, or ``use_kl_in_reward`` on (it would
            add the KL penalty into the token channel, where rlvp_token reads credit).
    """
    if _get(algorithm, "use_kl_in_reward"):
        raise SettingsError(
            "'algorithm.use_kl_in_reward' must be false with algorithm.adv_estimator=rlvp_token (got true): "
            "the in-reward KL penalty is written into token_level_rewards, the channel rlvp_token reads "
            "process credit from; use actor_rollout_ref.actor.use_kl_loss=true for a KL term instead"
        )
    values = _plain(_get(algorithm, "rlvp"), ESTIMATOR_KEY)
    _check_keys(values, ("process_weight", "scale_rewards", "eps"), ESTIMATOR_KEY)
    norm = _get(algorithm, "norm_adv_by_std_in_grpo")
    default_scale = "none" if norm is False else "group"
    scale = values.get("scale_rewards", default_scale)
    if scale not in SCALE_REWARDS:
        raise SettingsError(
            f"'{ESTIMATOR_KEY}.scale_rewards' must be one of {', '.join(SCALE_REWARDS)} (got {scale!r})"
        )
    eps = _number(values, "eps", 1e-4, ESTIMATOR_KEY)
    if eps < 0:
        raise SettingsError(f"'{ESTIMATOR_KEY}.eps' must be >= 0 (got {eps!r})")
    return EstimatorSettings(_number(values, "process_weight", 1.0, ESTIMATOR_KEY, minimum=0.0), scale, eps)


@attrs.frozen
class RuleSettings:
    """What the ``rlvp`` reward manager and the ``rlvp_tool_agent`` loop read from
    ``reward.reward_kwargs.rlvp``.

    Attributes:
        rules: the rule file (absolute, resolved).
        process_weight: scalar mode's w (the reward manager adds ``w * total credit``).
        error_signal: a name of `rlvp_dsl.readers.ERROR_SIGNALS` (default ``verl``: the
            tool agent loop's error texts).
        call_markers: the chat template's tool-call markers (Hermes/Qwen by default, which
            is also verl's default ``multi_turn.format``).
    """

    rules: str
    process_weight: float = 1.0
    error_signal: str = "verl"
    call_markers: tuple[str, str] = HERMES_MARKERS


def rule_settings(config: Any) -> RuleSettings:
    """Read and check `RuleSettings` from the whole verl config.

    Raises:
        SettingsError: no rule file, an unknown key, a wrong value, a missing file.
    """
    values = _plain(_get(_get(_get(config, "reward"), "reward_kwargs"), "rlvp"), REWARD_KEY)
    _check_keys(values, ("rules", "process_weight", "error_signal", "call_markers"), REWARD_KEY)
    rules = values.get("rules")
    if not isinstance(rules, str) or not rules:
        raise SettingsError(
            f"'{REWARD_KEY}.rules' must name the rule file (got {rules!r}); "
            f"add +{REWARD_KEY}.rules=/abs/path/rules.rlvp to the verl command line"
        )
    path = os.path.abspath(os.path.expanduser(rules))
    if not os.path.isfile(path):
        raise SettingsError(
            f"'{REWARD_KEY}.rules' names {rules!r}, which is not a file "
            f"(resolved to {path} in {os.getcwd()}); give an absolute path"
        )
    signal = values.get("error_signal", "verl")
    try:
        if not isinstance(signal, str):  # a config holds names, never an ErrorSignal
            raise ValueError(f"expected a name, got {signal!r}")
        resolve_signal(signal)
    except ValueError as exc:
        raise SettingsError(f"'{REWARD_KEY}.error_signal': {exc}") from None
    markers = values.get("call_markers", HERMES_MARKERS)
    try:
        markers = checked_markers(markers, field=f"'{REWARD_KEY}.call_markers'")
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return RuleSettings(path, _number(values, "process_weight", 1.0, REWARD_KEY, minimum=0.0), signal, markers)


def program_for(path: str) -> Program:
    """The compiled program of a rule file, compiled once per process and file version.

    Raises:
        RuleError: the file has errors (``str(err)`` renders the diagnostics).
    """
    stat = os.stat(path)
    return _program(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _program(path: str, mtime_ns: int, size: int) -> Program:
    return load_program(path)


def config_value(config: Any, dotted: str, default: Any = None) -> Any:
    """``config.a.b.c`` or `default` when any part is missing (works on partial test configs)."""
    node = config
    for part in dotted.split("."):
        node = _get(node, part)
        if node is None:
            return default
    return node
