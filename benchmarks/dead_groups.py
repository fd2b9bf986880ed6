"""Does a rule set's credit rank real failures?  tau2 dead groups and gold-action progress.

On tau2 simulation files (read with the project's readers; the raw JSON only for
``reward_info.action_checks``, which the readers do not keep), for each domain present
(airline; telecom, which includes tau2's ``telecom-workflow`` variant: the same tools under a
step-by-step policy) and for each credit source -- each rule file given, and two baselines: the
agent's call count, and the two Invariant-style rules of ``benchmarks/score_vs_invariant.py``
(``OUR_RULES``: a repeated errored call, a blind reservation write) -- it prints:

(a) **live dead groups**: among the (file, task) groups of >= 2 trials whose trials all failed
    (outcome 0: GRPO's outcome advantage is 0 for every trial), the share in which the
    per-episode process total differs (by more than 1e-9), so that process credit still gives
    the group a gradient;
(b) **tau-b vs gold progress**: over the failed episodes whose ``action_checks`` list at least
    one gold action, Kendall's tau-b between the process total and the fraction of the task's
    gold actions the agent performed (tau2's own ``action_match``), with a percentile bootstrap
    95 % CI (episodes resampled with replacement, ``--resamples`` times, ``random.Random(--seed)``);
(c) **corr with success**: Pearson's r between the process total and the outcome over all the
    domain's episodes (``rlvp_dsl.report.pearson``, as ``rlvp-score`` prints it).

    python benchmarks/dead_groups.py ../shared/data/tau2_simulations rules/tau2_airline.rlvp
    python benchmarks/dead_groups.py DATA rules/tau2_airline.rlvp rules/tau2_telecom.rlvp --json

Several rule files are rows of one table per domain (a rule file written for airline scores
telecom episodes too: read the row of the file written for the domain).

Exit 0; 1 when a rule file has errors (its diagnostics are printed); 2 for a usage or input
error (a missing path, an unreadable trajectory file, no episode of the domain), named with
its file and record, never a traceback.  A few seconds on one core.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time
from bisect import bisect_left
from collections import Counter
from operator import mul
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rlvp_dsl import Episode, RuleError, load_program, loads  # noqa: E402
from rlvp_dsl.readers import ReaderError, read_report  # noqa: E402
from rlvp_dsl.compare import TIE, dead_groups, is_live, quantile, task_groups  # noqa: E402
from rlvp_dsl.report import pearson  # noqa: E402

#: --domain name -> the tau2 ``domain_name``s it covers.
DOMAINS = {"airline": ("airline",), "telecom": ("telecom", "telecom-workflow")}
RESAMPLES = 2000
SEED = 0
# TIE (process totals closer than this are one value), quantile and the dead groups come from
# rlvp_dsl/compare.py, which rlvp-score --compare shares.


# ---- Kendall's tau-b and its bootstrap ---------------------------------------------------------


def _sign(d: float) -> int:
    return (d > 0) - (d < 0)


def kendall_tau_b(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's tau-b of two equal-length sequences; None when undefined (n < 2, or all x or
    all y tied).

    ``tau_b = (C - D) / sqrt((n0 - n1) (n0 - n2))`` with C, D the concordant and discordant
    pairs, ``n0 = n(n-1)/2``, and n1, n2 the pairs tied in x, in y (Kendall, "The treatment of
    ties in ranking problems", Biometrika 33, 1945; scipy.stats.kendalltau's default variant).
    O(n^2): n is a few hundred episodes here.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(xs) != len(ys):
        raise ValueError(f"kendall_tau_b: xs and ys must have one length (got {len(xs)} and {len(ys)})")
    n = len(xs)
    s = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = _sign(xs[i] - xs[j]), _sign(ys[i] - ys[j])
            s += a * b
            tied_x += a == 0
            tied_y += b == 0
    n0 = n * (n - 1) // 2
    denominator = (n0 - tied_x) * (n0 - tied_y)
    return s / math.sqrt(denominator) if denominator > 0 else None


class _TauB:
    """tau-b of resamples of fixed (x, y) pairs, given as counts per pair: the pairs' signs are
    computed once, so one resample costs n^2/2 multiplications in C (``map(mul)``), not n^2
    Python steps.  Two copies of one pair are tied in x and in y (they add to n1 and n2, not to
    C - D), exactly as in ``kendall_tau_b`` of the expanded sample."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float]):
        n = len(xs)
        self.n = n
        self.rows = [[_sign(xs[i] - xs[j]) * _sign(ys[i] - ys[j]) for j in range(i + 1, n)] for i in range(n)]
        self.x_class = _classes(xs)
        self.y_class = _classes(ys)

    def __call__(self, counts: Sequence[int]) -> float | None:
        s = sum(c * sum(map(mul, counts[i + 1 :], self.rows[i])) for i, c in enumerate(counts) if c)
        total = sum(counts)
        n0 = total * (total - 1) // 2
        denominator = (n0 - _tied(counts, self.x_class)) * (n0 - _tied(counts, self.y_class))
        return s / math.sqrt(denominator) if denominator > 0 else None


