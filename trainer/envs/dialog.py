"""dialog: a scripted conversation whose every user turn needs the previous turn's tool result.

The reference `trainer.envs.base.ConversationEnv` (the BFCL environment plays the same
protocol).  A task is a short booking conversation, one required tool call per user turn:

1. "which room does team <team> use ?"  ->  ``find <team>``       -> ``team <team> uses room <room>``
2. "book that room please ."            ->  ``book <room>``       -> ``booked room <room> ticket <ticket>``
3. "confirm that ticket please ."       ->  ``confirm <ticket>``  -> ``ticket <ticket> confirmed``

(``num_turns = 2``, the default and ``dialog`` / ``dialog2``, stops after step 2; ``dialog3`` has all three.)  The argument of step k is in the text of the turn
before: the team in the user message, the room and the ticket in the previous tool output.
The step-k tool succeeds only in user turn k, after step k-1, with the task's value; every
other call is an error that changes nothing.  The distractor ``cancel <room>`` (write,
destructive) undoes the booking (and its confirmation) when it names the booked room.

Per task: each parameter's closed value set (`schema()`, valid after `reset`) is the right
value plus ``num_values - 1`` others drawn from the task's seed, sorted; with ``vary_values``
the right values are drawn per task too (the policy must copy them from the conversation),
without it they are the same in every task (drawn from ``seed``).

The outcome is BFCL's kind of verdict: 1.0 iff, at the end of every user turn k (when the
policy answered it), exactly steps 1..k were done -- the state agreed with the ground truth
after every turn.  The signal ``steps_remaining`` (``num_turns`` minus the steps done now,
decreasing) is reported on every result and by `signals()`, declared in the manifest.

A random policy that picks a tool or `END_TURN` uniformly, then a value uniformly (`END_TURN`
forced after ``max_calls_per_turn`` calls), succeeds in about 3 % of episodes with the defaults
(2 turns, 2 values, 1 distractor, 3 calls per turn; 0.4 % with 3 turns; `tests/unit/test_dialog.py`).
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

import attrs

from rlvp_dsl.tools import ToolSpec
from trainer.envs.base import END_TURN, Task, ToolCall, ToolResult, manifest_from_schema

SIGNAL = "steps_remaining"
TEAMS = ("red", "blue", "green", "gold", "pink", "grey")
ROOMS = ("r1", "r2", "r3", "r4", "r5", "r6")
TICKETS = ("t1", "t2", "t3", "t4", "t5", "t6")
#: (tool, tags, parameter, value pool) per step, in order.
STEPS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    ("find", ("read",), "team", TEAMS),
    ("book", ("write",), "room", ROOMS),
    ("confirm", ("verify",), "ticket", TICKETS),
)
CANCEL = ("cancel", ("write", "destructive"), "room")
USER_TEXTS = (
    "which room does team {team} use ?",
    "book that room please .",
    "confirm that ticket please .",
)


def _check_int(name: str, low: int, high: int | None = None):
    def check(_instance, _attribute, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
            bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise ValueError(f"'{name}' must be an integer {bound} (got {value!r})")

    return check


@attrs.frozen
class DialogConfig:
    """Knobs of dialog.  Raises ValueError naming the field when one is out of range.

    Attributes:
        num_turns: user turns (= required steps), 2 (default) or 3.
        num_values: values per parameter per task (the right one and the others), 1..6.
        num_distractors: 0 or 1 (the ``cancel`` tool).
        max_calls_per_turn: calls per user turn before the rollout forces the answer.
        max_turns: calls per episode (default ``num_turns * max_calls_per_turn``).
        vary_values: draw the right values per task (True) or use the same ones in every task.
        seed: the right values when ``vary_values`` is False.
    """

    num_turns: int = attrs.field(default=2, validator=_check_int("num_turns", 2, len(STEPS)))
    num_values: int = attrs.field(default=2, validator=_check_int("num_values", 1, len(TEAMS)))
    num_distractors: int = attrs.field(default=1, validator=_check_int("num_distractors", 0, 1))
    max_calls_per_turn: int = attrs.field(default=3, validator=_check_int("max_calls_per_turn", 1))
    max_turns: int = attrs.field(default=None, converter=attrs.converters.optional(int))
    vary_values: bool = True
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.max_turns is None:
            object.__setattr__(self, "max_turns", self.num_turns * self.max_calls_per_turn)
        _check_int("max_turns", 1)(self, None, self.max_turns)


class DialogEnv:
    """The dialog environment (`trainer.envs.base.ConversationEnv`)."""

    def __init__(self, config: DialogConfig | None = None, **knobs: Any) -> None:
        self.config = config if config is not None else DialogConfig(**knobs)
        cfg = self.config
        self.name = f"dialog{cfg.num_turns}"
        self.max_turns = cfg.max_turns
        self.max_calls_per_turn = cfg.max_calls_per_turn
        self._steps = STEPS[: cfg.num_turns]
        self._task: Task | None = None
        self._answers: list[str] = []  # the right value per step
        self._values: dict[str, tuple[str, ...]] = {}  # parameter -> this task's closed value set
        self._done = 0  # steps done
        self._turn = 0  # the current user turn, 0-based; == num_turns once the conversation is over
        self._agreed = True  # the state agreed with the ground truth after every answered turn

    # --- schema -----------------------------------------------------------
    def _tools(self) -> list[tuple[str, tuple[str, ...], str]]:
        tools = [(name, tags, param) for name, tags, param, _ in self._steps]
        return tools + [CANCEL] * self.config.num_distractors

    def schema(self) -> Sequence[ToolSpec]:
        """The tools with this task's value sets.  Raises RuntimeError before `reset`."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: schema() is per task: call reset() first")
        return [
            ToolSpec(name, tags=tags, target=param, params=(param,), values={param: self._values[param]})
            for name, tags, param in self._tools()
        ]

    def manifest(self) -> dict[str, Any]:
        """The tool manifest (the same for every task; valid before `reset`), with the progress signal."""
        specs = [ToolSpec(name, tags=tags, target=param, params=(param,)) for name, tags, param in self._tools()]
        return manifest_from_schema(
            specs, signals=[{"name": SIGNAL, "direction": "decreasing", "description": "required steps still to do"}]
        )

    def vocabulary(self) -> set[str]:
        """Every whitespace-separated word any episode of any task can show the policy."""
        texts = [t.format(team=team) for t in USER_TEXTS for team in TEAMS]
        texts += [self._ok_text(k, v, w) for k in range(len(STEPS)) for v in ROOMS + TEAMS for w in ROOMS + TICKETS]
        texts += [self._error_text(tool, v) for tool, _, _ in self._tools() + [CANCEL] for v in TEAMS + ROOMS + TICKETS]
        texts += [f"cancelled room {room}" for room in ROOMS]
        words = {w for text in texts for w in text.split()}
        return words | {name for name, _, _ in self._tools() + [CANCEL]} | set(TEAMS + ROOMS + TICKETS) | {END_TURN}

    # --- texts ------------------------------------------------------------
    @staticmethod
    def _ok_text(step: int, value: str, result: str) -> str:
        if step == 0:
            return f"team {value} uses room {result}"
        if step == 1:
            return f"booked room {value} ticket {result}"
        return f"ticket {value} confirmed"

    @staticmethod
    def _error_text(tool: str, value: str) -> str:
        return f"error {tool} {value} cannot run now"

    # --- episode ----------------------------------------------------------
    def reset(self, task: Task) -> str:
        """Start an episode of `task`; returns the first user message."""
        rng = random.Random(task.seed)
        fixed = random.Random(self.config.seed)
        pools = [pool for _, _, _, pool in STEPS]
        self._answers = [(rng if self.config.vary_values else fixed).choice(pool) for pool in pools]
        self._values = {}
        for (_, _, param, pool), answer in zip(STEPS, self._answers, strict=True):
            others = rng.sample([v for v in pool if v != answer], self.config.num_values - 1)
            self._values[param] = tuple(sorted([answer, *others]))
        self._task, self._done, self._turn, self._agreed = task, 0, 0, True
        return USER_TEXTS[0].format(team=self._answers[0])

    def signals(self) -> Mapping[str, float]:
        """``steps_remaining`` now (``num_turns`` before any call)."""
        return {SIGNAL: float(self.config.num_turns - self._done)}

    def step(self, call: ToolCall) -> ToolResult:
        """Apply one call.  Raises RuntimeError before `reset` or after the conversation ended."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: step() called before reset()")
        if self._turn >= self.config.num_turns:
            raise RuntimeError(f"{self.name}: step() called after the conversation ended")
        tools = {name: param for name, _, param in self._tools()}
        value = str(call.arguments.get(tools.get(call.tool, ""), ""))
        if call.tool == CANCEL[0] and call.tool in tools:
            if self._done >= 2 and value == self._answers[1]:
                self._done = 1
                return ToolResult(ok=True, text=f"cancelled room {value}", signals=self.signals())
            return ToolResult(ok=False, text=self._error_text(call.tool, value), signals=self.signals())
        k = self._done
        if k < len(self._steps) and call.tool == self._steps[k][0] and value == self._answers[k] and k == self._turn:
            self._done += 1
            result = self._answers[k + 1] if k + 1 < len(STEPS) else ""
            return ToolResult(ok=True, text=self._ok_text(k, value, result), signals=self.signals())
        return ToolResult(ok=False, text=self._error_text(call.tool, value), signals=self.signals())

    def end_turn(self, answer: str = "") -> str | None:
        """The policy answered user turn k: the state must hold steps 1..k.  Returns the next user
        message, or None after the last turn.  Raises RuntimeError before `reset` or after the end."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: end_turn() called before reset()")
        if self._turn >= self.config.num_turns:
            raise RuntimeError(f"{self.name}: end_turn() called after the conversation ended")
        self._agreed = self._agreed and self._done == self._turn + 1
        self._turn += 1
        if self._turn >= self.config.num_turns:
            return None
        return USER_TEXTS[self._turn].format(team=self._answers[0])

    def outcome(self) -> float:
        """1.0 when every user turn was answered with the state the ground truth has then, else 0.0."""
        return 1.0 if self._task is not None and self._turn >= self.config.num_turns and self._agreed else 0.0

    def expected_actions(self) -> list[ToolCall | str]:
        """The ground truth from now on: per remaining turn its call, then `END_TURN` (tests, demonstrations)."""
        out: list[ToolCall | str] = []
        for k in range(self._turn, self.config.num_turns):
            if self._done <= k:
                name, _, param, _ = self._steps[k]
                out.append(ToolCall(name, {param: self._answers[k]}))
            out.append(END_TURN)
        return out
