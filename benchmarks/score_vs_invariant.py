"""Scoring against the Invariant policy analyzer, side by side, on the shared tau2 corpus.

Both sides check the same two rules on the tau2 simulations in ``../shared/data``:

* **a repeated errored call** -- a call identical (same tool, same arguments) to an earlier
  call whose result was an error;
* **a blind reservation write** -- a call that changes a reservation (``cancel_reservation``,
  ``update_reservation_*``) with no earlier successful ``get_reservation_details`` of the same
  ``reservation_id``.

Ours is the compiled rule program (``rlvp_dsl``); theirs is ``invariant-ai``'s local policy
analyzer (``invariant.analyzer.LocalPolicy.from_string(...).analyze(trace)``), run in its own
virtual environment (``.venv-bench-invariant``, created on the first run; pip is constrained so
that it can never pull torch) as a worker process this script talks to over a pipe.

The peer is reported at its best.  Invariant's rules are written twice (`FORMULATIONS`):

* **tool_call()** -- the headline: a result linked to its call with Invariant's own
  ``tool_call(output)`` builtin, the form Invariant's tests use; the fastest correct
  formulation we found;
* **3-way id join** -- the same rules linking call and result by ``out.tool_call_id == c.id``
  (what this benchmark used before: correct, and about 10x slower).

Ours and each formulation are timed alternately in every run (ours, then each formulation,
then the parse floor), and the median of ``--runs`` is reported:

1. **score alone**: the episodes already in memory (ours: `Episode`s; theirs: the message
   lists, converted to Invariant's OpenAI-style trace once);
2. **read + score**: from the files on disk (ours: `read_paths` then `Program.score`; theirs:
   ``json.load``, the conversion to a trace, ``analyze``);
3. **the parse floor**: open, read and ``orjson.loads`` the same files, nothing built, the
   cyclic collector paused as our readers pause it -- the least any reader can cost; ours
   read + score / floor is printed; beside it **the Python bound** (`python_bound`): the same
   parse, then one plain tuple per event and results handed to calls by id, with no checks --
   the least a reader written in Python can cost; the bound plus our scoring alone, over the
   floor, is the best read + score / floor any Python reader can reach with this scorer;
4. **a whole process**: ``rlvp-score`` on the folder -- with the cache warm (parser tables and
   checked rule set loaded: `rlvp_dsl.check_cache`) and cold (the rule file parsed and checked in
   the process) -- against a process that imports Invariant, parses the tool_call() policy, reads
   and analyzes; then what an rlvp-score process spends importing (``-X importtime``, warm and cold,
   as a wheel installs it and with this checkout's editable finder: `benchmarks/import_time.py`),
   against the goal of 100 ms;
5. **one episode at 1x, 4x, 16x and 64x its length** (the episode repeated, ids made unique):
   time per event for ours and the tool_call() formulation.

The violation counts must be equal, per rule, on every episode of the corpus for both
formulations (every run) and for every long episode; the script exits 1 when they are not.
It prints two goals: scoring alone at least 100x the fastest formulation, and read + score
at most 1.5x the parse floor.

    python benchmarks/score_vs_invariant.py                    # the whole comparison (a few minutes)
    python benchmarks/score_vs_invariant.py --runs 3 --lengths 1 4 16
    python benchmarks/score_vs_invariant.py --venv /tmp/inv    # the Invariant venv elsewhere
    python benchmarks/score_vs_invariant.py --data /path/to/shared/data

Without ``../shared/data`` (a user's clone) it prints a skip line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INVARIANT_VERSION = "0.3.5"

#: The writes the second rule looks at (each carries ``reservation_id``).
RESERVATION_WRITES = (
    "cancel_reservation",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
)

OUR_RULES = """\
tool get_reservation_details       : read   target reservation_id
tool cancel_reservation            : write, destructive  target reservation_id
tool update_reservation_baggages   : write  target reservation_id
tool update_reservation_flights    : write  target reservation_id
tool update_reservation_passengers : write  target reservation_id

