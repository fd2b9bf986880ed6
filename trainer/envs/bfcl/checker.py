"""The outcome of a BFCL task: BFCL's own checker, applied turn by turn to the instances played.

BFCL's ``multi_turn_checker`` (``bfcl_eval/eval_checker/multi_turn_eval/multi_turn_checker.py``)
takes call *strings* and ``eval``s them on instances it creates.  `TaskChecker` does not call it;
it runs the same procedure on the instances the environment executed (so nothing is evaluated)
and uses BFCL's own sub-checks for the verdict:

1. after each user turn, the turn's ground-truth calls (parsed by `calls.parse_call`, never
   evaluated) run on a second set of fresh instances, which persist across turns as BFCL's do;
2. a turn whose ground truth has calls fails when the policy made none
   (``multi_turn:empty_turn_model_response``, as ``is_empty_execute_response``);
3. ``state_checker(model_instances, ground_truth_instances)``: every public attribute equal;
4. ``response_checker(all model results so far, this turn's ground-truth results, turn)``:
   every ground-truth result string appears among the policy's results (unordered, with
   multiplicity), the result strings rendered as BFCL's executor renders them;
5. a turn whose ground truth is empty (multi_turn_miss_param) is skipped by 3-4 and fails BFCL's
   irrelevance check when the policy called a function in it.

The task passes when every user turn was played and no check failed (`verdict`); an unfinished
conversation fails.  `turns_matched`, the environment's progress signal, counts the leading user
turns that passed every check (2-5), so it rises only with BFCL's verdict: a turn answered without
the call it needed, or matched in state by doing nothing (a read-only turn, a write the scenario
already holds), earns nothing, and nothing after the first failed turn counts.  `passing_now` says
whether the current turn would pass if answered now (a ground truth kept one turn ahead): the
environment adds it to the signal on each call, so the credit for a passed turn lands on the call
that passed it, not on the next turn's first call.  `off_path` says whether a call left the
ground truth's path in the current turn (the environment's ``off_path`` signal, on every call).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

from trainer.envs.bfcl.backends import Backends
from trainer.envs.bfcl.calls import parse_call
from trainer.envs.bfcl.tasks import BfclTask


def ground_truth_calls(task: BfclTask, backends: Backends) -> list[list[tuple[str, dict[str, Any]]]]:
    """Per user turn, the ground-truth calls parsed into (name, arguments); positional arguments
    are bound in the method's signature order."""
    out = []
    for turn in task.ground_truth:
        parsed = []
        for text in turn:
            name = text.partition("(")[0].strip()
            method = backends.methods.get(name)
            order = list(inspect.signature(method).parameters) if method is not None else None
            parsed.append(parse_call(text, order))
        out.append(parsed)
    return out


class TaskChecker:
    """BFCL's verdict on one conversation, built turn by turn (see the module docstring)."""

    def __init__(self, task: BfclTask) -> None:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as bfcl

        self._bfcl = bfcl
        self.task = task
        self.truth = Backends(task)
        self.truth_calls = ground_truth_calls(task, self.truth)
        self.model_results: list[str] = []
        self.turns_checked = 0
        self.turns_matched = 0
        self.failure: dict[str, Any] | None = None
        # the ground truth one turn ahead: its instances after the current turn's calls, and their
        # results (`passing_now`); `truth` itself advances at `end_turn`, as BFCL's does
        self._ahead = Backends(task)
        self._path: list[dict[str, Any]] = []  # the ground truth's states in the current turn (`off_path`)
        self._ahead_results = self._advance_ahead(0)

    def _advance_ahead(self, index: int) -> list[str]:
        if index >= len(self.truth_calls):
            self._path = []
            return []
        # fresh argument objects per execution (BFCL evals the call string each time): a backend may keep
        # or mutate a list argument (TwitterAPI's post_tweet keeps `mentions`, mention extends it)
        self._path = [copy.deepcopy(self._ahead.instances)]
        results = []
        for name, args in self.truth_calls[index]:
            results.append(self._ahead.execute(name, copy.deepcopy(args), check=False).text)
            self._path.append(copy.deepcopy(self._ahead.instances))
        return results

    def off_path(self, model: Backends, result: str) -> bool:
        """Did the call that returned `result` leave the ground truth's path in the current turn?
        True when its result is none of the turn's ground-truth results, or the state after it is
        none of the ground truth's states in the turn (at its start or after any of its calls): a
        read the turn does not make, a write it does not make.  Judged only while every earlier turn
        passed (after a failed turn the states are no longer comparable: False); a turn whose ground
        truth is empty takes no call (True)."""
        if self.failure is not None or self.turns_checked >= len(self.truth_calls):
            return False
        if result not in self._ahead_results:
            return True
        return not any(self._bfcl.state_checker(model.instances, state)["valid"] for state in self._path)

    def passing_now(self, model: Backends, results: list[str]) -> bool:
        """Would the current user turn pass BFCL's checks if the policy answered now (every earlier
        turn passed, and the turn's calls so far have these result texts)?"""
        index = self.turns_checked
        if self.failure is not None or index >= len(self.truth_calls) or not self._ahead_results:
            return False  # a turn whose ground truth is empty passes only by answering: no call earns it
        if not results or not self._bfcl.state_checker(model.instances, self._ahead.instances)["valid"]:
            return False
        return bool(self._bfcl.response_checker(self.model_results + results, self._ahead_results, index)["valid"])

    def end_turn(self, model: Backends, results: list[str]) -> None:
        """The policy ended user turn `turns_checked` having made calls with these result texts."""
        index = self.turns_checked
        self.turns_checked += 1
        truth = [
            self.truth.execute(name, copy.deepcopy(args), check=False).text for name, args in self.truth_calls[index]
        ]
        self.model_results.extend(results)
        self._ahead_results = self._advance_ahead(index + 1)
        if self.failure is not None:
            return
        self._check_turn(index, truth, results, self._bfcl.state_checker(model.instances, self.truth.instances))
        if self.failure is None:
            self.turns_matched += 1

    def _check_turn(self, index: int, truth: list[str], results: list[str], state: dict[str, Any]) -> None:
        if not truth:
            if results:
                self.failure = {
                    "valid": False,
                    "error_type": "multi_turn:irrelevance_error:decoder_success",
                    "error_message": f"Model outputs valid function calls when it should not for turn {index}.",
                }
            return
        if not results:
            self.failure = {
                "valid": False,
                "error_type": "multi_turn:empty_turn_model_response",
                "error_message": f"Model response list is empty for turn {index}",
            }
        elif not state["valid"]:
            self.failure = state
        else:
            response = self._bfcl.response_checker(self.model_results, truth, index)
            if not response["valid"]:
                self.failure = response

    @property
    def complete(self) -> bool:
        return self.turns_checked == len(self.task.ground_truth)

    def verdict(self) -> dict[str, Any]:
        """``{"valid": True}`` or BFCL's failure dict (``error_type``, ``error_message``)."""
        if self.failure is not None:
            return self.failure
        if not self.complete:
            return {
                "valid": False,
                "error_type": "multi_turn:unfinished",
                "error_message": f"conversation stopped after {self.turns_checked} of {len(self.task.ground_truth)} turns",
            }
        return {"valid": True}
