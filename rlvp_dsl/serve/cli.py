"""``rlvp serve RULES... [--host 127.0.0.1] [--port 8000] [--workers N] [--token T] [--max-body BYTES]``.

Before serving, in order (exit codes as the other CLIs: 2 usage, 1 errors in the input):

1. the token: ``--token`` or the environment variable ``RLVP_SERVE_TOKEN``; an empty one is refused (2);
2. the address: a non-loopback ``--host`` (``0.0.0.0``, a LAN address) without a token is refused (2);
3. the rule files: one name each (their stems), present (2), checked: errors are printed as
   ``rlvp-compile`` prints them and the command exits 1;
4. the extra: FastAPI, uvicorn and prometheus_client importable (``pip install 'rlvp[serve]'``; 2);
5. the socket: bound here (2 when the port is taken); ``--port 0`` takes a free port, and the line
   ``rlvp serve: listening on http://HOST:PORT`` on standard error names it.

Then one process serves (``--workers 1``), or uvicorn's supervisor runs N worker processes
(`rlvp_dsl.serve.supervisor`); SIGHUP reloads the rules (a bad file keeps the old rules, and the
log says why); SIGTERM or Ctrl-C stops.  The token is never printed or logged.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE, Stop, console, stopped, version_text, whole_number
from rlvp_dsl.cli.options import ArgumentParser

from .auth import is_loopback
from .limits import DEFAULT_MAX_BODY
from .rulesets import RulesFailed, check_rule_files, rule_names

PROG = "rlvp"
TOKEN_ENV = "RLVP_SERVE_TOKEN"  # the same name as rlvp_dsl.serve.app.TOKEN_ENV (not imported: no FastAPI yet)


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog=PROG,
        description="rlvp: the reward-specification language's commands.",
        epilog="rlvp-compile checks rule files, rlvp-score scores trajectory files, rlvp serve serves the rules.",
    )
    p.add_argument("--version", action="version", version=version_text(PROG))
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser(
        "serve",
        help="serve rule files as a reward service over HTTP",
        description="Serve rule files over HTTP: POST /score (trajectory files), POST /get_reward (OpenRLHF), "
        "POST /verify and GET /reverify_mode (NeMo Gym), GET /healthz, /rules, /metrics.  SIGHUP reloads the rules.",
        epilog="Exit codes: 0 stopped, 1 the rule files have errors, 2 usage error (a non-loopback --host "
        "without a token, a taken port, the serve extra missing).  docs/integrations.md, 'rlvp serve'.",
    )
    s.add_argument("rules", nargs="+", metavar="RULES", help="rule files; a request names one by its file stem")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, this machine only)")
    s.add_argument(
        "--port", type=whole_number(0, 65535), default=8000, help="port (default 8000; 0: a free one, printed)"
    )
    s.add_argument("--workers", type=whole_number(1, 256), default=1, metavar="N", help="worker processes (default 1)")
    s.add_argument(
        "--token",
        default=None,
        metavar="T",
        help=f"require 'Authorization: Bearer T' on every route but /healthz (or set {TOKEN_ENV}, "
        "which keeps it out of the process list); needed for a non-loopback --host",
    )
    s.add_argument(
        "--max-body",
        type=whole_number(1),
        default=DEFAULT_MAX_BODY,
        metavar="BYTES",
        help=f"the longest request body; longer ones get 413 (default {DEFAULT_MAX_BODY})",
    )
    s.add_argument(
        "--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info", help="(default info)"
    )
    s.add_argument("--no-access-log", action="store_true", help="do not log a line per request")
    return p


def _token(given: str | None) -> str | None:
    """The token: `given` (--token), else the environment's; None when neither is set.

    Raises:
        Stop: an empty or blank token (exit 2).
    """
    token = given if given is not None else os.environ.get(TOKEN_ENV)
    if token is None:
        return None
    if not token.strip() or token != token.strip():
        source = "--token" if given is not None else TOKEN_ENV
        raise Stop(EXIT_USAGE, f"{source}: the token must be non-empty, with no spaces at its ends")
    return token


def _check_host(host: str, token: str | None) -> None:
    """Raises `Stop` (exit 2) for a non-loopback `host` without a token."""
    if token is None and not is_loopback(host):
        raise Stop(
            EXIT_USAGE,
            f"refusing to listen on {host} without a token: any machine that reaches it could use the server. "
            f"Pass --token (or set {TOKEN_ENV}), or listen on 127.0.0.1",
        )


def _check_extra() -> None:
    """Raises `Stop` (exit 2) when the serve extra is not installed."""
    missing = []
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise Stop(EXIT_USAGE, f"rlvp serve needs {', '.join(missing)}: pip install 'rlvp[serve]'")


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port`, inheritable by worker processes.

    Raises:
        Stop: the address cannot be resolved or bound (exit 2).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise Stop(EXIT_USAGE, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging configuration, with the server's own logger (``rlvp_dsl.serve``) beside its own."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["rlvp_dsl.serve"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def main(argv: list[str] | None = None) -> int:
    """Run ``rlvp`` on `argv` (default: the process's); the exit status (module docstring)."""
    args = _parser().parse_args(argv)
    try:
        token = _token(args.token)
        _check_host(args.host, token)
        try:
            named = rule_names(args.rules)
        except ValueError as exc:
            raise Stop(EXIT_USAGE, str(exc)) from None
        for path in named.values():
            if not os.path.isfile(path):
                what = "is a directory, not a rule file" if os.path.isdir(path) else "rule file not found"
                raise Stop(EXIT_USAGE, f"{what}: {path}")
        _check_extra()
        try:
            checked = check_rule_files(named)
        except RulesFailed as exc:
            print(str(exc), file=sys.stderr)
            raise Stop(EXIT_INPUT_ERRORS, "the rule files have errors (above): nothing served") from None
        sock = _bind(args.host, args.port)
    except Stop as stop:
        return stopped(PROG, stop)
    return _serve(args, token, named, checked, sock)


def _serve(
    args: argparse.Namespace, token: str | None, named: dict[str, str], checked: Any, sock: socket.socket
) -> int:
    """Serve until stopped: one process, or the supervisor of ``--workers`` processes."""
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the server (or the supervisor) reloads on it
    import uvicorn

    from .rulesets import RuleHolder, compile_sets, file_loader

    sets = compile_sets(checked, 1)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    rules = ", ".join(f"{s.name} {s.hash}" for s in sets.by_name.values())
    print(
        f"{PROG} serve: listening on http://{shown}:{port} ({rules}; "
        f"{'bearer token required' if token else 'no token'}; {args.workers} worker"
        f"{'s' if args.workers > 1 else ''})",
        file=sys.stderr,
        flush=True,
    )
    options: dict[str, Any] = dict(
        host=args.host,
        port=port,
        log_config=log_config(args.log_level),
        log_level=args.log_level,
        access_log=not args.no_access_log,
        server_header=False,
    )
    if args.workers == 1:
        from .app import ServeSettings, create_app

        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        holder = RuleHolder(file_loader(named), sets)
        app = create_app(holder, ServeSettings(max_body=args.max_body, token=token))
        server = uvicorn.Server(uvicorn.Config(app, **options))
        server.run(sockets=[sock])
        return EXIT_OK if server.started else _not_started()
    return _supervise(args, token, named, checked, sock, options)


def _supervise(
    args: argparse.Namespace,
    token: str | None,
    named: dict[str, str],
    checked: Any,
    sock: socket.socket,
    options: dict[str, Any],
) -> int:
    """``--workers N``: a private state folder (settings, the rule snapshot, the metrics files), then
    the supervisor until stopped; the folder is removed after."""
    import uvicorn

    from .app import SETTINGS_FILE, SNAPSHOT_FILE, STATE_ENV
    from .rulesets import write_snapshot
    from .supervisor import RulesSupervisor

    state = tempfile.mkdtemp(prefix="rlvp-serve-state-")  # mode 0700: this user's only
    try:
        metrics = os.path.join(state, "metrics")
        os.mkdir(metrics)
        with open(os.path.join(state, SETTINGS_FILE), "w", encoding="utf-8") as handle:
            json.dump({"max_body": args.max_body}, handle)
        snapshot = os.path.join(state, SNAPSHOT_FILE)
        write_snapshot(snapshot, checked, 1)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics  # read by prometheus_client in each worker
        os.environ[STATE_ENV] = state
        if token is not None:
            os.environ[TOKEN_ENV] = token  # the workers' (never logged)
        config = uvicorn.Config("rlvp_dsl.serve.app:worker_app", factory=True, workers=args.workers, **options)
        RulesSupervisor(config, [sock], named, snapshot).run()
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return EXIT_OK


def _not_started() -> int:
    print(f"{PROG} serve: error: the server did not start (the log above says why)", file=sys.stderr)
    return EXIT_USAGE


def run() -> None:
    """Run as a console script (``python -m rlvp_dsl.serve``; installed as ``rlvp``)."""
    console(main, PROG)


if __name__ == "__main__":
    run()
