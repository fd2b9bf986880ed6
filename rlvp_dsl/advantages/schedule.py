"""The process-weight schedule: annealing of the process weight once compliance saturates.

    w(t) = w0                                     before the decay starts
    w(t) = w0 * max(f, 1 - (t - t0) / D)          from the start iteration t0 on

``f`` is the floor, a fraction of w0 (0 <= f <= 1): the weight decays to ``f * w0``
and stays there.

The decay starts at the first iteration t0 at which either

* compliance has saturated: violations per episode <= ``threshold`` for
  ``patience`` consecutive iterations (t0 = the iteration completing the streak), or
* ``t0 = start`` (a fixed iteration), when set,

whichever comes first.  ``D = 0`` drops the weight to the floor at once.  Once started,
the decay never restarts.  The state is a small dict (`state_dict`) saved in
checkpoints so that a resumed run continues the same schedule.
"""

from __future__ import annotations

from typing import Any


class ProcessWeightSchedule:
    """Process weight per iteration.  Call `observe` once per iteration, then `weight`.

    Args:
        weight: w0 (>= 0).
        enabled: False keeps w0 forever (method rlvp_noanneal).
        threshold: saturation level of violations per episode.
        patience: consecutive iterations at or under the threshold.
        start: latest iteration at which the decay starts (None: saturation only).
        decay_iterations: D.
        floor: f, the fraction of w0 the decay stops at (0: decay to 0).

    Raises:
        ValueError: a negative weight, ``patience < 1``, ``decay_iterations < 0`` or a floor
            outside [0, 1], naming the config field.
    """

    def __init__(
        self,
        weight: float,
        enabled: bool = True,
        threshold: float = 0.1,
        patience: int = 3,
        start: int | None = None,
        decay_iterations: int = 10,
        floor: float = 0.0,
    ) -> None:
        if weight < 0:
            raise ValueError(f"'process_weight' must be non-negative (got {weight})")
        if patience < 1:
            raise ValueError(f"'anneal_patience' must be at least 1 (got {patience})")
        if decay_iterations < 0:
            raise ValueError(f"'anneal_iterations' must be non-negative (got {decay_iterations})")
        if not 0.0 <= floor <= 1.0:  # also refuses NaN
            raise ValueError(f"'anneal_floor' must be between 0 and 1, a fraction of process_weight (got {floor})")
        self.w0 = float(weight)
        self.floor = float(floor)
        self.enabled = enabled
        self.threshold = float(threshold)
        self.patience = int(patience)
        self.start = start
        self.decay_iterations = int(decay_iterations)
        self.streak = 0
        self.t0: int | None = None
        self.reason = ""

    def observe(self, iteration: int, violations_per_episode: float) -> None:
        """Record the compliance of ``iteration``'s rollouts; may start the decay."""
        if violations_per_episode <= self.threshold:
            self.streak += 1
        else:
            self.streak = 0
        if not self.enabled or self.t0 is not None:
            return
        if self.streak >= self.patience:
            self.t0, self.reason = (
                iteration,
                f"saturated ({self.patience} iterations at <= {self.threshold} violations/episode)",
            )
        elif self.start is not None and iteration >= self.start:
            self.t0, self.reason = iteration, f"scheduled start at iteration {self.start}"

    def weight(self, iteration: int) -> float:
        """w(iteration)."""
        if not self.enabled or self.t0 is None or iteration < self.t0:
            return self.w0
        if self.decay_iterations == 0:
            return self.w0 * self.floor
        return self.w0 * max(self.floor, 1.0 - (iteration - self.t0) / self.decay_iterations)

    @property
    def started(self) -> bool:
        return self.t0 is not None

    def state_dict(self) -> dict[str, Any]:
        return {"streak": self.streak, "t0": self.t0, "reason": self.reason}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.streak = int(state["streak"])
        self.t0 = state["t0"]
        self.reason = state.get("reason", "")
