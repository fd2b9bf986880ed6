"""rlvp credit as atropos ``ScoredDataGroup`` s (extra ``atropos``; tested with atroposlib 0.4).

Nous Research's atropos takes per-token advantages as plain data: an environment hands its
trainer ``ScoredDataGroup`` s (a TypedDict in ``atroposlib.envs.base``; on the wire the API
server's ``atroposlib.api.server.ScoredData``), one per group of rollouts of the same prompt,
whose ``advantages`` are ``[G][N]`` floats aligned with ``tokens`` (not shifted: position t is
token t).  This module writes them::

    from rlvp_dsl.integrations.atropos import RlvpAtropos
    from rlvp_dsl.integrations.tinker import TokenRollout

    credit = RlvpAtropos("rules/my.rlvp", marker_ids=(tok.encode("<tool_call>"), tok.encode("</tool_call>")))
    scored = credit.scored_groups(groups)  # groups: [n_groups][G] TokenRollout
    await env.handle_send_to_api(scored)   # inside an atropos BaseEnv, or POST /scored_data_list

The advantages are `rlvp_dsl.integrations.tinker.TokenCredit.advantages` (the compact trainer's
`rlvp_dsl.advantages.compute_advantages` in token mode)::

    A[t] = sampled[t] * A_out + w * P[t]

so prompt tokens and tool outputs get exactly 0; each group's ``masks`` follow atropos'
convention (``atroposlib.utils.tokenize_for_trainer``): the token id where the policy sampled
it, -100 elsewhere; ``scores`` are the outcome rewards and ``inference_logprobs`` (when the
rollouts have logprobs) carry atropos' placeholder 1.0 on the masked positions.

Nothing here imports atroposlib: a ``ScoredDataGroup`` is a plain dict (importing the TypedDict's
module would pull in wandb).
"""

from __future__ import annotations

from typing import Any, Sequence

from rlvp_dsl.integrations.tinker import TokenCredit, TokenRollout

__all__ = ["TESTED_ATROPOS", "MASKED", "SCORED_DATA_GROUP_KEYS", "RlvpAtropos"]

#: The atroposlib minor version this module is tested with (the ``atropos`` extra pins it).
TESTED_ATROPOS = "0.4"

#: atropos' mask value for a token the trainer does not train on (prompt, tool output, scaffold).
MASKED = -100

#: The fields of atroposlib 0.4's ``ScoredDataGroup``, in its order.
SCORED_DATA_GROUP_KEYS = (
    "tokens",
    "masks",
    "scores",
    "advantages",
    "ref_logprobs",
    "messages",
    "generation_params",
    "inference_logprobs",
    "group_overrides",
    "overrides",
    "images",
    "distill_token_ids",
    "distill_logprobs",
)

#: atropos' logprob placeholder on masked positions (``ManagedServer``: 1.0 for prompt positions).
_MASKED_LOGPROB = 1.0


class RlvpAtropos(TokenCredit):
    """`TokenCredit` that writes atropos ``ScoredDataGroup`` s (same arguments).

    One group per group of rollouts; sequence i of group g is ``groups[g][i]``::

        tokens[i]             = tokens
        masks[i]              = token id where sampled, -100 elsewhere
        scores[i]             = outcome
        advantages[i]         = A                 (A: `TokenCredit.advantages`, aligned with tokens)
        inference_logprobs[i] = logprobs where sampled, 1.0 elsewhere (None when no rollout has logprobs)

    `TokenCredit.advantages` gives the same rows with the credits and spans they come from.
    The other (optional) fields are None: ``ref_logprobs``, ``messages``, ``generation_params``,
    ``group_overrides``, ``overrides``, ``images``, ``distill_token_ids``, ``distill_logprobs``.
    """

    def scored_groups(self, groups: Sequence[Sequence[TokenRollout]]) -> list[dict[str, Any]]:
        """``[n_groups]`` ``ScoredDataGroup`` dicts of ``groups`` (see the class).

        Raises:
            ValueError: some but not all rollouts have logprobs (atropos needs them for all or
                none), a rollout whose first token is sampled (no position predicts it), and as
                `TokenCredit.advantages` (naming ``groups[g][i]`` and the field).
        """
        has_logprobs = set()
        for g, group in enumerate(groups):
            for i, r in enumerate(group):
                if isinstance(r, TokenRollout):
                    has_logprobs.add(r.logprobs is not None)
                    if len(r.sampled) and r.sampled[0]:
                        raise ValueError(f"groups[{g}][{i}]'s first token is sampled: no position predicts it")
        if len(has_logprobs) > 1:
            raise ValueError("some rollouts have logprobs and some do not: give them for all or for none")
        adv = self.advantages(groups)
        out = []
        for group, adv_group in zip(groups, adv.per_token, strict=True):
            tokens = [[int(t) for t in r.tokens] for r in group]
            sampled = [[bool(s) for s in r.sampled] for r in group]
            scored: dict[str, Any] = dict.fromkeys(SCORED_DATA_GROUP_KEYS)
            scored["tokens"] = tokens
            scored["masks"] = [
                [t if s else MASKED for t, s in zip(ts, ss, strict=True)] for ts, ss in zip(tokens, sampled)
            ]
            scored["scores"] = [float(r.outcome) for r in group]
            scored["advantages"] = [[float(x) for x in a] for a in adv_group]
            if has_logprobs == {True}:
                scored["inference_logprobs"] = [
                    [float(lp) if s else _MASKED_LOGPROB for lp, s in zip(r.logprobs or (), ss, strict=True)]
                    for r, ss in zip(group, sampled, strict=True)
                ]
            out.append(scored)
        return out
