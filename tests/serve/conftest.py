"""Fixtures of tests/serve (the helpers are in `server.py`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def start_server(tmp_path):
    """``start_server(args, env=None) -> Server``, ready; every server started is stopped in teardown."""
    from .server import Server

    started: list[Server] = []

    def start(args: list[str], env: dict[str, str] | None = None) -> Server:
        server = Server([str(a) for a in args], tmp_path / f"server-{len(started)}.log", env)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()
