"""chain-N: an N-stage tool chain, each stage needing the previous stage's output.

Stage k (1-based) has one correct tool; its single argument ``token`` must be the
token the previous stage returned (stage 1 takes the start token from the task
text).  Any other call -- a tool of another stage, a distractor, or the right tool
with the wrong token -- returns an environment error and changes nothing; the
episode goes on until the last stage (``submit``) succeeds or ``max_turns`` calls
have been made.  The outcome is 1.0 only when the chain completes.

Every call reports the signal ``stages_remaining`` (N minus completed stages), the
goal-progress signal of ``rules/chain.rlvp``.

Knobs (`ChainConfig`), and how they set the chance that an untrained policy
succeeds (the calibration target is a few percent; docs/calibration.md):

* ``num_stages`` N: the chain length.
* ``num_distractors``: tools that are never correct (all N stage tools are
  offered at every stage as well), so a uniform random call picks the right tool
  with probability 1 / (N + num_distractors).
* ``num_values``: candidate argument values (``k0`` .. ``k{V-1}``); a random call
  has the right token with probability 1 / V.
* ``max_turns``: calls allowed per episode (default 3 N); errors do not reset progress, so the
  random-success rate is about P[Binomial(max_turns, p) >= N] with
  p = 1 / ((N + num_distractors) * V).
* ``vary_tokens``: True draws each task's tokens from its seed (the policy must read
  tokens from the tool outputs); False uses the same tokens for every task.
* ``show_progress``: successful results say how many stages remain.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import attrs

from rlvp_dsl.tools import ToolSpec
from trainer.envs.base import Task, ToolCall, ToolResult, manifest_from_schema

STAGE_TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fetch", ("read",)),
    ("parse", ("read",)),
    ("transform", ("write",)),
    ("validate", ("verify",)),
    ("compute", ("read",)),
    ("store", ("write",)),
    ("convert", ("write",)),
    ("merge", ("write",)),
    ("index", ("write",)),
)
SUBMIT_TOOL = ("submit", ("submit",))
DISTRACTOR_TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("delete", ("write", "destructive")),
    ("lookup", ("read",)),
    ("ping", ("read",)),
    ("reset", ("write", "destructive")),
    ("echo", ("read",)),
    ("list", ("read",)),
)
ARGUMENT = "token"
SIGNAL = "stages_remaining"


def _positive(name: str, minimum: int = 1):
    def check(_instance, _attribute, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"'{name}' must be an integer >= {minimum} (got {value!r})")

    return check


@attrs.frozen
class ChainConfig:
    """Knobs of chain-N (see the module docstring for their effect on difficulty).

    Defaults (chain-4: 1 distractor, 2 token values, 12 turns) give an untrained
    tiny policy about 3 % success (docs/calibration.md).  Raises ValueError naming
    the field when a knob is out of range.
    """

    num_stages: int = attrs.field(default=4, validator=_positive("num_stages"))
    num_distractors: int = attrs.field(default=1, validator=_positive("num_distractors", 0))
    num_values: int = attrs.field(default=2, validator=_positive("num_values"))
    max_turns: int = attrs.field(default=None, converter=attrs.converters.optional(int))
    vary_tokens: bool = True
    show_progress: bool = True
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.max_turns is None:
            object.__setattr__(self, "max_turns", 3 * self.num_stages)
        _positive("max_turns")(self, None, self.max_turns)
        if self.num_stages > len(STAGE_TOOLS) + 1:
            raise ValueError(f"'num_stages' must be <= {len(STAGE_TOOLS) + 1} (got {self.num_stages})")
        if self.num_distractors > len(DISTRACTOR_TOOLS):
            raise ValueError(f"'num_distractors' must be <= {len(DISTRACTOR_TOOLS)} (got {self.num_distractors})")


class ChainEnv:
    """chain-N environment (`trainer.envs.base.ToolEnv`)."""

    def __init__(self, config: ChainConfig | None = None, **knobs: Any) -> None:
        self.config = config if config is not None else ChainConfig(**knobs)
        cfg = self.config
        self.name = f"chain{cfg.num_stages}"
        self.max_turns = cfg.max_turns
        self.values = tuple(f"k{i}" for i in range(cfg.num_values))
        self.stage_tools = [t for t, _ in STAGE_TOOLS[: cfg.num_stages - 1]] + [SUBMIT_TOOL[0]]
        self._tags = dict(STAGE_TOOLS[: cfg.num_stages - 1] + (SUBMIT_TOOL,) + DISTRACTOR_TOOLS)
        self._tools = self.stage_tools + [t for t, _ in DISTRACTOR_TOOLS[: cfg.num_distractors]]
        self._task: Task | None = None
        self._tokens: list[str] = []
        self._stage = 0
        self._turns = 0

    # --- schema -----------------------------------------------------------
    def schema(self) -> Sequence[ToolSpec]:
        """Every tool with its argument values, in a fixed order."""
        return [
            ToolSpec(name, tags=self._tags[name], target=ARGUMENT, params=(ARGUMENT,), values={ARGUMENT: self.values})
            for name in self._tools
        ]

    def manifest(self) -> dict[str, Any]:
        """The tool manifest, with the progress signal every result reports."""
        return manifest_from_schema(
            self.schema(),
            signals=[{"name": SIGNAL, "direction": "decreasing", "description": "stages of the chain still to do"}],
        )

    def vocabulary(self) -> set[str]:
        """Every whitespace-separated word this environment can show the policy."""
        words: set[str] = set()
        texts = [self._task_text(v) for v in self.values]
        texts += [self._ok_text(v, r) for v in self.values for r in range(self.config.num_stages + 1)]
        texts += [self._error_text(t, v) for t in self._tools for v in self.values]
        texts += [self._wrong_tool_text(t) for t in self._tools]
        for text in texts:
            words.update(text.split())
        return words | set(self._tools) | set(self.values)

    # --- texts ------------------------------------------------------------
    def _task_text(self, start: str) -> str:
        n = self.config.num_stages
        return (
            f"Run the {n} stage tool chain . Stage 1 takes the start token {start} ; "
            f"each later stage takes the token the previous stage returned ."
        )

    def _ok_text(self, token: str, remaining: int) -> str:
        if remaining == 0:
            return "ok chain complete"
        if self.config.show_progress:
            return f"ok token {token} remaining {remaining}"
        return f"ok token {token}"

    def _error_text(self, tool: str, value: str) -> str:
        if tool not in self._tools:
            return f"error unknown tool {tool}"
        return f"error bad token {value}"

    def _wrong_tool_text(self, tool: str) -> str:
        return f"error {tool} cannot run now"

    # --- episode ----------------------------------------------------------
    def reset(self, task: Task) -> str:
        """Start an episode of `task`; returns the task text."""
        rng = random.Random(task.seed if self.config.vary_tokens else self.config.seed)
        self._tokens = [rng.choice(self.values) for _ in range(self.config.num_stages + 1)]
        self._task = task
        self._stage = 0
        self._turns = 0
        self._reset_extra()
        return self._task_text(self._tokens[0])

    def _reset_extra(self) -> None:
        """Hook for subclasses: clear their own episode state."""

    @property
    def stages_remaining(self) -> int:
        return self.config.num_stages - self._stage

    def _signals(self) -> dict[str, float]:
        return {SIGNAL: float(self.stages_remaining)}

    def initial_signals(self) -> dict[str, float]:
        """The signals before any call (all N stages remaining); the rollout puts them on the
        task's user turn, where they set a progress rule's starting value."""
        return self._signals()

    def _error(self, text: str) -> ToolResult:
        return ToolResult(ok=False, text=text, done=False, signals=self._signals())

    def step(self, call: ToolCall) -> ToolResult:
        """Apply one call.  Raises RuntimeError before `reset` or after the episode ended."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: step() called before reset()")
        if self._stage >= self.config.num_stages:
            raise RuntimeError(f"{self.name}: step() called after the chain completed")
        self._turns += 1
        value = str(call.arguments.get(ARGUMENT, ""))
        if call.tool not in self._tools:
            return self._error(self._error_text(call.tool, value))
        special = self._special_call(call, value)
        if special is not None:
            return special
        if call.tool != self.stage_tools[self._stage]:
            return self._error(self._wrong_tool_text(call.tool))
        if value != self._tokens[self._stage] or not self._stage_allowed(self._stage):
            return self._error(self._error_text(call.tool, value))
        self._stage += 1
        remaining = self.stages_remaining
        return ToolResult(
            ok=True,
            text=self._ok_text(self._tokens[self._stage], remaining),
            done=remaining == 0,
            signals=self._signals(),
        )

    def _special_call(self, call: ToolCall, value: str) -> ToolResult | None:
        """Hook for subclasses: handle a tool of their own (None: not handled)."""
        return None

    def _stage_allowed(self, stage: int) -> bool:
        """Hook for subclasses: a hidden precondition on `stage` (0-based)."""
        return True

    def outcome(self) -> float:
        """1.0 when every stage completed, else 0.0."""
        return 1.0 if self._task is not None and self._stage >= self.config.num_stages else 0.0

    def expected_call(self) -> ToolCall | None:
        """The call that advances the chain now (for tests and scripted demonstrations)."""
        if self._stage >= self.config.num_stages:
            return None
        return ToolCall(self.stage_tools[self._stage], {ARGUMENT: self._tokens[self._stage]})
