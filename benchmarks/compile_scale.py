"""Compile time and memory against rule-set size: check + lint + compile for 1k/5k/10k rules.

Three shapes of generated rule file, each size with the lints on and off, each in a fresh
subprocess (so one run's peak memory never hides in another's):

* ``distinct``  -- rules that differ in a value (violations on an argument or an error text,
  obligations on an argument), over three tools;
* ``identical`` -- one condition repeated (``violation vI (-0.0001) { on call a error }``): the
  worst case of the double-counting lint (RV302), which reports the group once;
* ``one_tool``  -- one tool declared per rule, each rule on its own tool: the worst case for the
  checker's tool table.

    python benchmarks/compile_scale.py                          # 1k, 5k, 10k rules, every shape, lints on and off
    python benchmarks/compile_scale.py --sizes 1000 2000 --kinds identical --lints on
    python benchmarks/compile_scale.py --src ../old-checkout --timeout 120 --max-mb 8000   # another checkout

Columns: seconds to read and parse, to check, to lint, to compile, their total, and the CPU
seconds of those stages (on a shared machine the clock runs ahead of the CPU); the peak resident
memory of the subprocess (``ru_maxrss``) and what it held before the rule file was built (the
interpreter, lark and the parser); the number of diagnostics.  A run past --timeout or --max-mb
(an address-space limit) is reported as such.  The last lines check the goal of issue 12: every
shape at 10,000 rules, lints on, under 5 s and 500 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KINDS = ("distinct", "identical", "one_tool")
#: The goal: 10,000 rules of any shape, lints on, under this many seconds and MB.
GOAL_RULES, GOAL_S, GOAL_MB = 10_000, 5.0, 500


def rule_text(kind: str, n: int) -> str:
    """A generated rule file of `n` rules of one shape."""
    if kind == "identical":
        return "tool a : read\n" + "".join(f"violation v{i} (-0.0001) {{ on call a error }}\n" for i in range(n))
    if kind == "one_tool":
        return "".join(f"tool t{i} : read\n" for i in range(n)) + "".join(
            f"violation v{i} (-0.0001) {{ on call t{i} error }}\n" for i in range(n)
        )
    if kind != "distinct":
        raise ValueError(f"kind must be one of {', '.join(KINDS)} (got {kind!r})")
    lines = ["tool read_x : read target x", "tool write_x : write target x", "tool submit : submit"]
    for i in range(n):
        k = i % 3
        if k == 0:
            lines.append(f'violation v{i} (-0.0001) {{ on call write_x error and arg x == "{i}" }}')
        elif k == 1:
            lines.append(f'violation e{i} (-0.0001) {{ on call error error_text contains "code {i}" }}')
        else:
            lines.append(
                f'obligation o{i} (+0.0001, expire -0.0001) {{ open on call write_x arg x == "{i}" '
                "discharge on call read_x ok same x }"
            )
    return "\n".join(lines) + "\n"


def measure(kind: str, n: int, lints: bool = True) -> dict:
    """Run in the subprocess: build the file, then time each stage (the stages of `rlvp-compile`)."""
    import resource

    from rlvp_dsl.check import check
    from rlvp_dsl.compile import compile_ruleset
    from rlvp_dsl.diagnostics import has_errors
    from rlvp_dsl.lints import lint
    from rlvp_dsl.loader import load_files, load_manifests
    from rlvp_dsl.syntax.grammar import get_parser

    get_parser()  # built once per process; not part of compiling a file
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = rule_text(kind, n)
    c0 = time.process_time()
    t0 = time.perf_counter()
    files, _, diagnostics = load_files(f"{kind}_{n}.rlvp", text=text)
    t1 = time.perf_counter()
    ruleset = None
    if not has_errors(diagnostics):
        manifests, problems = load_manifests(files)
        ruleset, checked = check(files, manifests)
        diagnostics = diagnostics + problems + checked
    t2 = time.perf_counter()
    if lints and ruleset is not None and not has_errors(diagnostics):
        diagnostics = diagnostics + lint(ruleset)
    t3 = time.perf_counter()
    if ruleset is not None and not has_errors(diagnostics):
        compile_ruleset(ruleset)
    t4 = time.perf_counter()
    cpu = time.process_time() - c0
    codes: dict[str, int] = {}
    for d in diagnostics:
        codes[d.code] = codes.get(d.code, 0) + 1
    return {
        "parse": t1 - t0,
        "check": t2 - t1,
        "lint": t3 - t2,
        "compile": t4 - t3,
        "total": t4 - t0,
        "cpu": cpu,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "before_mb": before,
        "codes": codes,
    }


def run_one(kind: str, n: int, src: str, timeout: float, max_mb: int | None, lints: bool = True) -> dict:
    """One measurement in a fresh interpreter; {"error": ...} when it ran out of time or memory."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--one",
        kind,
        str(n),
        "--src",
        src,
        "--lints",
        "on" if lints else "off",
    ]
    if max_mb:
        cmd += ["--max-mb", str(max_mb)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": "MemoryError" if "MemoryError" in proc.stderr else last[:60]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: list[tuple[str, int, bool, dict]]) -> str:
    head = (
        f"{'shape':<10} {'rules':>6} {'lints':>5} {'parse s':>8} {'check s':>8} {'lint s':>8} {'compile s':>9} "
        f"{'total s':>8} {'cpu s':>6} {'peak MB':>8} {'base MB':>8}  diagnostics"
    )
    out = [head, "-" * len(head)]
    for kind, n, lints, r in rows:
        on = "on" if lints else "off"
        if "error" in r:
            out.append(f"{kind:<10} {n:>6} {on:>5}  {r['error']}")
            continue
        codes = ", ".join(f"{c} x{k}" for c, k in sorted(r["codes"].items())) or "none"
        out.append(
            f"{kind:<10} {n:>6} {on:>5} {r['parse']:>8.2f} {r['check']:>8.2f} {r['lint']:>8.2f} "
            f"{r['compile']:>9.2f} {r['total']:>8.2f} {r['cpu']:>6.2f} {r['peak_mb']:>8.0f} {r['before_mb']:>8.0f}  {codes}"
        )
    return "\n".join(out)


def goal_lines(rows: list[tuple[str, int, bool, dict]]) -> list[str]:
    """Whether each shape meets the goal at GOAL_RULES rules with the lints on, and by how much it misses."""
    out = []
    for kind, n, lints, r in rows:
        if n != GOAL_RULES or not lints:
            continue
        if "error" in r:
            out.append(f"goal ({kind}, {n:,} rules, lints on): missed -- {r['error']}")
            continue
        misses = []
        if r["total"] >= GOAL_S:
            misses.append(f"{r['total']:.1f} s is {r['total'] / GOAL_S:.2f}x the {GOAL_S:g} s")
        if r["peak_mb"] >= GOAL_MB:
            misses.append(f"{r['peak_mb']:.0f} MB is {r['peak_mb'] / GOAL_MB:.2f}x the {GOAL_MB} MB")
        verdict = "missed: " + "; ".join(misses) if misses else "met"
        if misses and r["cpu"] < GOAL_S and r["peak_mb"] < GOAL_MB:
            verdict += f" (on the clock only: the process used {r['cpu']:.1f} s of CPU -- the machine is shared)"
        out.append(
            f"goal ({kind}, {n:,} rules, lints on, < {GOAL_S:g} s and < {GOAL_MB} MB): "
            f"{r['total']:.2f} s, {r['cpu']:.2f} s CPU, {r['peak_mb']:.0f} MB -- {verdict}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000], help="numbers of rules")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="shapes of rule file")
    ap.add_argument("--src", default=REPO, help="the checkout whose rlvp_dsl is measured (default: this one)")
    ap.add_argument(
        "--lints",
        nargs="+",
        choices=("on", "off"),
        default=["on", "off"],
        help="run the lints (rlvp-compile does), skip them (rlvp-score does), or both",
    )
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per measurement")
    ap.add_argument("--max-mb", type=int, default=None, help="address-space limit per measurement (MB)")
    ap.add_argument("--one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # the subprocess
        if args.max_mb:
            import resource

            limit = args.max_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        sys.path.insert(0, os.path.abspath(args.src))
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.lints == ["on"])))
        return
    print("$ " + shlex.join(["python", os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:]))
    print(f"rlvp_dsl from {os.path.abspath(args.src)}; python {sys.version.split()[0]}; one subprocess per row")
    print()
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"load average {load:.1f}: the machine is busy, the seconds are inflated")
    rows = []
    for kind in args.kinds:
        for n in args.sizes:
            for on in args.lints:
                lints = on == "on"
                rows.append((kind, n, lints, run_one(kind, n, args.src, args.timeout, args.max_mb, lints)))
    print(table(rows))
    goals = goal_lines(rows)
    if goals:
        print()
        print("\n".join(goals))
    print(f"\nwall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
