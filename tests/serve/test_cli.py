"""``rlvp serve``'s checks before serving: each refusal is one clear message and its exit code, never a
traceback, and nothing listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from .server import REPO, TOKEN

from rlvp_dsl.serve.auth import is_loopback, token_matches
from rlvp_dsl.serve.cli import main


@pytest.fixture(autouse=True)
def _no_token_in_environment(monkeypatch):
    monkeypatch.delenv("RLVP_SERVE_TOKEN", raising=False)
    monkeypatch.chdir(REPO)


def test_a_non_loopback_host_without_a_token_is_refused_as_a_process():
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.serve", "serve", "rules/tau2_airline.rlvp", "--host", "0.0.0.0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "RLVP_SERVE_TOKEN"},
    )
    assert done.returncode == 2
    assert done.stderr.startswith("rlvp: error: refusing to listen on 0.0.0.0 without a token")
    assert "--token" in done.stderr and "RLVP_SERVE_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr and "listening" not in done.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org"])
def test_every_non_loopback_host_needs_a_token(capsys, host):
    assert main(["serve", "rules/tau2_airline.rlvp", "--host", host]) == 2
    assert f"refusing to listen on {host} without a token" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,env,says",
    [
        (["rules/no_such.rlvp"], {}, "rule file not found: rules/no_such.rlvp"),
        (["rules"], {}, "is a directory, not a rule file: rules"),
        (["rules/swe.rlvp", "tests/../rules/swe.rlvp"], {}, "two rule files are named 'swe'"),
        (["rules/swe.rlvp"], {"RLVP_SERVE_TOKEN": ""}, "RLVP_SERVE_TOKEN: the token must be non-empty"),
        (["rules/swe.rlvp", "--token", " x"], {}, "--token: the token must be non-empty, with no spaces"),
    ],
    ids=["missing", "folder", "same-stem", "empty-env-token", "blank-token"],
)
def test_usage_errors_exit_2(capsys, monkeypatch, args, env, says):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlvp: error: ") and says in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args,says",
    [
        (["--workers", "0"], "--workers: must be at least 1"),
        (["--port", "70000"], "--port: must be at most 65535"),
        (["--max-body", "big"], "--max-body: must be a whole number"),
        ([], "the following arguments are required: RULES"),
    ],
)
def test_bad_options_are_argparse_usage_errors(capsys, args, says):
    with pytest.raises(SystemExit) as raised:
        main(["serve", "rules/swe.rlvp", *args] if args else ["serve"])
    assert raised.value.code == 2
    assert says in capsys.readouterr().err


def test_rules_with_errors_exit_1_with_the_diagnostics(capsys):
    path = "tests/golden/diagnostics/unknown_tool.rlvp"
    assert main(["serve", path]) == 1
    err = capsys.readouterr().err
    assert f"{path}:" in err and ": error[RV" in err and "= help: " in err
    assert "the rule files have errors (above): nothing served" in err


def test_a_taken_port_exits_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "rules/swe.rlvp", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as raised:
        main([])
    assert raised.value.code == 2


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("myhost", False),
    ],
)
def test_loopback_addresses(host, loopback):
    assert is_loopback(host) is loopback


def test_the_token_compare():
    token = TOKEN.encode()
    assert token_matches(b"Bearer " + token, token)
    assert token_matches(b"BEARER " + token, token)
    for header in (
        None,
        b"",
        b"Bearer",
        b"Bearer ",
        b"Basic " + token,
        b"Bearer " + token[:-1],
        b"Bearer " + token + b"x",
    ):
        assert not token_matches(header, token)


def test_help_lists_every_route(capsys):
    with pytest.raises(SystemExit) as raised:
        main(["serve", "--help"])
    assert raised.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the description
    for route in (
        "POST /score",
        "POST /get_reward",
        "POST /verify",
        "GET /reverify_mode",
        "GET /healthz",
        "/rules",
        "/metrics",
    ):
        assert route in text, route
