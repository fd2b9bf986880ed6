"""What a whole ``rlvp-score`` process spends importing: the sum of ``python -X importtime``'s self times.

The goal (issue 22 part 1): at most 100 ms with the checked rule set in the cache (`rlvp_dsl.check_cache`).
Each figure is the median of `runs` processes scoring the same rule file and trajectories, in two installs:

* **as installed here** -- this checkout's interpreter and site-packages, where an editable install
  adds its import hook (``__editable___rlvp_*_finder``, and the ``pathlib``/``importlib.util`` it
  loads) to every process's start;
* **as a wheel installs it** -- the interpreter started with ``-S`` (no ``.pth`` hooks), ``site``
  imported and the same site-packages put on ``sys.path`` by hand, and the package copied into a
  temporary folder as a wheel lays it out (``rlvp_dsl/grammars`` inside the package): no editable
  finder.  The goal is judged on this figure.

And two caches: **warm** (the parser tables and the checked rule set already saved) and **cold**
(no cache folder can be made: every process parses and checks).  Run alone::

    python benchmarks/import_time.py RULES.rlvp TRAJECTORY... [--runs 7] [--no-bytecode]

The .pyc files are written by a first run and read by the measured ones, as an installed package
has them (``PYTHONPYCACHEPREFIX`` in the temporary folder: nothing is written into the checkout);
``--no-bytecode`` measures processes that compile every module instead.

`benchmarks/score_vs_invariant.py` prints the same lines in its whole-process section.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: The rlvp-score process, as ``python -m`` runs it.
SCORE = "import sys; from rlvp_dsl.cli.score import run; sys.exit(run())"

#: The goal, milliseconds of import time (sum of self times).
GOAL_MS = 100.0


def importtime_ms(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """Milliseconds: the sum of the self times ``-X importtime`` prints for one process (`argv`
    starts with the interpreter; its stdout is discarded).

    Raises:
        RuntimeError: the process failed (its stderr's end in the message).
    """
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {done.returncode}: {done.stderr[-1500:]}")
    total = 0
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us = line[len("import time:") :].split("|")[0].strip()
            if self_us.isdigit():  # the header line says "self [us]"
                total += int(self_us)
    return total / 1e3


def wheel_layout(folder: Path) -> Path:
    """This checkout's package copied as a wheel holds it (``rlvp_dsl/`` with ``grammars/`` inside)
    under `folder`; returns `folder`."""
    shutil.copytree(REPO / "rlvp_dsl", folder / "rlvp_dsl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "grammars", folder / "rlvp_dsl" / "grammars")
    return folder


def score_commands(args: list[str], wheel: Path) -> dict[str, list[str]]:
    """The two rlvp-score commands: "installed" (this interpreter as set up here) and "wheel"
    (``-S``: no .pth hooks, the package from `wheel`, the same site-packages)."""
    purelib = sysconfig.get_paths()["purelib"]
    boot = f"import site, sys; sys.path[0:0] = [{str(wheel)!r}, {purelib!r}]; "
    return {
        "installed": [sys.executable, "-c", SCORE, *args],
        "wheel": [sys.executable, "-S", "-c", boot + SCORE, *args],
    }


def measure(args: list[str], runs: int, bytecode: bool = True) -> dict[tuple[str, str], float]:
    """Median milliseconds of import time per (install, cache): installs "installed"/"wheel", caches
    "warm"/"cold"; the runs alternate so that a change of load hits all four alike.  `bytecode`: the
    .pyc files written by a first run and read after (as an install has them); False: every module
    compiled in every process (``PYTHONDONTWRITEBYTECODE=1``, as some sandboxes run)."""
    with tempfile.TemporaryDirectory() as tmp:
        wheel = wheel_layout(Path(tmp, "site"))
        blocker = Path(tmp, "not_a_folder")
        blocker.write_text("")
        caches = {
            "warm": {**os.environ, "RLVP_CACHE_DIR": str(Path(tmp, "cache"))},
            "cold": {**os.environ, "RLVP_CACHE_DIR": str(blocker / "cache")},  # cannot be made: no cache
        }
        cwd = tmp  # not the checkout: its rlvp_dsl/ is on sys.path only where PYTHONPATH puts it
        commands = score_commands([a if a.startswith("-") else os.path.abspath(a) for a in args], wheel)
        paths = {"installed": str(REPO), "wheel": ""}  # this checkout's code in both

        def env(install: str, cache: str) -> dict[str, str]:
            out = {**caches[cache], "PYTHONPATH": paths[install]}
            if bytecode:  # an install has its .pyc files: compiling is not importing
                out["PYTHONPYCACHEPREFIX"] = str(Path(tmp, "pycache"))
                out.pop("PYTHONDONTWRITEBYTECODE", None)
            else:  # the libraries' own .pyc files are read, ours never written
                out["PYTHONDONTWRITEBYTECODE"] = "1"
                out.pop("PYTHONPYCACHEPREFIX", None)
            return out

        for install, command in commands.items():  # the .pyc files written, the caches filled
            for cache in caches:
                importtime_ms(command, env(install, cache), cwd)
        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(runs):
            for install, command in commands.items():
                for cache in caches:
                    samples.setdefault((install, cache), []).append(importtime_ms(command, env(install, cache), cwd))
    return {key: statistics.median(values) for key, values in samples.items()}


def report_lines(medians: dict[tuple[str, str], float], runs: int) -> list[str]:
    """The lines the benchmarks print: the goal judged on the wheel install with a warm cache."""
    wheel_warm = medians[("wheel", "warm")]
    verdict = "met" if wheel_warm <= GOAL_MS else f"missed by {wheel_warm - GOAL_MS:.0f} ms"
    return [
        f"rlvp-score imports: {wheel_warm:.0f} ms (sum of -X importtime self times, median of {runs} runs, "
        f"cache warm, as a wheel installs it: no editable finder), goal <= {GOAL_MS:.0f} ms: {verdict}",
        f"  cache cold (the rule file parsed and checked in each process): {medians[('wheel', 'cold')]:.0f} ms",
        f"  with this checkout's editable install (its __editable__ finder imported at start): "
        f"{medians[('installed', 'warm')]:.0f} ms warm, {medians[('installed', 'cold')]:.0f} ms cold",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("`benchmarks/score_vs_invariant.py`")[0].replace("``", "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("rlvp_score_args", nargs="+", help="rlvp-score's arguments: RULES TRAJECTORY...")
    ap.add_argument("--runs", type=int, default=7, help="processes per figure (median; default 7)")
    ap.add_argument("--no-bytecode", action="store_true", help="no .pyc files: every module compiled in every process")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cores, load average {load:.1f}")
    if args.no_bytecode:
        print("no .pyc files (PYTHONDONTWRITEBYTECODE=1): each process compiles every module it imports")
    for line in report_lines(measure(args.rlvp_score_args, args.runs, bytecode=not args.no_bytecode), args.runs):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
