"""Two rule sets on the same episodes: which one ranks outcomes better (`rlvp-score --compare`).

Pure Python (no numpy).  `compare(a, b)` takes the episodes scored under rule set A and
under rule set B (the same episodes, in the same order) and measures, per rule and for the
process total:

* **the correlation with the outcome**: Pearson's r between the per-episode total and the
  outcome reward over the episodes that have one (`rlvp_dsl.report.pearson`, the number
  ``rlvp-score`` prints as "corr w/ outcome");
* **the share of outcome-dead groups made live**: a group is the episodes of one task in
  one file (``(source, meta["task_id"])``, as benchmarks/dead_groups.py groups tau2 trials),
  of >= 2 episodes; it is outcome-dead when their outcomes are all equal (GRPO's outcome
  advantage is 0 for each), and live under a rule set when the total differs within it
  (by more than `TIE`).

Each difference B - A has a paired percentile bootstrap 95 % CI: one resample draws the
episodes (for the correlations) or the dead groups (for the live shares) with replacement,
``random.Random(seed)``, and both sides are computed on that same draw.  A resample where a
side's correlation is undefined (no variance) is left out; ``resamples_defined`` counts the rest.

Also: the episodes whose rank by process total moves most (`rank_moves`), with the credits
only one side gives, and a one-line verdict (`verdict`).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from operator import mul
from typing import Any, Sequence

import attrs

from .events import Credit, Episode
from .report import fixed, pearson

#: Bootstrap resamples and seed of `compare` (fixed: a comparison reruns to the same numbers).
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
#: Totals closer than this are one value (float sums of the same credits in another order).
TIE = 1e-9
#: Episodes listed by `rank_moves`.
TOP_MOVES = 10
#: Below these sample sizes the verdict says so: a percentile bootstrap CI covers less than its
#: nominal 95 % on small samples (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
#: ch. 13-14), and with a few dead groups the live share moves in steps of 1/n.
SMALL_EPISODES = 20
SMALL_GROUPS = 5

#: An episode and its credits, as `Program.score` gives them.
Scored = tuple[Episode, Sequence[Credit]]


# ---- shared maths (benchmarks/dead_groups.py imports these) ----------------------------------


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, linear between order statistics (Hyndman and Fan's
    type 7, numpy's default).

    Raises:
        ValueError: no values, or q outside [0, 1].
    """
    if not sorted_values or not 0 <= q <= 1:
        raise ValueError(f"quantile: need values and 0 <= q <= 1 (got {len(sorted_values)} values, q={q})")
    h = (len(sorted_values) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def task_groups(episodes: Sequence[Episode], *, need_task: bool = True) -> list[list[int]]:
    """The groups of >= 2 episodes of one task in one file: ``(source, meta["task_id"])``, as
    indices into `episodes`, in order of first appearance.  With `need_task` (the default) an
    episode without a task id is in no group (a chat file's records are not trials of one task)."""
    groups: dict[tuple[str, Any], list[int]] = defaultdict(list)
    for k, e in enumerate(episodes):
        task = e.meta.get("task_id")
        if task is not None or not need_task:
            groups[(e.source, task)].append(k)
    return [g for g in groups.values() if len(g) >= 2]


def dead_groups(
    episodes: Sequence[Episode], groups: Sequence[Sequence[int]], *, all_failed: bool = False
) -> list[Sequence[int]]:
    """The outcome-dead groups among `groups`: every episode has an outcome and all outcomes are
    equal (with `all_failed`: all are 0, benchmarks/dead_groups.py's "all failed")."""
    out = []
    for g in groups:
        outcomes = {episodes[k].outcome for k in g}
        if None not in outcomes and len(outcomes) == 1 and (not all_failed or outcomes == {0}):
            out.append(g)
    return out


def is_live(totals: Sequence[float], group: Sequence[int]) -> bool:
    """Whether the totals of the episodes of `group` differ (by more than `TIE`)."""
    values = [totals[k] for k in group]
    return max(values) - min(values) > TIE


# ---- the comparison ----------------------------------------------------------------------------


@attrs.frozen
class Difference:
    """One measure under A and under B, and B - A with its paired bootstrap CI.

    Attributes:
        a / b: the measure on all episodes (None: undefined, e.g. a correlation with no variance).
        diff: ``b - a``; None when either is undefined.
        ci95: ``(low, high)`` of the difference; None when no resample was defined.
        resamples_defined: resamples where both sides were defined.
    """

    a: float | None
    b: float | None
    diff: float | None
    ci95: tuple[float, float] | None
    resamples_defined: int

    @property
    def shown(self) -> int:
        """+1: the CI lies above 0 (B higher), -1: below 0 (A higher), 0: no difference shown."""
        if self.ci95 is None:
            return 0
        low, high = self.ci95
        return 1 if low > 0 else (-1 if high < 0 else 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "diff": self.diff,
            "ci95": None if self.ci95 is None else list(self.ci95),
            "resamples_defined": self.resamples_defined,
        }


@attrs.frozen
class RuleComparison:
    """One rule (by name) under both rule sets: `in_a` / `in_b` say where it is written (a rule
    one side lacks gives 0 there); `correlation` and `live_share` are `Difference`s."""

    name: str
    in_a: bool
    in_b: bool
    correlation: Difference
    live_share: Difference

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "in_a": self.in_a,
            "in_b": self.in_b,
            "correlation": self.correlation.to_json(),
            "live_share": self.live_share.to_json(),
        }


