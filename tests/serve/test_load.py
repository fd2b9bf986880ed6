"""benchmarks/serve_load.py, small: 2 workers, one killed mid-run, every answer checked against
in-process scoring; the run passes only with nothing lost, nothing answered twice, no answer
different, and a replacement worker serving."""

from __future__ import annotations

import re
import subprocess
import sys

from .server import REPO


def _row(text: str, key: str) -> str:
    found = re.search(rf"^  {re.escape(key)}\s+(.+)$", text, re.M)
    assert found, text
    return found.group(1).strip()


def test_serve_load_small_run_with_a_killed_worker():
    done = subprocess.run(
        [sys.executable, "benchmarks/serve_load.py", "--requests", "42", "--clients", "4", "--time-limit", "120"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert _row(out, "requests (answered / sent)") == "42 / 42"
    assert _row(out, "worker killed (SIGKILL) at half").startswith("pid ")
    assert int(_row(out, "answered after the kill")) == 21
    assert _row(out, "replacement worker started") == "yes"
    for key in ("lost (never answered)", "answered twice", "not 200", "answers != in-process bytes"):
        assert _row(out, key) == "0", out
    # the server counted every answer the clients accepted (retries may add one the killed worker scored)
    assert (
        42
        <= int(_row(out, "/score 200s the server counted (/metrics)"))
        <= 42 + int(_row(out, "transport errors retried"))
    )
    # the 7 bodies in turn: 4 chat episodes of one, tau2 Results of 2, tau2 and tau-bench samples of 3
    assert _row(out, "episodes") == str(sum([1, 1, 1, 1, 2, 3, 3][i % 7] for i in range(42)))
