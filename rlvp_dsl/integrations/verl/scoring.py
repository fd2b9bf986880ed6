"""Scoring one verl episode with the rules, and the metrics both verl pieces report.

The ``rlvp`` reward manager and the ``rlvp_tool_agent`` loop report the same keys, with
the same value types, for every sample (verl takes the key set of a batch from its first
sample): they land in ``reward_extra_info`` (verl's validation tables and generation
dumps) and, for the agent loop, in ``extra_fields["rlvp"]``.
"""

from __future__ import annotations

from typing import Any

import attrs

from rlvp_dsl.attach import CallCredits, completion_calls, completion_credits
from rlvp_dsl.compile import Program
from rlvp_dsl.events import Episode

#: The metric keys, in order (all floats).
METRIC_KEYS = (
    "rlvp_outcome",  # the outcome reward (from compute_score)
    "rlvp_credit",  # the episode's total rule credit (attached + unattached), unweighted
    "rlvp_process",  # what entered the scalar reward: w * credit in scalar mode, 0 in token mode
    "rlvp_violations",  # negative credits received by calls
    "rlvp_discharges",  # obligation discharges received by calls
    "rlvp_calls",  # tool calls in the episode (malformed ones included)
    "rlvp_malformed",  # blocks verl did not read as calls
    "rlvp_dropped",  # token mode: credit on the last action token, which the channel cannot carry
)


@attrs.frozen
class Scored:
    """One scored episode.

    Attributes:
        credits: per-call credit (`rlvp_dsl.attach.CallCredits`).
        n_calls: calls of the response (the prompt's calls not counted).
        malformed: calls verl did not read as calls.
    """

    credits: CallCredits
    n_calls: int
    malformed: int = 0

    def metrics(self, *, outcome: float, process: float, dropped: float = 0.0) -> dict[str, float]:
        """The `METRIC_KEYS` of this episode."""
        return {
            "rlvp_outcome": float(outcome),
            "rlvp_credit": float(self.credits.total),
            "rlvp_process": float(process),
            "rlvp_violations": float(self.credits.n_violations),
            "rlvp_discharges": float(self.credits.n_discharges),
            "rlvp_calls": float(self.n_calls),
            "rlvp_malformed": float(self.malformed),
            "rlvp_dropped": float(dropped),
        }


def score(program: Program, episode: Episode, *, source: str, malformed: int = 0, first_event: int = 0) -> Scored:
    """Score `episode` with `program` and sum the credits per call.

    The rules see the whole episode, prompt history included; credit on an event before
    `first_event` (the prompt's) is dropped and the prompt's calls are not counted
    (`rlvp_dsl.attach.completion_credits`).

    Raises:
        ValueError: a credit on an event the episode does not have (a rule bug; see
            `rlvp_dsl.attach.call_credits`).
    """
    credits = completion_credits(program, episode, first_event=first_event, source=source)
    return Scored(credits, completion_calls(episode, first_event), malformed)


def as_floats(metrics: dict[str, Any]) -> dict[str, float]:
    """`metrics` restricted to `METRIC_KEYS`, every key present (0.0 when missing)."""
    return {key: float(metrics.get(key, 0.0)) for key in METRIC_KEYS}