@attrs.frozen
class RankMove:
    """An episode whose rank by process total moved: ranks are 1 = lowest total (ties share
    their mean rank); `only_a` / `only_b` the credits ``(event_index, rule, value)`` one side
    gives and the other does not (credits of 0 left out)."""

    index: int
    id: str
    outcome: float | None
    total_a: float
    total_b: float
    rank_a: float
    rank_b: float
    only_a: tuple[tuple[int, str, float], ...]
    only_b: tuple[tuple[int, str, float], ...]

    @property
    def change(self) -> float:
        return self.rank_b - self.rank_a

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["rank_change"] = self.change
        out["only_a"] = [{"event": e, "rule": r, "value": v} for e, r, v in self.only_a]
        out["only_b"] = [{"event": e, "rule": r, "value": v} for e, r, v in self.only_b]
        return out


@attrs.frozen
class Comparison:
    """Everything `compare` measures (docs/scoring.md, "Comparing two rule sets").

    Attributes:
        episodes / with_outcome: episodes compared, and those with an outcome (the correlations' n).
        groups / dead: task groups of >= 2 episodes, and the outcome-dead ones (the live shares' n).
        total: the process total's `correlation` and `live_share`, as a `RuleComparison` named ``total``.
        rules: one `RuleComparison` per rule name, A's rules first (in order), then B's others.
        moves: up to `TOP_MOVES` `RankMove`s, the largest ``|rank change|`` first.
        resamples / seed: the bootstrap's.
    """

    episodes: int
    with_outcome: int
    groups: int
    dead: int
    total: RuleComparison
    rules: tuple[RuleComparison, ...]
    moves: tuple[RankMove, ...]
    resamples: int
    seed: int

    @property
    def verdict(self) -> str:
        return verdict(self)

    @property
    def small_sample(self) -> list[str]:
        """Why the CIs are indicative only: fewer than `SMALL_EPISODES` episodes with an outcome,
        fewer than `SMALL_GROUPS` outcome-dead groups (none when there are no dead groups at all);
        empty when neither holds."""
        why = []
        if self.with_outcome < SMALL_EPISODES:
            why.append(f"{self.with_outcome} episodes with an outcome (< {SMALL_EPISODES})")
        if 0 < self.dead < SMALL_GROUPS:
            why.append(f"{self.dead} outcome-dead group{'' if self.dead == 1 else 's'} (< {SMALL_GROUPS})")
        return why

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "with_outcome": self.with_outcome,
            "groups": self.groups,
            "dead_groups": self.dead,
            "resamples": self.resamples,
            "seed": self.seed,
            "level": LEVEL,
            "verdict": self.verdict,
            "small_sample": self.small_sample,
            "total": self.total.to_json(),
            "rules": [r.to_json() for r in self.rules],
            "rank_moves": [m.to_json() for m in self.moves],
        }


def _rule_totals(scored: Sequence[Scored], names: Sequence[str]) -> dict[str, list[float]]:
    out = {name: [0.0] * len(scored) for name in names}
    for k, (_, credits) in enumerate(scored):
        for c in credits:
            if c.rule in out:
                out[c.rule][k] += c.value
    return out


class _Correlations:
    """Pearson's r of fixed (x, y) pairs on resamples given as counts per pair: the sums are
    ``sum(map(mul, counts, ...))`` in C, one pass per sum."""

    def __init__(self, ys: Sequence[float]):
        my = sum(ys) / len(ys) if ys else 0.0
        self.y = [v - my for v in ys]
        self.yy = [v * v for v in self.y]

    def series(self, xs: Sequence[float]) -> tuple[list[float], list[float], list[float]] | None:
        """The centred x, x^2 and x*y of `xs`; None when `xs` has no variance (r is undefined in every resample)."""
        if not xs or max(xs) - min(xs) <= TIE:
            return None
        top = max(abs(v) for v in xs)
        scale = top if top > 1e150 else 1.0
        mx = sum(v / scale for v in xs) / len(xs)
        x = [v / scale - mx for v in xs]
        return x, [v * v for v in x], [a * b for a, b in zip(x, self.y)]

    def r(
        self,
        counts: Sequence[int],
        n: int,
        sy: float,
        syy: float,
        s: tuple[list[float], list[float], list[float]] | None,
    ) -> float | None:
        """r on the resample `counts` (``n`` draws; ``sy``, ``syy``: the outcome's sums on it) of the prepared `s`."""
        if s is None:
            return None
        x, xx, xy = s
        sx: float = sum(map(mul, counts, x))
        vx: float = sum(map(mul, counts, xx)) - sx * sx / n
        vy = syy - sy * sy / n
        if vx <= 1e-12 or vy <= 1e-12:
            return None
        sxy: float = sum(map(mul, counts, xy))
        return (sxy - sx * sy / n) / math.sqrt(vx * vy)


