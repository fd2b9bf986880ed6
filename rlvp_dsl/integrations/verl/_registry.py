"""The three pieces rlvp registers in verl's registries, registered idempotently.

verl imports every ``verl.plugins`` entry point at each ``import verl`` -- in the driver,
the ``TaskRunner`` actor (where the estimator runs), every ``RewardLoopWorker`` (reward
managers) and every ``AgentLoopWorker`` (agent loops).  Registering twice must not
raise: verl's ``register_adv_est`` and reward-loop ``register`` raise ``ValueError`` for a
second, different object under a name (which a module executed again by file path
creates), and the agent-loop registry silently overwrites.  So each piece is registered
only when its name is absent, and `status` reports what the registry holds.

verl 0.9.1 registries (the ones its v1 trainer looks names up in):

=====================  ==============  ====================================================================
piece                  name            registry
=====================  ==============  ====================================================================
advantage estimator    rlvp_token      ``verl.trainer.ppo.core_algos.ADV_ESTIMATOR_REGISTRY``
reward manager         rlvp            ``verl.experimental.reward_loop.reward_manager.registry.REWARD_MANAGER``
agent loop             rlvp_tool_agent ``verl.experimental.agent_loop.agent_loop._agent_loop_registry``
=====================  ==============  ====================================================================

(verl's legacy ``verl.workers.reward_manager`` registry is not used by 0.9.1's trainers and
gets nothing.)
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable

import attrs

logger = logging.getLogger("rlvp_dsl.integrations.verl")

#: The verl version the integration is written against and tested with (pyproject's ``verl`` extra).
VERL_VERSION = "0.9.1"


@attrs.frozen
class Piece:
    """One registration.

    Attributes:
        kind: what it is, in words.
        name: the name a verl config uses.
        registry: ``module:attribute`` of verl's registry dict.
        target: ``module:attribute`` of rlvp's object.
        config: the config line that selects it.
    """

    kind: str
    name: str
    registry: str
    target: str
    config: str

    def registry_dict(self) -> dict:
        module, attr = self.registry.split(":")
        return getattr(importlib.import_module(module), attr)

    def target_object(self) -> Any:
        module, attr = self.target.split(":")
        return getattr(importlib.import_module(module), attr)


PIECES = (
    Piece(
        "advantage estimator",
        "rlvp_token",
        "verl.trainer.ppo.core_algos:ADV_ESTIMATOR_REGISTRY",
        "rlvp_dsl.integrations.verl.estimator:rlvp_token_advantage",
        "algorithm.adv_estimator=rlvp_token",
    ),
    Piece(
        "reward manager",
        "rlvp",
        "verl.experimental.reward_loop.reward_manager.registry:REWARD_MANAGER",
        "rlvp_dsl.integrations.verl.reward_manager:RlvpRewardManager",
        "reward.reward_manager.name=rlvp",
    ),
    Piece(
        "agent loop",
        "rlvp_tool_agent",
        "verl.experimental.agent_loop.agent_loop:_agent_loop_registry",
        "rlvp_dsl.integrations.verl.agent_loop:RlvpToolAgentLoop",
        "actor_rollout_ref.rollout.agent.default_agent_loop=rlvp_tool_agent",
    ),
)


def _fqn(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _register_estimator(piece: Piece, fn: Callable) -> None:
    from verl.trainer.ppo.core_algos import register_adv_est

    register_adv_est(piece.name)(fn)


def _register_reward_manager(piece: Piece, cls: type) -> None:
    from verl.experimental.reward_loop.reward_manager import register

    register(piece.name)(cls)


def _register_agent_loop(piece: Piece, cls: type) -> None:
    from verl.experimental.agent_loop.agent_loop import register

    register(piece.name)(cls)


_REGISTER = {
    "rlvp_token": _register_estimator,
    "rlvp": _register_reward_manager,
    "rlvp_tool_agent": _register_agent_loop,
}


def held(piece: Piece) -> str | None:
    """The fully qualified name of what verl's registry holds under ``piece.name`` (None: nothing)."""
    entry = piece.registry_dict().get(piece.name)
    if entry is None:
        return None
    if isinstance(entry, dict):  # the agent-loop registry stores {"_target_": fqn}
        return str(entry.get("_target_"))
    return _fqn(entry)


def expected(piece: Piece) -> str:
    """The fully qualified name of rlvp's object for `piece`."""
    module, attr = piece.target.split(":")
    return f"{module}.{attr}"


def register_all() -> dict[str, str]:
    """Register every piece whose name verl's registry does not hold yet.

    Returns:
        ``{name: error}`` for the pieces that failed (empty when all are registered); each
        failure is also logged as a warning, since verl logs a failing plugin only at debug.
    """
    errors: dict[str, str] = {}
    for piece in PIECES:
        try:
            if held(piece) is None:
                _REGISTER[piece.name](piece, piece.target_object())
        except Exception as exc:  # reported, not raised: verl would swallow it anyway
            errors[piece.name] = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "rlvp: could not register the %s %r: %s: %s (run `python -m rlvp_dsl.integrations.verl --check`)",
                piece.kind,
                piece.name,
                type(exc).__name__,
                exc,
            )
    return errors
