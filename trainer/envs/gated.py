"""gated: a chain with a hidden precondition.

Like chain-N, but stage ``gate_stage`` (1-based) only succeeds after an earlier
successful ``unlock`` call in the same episode.  ``unlock`` takes the chain's
*current* token (the one the next stage needs) and answers a bare ``ok``; calling
the gated stage while locked returns exactly the error a wrong token gets
(``error bad token kX``), so neither the error text nor any signal reveals the
precondition.  An untrained policy therefore succeeds far more rarely than on the
plain chain, and process rules written against the visible errors cannot point
at ``unlock`` (the seed's "gated" ceiling test).
"""

from __future__ import annotations

from typing import Any

import attrs

from trainer.envs.base import ToolCall, ToolResult
from trainer.envs.chain import ARGUMENT, ChainConfig, ChainEnv

UNLOCK_TOOL = ("unlock", ("write",))


@attrs.frozen
class GatedConfig(ChainConfig):
    """chain knobs plus ``gate_stage``: the 1-based stage behind the hidden precondition."""

    gate_stage: int = 2

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not isinstance(self.gate_stage, int) or not 1 <= self.gate_stage <= self.num_stages:
            raise ValueError(f"'gate_stage' must be an integer in [1, {self.num_stages}] (got {self.gate_stage!r})")


class GatedEnv(ChainEnv):
    """The gated environment (`trainer.envs.base.ToolEnv`)."""

    def __init__(self, config: GatedConfig | None = None, **knobs: Any) -> None:
        super().__init__(config if config is not None else GatedConfig(**knobs))
        self.name = f"gated{self.config.num_stages}"
        self._tags[UNLOCK_TOOL[0]] = UNLOCK_TOOL[1]
        # unlock goes after the stage tools, before the distractors.
        self._tools.insert(len(self.stage_tools), UNLOCK_TOOL[0])
        self._unlocked = False

    def _reset_extra(self) -> None:
        self._unlocked = False

    def _special_call(self, call: ToolCall, value: str) -> ToolResult | None:
        if call.tool != UNLOCK_TOOL[0]:
            return None
        if value != self._tokens[self._stage]:
            return self._error(self._error_text(call.tool, value))
        self._unlocked = True
        return ToolResult(ok=True, text="ok", done=False, signals=self._signals())

    def _stage_allowed(self, stage: int) -> bool:
        return stage + 1 != self.config.gate_stage or self._unlocked

    def vocabulary(self) -> set[str]:
        return super().vocabulary() | {"ok"}

    def expected_call(self) -> ToolCall | None:
        """The shortest-path next call: ``unlock`` first when the gate is still closed."""
        call = super().expected_call()
        if call is not None and not self._stage_allowed(self._stage):
            return ToolCall(UNLOCK_TOOL[0], {ARGUMENT: self._tokens[self._stage]})
        return call
