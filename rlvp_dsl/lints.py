"""Lints: warnings about rule sets that compile but shape the gradient badly.

Each lint is a function of the checked `RuleSet`; `lint` runs them all and returns
`Diagnostic`s with severity ``warning`` and a stable code (docs/language.md,
"Diagnostics").  They reason only with `analysis.Universe.possible` (which event
classes a condition may match) and with conditions normalised to a canonical form,
so each criterion below is exact about what it claims and errs towards silence:

RV301  credit with no penalty path.  A paying rule that nothing in the rule set can
       ever penalise.  The *penalised classes* are the event classes any violation
       (``repeat_error`` and ``blind_destructive`` included) may match, plus the
       opening classes of every obligation whose ``expire`` is negative (its penalty
       lands on the opening event).  An obligation with credit > 0 is reported when
       neither its ``open`` nor its ``discharge`` classes meet the penalised classes
       (so ``expire`` is 0 too): opening it is free, and a policy is paid for every
       open-then-discharge pair it produces.  A progress rule is reported when no
       call can ever be penalised at all (the rule set only pays).
RV302  double counting: two rules that credit the same event for the same reason.
       Two violations (after lowering) whose conditions are equal in canonical form,
       or where one's conjuncts are all among the other's and the other adds only
       *scope* (tool, tag, status, kind atoms): every event of the narrower rule also
       fires the broader one.  A broader condition that tests only the event's kind
       (bare ``call``, a step cost) never counts.  Also two obligations with equal
       ``open``, ``discharge`` and ``same``, and two progress rules on one signal in
       one direction.  ``repeat_error`` beside an ``errored_call`` violation is not
       double counting: their conditions differ (a repeat of a failure, a failure).
       Linear in the number of rules, and a group is reported once: rules with equal
       conditions get one warning (naming the first, counting the rest), a group that
       narrows others one more (naming the first broader rule, counting the rest); no
       pair of rules is enumerated.
RV303  an obligation whose discharge is implied by its open: every event satisfying
       ``open`` also satisfies ``discharge``.  A discharging event never opens, so the
       obligation can never open (or opens only on malformed / unanswered calls, which
       never discharge).  Implication is shown conjunct by conjunct: each conjunct of
       the discharge appears among the open's conjuncts, or is an ``or`` with such a
       branch, or is a scope test every class the open may match surely passes.
RV304  weights that dwarf the outcome reward.  A rule whose per-event bound
       (`ir.rule_bound`) exceeds ``rule_ratio * outcome_scale`` (defaults 1.0 and 1.0:
       one call of one rule outweighs solving the task), or a rule set whose
       `Program.event_bound` (the sum of the bounds) exceeds ``total_ratio *
       outcome_scale`` (default 5.0; the stock rule sets lie between 2 and 4.05).
       The research measured that process credit swamping the outcome hurts it (tau2).
RV305  an unreachable deadline: ``deadline before C`` where no event can satisfy C;
       instances then expire only at the end of the episode (write ``at end``).
"""

from __future__ import annotations

import math

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from . import ast
from .analysis import EventClass, Universe
from .canonical import CanonicalForms, flatten, form_key
from .diagnostics import WARNING, Diagnostic
from .events import ASSISTANT, CALL, MALFORMED, NO_RESULT, USER
from .ir import (
    CheckedRule,
    ObligationRule,
    ProgressRule,
    RuleSet,
    ViolationRule,
    binding_to_json,
    rule_bound,
)
from .source import Span

#: The codes of this module (registered, with their summaries, in `diagnostics.CODES`).
LINT_CODES = ("RV301", "RV302", "RV303", "RV304", "RV305")


@attrs.frozen
class LintOptions:
    """Thresholds of RV304.

    Attributes:
        outcome_scale: the magnitude of the outcome reward the process credit is added to
            (reward units; 1.0 for a pass/fail task).
        rule_ratio: a rule whose per-event bound exceeds ``rule_ratio * outcome_scale`` is reported.
        total_ratio: a rule set whose `Program.event_bound()` exceeds ``total_ratio * outcome_scale``
            is reported.
    """

    outcome_scale: float = 1.0
    rule_ratio: float = 1.0
    total_ratio: float = 5.0


def lint(ruleset: RuleSet, options: LintOptions = LintOptions()) -> list[Diagnostic]:
    """Every lint warning of a checked rule set (one without errors), grouped by code (sort for display
    with `diagnostics.sort_and_cap`).

    Raises:
        ValueError: an option is not a positive number.
    """
    for field in ("outcome_scale", "rule_ratio", "total_ratio"):
        value = getattr(options, field)
        if not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"lint option '{field}' must be a positive number (got {value!r})")
    linter = _Linter(ruleset)
    out = linter.no_penalty_path() + linter.double_counting() + linter.self_discharging()
    out += linter.magnitudes(options) + linter.unreachable_deadlines()
    return out


