"""rlvp per-token advantages on verifiers traces (extra ``verifiers``; tested with verifiers 0.4).

verifiers v1 records a rollout as a message graph (``verifiers.v1.Trace``): each
``MessageNode`` carries its ``token_ids``, a ``mask`` (True on the tokens the model sampled;
template scaffold and input messages False) and ``advantages``, "per-token credit over the
sampled tokens, same layout as ``logprobs``; None until a consumer's RL algorithm assigns it".
prime-rl trains on ``Branch.advantages`` when they are set.  `RlvpVerifiers` sets them::

    from rlvp_dsl.integrations.verifiers import RlvpVerifiers

    rlvp = RlvpVerifiers("rules/my.rlvp", marker_ids=(tok.encode("<tool_call>"), tok.encode("</tool_call>")))
    rlvp.assign(groups)   # groups: [n_groups][G] scored traces of the same task per group

For every trace the advantage of each sampled token is the compact trainer's
(`rlvp_dsl.advantages.compute_advantages`, token mode, through
`rlvp_dsl.integrations.tinker.TokenCredit`)::

    A[t] = A_out + w * P[t]

``A_out`` the group-relative advantage of the trace's outcome (``trace.reward``, the sum of its
weighted verifiers rewards, unless `RlvpVerifiers.assign` is given ``outcomes``), ``P[t]`` the
rule credit of the call whose tokens include t (the call's tokens found by the template's
marker ids among the sampled ones), plus the answers' credit on every sampled token.  Each
assistant node gets the values of its own sampled positions (its mask excludes the scaffold);
input nodes keep ``advantages=None``.

**Declaring it.**  verifiers 0.4.0 has no flag by which an environment or rubric declares that
it supplies advantages (its only advantage fields are ``MessageNode.advantages`` and
``Branch.advantages``); what the package tells a consumer is ``Branch.advantages`` not None
("assigned", unlike a never-scored branch).  A trace scored here also carries
``trace.info["rlvp"]`` (``provides_advantages: True``, the process weight, the rule source) and
the metrics ``rlvp_credit``, ``rlvp_violations``, ``rlvp_calls``; the class has
``provides_advantages = True``.  All of it survives ``Trace.to_record`` and ``WireTrace`` (how a
trainer reads traces).  A consumer that would compute its own advantages must skip traces whose
nodes already hold some.

**Limits.**  One trainable branch per trace (a trace with sub-agent or compaction branches is
refused, naming it): the branches of one trace share nodes, and one node cannot hold two
branches' advantages.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from verifiers.v1 import AssistantMessage, Trace
from verifiers.v1.types import content_text

from rlvp_dsl.integrations.tinker import TokenAdvantages, TokenCredit, TokenRollout

__all__ = ["TESTED_VERIFIERS", "RlvpVerifiers", "openai_messages"]

#: The verifiers minor version this module is tested with (the ``verifiers`` extra pins it).
TESTED_VERIFIERS = "0.4"


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """verifiers' typed messages as OpenAI-chat dicts (what `rlvp_dsl.readers` reads)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            d: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.reasoning_content:
                d["reasoning_content"] = m.reasoning_content
            if m.tool_calls:
                d["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
        elif m.role == "tool":
            d = {"role": "tool", "tool_call_id": m.tool_call_id, "content": content_text(m.content)}
            if m.name:
                d["name"] = m.name
        else:
            d = {"role": m.role, "content": content_text(m.content)}
        out.append(d)
    return out


class RlvpVerifiers(TokenCredit):
    """Writes rlvp's per-token advantages onto verifiers traces (arguments: `TokenCredit`)."""

    provides_advantages = True

    def rollout(self, trace: Trace, outcome: float, where: str = "trace") -> TokenRollout:
        """The trace's one trainable branch as token data.

        Raises:
            TypeError: not a ``verifiers.v1.Trace``.
            ValueError: no trainable branch, or more than one (see the module's Limits).
        """
        if not isinstance(trace, Trace):
            raise TypeError(f"{where} must be a verifiers.v1.Trace (got {type(trace).__name__})")
        branches = [b for b in trace.branches if b.trainable]
        if len(branches) != 1:
            raise ValueError(
                f"{where} (trace {trace.id}) has {len(branches)} trainable branches; "
                "rlvp assigns advantages to traces of exactly one"
            )
        branch = branches[0]
        first = next((k for k, node in enumerate(branch.nodes) if node.sampled), len(branch.nodes))
        for k, node in enumerate(branch.nodes):
            if len(node.mask) != len(node.token_ids):
                raise ValueError(
                    f"{where} (trace {trace.id}): node {k} has {len(node.mask)} mask entries "
                    f"for {len(node.token_ids)} token ids (a trace without tokens cannot take advantages)"
                )
        return TokenRollout(
            branch.token_ids, [int(m) for m in branch.sampled_mask], openai_messages(branch.messages), first, outcome
        )

    def assign(
        self,
        groups: Sequence[Sequence[Trace]],
        outcomes: Sequence[Sequence[float]] | Callable[[Trace], float] | None = None,
    ) -> TokenAdvantages:
        """Set ``advantages`` on every sampled node of every trace of ``groups``.

        Args:
            groups: ``[n_groups][G]`` traces; a group is the rollouts of one task.
            outcomes: ``[n_groups][G]`` outcome rewards, or a function of a trace; None:
                ``trace.reward``.

        Returns:
            `TokenAdvantages`: ``per_token[g][i]`` is aligned with the branch's ``token_ids``.

        Raises:
            TypeError, ValueError: as `rollout` and `TokenCredit.advantages`, naming
                ``groups[g][i]``; outcomes of another shape than ``groups``.
        """
        if outcomes is None:
            values = [[float(t.reward) if isinstance(t, Trace) else 0.0 for t in g] for g in groups]
        elif callable(outcomes):
            values = [[float(outcomes(t)) for t in g] for g in groups]
        else:
            values = [[float(x) for x in g] for g in outcomes]
            if [len(g) for g in values] != [len(g) for g in groups]:
                raise ValueError(
                    f"outcomes has group sizes {[len(g) for g in values]} for groups of {[len(g) for g in groups]}"
                )
        rollouts = [
            [self.rollout(t, values[g][i], f"groups[{g}][{i}]") for i, t in enumerate(group)]
            for g, group in enumerate(groups)
        ]
        adv = self.advantages(rollouts)
        for g, group in enumerate(groups):
            for i, trace in enumerate(group):
                self._write(trace, adv.per_token[g][i])
                cc = adv.credits[g][i]
                trace.record_metrics(
                    {
                        "rlvp_credit": float(cc.total),
                        "rlvp_violations": float(cc.n_violations),
                        "rlvp_calls": float(len(cc.values)),
                    }
                )
                trace.info["rlvp"] = {
                    "provides_advantages": True,
                    "process_weight": self.process_weight,
                    "rules": self.source,
                }
        return adv

    @staticmethod
    def _write(trace: Trace, per_token: list[float]) -> None:
        """Each sampled node gets its sampled positions' values (the compact layout of ``logprobs``)."""
        (branch,) = [b for b in trace.branches if b.trainable]
        offset = 0
        for node in branch.nodes:
            n = len(node.token_ids)
            if node.sampled:
                node.advantages = [per_token[offset + j] for j in range(n) if node.mask[j]]
            offset += n
