"""`ToolSpec`: one tool an agent can call -- the one tool type of rlvp.

Every stage speaks of tools with this class: a manifest lists them
(`rlvp_dsl.manifests`), the checker merges a rule file's `tool` declarations into a
table of them (`ir.RuleSet.tools`), episode generators draw calls from them
(`rlvp_dsl.testing`), and the trainer's environments describe their schema with them
(`trainer.envs`), adding the closed set of argument values a constrained decoder may
emit.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from .source import NO_SPAN, Span


def _values(value: Mapping[str, Iterable[object]] | None) -> Mapping[str, tuple[object, ...]]:
    return {str(k): tuple(v) for k, v in (value or {}).items()}


def _tags(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _params(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class ToolSpec:
    """One tool: its name, category tags and target argument.

    Attributes:
        name: the tool name the agent writes.
        tags: category tags (``read``, ``write``, ``destructive``, ``verify``, ``submit``, ...).
        target: the argument naming the object the tool reads or changes (the binding of
            ``same target`` and of ``blind_destructive``); None: no target.
        params: parameter names in declaration order; None when they are not known
            (a ``tool`` declaration without parameters), which turns off the checks that
            need them.
        values: per parameter, the closed set of values an environment accepts (empty
            when open); generators and constrained decoders draw from it.
        target_inferred: the target was inferred from the catalogue, not declared.
        description: the catalogue's description (informational).
        side: the toolkit a tau2 tool belongs to (``agent`` or ``user``); target inference
            groups tools by it.
        span: where a rule file declared the tool (excluded from equality).
    """

    name: str
    tags: frozenset[str] = attrs.field(default=frozenset(), converter=_tags)
    target: str | None = None
    params: tuple[str, ...] | None = attrs.field(default=None, converter=_params)
    values: Mapping[str, tuple[object, ...]] = attrs.field(
        factory=dict, converter=_values, eq=False, hash=False, repr=False
    )
    target_inferred: bool = attrs.field(default=False, eq=False)
    description: str = attrs.field(default="", eq=False, repr=False)
    side: str = attrs.field(default="", eq=False, repr=False)
    span: Span = attrs.field(default=NO_SPAN, eq=False, repr=False)

    def values_for(self, param: str) -> tuple[object, ...]:
        """The closed set of values of `param` (empty: open)."""
        return self.values.get(param, ())

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON of the rule set's tool table (name, sorted tags, target, params)."""
        return {
            "name": self.name,
            "tags": sorted(self.tags),
            "target": self.target,
            "params": list(self.params) if self.params is not None else None,
        }
