"""Scoring speed: the compiled program vs the reference interpreter, side by side.

Scores the shared tau2 trajectories (tau2 simulations + tau-bench v1), replicated
to at least --events events, with the compiled program and with the reference
interpreter in the same run, and prints events per second for each and their
ratio.  Also times compiling a generated file of --rules rules.

    python benchmarks/score_speed.py                      # 1,000,000 events (a few minutes)
    python benchmarks/score_speed.py --events 200000      # quicker

The reference interpreter is quadratic in the episode's length on purpose, so it
is timed on a fixed sample (--reference-events) and reported per event; a second
measurement concatenates the events into one long episode (--long-events), where
the difference between O(1) and O(history) per event shows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from rlvp_dsl import check_text, load_program  # noqa: E402
from rlvp_dsl.readers import read_paths  # noqa: E402
from rlvp_dsl.reference import score_reference  # noqa: E402


def generated_rules(n: int) -> str:
    lines = ["tool read_x : read target x", "tool write_x : write target x", "tool submit : submit"]
    for i in range(n):
        k = i % 4
        if k == 0:
            lines.append(
                f'violation v{i} (-0.1) {{ on call write_x arg x == "{i}" unless seen (call read_x ok same x) }}'
            )
        elif k == 1:
            lines.append(
                f"obligation o{i} (+0.1, expire -0.1) {{ open on call tag write discharge on call tag read ok same x deadline within {1 + i % 5} calls }}"
            )
        elif k == 2:
            lines.append(f'violation e{i} (-0.1) {{ on call error error_text contains "code {i}" }}')
        else:
            lines.append(f"progress p{i} (+0.1) {{ signal s{i} decreasing }}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--rules", dest="rules_file", default=os.path.join(REPO, "rules", "tau2_airline.rlvp"))
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reference-events", type=int, default=100_000)
    ap.add_argument("--compile-rules", type=int, default=1000)
    ap.add_argument("--long-events", type=int, default=2000)
    args = ap.parse_args()

    sources = [os.path.join(args.data, "tau2_simulations"), os.path.join(args.data, "tau_bench_v1")]
    if not all(os.path.isdir(s) for s in sources):
        sources = [os.path.join(REPO, "examples", "episodes")]
    episodes = read_paths(sources)
    per_copy = sum(len(e.events) for e in episodes)
    copies = max(1, -(-args.events // per_copy))
    program = load_program(args.rules_file)
    print(
        f"rules: {args.rules_file} ({len(program.rules)} rules); data: {len(episodes)} episodes, "
        f"{per_copy} events per copy x {copies} copies = {per_copy * copies} events"
    )

    # warm the plan cache (one pass), then time
    for e in episodes:
        program.score(e)
    start = time.perf_counter()
    credits = 0
    for _ in range(copies):
        for e in episodes:
            credits += len(program.score(e))
    compiled_s = time.perf_counter() - start
    compiled_rate = per_copy * copies / compiled_s

    ref_copies = max(1, -(-min(args.reference_events, per_copy * copies) // per_copy))
    start = time.perf_counter()
    for _ in range(ref_copies):
        for e in episodes:
            score_reference(program.ruleset, e)
    reference_s = time.perf_counter() - start
    reference_rate = per_copy * ref_copies / reference_s

    print(
        f"compiled:  {compiled_rate:>12,.0f} events/s  ({per_copy * copies:,} events, {compiled_s:.1f} s, {credits:,} credits)"
    )
    print(f"reference: {reference_rate:>12,.0f} events/s  ({per_copy * ref_copies:,} events, {reference_s:.1f} s)")
    print(f"ratio compiled/reference: {compiled_rate / reference_rate:.1f}x")

    # Long episodes: the same events concatenated into episodes of about --long-events events.
    # The reference re-scans the history at every event (quadratic); the compiled program does not.
    import attrs
    from rlvp_dsl.events import Episode

    flat = [ev for e in episodes for ev in e.events]
    long_events = flat[: args.long_events]
    long_episode = Episode("long", tuple(attrs.evolve(ev, index=i) for i, ev in enumerate(long_events)))
    start = time.perf_counter()
    for _ in range(5):
        program.score(long_episode)
    long_compiled = 5 * len(long_events) / (time.perf_counter() - start)
    start = time.perf_counter()
    score_reference(program.ruleset, long_episode)
    long_reference = len(long_events) / (time.perf_counter() - start)
    print(
        f"one {len(long_events):,}-event episode: compiled {long_compiled:,.0f} events/s, "
        f"reference {long_reference:,.0f} events/s, ratio {long_compiled / long_reference:.1f}x"
    )

    text = generated_rules(args.compile_rules)
    start = time.perf_counter()
    result = check_text(text, "<generated>")
    from rlvp_dsl import compile_ruleset

    compile_ruleset(result.ruleset)
    print(
        f"compile a {args.compile_rules}-rule file: {time.perf_counter() - start:.3f} s "
        f"({'ok' if result.ok else 'ERRORS'})"
    )


if __name__ == "__main__":
    main()