def _ci(values: list[float]) -> tuple[float, float] | None:
    if not values:
        return None
    values.sort()
    return quantile(values, (1 - LEVEL) / 2), quantile(values, (1 + LEVEL) / 2)


def _counts(rng: random.Random, n: int) -> list[int]:
    """One bootstrap draw of n items with replacement, as a count per item."""
    counts = [0] * n
    for i in rng.choices(range(n), k=n):
        counts[i] += 1
    return counts


def _correlation_differences(
    series: Sequence[tuple[Sequence[float], Sequence[float]]], outcomes: Sequence[float], resamples: int, seed: int
) -> list[Difference]:
    """Per (A totals, B totals) over the episodes with an outcome: r under A and B and the paired CI of B - A."""
    points = [(pearson(a, outcomes), pearson(b, outcomes)) for a, b in series]
    draws: list[list[float]] = [[] for _ in series]
    n = len(outcomes)
    active = [k for k, (pa, pb) in enumerate(points) if pa is not None and pb is not None]
    if n >= 2 and active:
        corr = _Correlations(outcomes)
        prepared = [(corr.series(a), corr.series(b)) for a, b in series]
        same = [list(a) == list(b) for a, b in series]  # one rule unchanged: r is one number on both sides
        rng = random.Random(seed)
        for _ in range(resamples):
            counts = _counts(rng, n)
            sy, syy = sum(map(mul, counts, corr.y)), sum(map(mul, counts, corr.yy))
            for k in active:
                ra = corr.r(counts, n, sy, syy, prepared[k][0])
                if ra is None:
                    continue
                rb = ra if same[k] else corr.r(counts, n, sy, syy, prepared[k][1])
                if rb is not None:
                    draws[k].append(rb - ra)
    out = []
    for (pa, pb), values in zip(points, draws):
        diff = None if pa is None or pb is None else pb - pa
        out.append(Difference(pa, pb, diff, _ci(values), len(values)))
    return out


