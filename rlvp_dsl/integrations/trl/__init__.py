"""rlvp credit in Hugging Face TRL's `GRPOTrainer` (extra ``trl``; tested with TRL 1.16).

Two ways in, one line each::

    from rlvp_dsl.integrations.trl import RlvpReward, RlvpGRPOTrainer

    # scalar mode: the stock GRPOTrainer, rule credit added to the reward
    trainer = GRPOTrainer(model, reward_funcs=[outcome, RlvpReward("rules/my.rlvp", mode="scalar")], ...)

    # token mode: each call's credit on exactly the tokens of that call
    trainer = RlvpGRPOTrainer(model, reward_funcs=[outcome, RlvpReward("rules/my.rlvp")], ...)

**Scalar mode.**  `RlvpReward` returns ``process_weight * (total rule credit)`` per
completion; TRL adds it to the other reward functions' outputs before its group
advantage (the ``scalar_fold`` of docs/results.md).  In a group whose outcomes are all
equal (all failed) TRL's group std z-scores the rule credit's differences, however
small, into unit-size advantages: penalties a few hundredths apart become +-1, shaping
noise as a full-size gradient.  Such *amplified* groups are counted
(``rlvp/amplified_groups``, `rlvp_dsl.advantages.amplified_groups`) and logged once;
token mode has no such step (its process part is ``w * C``, at most ``w * |c|`` a token).

**Token mode.**  `RlvpReward` adds nothing to the scalar reward (it returns 0.0) and
keeps each row's episode; `RlvpGRPOTrainer` (or `RlvpAdvantageMixin` on a trainer you
already subclass) replaces TRL's ``[B]`` advantages with ``[B, T]`` ones::

    A[i, t] = mask[i, t] * (A_out[i] + w * u[i]) + w * C[i, t]

computed by `rlvp_dsl.advantages.compute_advantages` -- the same function the compact
trainer and the verl estimator use: ``A_out`` is the group-normalised outcome (the
other reward functions' weighted sum, TRL's ``scale_rewards``; a group with equal
outcomes gets exactly 0), ``C[i, t]`` the credit of the call whose tokens include t,
``u`` the credit of assistant turns (no span), ``w`` the process weight (optionally
annealed, `rlvp_dsl.advantages.ProcessWeightSchedule`).  TRL's ``_compute_loss`` takes 2-D
advantages as they are, for every ``loss_type``.

**Reading TRL's completions.**  Tool mode (``tools=``, ``environment_factory``) gives
message lists: tool errors are TRL's ``{'error': ...}`` text (error signal ``trl``), and
a call whose arguments were not valid JSON stays text in the message -- with the
template's markers it becomes a malformed call.  Plain-text completions are read for
marked calls.  TRL's tool messages carry no ids (and TRL writes sync tools' results before
async ones'): each answers the oldest unanswered call of its ``name``.  A call written
inside ``<think>...</think>`` is no call, in the text and in the spans.  In
``rollout_func`` mode a rollout may return the messages under the key
``rlvp_messages`` (one message list per completion), which takes precedence.  The
prompt's messages are part of the episode (a rule may look at what the user said), but
credit never lands on them.

**Spans.**  In token mode the trainer finds each call's tokens from the completion ids,
the completion mask times the tool mask, and the marker tokens, and pairs them with
the episode's calls (`rlvp_dsl.call_spans`); a span TRL did not read as a call becomes a
malformed call, scored as failed.  A bad completion never stops training: the row
gets no credit and is counted (``rlvp/unscorable_rows``).

**Outcome once.**  In ``environment_factory`` mode TRL adds the environment's
``get_reward`` as a reward function of its own; it is part of the outcome here, and
`RlvpReward` never adds an outcome, so nothing is counted twice.

Metrics, next to TRL's (``frac_reward_zero_std`` reads 1.0 where every group's outcomes
are equal; ``rlvp/live_groups`` shows that token credit kept them live):
``rlvp/live_groups``, ``rlvp/dead_groups``, ``rlvp/violations_per_episode``,
``rlvp/credit_per_episode``, ``rlvp/process_weight``, ``rlvp/unmatched_spans``,
``rlvp/calls_without_span`` (calls whose tokens were not found: their credit reaches
no token), ``rlvp/unscorable_rows``, ``rlvp/flagged_credits`` (non-finite credits and
sums dropped, `rlvp_dsl.attach`), ``rlvp/ambiguous_results`` (calls whose result, paired
by tool name, could be a same-name call's: docs/readers.md); in scalar mode
``rlvp/amplified_groups``.

Importing this module imports torch and trl.

The package: `reward` (`RlvpReward`, `RlvpRuleReward`, `ScoredRow`: reading TRL's completions into
episodes and their credit) and `trainer` (`RlvpAdvantageMixin`, `RlvpGRPOTrainer`: the ``[B, T]``
advantages).
"""

from __future__ import annotations

from .reward import TESTED_TRL, RlvpReward, RlvpRuleReward, ScoredRow
from .trainer import RlvpAdvantageMixin, RlvpGRPOTrainer

__all__ = ["RlvpAdvantageMixin", "RlvpGRPOTrainer", "RlvpReward", "RlvpRuleReward", "ScoredRow", "TESTED_TRL"]