violation repeated_errored_call (-0.3) {
  on call and seen (call error same call)
}

violation blind_reservation_write (-0.3) {
  on call tag write
  unless seen (call get_reservation_details ok same reservation_id)
}
"""

#: The fastest correct formulation: a call's result linked to its call with Invariant's own
#: ``tool_call(output)`` builtin (the form Invariant's tests use).  The headline peer.
INVARIANT_POLICY_TOOL_CALL = """\
from invariant import count

raise PolicyViolation("repeated_errored_call", call=c2) if:
    (out: ToolOutput) -> (c2: ToolCall)
    out.metadata["error"]
    tool_call(out).function.name == c2.function.name
    tool_call(out).function.arguments == c2.function.arguments

raise PolicyViolation("blind_reservation_write", call=w) if:
    (w: ToolCall)
    w.function.name in WRITES
    not count(min=1):
        (o: ToolOutput) -> w
        not o.metadata["error"]
        tool_call(o).function.name == "get_reservation_details"
        tool_call(o).function.arguments["reservation_id"] == w.function.arguments["reservation_id"]
""".replace("WRITES", json.dumps(list(RESERVATION_WRITES)))

#: The same rules with the call linked to its result by a 3-way id join
#: (``out.tool_call_id == c1.id``): correct, far slower.  The second peer row.
INVARIANT_POLICY_JOIN = """\
from invariant import count

raise PolicyViolation("repeated_errored_call", call=c2) if:
    (c1: ToolCall) -> (out: ToolOutput)
    out -> (c2: ToolCall)
    out.tool_call_id == c1.id
    out.metadata["error"]
    c1.function.name == c2.function.name
    c1.function.arguments == c2.function.arguments

raise PolicyViolation("blind_reservation_write", call=w) if:
    (w: ToolCall)
    w.function.name in WRITES
    not count(min=1):
        (r: ToolCall) -> (o: ToolOutput)
        o -> w
        r.function.name == "get_reservation_details"
        o.tool_call_id == r.id
        not o.metadata["error"]
        r.function.arguments["reservation_id"] == w.function.arguments["reservation_id"]
