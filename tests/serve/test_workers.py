"""``rlvp serve --workers 2``: uvicorn's supervisor and two worker processes.

SIGHUP to the parent checks the rules there and has every worker reload them in place; bad rules
change nothing; a worker killed is replaced by one serving the same rules (the parent's snapshot,
not the file, which is bad by then); /metrics adds up both workers.
"""

from __future__ import annotations

import os
import re
import signal
import time

from .server import TOKEN, httpx
from .test_reload import BAD, V1, V2, _hash

WORKERS = 2


def _worker_pids(server) -> list[int]:
    return [int(p) for p in re.findall(r"process (\d+) serving ", server.text())]


def _every_answer(server, n: int = 12) -> set[tuple[str, int]]:
    """(hash, generation) of `n` /healthz answers, each on a new connection (any worker may answer)."""
    out = set()
    for _ in range(n):
        state = httpx.get(server.url + "/healthz", timeout=10).json()
        out.add((state["rules"]["orders"], state["generation"]))
    return out


def test_workers_reload_together_and_a_killed_worker_serves_the_same_rules(start_server, tmp_path):
    rules = tmp_path / "orders.rlvp"
    h1 = _hash(rules, V1)
    server = start_server([rules, "--workers", WORKERS, "--no-access-log"], env={"RLVP_SERVE_TOKEN": TOKEN})
    server.wait_log(" serving orders ", count=WORKERS)
    assert _every_answer(server) == {(h1, 1)}
    for _ in range(4):  # every worker has the token (from the parent's environment)
        assert httpx.get(server.url + "/rules", timeout=10).status_code == 401
        assert httpx.get(server.url + "/rules", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).is_success

    h2 = _hash(rules, V2)
    os.kill(server.pid, signal.SIGHUP)
    server.wait_log(f"reloaded: now serving orders {h2}", count=WORKERS)
    assert _every_answer(server) == {(h2, 2)}

    rules.write_text(BAD, encoding="utf-8")
    os.kill(server.pid, signal.SIGHUP)
    server.wait_log("reload failed; every worker keeps serving the rules it has")
    assert "error[RV201]: unknown tool 'no_such_tool'" in server.text()
    assert _every_answer(server) == {(h2, 2)}

    victim = _worker_pids(server)[0]
    os.kill(victim, signal.SIGKILL)
    server.wait_log(f"Child process [{victim}] died")
    deadline = time.monotonic() + 60
    while len(_worker_pids(server)) < WORKERS + 1:  # the replacement says what it serves
        assert time.monotonic() < deadline, server.text()
        time.sleep(0.1)
    replacement = _worker_pids(server)[-1]
    assert replacement != victim
    assert f"process {replacement} serving orders {h2} (1 rules) (generation 2)" in server.text()
    assert _every_answer(server) == {(h2, 2)}

    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
    answered = float(re.search(r'rlvp_serve_requests_total\{route="/healthz",status="200"\} (\S+)', text).group(1))
    assert answered >= 4 * 12  # both workers' counts (the killed one's included), whichever answers
    # each reload once, however many workers: the good one (every worker reloaded) and the bad one
    # (refused in the parent, which no worker saw)
    reloads = sorted(x for x in text.splitlines() if x.startswith("rlvp_serve_reloads_total{"))
    assert reloads == ['rlvp_serve_reloads_total{result="failed"} 1.0', 'rlvp_serve_reloads_total{result="ok"} 1.0']
    assert "Traceback" not in server.text() and TOKEN not in server.text() and TOKEN not in text