def _warn(code: str, message: str, span: Span, help: str) -> Diagnostic:
    return Diagnostic(code, message, span, help, WARNING)


_SCOPE = (ast.CallAtom, ast.KindAtom, ast.TagAtom, ast.StatusAtom)

#: A rule with at most this many scope conjuncts finds the rules it narrows by looking up each subset
#: of them (2**k lookups); one with more (a rare, long conjunction) only the rules lacking one of them.
_MAX_SCOPE_SUBSETS = 10

#: A kind of checked rule (`_Linter._groups`).
_Rule = TypeVar("_Rule", ViolationRule, ObligationRule, ProgressRule)

#: The canonical keys of a condition's conjuncts (`_Linter.conjuncts`).
_Keys = frozenset[str]


class _Linter(CanonicalForms):
    def __init__(self, ruleset: RuleSet) -> None:
        super().__init__(Universe(ruleset.tools))
        self.ruleset = ruleset
        self.rules = ruleset.rules

    # ---- RV301 ---------------------------------------------------------------
    def no_penalty_path(self) -> list[Diagnostic]:
        possible = self.universe.possible
        penalised: set[EventClass] = set()  # grown in place: a new frozenset per rule would be quadratic
        for r in self.rules:
            if isinstance(r, ViolationRule) and r.weight < 0:
                penalised.update(possible(r.cond))
            elif isinstance(r, ObligationRule) and r.expire < 0:
                penalised.update(possible(r.open))
        calls_penalised = not penalised.isdisjoint(self.universe.calls)
        out = []
        for r in self.rules:
            if isinstance(r, ObligationRule) and r.credit > 0 and r.expire == 0:
                if penalised.isdisjoint(possible(r.open)) and penalised.isdisjoint(possible(r.discharge)):
                    out.append(
                        _warn(
                            "RV301",
                            f"obligation '{r.name}' pays {r.credit:+g} on discharge but nothing can penalise it: "
                            "its expire is 0 and no rule can fire on its open or discharge events, so a policy is paid "
                            "for every open-then-discharge pair it produces",
                            r.span,
                            "give it a penalty (`expire -0.2`) for the unmet promise, or a violation for opening it "
                            "without need",
                        )
                    )
            elif isinstance(r, ProgressRule) and not calls_penalised:
                out.append(
                    _warn(
                        "RV301",
                        f"progress '{r.name}' pays credit but no rule of this set can ever penalise a call: "
                        "the rule set only pays",
                        r.span,
                        "add the penalties that matter (`repeat_error (-0.3)`, `violation errored_call (-0.1) "
                        "{ on call error }`)",
                    )
                )
        return out

    # ---- RV302 ---------------------------------------------------------------
    def double_counting(self) -> list[Diagnostic]:
        rules = list(self.rules)
        out = self._same_violations([r for r in rules if isinstance(r, ViolationRule)])
        out += self._same_obligations(rules) + self._same_progress(rules)
        return out

    def _same_violations(self, violations: list[ViolationRule]) -> list[Diagnostic]:
        """RV302 for violations, in time and memory about linear in the number of rules.

        Rules are bucketed by their set of canonical conjuncts (equal conditions); the conditions a
        rule narrows are its own less some of its scope conjuncts, looked up by key (`_broader`), so
        no pair of rules is ever enumerated.  A rule is reported at most twice -- once when its
        condition equals an earlier rule's (naming the first such rule), once when it narrows other
        rules (naming the first of them and counting the rest).  A group of equal rules is reported
        once: two equal rules give one warning on the second, naming the first; three or more give
        one warning on the second rule naming the first and counting the rest -- so 10,000 equal
        rules give one warning, not 9,999 (or 50 million pairs).  A group that narrows other rules is
        likewise reported once, on its first rule."""
        out = []
        # conjunct-key set -> rules with exactly that condition, in source order
        by_keys: dict[_Keys, list[tuple[int, ViolationRule]]] = {}
        scope_of: dict[_Keys, _Keys] = {}  # conjunct-key set -> its scope conjuncts
        kind_only: dict[_Keys, bool] = {}  # conjunct-key set -> it tests only the kind of event
        for index, r in enumerate(violations):
            conj = dict(self.conjuncts(r.cond))
            nodes = self.conjunct_nodes(r.cond)
            keys = frozenset(conj)
            if keys not in by_keys:
                by_keys[keys] = []
                scope_of[keys] = frozenset(k for k in keys if isinstance(nodes.get(k), _SCOPE))
                kind_only[keys] = all(_kind_only(j) for j in conj.values())
            by_keys[keys].append((index, r))
        for keys, group in by_keys.items():
            if len(group) > 1:
                out.append(self._equal_group([r for _, r in group]))
            broader = [by_keys[k] for k in self._broader(keys, scope_of[keys], by_keys) if not kind_only[k]]
            if not broader:
                continue
            broad = min((rules[0] for rules in broader), key=lambda pair: pair[0])[1]  # the first in source order
            more = sum(len(rules) for rules in broader) - 1
            also = f" and {more} other rule{'s' if more != 1 else ''} with a broader condition" if more else ""
            narrow = group[0][1]
            alike = len(group) - 1
            same = f" (and the {alike} other rule{'s' if alike != 1 else ''} with its condition)" if alike else ""
            out.append(
                _warn(
                    "RV302",
                    f"every event that fires rule '{narrow.name}'{same} also fires rule '{broad.name}' "
                    f"({broad.span.location}){also}: '{narrow.name}' only narrows its condition to some tools or "
                    "statuses, so such an event is penalised twice for one reason",
                    narrow.span,
                    f"if the extra penalty is meant, fold it into '{narrow.name}' and exclude its events from "
                    f"'{broad.name}' with `unless`",
                )
            )
        return out

    @staticmethod
    def _equal_group(group: list[ViolationRule]) -> Diagnostic:
        """The one RV302 of rules whose conditions are equal (in source order, two or more), on the second."""
        first, second = group[0], group[1]
        total = sum(r.weight for r in group)
        # the summed weight, unless it overflows: RV104 rejects a weight past 1.8e308
        weight = (
            f" with weight {total:g}"
            if math.isfinite(total)
            else " (their weights sum past what a number holds: give it one weight, well below 1e308)"
        )
        if len(group) == 2:
            return _warn(
                "RV302",
                f"rule '{second.name}' fires on exactly the events rule '{first.name}' fires on (their "
                f"conditions are equal): each such event is penalised twice for one reason "
                f"({first.span.location})",
                second.span,
                f"merge them into one rule{weight}, or remove one",
            )
        rest = len(group) - 2
        return _warn(
            "RV302",
            f"rule '{second.name}' and {rest} other rule{'s' if rest != 1 else ''} fire on exactly the "
            f"events rule '{first.name}' fires on (their conditions are equal): each such event is penalised "
            f"{len(group)} times for one reason ({first.span.location})",
            second.span,
            f"merge the {len(group)} rules into one rule{weight}, or keep one",
        )

    @staticmethod
    def _broader(keys: _Keys, scope: _Keys, by_keys: Mapping[_Keys, object]) -> list[_Keys]:
        """The conjunct-key sets of other rules that are `keys` less some of its scope conjuncts (a proper
        subset whose missing conjuncts are all scope tests), looked up subset by subset: every subset
        while the rule has at most `_MAX_SCOPE_SUBSETS` scope conjuncts (2**k lookups), else only the
        sets lacking one of them (k lookups; the lint errs towards silence)."""
        ordered = sorted(scope)
        if len(ordered) > _MAX_SCOPE_SUBSETS:
            return [keys - {k} for k in ordered if keys - {k} in by_keys]
        found = []
        for mask in range(1, 1 << len(ordered)):
            smaller = keys - {ordered[i] for i in range(len(ordered)) if mask >> i & 1}
            if smaller in by_keys:
                found.append(smaller)
        return found

    @staticmethod
    def _groups(rules: Sequence[CheckedRule], kind: type[_Rule], key: Callable[[_Rule], Hashable]) -> list[list[_Rule]]:
        """Rules of `kind` grouped by `key(rule)`, groups of two or more, in source order."""
        by_key: dict[Hashable, list[_Rule]] = {}
        for r in rules:
            if isinstance(r, kind):
                by_key.setdefault(key(r), []).append(r)
        return [group for group in by_key.values() if len(group) > 1]

    @staticmethod
    def _others(group: Sequence[CheckedRule]) -> str:
        """`` (and N other rules like it)`` for a group of three or more, else nothing."""
        rest = len(group) - 2
        return f" (and {rest} other rule{'s' if rest != 1 else ''} like it)" if rest else ""

    def _same_obligations(self, rules: Sequence[CheckedRule]) -> list[Diagnostic]:
        """RV302 for obligations: one warning per group with equal open, discharge and same (on its second)."""
        out = []
        key = lambda r: form_key([self.normal(r.open), self.normal(r.discharge), binding_to_json(r.same)])  # noqa: E731
        for group in self._groups(rules, ObligationRule, key):
            a, r = group[0], group[1]
            out.append(
                _warn(
                    "RV302",
                    f"obligation '{r.name}'{self._others(group)} opens and discharges on exactly the events "
                    f"obligation '{a.name}' does ({a.span.location}): each discharge is paid "
                    f"{'twice' if len(group) == 2 else f'{len(group)} times'}",
                    r.span,
                    "merge them into one obligation",
                )
            )
        return out

    def _same_progress(self, rules: Sequence[CheckedRule]) -> list[Diagnostic]:
        """RV302 for progress rules: one warning per group on one signal in one direction (on its second)."""
        out = []
        for group in self._groups(rules, ProgressRule, lambda r: (r.signal, r.direction)):
            a, r = group[0], group[1]
            out.append(
                _warn(
                    "RV302",
                    f"progress '{r.name}'{self._others(group)} tracks signal '{r.signal}' {r.direction}, "
                    f"as progress '{a.name}' does ({a.span.location}): each new best is paid "
                    f"{'twice' if len(group) == 2 else f'{len(group)} times'}",
                    r.span,
                    "merge them into one progress rule",
                )
            )
        return out

    # ---- RV303 ---------------------------------------------------------------
    def implies(self, a: ast.Expr, d: ast.Expr) -> bool:
        """True when every event satisfying `a` surely satisfies `d` (sound, incomplete)."""
        if isinstance(a, ast.Or):
            return all(self.implies(k, d) for k in flatten(a, ast.Or))
        have = {k for k, _ in self.conjuncts(a)}
        classes = self.universe.possible(a)
        return self._implied(have, classes, d)

    def _implied(self, have: set[str], classes: frozenset[EventClass], d: ast.Expr) -> bool:
        if form_key(self.normal(d)) in have:
            return True
        if isinstance(d, ast.And):
            return all(self._implied(have, classes, k) for k in flatten(d, ast.And))
        if isinstance(d, ast.Or):
            return any(self._implied(have, classes, k) for k in flatten(d, ast.Or))
        return classes <= self.surely(d)

    def self_discharging(self) -> list[Diagnostic]:
        out = []
        for r in self.rules:
            if not isinstance(r, ObligationRule) or not self.universe.possible(r.open):
                continue
            if not self.implies(r.open, r.discharge):
                continue
            unanswered = [c for c in self.universe.possible(r.open) if c[2] in (MALFORMED, NO_RESULT)]
            effect = (
                "it opens only on malformed or unanswered calls (which never discharge)"
                if unanswered
                else "it can never open, so it never pays and never expires"
            )
            out.append(
                _warn(
                    "RV303",
                    f"every event that opens obligation '{r.name}' also satisfies its discharge condition; "
                    f"an event that discharges never opens an instance: {effect}",
                    r.discharge.span,
                    "make the discharge something a later event does that the opening event does not (a different "
                    "tool or tag, or `same` with another binding)",
                )
            )
        return out

    # ---- RV304 ---------------------------------------------------------------
    def magnitudes(self, options: LintOptions) -> list[Diagnostic]:
        out = []
        scale = options.outcome_scale
        for r in self.rules:
            bound = rule_bound(r)
            if bound > options.rule_ratio * scale:
                out.append(
                    _warn(
                        "RV304",
                        f"rule '{r.name}' can move one event by {bound:g}, more than {options.rule_ratio:g} x "
                        f"the outcome reward ({scale:g}): one call outweighs solving the task",
                        r.span,
                        "keep process weights well below the outcome (the research measured the outcome falling on "
                        "tau2 when process credit swamped it); scale the weights down",
                    )
                )
        total = sum(rule_bound(r) for r in self.rules)
        if self.rules and total > options.total_ratio * scale:
            top = max(self.rules, key=rule_bound)
            out.append(
                _warn(
                    "RV304",
                    f"one event can receive up to {total:g} from this rule set (Program.event_bound), more than "
                    f"{options.total_ratio:g} x the outcome reward ({scale:g})",
                    top.span,
                    f"the largest bound is rule '{top.name}' ({rule_bound(top):g}); scale the weights down",
                )
            )
        return out

    # ---- RV305 ---------------------------------------------------------------
    def unreachable_deadlines(self) -> list[Diagnostic]:
        out = []
        for r in self.rules:
            if (
                isinstance(r, ObligationRule)
                and r.deadline == "before"
                and r.before is not None
                and not self.universe.possible(r.before)
            ):
                out.append(
                    _warn(
                        "RV305",
                        f"the deadline of obligation '{r.name}' can never pass: no event satisfies its "
                        "`before` condition, so instances expire only at the end of the episode",
                        r.before.span,
                        "check the tool names, tags and statuses it combines with `and`, or write `deadline at end`",
                    )
                )
        return out


def _kind_only(j: Any) -> bool:
    """A canonical conjunct that tests only the kind of event: ``call``, ``user``, ``assistant``."""
    return j in ([CALL, []], [USER], [ASSISTANT])