""".replace("WRITES", json.dumps(list(RESERVATION_WRITES)))

#: The formulations, the headline first: name -> (label in the tables, policy text).
FORMULATIONS = {
    "tool_call": ("Invariant, tool_call() (fastest)", INVARIANT_POLICY_TOOL_CALL),
    "join": ("Invariant, 3-way id join", INVARIANT_POLICY_JOIN),
}

RULES = ("repeated_errored_call", "blind_reservation_write")


# ---- the trace Invariant reads: OpenAI-style messages ---------------------------------------


def invariant_trace(messages: list[dict], suffix: str = "") -> list[dict]:
    """A tau2 simulation's messages as Invariant's input: ``{role, content, tool_calls}``
    messages and ``{role: tool, tool_call_id, content, metadata: {error}}`` outputs.  `suffix`
    makes call ids unique when an episode is repeated."""
    trace = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        content = m.get("content")
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        if role == "tool":
            trace.append(
                {
                    "role": "tool",
                    "tool_call_id": f"{m.get('id')}{suffix}",
                    "content": text,
                    "metadata": {"error": m.get("error") is True},
                }
            )
            continue
        calls = [
            {
                "id": f"{c.get('id')}{suffix}",
                "type": "function",
                "function": {"name": c.get("name"), "arguments": c.get("arguments") or {}},
            }
            for c in (m.get("tool_calls") or [])
        ]
        trace.append({"role": role, "content": text, "tool_calls": calls or None})
    return trace


def tau2_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if p.is_file())


def repeated_messages(messages: list[dict], times: int) -> list[dict]:
    """The message list repeated `times` times, call ids made unique per copy."""
    out = []
    for k in range(times):
        for m in messages:
            m = dict(m)
            if m.get("role") == "tool":
                m["id"] = f"{m.get('id')}~{k}"
            elif m.get("tool_calls"):
                m["tool_calls"] = [{**c, "id": f"{c.get('id')}~{k}"} for c in m["tool_calls"]]
            out.append(m)
    return out


# ---- the Invariant worker (runs inside the Invariant venv) ----------------------------------


def _lift_cycle_cap() -> None:
    """Invariant stops a check after 100 "checking cycles" by default (``INVARIANT_MAX_ITERATIONS``),
    which the quantified rule exceeds on ordinary tau2 episodes: lift the cap so that it checks
    every episode completely, as ours does."""
    os.environ.setdefault("INVARIANT_MAX_ITERATIONS", str(10**15))


def worker() -> None:
    """Answer one JSON command per line on stdin with one JSON line on stdout.  Every command
    that analyzes names its ``policy`` (a key of `FORMULATIONS`); the counts come back per
    episode, in the order of the files and of their simulations."""
    _lift_cycle_cap()
    from invariant.analyzer.policy import LocalPolicy

    policies = {name: LocalPolicy.from_string(text) for name, (_, text) in FORMULATIONS.items()}
    traces: list[list[dict]] = []

    def analyze(policy, trace: list[dict]) -> list[int]:
        counts = dict.fromkeys(RULES, 0)
        flagged = set()
        for error in policy.analyze(trace).errors:
            key = (error.args[0], error.kwargs["call"].id)
            if key not in flagged:
                flagged.add(key)
                counts[error.args[0]] += 1
        return [counts[r] for r in RULES]

    def read(files: list[str]) -> list[list[dict]]:
        out = []
        for f in files:
            with open(f, encoding="utf-8") as fh:
                data = json.load(fh)
            out.extend(invariant_trace(sim["messages"]) for sim in data["simulations"])
        return out

    for line in sys.stdin:
        cmd = json.loads(line)
        policy = policies.get(cmd.get("policy", "tool_call"))
        t0, c0 = time.perf_counter(), time.process_time()
        reply: dict = {}
        if cmd["op"] == "load":
            traces = read(cmd["files"])
            reply["keys"] = [episode_key(f, i) for f in cmd["files"] for i in range(len(_simulations(f)))]
        elif cmd["op"] == "score":
            reply["per_episode"] = [analyze(policy, t) for t in traces]
        elif cmd["op"] == "read_score":
            reply["per_episode"] = [analyze(policy, t) for t in read(cmd["files"])]
        elif cmd["op"] == "long":
            with open(cmd["file"], encoding="utf-8") as fh:
                trace = invariant_trace(json.load(fh))
            t0, c0 = time.perf_counter(), time.process_time()  # the analysis only
            reply["counts"] = dict(zip(RULES, analyze(policy, trace)))
        else:
            reply["error"] = f"unknown op {cmd['op']!r}"
        reply["seconds"] = time.perf_counter() - t0
        reply["cpu"] = time.process_time() - c0
        print(json.dumps(reply), flush=True)


def _simulations(path: str) -> list:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["simulations"]


def episode_key(path: str, index: int) -> str:
    """``/real/path/file.json#simulations[3]``: one episode, the same on both sides."""
    return f"{os.path.realpath(path)}#simulations[{index}]"


def once(folder: str, formulation: str) -> None:
    """A whole Invariant process: import, parse the policy, read the folder, analyze, print counts."""
    _lift_cycle_cap()
    from invariant.analyzer.policy import LocalPolicy

    policy = LocalPolicy.from_string(FORMULATIONS[formulation][1])
    errors = 0
    for f in tau2_files(Path(folder)):
        with open(f, encoding="utf-8") as fh:
            data = json.load(fh)
        for sim in data["simulations"]:
            errors += len(policy.analyze(invariant_trace(sim["messages"])).errors)
    print(errors)