def _live_differences(
    series: Sequence[tuple[Sequence[float], Sequence[float]]], dead: Sequence[Sequence[int]], resamples: int, seed: int
) -> list[Difference]:
    """Per (A totals, B totals): the share of `dead` groups live under A and B, and the paired CI of B - A."""
    m = len(dead)
    if not m:
        return [Difference(None, None, None, None, 0) for _ in series]
    lives = [([is_live(a, g) for g in dead], [is_live(b, g) for g in dead]) for a, b in series]
    gains = [[int(lb) - int(la) for la, lb in zip(a, b)] for a, b in lives]
    changed = [k for k, gain in enumerate(gains) if any(gain)]  # the others' difference is 0 in every resample
    draws: list[list[float]] = [[0.0] * resamples for _ in series]
    rng = random.Random(seed)
    for t in range(resamples):
        counts = _counts(rng, m)
        for k in changed:
            draws[k][t] = sum(map(mul, counts, gains[k])) / m
    out = []
    for (la, lb), values in zip(lives, draws):
        a, b = sum(la) / m, sum(lb) / m
        out.append(Difference(a, b, b - a, _ci(values), len(values)))
    return out


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of `values`, lowest first; values equal after rounding to `TIE` share their mean rank."""
    keys = [round(v / TIE) if math.isfinite(v) else v for v in values]
    order = sorted(range(len(values)), key=lambda k: keys[k])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and keys[order[j + 1]] == keys[order[i]]:
            j += 1
        for k in order[i : j + 1]:
            out[k] = (i + j) / 2 + 1
        i = j + 1
    return out


def _credit_keys(credits: Sequence[Credit]) -> Counter[tuple[int, str, float]]:
    """The credits as ``(event_index, rule, value)`` (value rounded to 9 places), those of value 0 left out."""
    return Counter((c.event_index, c.rule, round(c.value, 9)) for c in credits if round(c.value, 9))


def rank_moves(a: Sequence[Scored], b: Sequence[Scored], top: int = TOP_MOVES) -> list[RankMove]:
    """The `top` episodes whose rank by process total moves most from A to B (ties: input order);
    episodes that keep their rank are left out."""
    totals_a = [sum(c.value for c in cs) for _, cs in a]
    totals_b = [sum(c.value for c in cs) for _, cs in b]
    rank_a, rank_b = ranks(totals_a), ranks(totals_b)
    moved = sorted((k for k in range(len(a)) if rank_a[k] != rank_b[k]), key=lambda k: (-abs(rank_b[k] - rank_a[k]), k))
    out = []
    for k in moved[:top]:
        ca, cb = _credit_keys(a[k][1]), _credit_keys(b[k][1])
        episode = a[k][0]
        out.append(
            RankMove(
                k,
                episode.id,
                episode.outcome,
                totals_a[k],
                totals_b[k],
                rank_a[k],
                rank_b[k],
                tuple(sorted((ca - cb).elements())),
                tuple(sorted((cb - ca).elements())),
            )
        )
    return out


def compare(
    a: Sequence[Scored],
    b: Sequence[Scored],
    rules_a: Sequence[str],
    rules_b: Sequence[str],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Comparison:
    """Compare rule set B with rule set A on the same episodes.

    Args:
        a / b: ``[(episode, credits)]`` of the same episodes, in the same order, scored under A and B.
        rules_a / rules_b: the rule names of A and B (`Program.rules`' names), in rule-file order.
        resamples / seed: the bootstrap's (resamples >= 1).

    Returns:
        `Comparison`.

    Raises:
        ValueError: `a` and `b` differ in length or in an episode's id, or resamples < 1.
    """
    if len(a) != len(b) or any(ea.id != eb.id for (ea, _), (eb, _) in zip(a, b)):
        raise ValueError("compare: a and b must hold the same episodes in the same order")
    if resamples < 1:
        raise ValueError(f"compare: resamples must be >= 1 (got {resamples})")
    episodes = [e for e, _ in a]
    names = list(dict.fromkeys([*rules_a, *rules_b]))
    per_a, per_b = _rule_totals(a, rules_a), _rule_totals(b, rules_b)
    zeros = [0.0] * len(episodes)
    series = [(per_a.get(name, zeros), per_b.get(name, zeros)) for name in names]
    series.append(([sum(c.value for c in cs) for _, cs in a], [sum(c.value for c in cs) for _, cs in b]))
    have = [k for k, e in enumerate(episodes) if e.outcome is not None]
    outcomes = [float(episodes[k].outcome or 0.0) for k in have]
    correlations = _correlation_differences(
        [([x[k] for k in have], [y[k] for k in have]) for x, y in series], outcomes, resamples, seed
    )
    groups = task_groups(episodes)
    dead = dead_groups(episodes, groups)
    lives = _live_differences(series, dead, resamples, seed)
    compared = [
        RuleComparison(name, name in per_a, name in per_b, correlations[k], lives[k]) for k, name in enumerate(names)
    ]
    total = RuleComparison("total", True, True, correlations[-1], lives[-1])
    moves = tuple(rank_moves(a, b))
    return Comparison(len(episodes), len(have), len(groups), len(dead), total, tuple(compared), moves, resamples, seed)


def _difference_text(d: Difference) -> str:
    if d.diff is None:
        return "n/a"
    ci = "" if d.ci95 is None else f" [{fixed(d.ci95[0], '+.2f')}, {fixed(d.ci95[1], '+.2f')}]"
    return f"{fixed(d.diff, '+.2f')}{ci}"


def verdict(comparison: Comparison) -> str:
    """One line: which rule set's process total ranks outcomes better (the correlation's CI
    lies on one side of 0), and which makes more outcome-dead groups live; "no difference
    shown" when neither CI excludes 0.  Each difference B - A is given with its 95 % CI; a
    small sample (`Comparison.small_sample`) is named after the verdict."""
    text = _verdict(comparison)
    if comparison.small_sample:
        text += "; small sample, the CIs are indicative only: " + ", ".join(comparison.small_sample)
    return text


def _verdict(comparison: Comparison) -> str:
    corr, live = comparison.total.correlation, comparison.total.live_share
    corr_text = f"corr with outcome {_difference_text(corr)}" if corr.diff is not None else "corr with outcome n/a"
    live_text = f"dead groups made live {_difference_text(live)}" if live.diff is not None else "no outcome-dead groups"
    if corr.shown == 0 and live.shown == 0:
        return f"no difference shown ({corr_text}; {live_text})"
    first = (
        {1: "B ranks outcomes better", -1: "A ranks outcomes better"}[corr.shown] + f": {_difference_text(corr)}"
        if corr.shown
        else f"no difference shown in ranking outcomes ({corr_text})"
    )
    second = (
        {1: "B makes more dead groups live", -1: "A makes more dead groups live"}[live.shown]
        + f": {_difference_text(live)}"
        if live.shown
        else f"no difference shown in {live_text}"
        if live.diff is not None
        else live_text
    )
    return f"{first}; {second}"
