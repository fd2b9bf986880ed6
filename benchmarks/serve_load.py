"""`rlvp serve` under load: 2 worker processes, 16 concurrent clients, one worker killed mid-run.

    python benchmarks/serve_load.py                       # 10,000 requests (the issue's run)
    python benchmarks/serve_load.py --requests 2000       # shorter

The server is started as its own process on a loopback port (``python -m rlvp_dsl.serve serve
rules/tau2_airline.rlvp --workers 2 --port 0``).  Each request posts one trajectory file to
``/score``: the four OpenAI-chat episodes of examples/episodes/airline_chat.jsonl (one per body),
the tau2 Results of examples/episodes/airline_tau2_results.json, a tau2 simulations sample and a
tau-bench v1 sample (examples/data), in turn; request ``i`` is named ``req{i}`` (``?name=``), so
its answer names it.  Measured and checked:

* in-process scoring first (`rlvp_dsl.serve.scoring.score_body`, the same rules, one process,
  serial): the expected answer of every request (its SHA-256) and the in-process episodes/s;
* then ``--clients`` threads, each with its own ``httpx.Client``, take request numbers from one
  counter until all are answered (or ``--time-limit`` seconds pass: the run then fails); a
  transport error (a connection the killed worker held) is retried on a new connection, up to
  ``--retries`` times (scoring is pure: sending a request again is safe);
* when half of the requests are answered, one worker is sent SIGKILL; uvicorn's supervisor starts
  another;
* the server's own count of ``/score`` 200 answers (``/metrics``, summed over the workers, the
  killed one included) is shown beside the clients' count: a request the killed worker scored but
  could not deliver is scored again on the retry (harmless: scoring is pure), the client keeps one;
* every answer must be a 200 whose bytes equal in-process scoring's; every request answered once
  (the first answer accepted; none missing); the server still answers ``/healthz`` after the run, and
  its log shows the replacement worker.

Prints a table: requests, episodes, retries, latency p50/p99 (ms, a request's whole time, retries
included), episodes/s served and in process, their ratio (the issue's goal: >= 0.5), the CPU
time of the server's processes and of the clients (episodes per CPU second: how much of the ratio the
machine's other load takes, on a shared machine), the load average.  Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from rlvp_dsl.serve.rulesets import check_rule_files, compile_sets, rule_names  # noqa: E402
from rlvp_dsl.serve.scoring import score_body  # noqa: E402

RULES = "rules/tau2_airline.rlvp"
START_TIMEOUT = 90.0
_LISTENING = re.compile(r"listening on (http://\S+?:\d+) ")
_WORKER = re.compile(r"process (\d+) serving ")


def request_pool() -> list[tuple[bytes, str]]:
    """The request bodies, in turn: ``(body, file extension)``."""
    pool = [
        (line.encode("utf-8") + b"\n", ".jsonl")
        for line in (REPO / "examples/episodes/airline_chat.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    for path in (
        "examples/episodes/airline_tau2_results.json",
        "examples/data/tau2_simulations/sierra_tau2-bench_prs/pr103_azure-airline-full_gpt-4o.sample.json",
        "examples/data/tau_bench_v1/gpt-4o-airline.sample.json",
    ):
        pool.append(((REPO / path).read_bytes(), ".json"))
    return pool


@dataclass
class Expected:
    digests: list[str]
    episodes: list[int]
    seconds: float
    cpu: float


def in_process(pool: list[tuple[bytes, str]], n: int) -> Expected:
    """Every request scored here, serially: the expected answers' digests, episode counts, time."""
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        served = compile_sets(check_rule_files(rule_names([RULES])), 1).by_name["tau2_airline"]
    finally:
        os.chdir(cwd)
    digests, episodes = [], []
    with tempfile.TemporaryDirectory(prefix="serve-load-") as workdir:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            body, ext = pool[i % len(pool)]
            rendered, count = score_body(
                served, body, name=f"req{i}{ext}", format=None, error_signal=None, workdir=workdir
            )
            digests.append(hashlib.sha256(rendered).hexdigest())
            episodes.append(count)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Expected(digests, episodes, seconds, cpu)