def _classes(values: Sequence[float]) -> list[int]:
    distinct = sorted(set(values))
    return [bisect_left(distinct, v) for v in values]


def _tied(counts: Sequence[int], classes: Sequence[int]) -> int:
    per_class: Counter[int] = Counter()
    for c, k in zip(counts, classes):
        per_class[k] += c
    return sum(t * (t - 1) // 2 for t in per_class.values())


def bootstrap_tau_b(
    xs: Sequence[float], ys: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95
) -> tuple[float, float, int] | None:
    """Percentile bootstrap CI of Kendall's tau-b: (low, high, resamples where tau-b was defined).

    Each resample draws len(xs) pairs with replacement (``random.Random(seed).choices``); the CI
    is the (1-level)/2 and (1+level)/2 quantiles (``quantile``) of the defined resamples' tau-b
    (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13).  None when fewer
    than 2 pairs or no resample is defined.

    Raises:
        ValueError: the sequences differ in length, or resamples < 1.
    """
    if len(xs) != len(ys):
        raise ValueError(f"bootstrap_tau_b: xs and ys must have one length (got {len(xs)} and {len(ys)})")
    if resamples < 1:
        raise ValueError(f"bootstrap_tau_b: resamples must be >= 1 (got {resamples})")
    n = len(xs)
    if n < 2:
        return None
    tau = _TauB(xs, ys)
    rng = random.Random(seed)
    indices = range(n)
    values = []
    for _ in range(resamples):
        counts = [0] * n
        for i in rng.choices(indices, k=n):
            counts[i] += 1
        t = tau(counts)
        if t is not None:
            values.append(t)
    if not values:
        return None
    values.sort()
    return quantile(values, (1 - level) / 2), quantile(values, (1 + level) / 2), len(values)


# ---- the data ----------------------------------------------------------------------------------


class InputError(Exception):
    """A path, file or record this benchmark cannot use (exit 2)."""


def gold_fractions(files: Sequence[str]) -> dict[tuple[str, int], float]:
    """(file, simulation index) -> the fraction of the task's gold actions tau2 found performed
    (``action_match`` over ``reward_info.action_checks``); simulations without gold actions are
    absent.

    Raises:
        InputError: a file is not valid JSON, or an ``action_checks`` entry lacks a boolean
            ``action_match`` (named by file, record and field).
    """
    out: dict[tuple[str, int], float] = {}
    for file in files:
        try:
            with open(file, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            raise InputError(f"{file}: cannot read it as JSON: {exc}") from None
        simulations = data.get("simulations") if isinstance(data, dict) else None
        for k, sim in enumerate(simulations if isinstance(simulations, list) else []):
            info = sim.get("reward_info") if isinstance(sim, dict) else None
            checks = info.get("action_checks") if isinstance(info, dict) else None
            if not isinstance(checks, list) or not checks:
                continue
            matched = 0
            for c, check in enumerate(checks):
                match = check.get("action_match") if isinstance(check, dict) else None
                if not isinstance(match, bool):
                    where = f"simulations[{k}].reward_info.action_checks[{c}]"
                    raise InputError(f"{file}: {where}: field 'action_match': expected true or false, got {match!r}")
                matched += match
            out[(file, k)] = matched / len(checks)
    return out


def simulation_index(episode: Episode) -> int:
    """The simulation's index in its file, from the tau2 reader's id ``<name>#simulations[i]``."""
    return int(episode.id.rsplit("#simulations[", 1)[1].rstrip("]"))


def invariant_rules() -> str:
    """The rlvp text of the two Invariant-style rules of benchmarks/score_vs_invariant.py."""
    spec = importlib.util.spec_from_file_location("score_vs_invariant", ROOT / "benchmarks" / "score_vs_invariant.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.OUR_RULES)


def measure(
    episodes: Sequence[Episode],
    total: Callable[[Episode], float],
    gold: dict[tuple[str, int], float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """(a), (b), (c) of one credit source (`total`: an episode's process total) on one domain's
    episodes: live and dead group counts, tau-b with its CI and n, and the correlation with success."""
    totals = [total(e) for e in episodes]
    dead = dead_groups(episodes, task_groups(episodes, need_task=False), all_failed=True)
    live = sum(1 for g in dead if is_live(totals, g))
    failed = [k for k, e in enumerate(episodes) if e.outcome == 0 and (e.source, simulation_index(e)) in gold]
    xs = [round(totals[k] / TIE) * TIE for k in failed]  # ties within float noise are ties
    ys = [gold[(episodes[k].source, simulation_index(episodes[k]))] for k in failed]
    ci = bootstrap_tau_b(xs, ys, resamples=resamples, seed=seed)
    with_outcome = [k for k, e in enumerate(episodes) if e.outcome is not None]
    return {
        "dead_groups": len(dead),
        "live_dead_groups": live,
        "failed_with_gold": len(failed),
        "tau_b": kendall_tau_b(xs, ys),
        "ci95": None if ci is None else [ci[0], ci[1]],
        "resamples_defined": 0 if ci is None else ci[2],
        "corr_success": pearson([totals[k] for k in with_outcome], [episodes[k].outcome or 0.0 for k in with_outcome]),
        "episodes": len(episodes),
    }


# ---- the command -------------------------------------------------------------------------------


def _num(x: float | None, spec: str = "+.2f") -> str:
    return "n/a" if x is None else format(x, spec)


def render(results: dict[str, Any]) -> str:
    lines = []
    for domain, block in results["domains"].items():
        lines += [
            "",
            f"{domain}: {block['episodes']} episodes, {block['dead_groups']} outcome-dead groups (>= 2 trials, "
            f"all failed), {block['failed_with_gold']} failed episodes with gold actions",
            "| credit source | live dead groups | tau-b vs gold fraction (failed) | 95 % CI | corr with success |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, m in block["sources"].items():
            ci = "n/a" if m["ci95"] is None else f"[{m['ci95'][0]:+.2f}, {m['ci95'][1]:+.2f}]"
            lines.append(
                f"| {name} | {m['live_dead_groups']}/{m['dead_groups']} | {_num(m['tau_b'])} | {ci} "
                f"| {_num(m['corr_success'])} |"
            )
    lines += [
        "",
        f"bootstrap: {results['resamples']} resamples of the failed episodes, seed {results['seed']}, "
        f"percentile CI; {results['seconds']:.1f} s",
    ]
    return "\n".join(lines[1:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dead_groups.py", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("data", help="tau2 simulation files or a folder of them (e.g. ../shared/data/tau2_simulations)")
    parser.add_argument("rules", nargs="+", help="the rule files to measure (e.g. rules/tau2_airline.rlvp)")
    parser.add_argument("--domain", choices=sorted(DOMAINS), action="append", help="only this domain (repeatable)")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help=f"bootstrap resamples (default {RESAMPLES})")
    parser.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default {SEED})")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error(f"--resamples must be >= 1 (got {args.resamples})")
    t0 = time.perf_counter()
    programs = {}
    for path in args.rules:
        try:
            programs[path] = load_program(path)
        except RuleError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"dead_groups.py: {path}: cannot read the rule file: {exc.strerror or exc}", file=sys.stderr)
            return 2
    try:
        report = read_report(args.data)  # other formats are read and left out below: no action_checks
        gold = gold_fractions(report.files)
    except (ReaderError, InputError) as exc:
        print(f"dead_groups.py: {exc}", file=sys.stderr)
        return 2
    baseline = loads(invariant_rules(), "benchmarks/score_vs_invariant.py:OUR_RULES")
    sources: dict[str, Callable[[Episode], float]] = {
        path: (lambda e, p=program: sum(c.value for c in p.score(e))) for path, program in programs.items()
    }
    sources.update(
        {
            "call count (agent calls)": lambda e: float(sum(1 for c in e.calls if c.requestor != "user")),
            "Invariant-style 2 rules": lambda e: sum(c.value for c in baseline.score(e)),
        }
    )
    wanted = args.domain or sorted(DOMAINS)
    results: dict[str, Any] = {"data": args.data, "rules": args.rules, "resamples": args.resamples, "seed": args.seed}
    results["domains"] = {}
    for domain in wanted:
        episodes = [
            e for e in report.episodes if e.meta.get("format") == "tau2" and e.meta.get("domain") in DOMAINS[domain]
        ]
        if not episodes:
            if args.domain:
                print(f"dead_groups.py: {args.data}: no tau2 episode of the domain {domain!r}", file=sys.stderr)
                return 2
            continue
        block: dict[str, Any] = {"sources": {}}
        for name, total in sources.items():
            block["sources"][name] = measure(episodes, total, gold, resamples=args.resamples, seed=args.seed)
        first = next(iter(block["sources"].values()))
        block.update({k: first[k] for k in ("episodes", "dead_groups", "failed_with_gold")})
        results["domains"][domain] = block
    if not results["domains"]:
        print(f"dead_groups.py: {args.data}: no tau2 episode of airline or telecom", file=sys.stderr)
        return 2
    results["seconds"] = time.perf_counter() - t0
    try:
        print(json.dumps(results, indent=2) if args.json else render(results), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
