"""Helpers of tests/serve: `rlvp serve` as its own process, started with ``python -m rlvp_dsl.serve serve ... --port 0`` (the
port it takes is read from its first log line), ready once ``/healthz`` answers (bounded waits), and
always stopped in teardown (SIGTERM, then SIGKILL of its process group: the workers too)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")  # the serve extra (third-party): the tests skip without it
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

REPO = Path(__file__).resolve().parents[2]
#: The bearer token of the servers that need one (it must never show in a log or /metrics).
TOKEN = "tok-3f9c1e7a-never-logged-5b2d"
#: How long a server may take to start on a loaded two-core machine, in seconds.
START_TIMEOUT = 60.0

_LISTENING = re.compile(r"listening on (http://\S+?:\d+) ")


class Server:
    """One ``rlvp serve`` process: its `url`, its `log` (stdout and stderr), its `pid`."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._log_handle = open(log, "wb")
        full_env = dict(os.environ)
        full_env.pop("RLVP_SERVE_TOKEN", None)  # only the token a test gives
        full_env.update(env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlvp_dsl.serve", "serve", *args, "--port", "0"],
            cwd=REPO,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,  # its own process group: teardown reaches the workers too
        )
        self.pid = self.process.pid
        self.url = ""

    def text(self) -> str:
        """Everything it logged so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, headers: dict[str, str] | None = None) -> None:
        """Wait (at most `START_TIMEOUT`) for the listening line, then for ``/healthz``."""
        deadline = time.monotonic() + START_TIMEOUT
        while not self.url:
            found = _LISTENING.search(self.text())
            if found:
                self.url = found.group(1)
            elif self.process.poll() is not None:
                raise AssertionError(f"rlvp serve exited ({self.process.returncode}):\n{self.text()}")
            elif time.monotonic() > deadline:
                raise AssertionError(f"rlvp serve did not start in {START_TIMEOUT} s:\n{self.text()}")
            else:
                time.sleep(0.05)
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"/healthz never answered:\n{self.text()}")
            time.sleep(0.05)

    def wait_log(self, text: str, timeout: float = 30.0, count: int = 1) -> None:
        """Wait until `text` appears `count` times in the log."""
        deadline = time.monotonic() + timeout
        while self.text().count(text) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged {count} times in {timeout} s:\n{self.text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, up to 15 s to finish, then SIGKILL of the whole process group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the group this test started (workers left behind, if any)
        except (ProcessLookupError, PermissionError):
            pass
        if self.process.poll() is None:
            self.process.wait(timeout=10)
        self._log_handle.close()


def serve_for_module(tmp_path_factory, args: list[str], env: dict[str, str] | None = None):
    """A generator for a module-scoped fixture: one ready server for a whole test module, stopped after."""
    server = Server([str(a) for a in args], tmp_path_factory.mktemp("serve") / "server.log", env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