class Invariant:
    """The worker process in the Invariant venv."""

    def __init__(self, python: Path):
        self.python = python
        self.proc = self._start()

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen(
            [str(self.python), __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def long(self, messages: list[dict], timeout: float, policy: str = "tool_call") -> dict | None:
        """Analyze one long episode in a fresh worker, or None when it runs past `timeout` s."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(messages, f)
        proc = subprocess.Popen(
            [str(self.python), __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            out, _ = proc.communicate(
                json.dumps({"op": "long", "file": f.name, "policy": policy}) + "\n", timeout=timeout + 30
            )
            return json.loads(out.splitlines()[-1])
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        finally:
            os.unlink(f.name)

    def ask(self, **cmd) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the Invariant worker died (see its traceback above)")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def ensure_venv(venv: Path) -> Path:
    """The Invariant venv's python, creating the venv on first use (torch can never be pulled)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import invariant.analyzer.policy"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"creating {venv} with invariant-ai=={INVARIANT_VERSION} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as c:
        c.write("torch==0.0.0\n")  # an unsatisfiable pin: a dependency on torch fails the install
    try:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-c", c.name, f"invariant-ai=={INVARIANT_VERSION}"], check=True
        )
    finally:
        os.unlink(c.name)
    subprocess.run(probe, check=True)
    return python


# ---- ours ---------------------------------------------------------------------------------


def our_counts(program, episodes) -> dict[str, int]:
    counts = dict.fromkeys(RULES, 0)
    for e in episodes:
        for credit in program.score(e):
            counts[credit.rule] += 1
    return counts


def our_per_episode(program, episodes) -> list[list[int]]:
    """Each episode's violation counts in `RULES` order, in the order of `episodes`."""
    out = []
    column = {r: i for i, r in enumerate(RULES)}
    for e in episodes:
        counts = [0] * len(RULES)
        for credit in program.score(e):
            counts[column[credit.rule]] += 1
        out.append(counts)
    return out


def our_keys(episodes) -> list[str]:
    """Each episode's `episode_key` (computed once, outside the timings)."""
    return [episode_key(e.source, int(e.id.rsplit("[", 1)[1].rstrip("]"))) for e in episodes]


def _parser():
    """orjson's ``loads`` (what the readers use when it is installed), else json's."""
    try:
        from orjson import loads
    except ImportError:
        loads = json.loads
    return loads


def parse_floor(files: list[str]) -> int:
    """The physical floor of reading: open, read and parse (orjson, else json) every file; the
    number of simulations, so that the parse cannot be skipped.  The cyclic collector is
    paused, as our readers pause it (``rlvp_dsl.gcpause``): with it on, its passes over the
    process's live objects would inflate the floor (by 30-70 % here) and make it noisy."""
    from rlvp_dsl.gcpause import collector_paused

    parse, n = _parser(), 0
    with collector_paused():
        for f in files:
            with open(f, "rb") as fh:
                n += len(parse(fh.read())["simulations"])
    return n


def python_bound(files: list[str]) -> int:
    """The least a reader written in Python can cost on top of `parse_floor`: the same parse,
    then a visit of every message that builds one plain tuple per event -- each non-blank user
    or assistant text, each call -- and hands each tool result to its call by id, with no checks,
    no pairing rules, no errors and no `Event` class: not a reader (it would accept anything),
    a measure of the interpreter's own cost.  The number of events (ours: the same)."""
    from rlvp_dsl.gcpause import collector_paused

    parse, new, blank = _parser(), tuple.__new__, frozenset()
    n = 0
    with collector_paused():
        for f in files:
            with open(f, "rb") as fh:
                data = parse(fh.read())
            for sim in data["simulations"]:
                events: list = []
                pending: dict = {}
                for position, m in enumerate(sim["messages"]):
                    content = m.get("content")
                    if m.get("role") == "tool":
                        call = pending.pop(m.get("id"), None)
                        if call is not None:
                            call[0], call[1] = content, m.get("error")
                        continue
                    if type(content) is str and content and not content.isspace():
                        events.append(new(tuple, (len(events), m["role"], content, blank, position)))
                    for c in m.get("tool_calls") or ():
                        pending[c.get("id")] = call = ["", None, c.get("name"), c.get("arguments"), len(events)]
                        events.append(call)
                for k, e in enumerate(events):
                    if type(e) is list:
                        events[k] = new(tuple, (k, "call", *e, blank))
                n += len(events)
    return n


def our_episode(messages: list[dict], name: str):
    from rlvp_dsl.readers.error_signals import DEFAULT_ERROR_SIGNALS
    from rlvp_dsl.readers.tau2 import read_tau2

    return read_tau2({"simulations": [{"messages": messages}]}, name, name, DEFAULT_ERROR_SIGNALS["tau2"])[0]


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def timed_cpu(fn):
    """(wall seconds, CPU seconds of this process, value)."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - t0, time.process_time() - c0, value


def process_seconds(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole child process."""
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    return time.perf_counter() - t0, (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def pick_episode(files: list[Path], target: int) -> tuple[str, list[dict]]:
    """The simulation whose message count is closest to `target` among those with a reservation
    write and an errored call, so that the copies repeat the errored call (ties: file order)."""
    best = None
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for i, sim in enumerate(data["simulations"]):
            messages = sim["messages"]
            writes = any(c.get("name") in RESERVATION_WRITES for m in messages for c in (m.get("tool_calls") or []))
            errors = any(m.get("role") == "tool" and m.get("error") is True for m in messages)
            if not (writes and errors):
                continue
            score = abs(len(messages) - target)
            if best is None or score < best[0]:
                best = (score, f"{f.name}#simulations[{i}]", messages)
    if best is None:
        raise SystemExit("no simulation with a reservation write in the corpus")
    return best[1], best[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--runs", type=int, default=5, help="alternating runs per measurement (median)")
    ap.add_argument("--process-runs", type=int, default=3, help="whole-process runs per side")
    ap.add_argument("--import-runs", type=int, default=7, help="rlvp-score processes per import-time figure")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1, 4, 16, 64], help="episode repetitions")
    ap.add_argument(
        "--long-runs",
        type=int,
        default=3,
        help="runs per repetition (Invariant gets 1 at 16x and more: it is not linear)",
    )
    ap.add_argument(
        "--long-timeout",
        type=float,
        default=150.0,
        help="seconds Invariant may take on one long episode (past it: a lower bound)",
    )
    ap.add_argument("--messages", type=int, default=40, help="length of the repeated episode, in messages")
    ap.add_argument("--venv", default=str(REPO / ".venv-bench-invariant"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--once", help=argparse.SUPPRESS)
    ap.add_argument("--formulation", default="tool_call", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker()
        return 0
    if args.once:
        once(args.once, args.formulation)
        return 0

    folder = Path(args.data) / "tau2_simulations"
    if not folder.is_dir():
        print(f"skip: the shared tau2 corpus is not at {folder} (it exists only beside the project's checkout)")
        return 0
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))  # (other scripts load this file by its path)
    import import_time  # benchmarks/import_time.py: rlvp-score's import time
    from rlvp_dsl import loads
    from rlvp_dsl.readers import read_paths

    print("$ " + shlex.join(["python", os.path.relpath(__file__)] + sys.argv[1:]))
    load = os.getloadavg()[0]
    print(
        f"python {sys.version.split()[0]}; {os.cpu_count()} cores, load average {load:.1f}"
        + (" (the machine is busy: compare the ratios, not the times)" if load > 0.5 else "")
    )
    try:
        import orjson  # noqa: F401

        print("orjson: installed (the readers use it)")
    except ImportError:
        print("orjson: not installed (the readers use json; pip install 'rlvp[fast]')")
    python = ensure_venv(Path(args.venv))
    files = [str(f) for f in tau2_files(folder)]
    program = loads(OUR_RULES, "bench.rlvp")
    inv = Invariant(python)
    failures = []
    try:
        episodes = read_paths(folder)
        n_events = sum(len(e.events) for e in episodes)
        keys = inv.ask(op="load", files=files)["keys"]
        print(
            f"corpus: {folder} -- {len(files)} files, {len(episodes)} episodes ({len(keys)} for Invariant), "
            f"{n_events:,} events"
        )
        print()

        ours_list = our_per_episode(program, episodes)
        ours_per = dict(zip(our_keys(episodes), ours_list))
        if sorted(ours_per) != sorted(keys):
            raise SystemExit("the two sides read different episodes from the corpus")

        def compare(label: str, theirs: list[list[int]], mine: dict[str, list[int]]) -> None:
            """Per episode: each formulation's counts against ours (a failure per differing episode)."""
            for key, c in zip(keys, theirs):
                if c != mine[key]:
                    failures.append(f"{label}, {key}: ours {mine[key]}, Invariant {c} ({', '.join(RULES)})")

        def totals(per: list[list[int]]) -> dict[str, int]:
            return {r: sum(c[i] for c in per) for i, r in enumerate(RULES)}

        # each run: ours score, each formulation's score, ours read + score, each formulation's
        # read + score, the parse floor -- alternately, so that a change of load hits all alike
        samples: dict[str, list[tuple[float, float]]] = {}
        counts = {}
        for _ in range(args.runs):
            s, c, mine = timed_cpu(lambda: our_per_episode(program, episodes))
            samples.setdefault("ours score", []).append((s, c))
            if mine != ours_list:
                failures.append("ours: counts changed between runs")
            for f in FORMULATIONS:
                reply = inv.ask(op="score", policy=f)
                samples.setdefault(f"{f} score", []).append((reply["seconds"], reply["cpu"]))
                compare(f"{f}, score", reply["per_episode"], ours_per)
                counts[f] = totals(reply["per_episode"])
            s, c, (read_episodes, mine) = timed_cpu(lambda: (e := read_paths(folder), our_per_episode(program, e)))
            samples.setdefault("ours read", []).append((s, c))
            if dict(zip(our_keys(read_episodes), mine)) != ours_per:
                failures.append("ours read + score: counts differ from the episodes in memory")
            for f in FORMULATIONS:
                reply = inv.ask(op="read_score", policy=f, files=files)
                samples.setdefault(f"{f} read", []).append((reply["seconds"], reply["cpu"]))
                compare(f"{f}, read + score", reply["per_episode"], ours_per)
            s, c, _ = timed_cpu(lambda: parse_floor(files))
            samples.setdefault("floor", []).append((s, c))
            s, c, bound_events = timed_cpu(lambda: python_bound(files))
            samples.setdefault("bound", []).append((s, c))
            if bound_events != n_events:
                failures.append(f"the Python bound built {bound_events} events, ours {n_events}")
        counts["ours"] = totals(list(ours_per.values()))
        rows = []
        for f, (label, _) in FORMULATIONS.items():
            rows.append((f"score alone vs {label}", samples["ours score"], samples[f"{f} score"]))
        for f, (label, _) in FORMULATIONS.items():
            rows.append((f"read + score vs {label}", samples["ours read"], samples[f"{f} read"]))

        # whole processes
        with tempfile.TemporaryDirectory() as tmp:
            rules_file = Path(tmp, "bench.rlvp")
            rules_file.write_text(OUR_RULES, encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            warm = {**env, "RLVP_CACHE_DIR": str(Path(tmp, "cache"))}
            blocker = Path(tmp, "not_a_folder")
            blocker.write_text("")
            cold = {**env, "RLVP_CACHE_DIR": str(blocker / "cache")}  # cannot be created: parsed, checked per process
            score_cmd = [
                sys.executable,
                "-c",
                "import sys; from rlvp_dsl.cli.score import run; sys.exit(run())",
                str(rules_file),
                str(folder),
            ]
            inv_cmd = [str(python), __file__, "--once", str(folder), "--formulation", "tool_call"]
            process_seconds(score_cmd, warm)  # fills the cache
            process_seconds(inv_cmd, env)  # the same first-run disk reads for both
            warm_s, cold_s, inv_s = [], [], []
            for _ in range(args.process_runs):
                warm_s.append(process_seconds(score_cmd, warm))
                cold_s.append(process_seconds(score_cmd, cold))
                inv_s.append(process_seconds(inv_cmd, env))
            imports = import_time.measure([str(rules_file), str(folder)], args.import_runs)
        rows.append(("whole process vs tool_call(), cache warm", warm_s, inv_s))
        rows.append(("whole process vs tool_call(), cache cold", cold_s, inv_s))

        def med(pairs: list[tuple[float, float]], i: int) -> float:
            return statistics.median(p[i] for p in pairs)

        print("medians; 'cpu' is the CPU time of the process doing the work (steadier on a shared machine)")
        print(
            f"{'the corpus':<52} {'ours ms':>9} {'Invariant ms':>13} {'ratio':>8}   {'ours cpu':>9} "
            f"{'Inv. cpu':>9} {'cpu ratio':>9}"
        )
        ratios = {}
        for name, o, t in rows:
            wall, cpu = med(t, 0) / med(o, 0), med(t, 1) / med(o, 1)
            ratios[name] = (wall, cpu)
            print(
                f"{name:<52} {med(o, 0) * 1e3:>9.1f} {med(t, 0) * 1e3:>13.1f} {wall:>7.1f}x   "
                f"{med(o, 1) * 1e3:>9.1f} {med(t, 1) * 1e3:>9.1f} {cpu:>8.1f}x"
            )
        warm_s, cold_s = [p[0] for p in warm_s], [p[0] for p in cold_s]
        differ = [f for f in FORMULATIONS if any(f"{f}," in x for x in failures)]
        print(
            f"violations: ours {counts['ours']}; "
            + "; ".join(f"{f} {counts[f]}" for f in FORMULATIONS)
            + f" -- {'DIFFERENT on some episodes: ' + ', '.join(differ) if differ else 'equal on every episode'}"
            f" ({len(keys)} episodes, every run)"
        )
        floor = samples["floor"]
        rs = samples["ours read"]
        floor_ratio = (med(rs, 0) / med(floor, 0), med(rs, 1) / med(floor, 1))
        print(
            f"{'parse floor: open + read + orjson.loads':<52} {med(floor, 0) * 1e3:>9.1f} {'':>13} {'':>8}   "
            f"{med(floor, 1) * 1e3:>9.1f}"
        )
        print(
            f"ours read + score / parse floor: {floor_ratio[0]:.2f}x on the clock, {floor_ratio[1]:.2f}x in CPU time"
            " (timed alternately with the rows above)"
        )
        bound = samples["bound"]
        score = samples["ours score"]
        print(
            f"{'Python bound: the parse + one tuple per event':<52} {med(bound, 0) * 1e3:>9.1f} {'':>13} {'':>8}   "
            f"{med(bound, 1) * 1e3:>9.1f}   (no checks: `python_bound`)"
        )
        bound_ratio = tuple((med(bound, i) + med(score, i)) / med(floor, i) for i in (0, 1))
        print(
            f"the Python bound + ours score alone / parse floor: {bound_ratio[0]:.2f}x on the clock, "
            f"{bound_ratio[1]:.2f}x in CPU time -- the least any Python reader followed by this scorer can reach"
        )
        print(
            f"cache (parser tables, checked rule set): a whole rlvp-score process {statistics.median(cold_s) * 1e3:.0f} "
            f"ms -> {statistics.median(warm_s) * 1e3:.0f} ms ({statistics.median(cold_s) / statistics.median(warm_s):.2f}x)"
        )
        for line in import_time.report_lines(imports, args.import_runs):
            print(line)
        print()

        # one episode, repeated
        name, messages = pick_episode([Path(f) for f in files], args.messages)
        print(f"one episode at k times its length: {name} ({len(messages)} messages) repeated")
        print(
            f"{'k':>4} {'messages':>9} {'events':>7} {'ours us/event':>14} {'Invariant us/event':>19} "
            f"{'Invariant/ours':>15}  violations (ours = Invariant)"
        )
        per_event = {}
        for k in args.lengths:
            long_messages = repeated_messages(messages, k)
            episode = our_episode(long_messages, f"{name}x{k}")
            events = len(episode.events)
            theirs_runs = args.long_runs if k < 16 else 1
            ours_t, theirs_t = [], []
            mine = theirs = None
            bound = False
            reps = max(1, 8192 // events)  # ours is timed over about 8,000 events a sample: steadier medians
            for r in range(max(args.long_runs, 7)):
                s, mine = timed(lambda e=episode, n=reps: [our_counts(program, [e]) for _ in range(n)][-1])
                ours_t.append(s / reps)
                if r < min(theirs_runs, args.long_runs) and not bound:
                    reply = inv.long(long_messages, args.long_timeout, "tool_call")
                    if reply is None:  # past the time limit: its time is at least the limit
                        bound = True
                        theirs_t = [args.long_timeout]
                    else:
                        theirs_t.append(reply["seconds"])
                        theirs = reply["counts"]
            o, t = statistics.median(ours_t) / events, statistics.median(theirs_t) / events
            per_event[k] = (o, t, bound)
            same = mine == theirs
            if not same and not bound:
                failures.append(f"{k}x: ours {mine}, Invariant {theirs}")
            ge = ">" if bound else ""
            per_event_theirs, ratio = f"{ge}{t * 1e6:.1f}", f"{ge}{t / o:.0f}x"
            print(
                f"{k:>4} {len(long_messages):>9} {events:>7} {o * 1e6:>14.2f} {per_event_theirs:>19} {ratio:>15}  "
                + (
                    f"ours {mine}; Invariant stopped after {args.long_timeout:g} s"
                    if bound
                    else f"{mine} {'=' if same else '!='} {theirs}"
                )
            )
        lo, hi = min(args.lengths), max(args.lengths)
        if hi > lo:
            print(
                f"time per event, {hi}x against {lo}x: ours {per_event[hi][0] / per_event[lo][0]:.2f}x, "
                f"Invariant {per_event[hi][1] / per_event[lo][1]:.1f}x{' or more' if per_event[hi][2] else ''}"
                "  (flat = 1.0)"
            )
    finally:
        inv.close()
    print()
    headline = FORMULATIONS["tool_call"][0]
    wall, cpu = ratios[f"score alone vs {headline}"]
    print(
        f"goal: scoring alone at least 100x Invariant's fastest formulation -- {wall:.0f}x on the clock, "
        f"{cpu:.0f}x in CPU time: " + ("met" if min(wall, cpu) >= 100 else f"missed by {100 / max(wall, cpu):.2f}x")
    )
    wall, cpu = ratios[f"read + score vs {headline}"]
    print(f"read + score against Invariant's fastest formulation: {wall:.1f}x on the clock, {cpu:.1f}x in CPU time")
    print(
        f"goal: read + score at most 1.5x the parse floor -- {floor_ratio[0]:.2f}x on the clock, "
        f"{floor_ratio[1]:.2f}x in CPU time: " + ("met" if max(floor_ratio) <= 1.5 else "missed")
    )
    if failures:
        print("COUNTS DIFFER:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