class Server:
    """``rlvp serve`` as its own process (its own process group), its log in a file."""

    def __init__(self, workers: int, log: Path) -> None:
        self.log = log
        self._handle = open(log, "wb")
        env = dict(os.environ)
        env.pop("RLVP_SERVE_TOKEN", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlvp_dsl.serve", "serve", RULES, "--workers", str(workers), "--port", "0"]
            + ["--no-access-log", "--max-body", str(64 * 1024 * 1024)],
            cwd=REPO,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.url = ""

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def workers(self) -> list[int]:
        return [int(p) for p in _WORKER.findall(self.text())]

    def cpu_seconds(self, pids: set[int] | None = None) -> float:
        """CPU time (user + system) of `pids` (default: the supervisor and every worker still alive),
        from /proc (0.0 without it)."""
        total = 0.0
        for pid in pids if pids is not None else {self.process.pid, *self.workers()}:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone (the killed worker), or no /proc
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def wait_replaced(self, workers: int, timeout: float = 60.0) -> bool:
        """Whether a worker beyond the first `workers` said what it serves within `timeout` s."""
        deadline = time.monotonic() + timeout
        while len(self.workers()) <= workers:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def wait_ready(self, workers: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self.url or len(self.workers()) < workers:
            found = _LISTENING.search(self.text())
            if found:
                self.url = found.group(1)
            if self.process.poll() is not None:
                raise SystemExit(f"rlvp serve exited ({self.process.returncode}):\n{self.text()}")
            if time.monotonic() > deadline:
                raise SystemExit(f"rlvp serve did not start in {START_TIMEOUT:.0f} s:\n{self.text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # this benchmark's own process group
        except (ProcessLookupError, PermissionError):
            pass
        if self.process.poll() is None:
            self.process.wait(timeout=10)
        self._handle.close()


@dataclass
class Run:
    """What the clients saw."""

    answers: dict[int, tuple[int, str]] = field(default_factory=dict)  # request -> (status, digest)
    latencies: list[float] = field(default_factory=list)
    retries: int = 0
    twice: int = 0
    failed: list[str] = field(default_factory=list)
    killed: int | None = None
    killed_cpu: float = 0.0  # the killed worker's CPU seconds since it started, read just before the kill
    answered_after_kill: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def load(
    server: Server, pool: list[tuple[bytes, str]], n: int, clients: int, retries: int, time_limit: float, kill: bool
) -> tuple[Run, float]:
    """Run the clients; the wall time in seconds."""
    run = Run()
    counter = iter(range(n))
    take = threading.Lock()
    deadline = time.monotonic() + time_limit

    def client() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            while time.monotonic() < deadline:
                with take:
                    i = next(counter, None)
                if i is None:
                    return
                body, ext = pool[i % len(pool)]
                start = time.perf_counter()
                for attempt in range(retries + 1):
                    try:
                        answer = http.post("/score", params={"name": f"req{i}{ext}"}, content=body)
                        break
                    except httpx.TransportError as exc:
                        with run.lock:
                            run.retries += 1
                        if attempt == retries:
                            with run.lock:
                                run.failed.append(f"req{i}: {type(exc).__name__} after {retries} retries")
                            answer = None
                        time.sleep(0.05)
                if answer is None:
                    continue
                elapsed = time.perf_counter() - start
                digest = hashlib.sha256(answer.content).hexdigest()
                with run.lock:
                    if i in run.answers:
                        run.twice += 1
                        continue
                    run.answers[i] = (answer.status_code, digest)
                    run.latencies.append(elapsed)
                    if run.killed is not None:
                        run.answered_after_kill += 1
                    should_kill = kill and run.killed is None and len(run.answers) >= n // 2
                    if should_kill:
                        victim = server.workers()[0]
                        run.killed_cpu = server.cpu_seconds({victim})
                        os.kill(victim, signal.SIGKILL)
                        run.killed = victim

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 70)
    return run, time.perf_counter() - start


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000, help="requests in all (default 10,000)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds the clients may take (default 900)")
    ap.add_argument("--retries", type=int, default=20, help="retries of one request after a transport error")
    ap.add_argument("--no-kill", action="store_true", help="do not kill a worker mid-run")
    args = ap.parse_args(argv)
    if args.requests < 2 or args.clients < 1 or args.workers < 1:
        ap.error("--requests must be at least 2, --clients and --workers at least 1")

    pool = request_pool()
    load_before = os.getloadavg()
    expected = in_process(pool, args.requests)
    episodes = sum(expected.episodes)

    with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
        server = Server(args.workers, Path(folder) / "server.log")
        try:
            server.wait_ready(args.workers)
            cpu_start, client_start = server.cpu_seconds(), time.process_time()
            run, wall = load(server, pool, args.requests, args.clients, args.retries, args.time_limit, not args.no_kill)
            server_cpu = server.cpu_seconds() - cpu_start + run.killed_cpu
            client_cpu = time.process_time() - client_start
            replaced = server.wait_replaced(args.workers) if run.killed else False
            healthy = httpx.get(server.url + "/healthz", timeout=30).status_code == 200
            metrics = httpx.get(server.url + "/metrics", timeout=30).text
            log = server.text()
        finally:
            server.stop()
    load_after = os.getloadavg()

    counted = re.search(r'rlvp_serve_requests_total\{route="/score",status="200"\} (\S+)', metrics)
    server_answers = int(float(counted.group(1))) if counted else -1
    missing = [i for i in range(args.requests) if i not in run.answers]
    not_ok = [i for i, (status, _) in run.answers.items() if status != 200]
    differ = [i for i, (status, digest) in run.answers.items() if status == 200 and digest != expected.digests[i]]
    served_eps = sum(expected.episodes[i] for i in run.answers) / wall
    local_eps = episodes / expected.seconds
    rows = [
        ("requests (answered / sent)", f"{len(run.answers)} / {args.requests}"),
        ("episodes", f"{episodes}"),
        ("clients / workers", f"{args.clients} / {args.workers}"),
        ("worker killed (SIGKILL) at half", f"pid {run.killed}" if run.killed else "no"),
        ("answered after the kill", f"{run.answered_after_kill}"),
        ("replacement worker started", "yes" if replaced else "no"),
        ("transport errors retried", f"{run.retries}"),
        ("lost (never answered)", f"{len(missing) + len(run.failed)}"),
        ("/score 200s the server counted (/metrics)", f"{server_answers}"),
        ("answered twice", f"{run.twice}"),
        ("not 200", f"{len(not_ok)}"),
        ("answers != in-process bytes", f"{len(differ)}"),
        (
            "latency p50 / p99 (ms)",
            f"{_percentile(run.latencies, 0.5) * 1e3:.1f} / {_percentile(run.latencies, 0.99) * 1e3:.1f}",
        ),
        ("mean latency (ms)", f"{statistics.fmean(run.latencies) * 1e3:.1f}" if run.latencies else "-"),
        ("served: wall s, episodes/s", f"{wall:.1f}, {served_eps:.0f}"),
        ("in-process (1 process, serial): s, episodes/s", f"{expected.seconds:.1f}, {local_eps:.0f}"),
        ("ratio served / in-process (goal >= 0.5)", f"{served_eps / local_eps:.2f}"),
        ("CPU s: server (killed worker included), clients", f"{server_cpu:.1f}, {client_cpu:.1f}"),
        (
            "episodes per CPU s: server, in-process",
            f"{sum(expected.episodes[i] for i in run.answers) / max(server_cpu, 1e-9):.0f}, "
            f"{episodes / max(expected.cpu, 1e-9):.0f}",
        ),
        ("load average before / after (1 min)", f"{load_before[0]:.2f} / {load_after[0]:.2f} ({os.cpu_count()} CPUs)"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"rlvp serve load ({RULES}, POST /score, loopback)")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    problems = []
    if missing or run.failed:
        problems.append(f"{len(missing)} requests never answered: {run.failed[:3] or missing[:5]}")
    if run.twice:
        problems.append(f"{run.twice} requests answered twice")
    if not_ok:
        problems.append(f"{len(not_ok)} answers were not 200 (first: req{not_ok[0]})")
    if differ:
        problems.append(f"{len(differ)} answers differ from in-process scoring (first: req{differ[0]})")
    if not healthy:
        problems.append("/healthz did not answer after the run")
    if run.killed and not replaced:
        problems.append("no replacement worker started after the kill")
    if "Traceback" in log and run.killed is None:
        problems.append("the server logged a traceback")
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
