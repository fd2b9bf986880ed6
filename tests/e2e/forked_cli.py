"""`python -m rlvp_dsl.cli.TOOL ARGS` as a real child process, without paying Python's start-up and
the command's imports (about 0.4 s) on every run: one server process imports the commands' modules
once, then forks a child per command.  The child is a separate process with its own standard
streams (files, not a terminal, as a pipe is not), working folder, exit status and no state of an
earlier run: it runs the module as ``__main__`` exactly as ``python -m`` does (`runpy`), from the
state the server had after its imports, so module-level work, argparse, the guarded streams
(`rlvp_dsl.cli.console`) and ``sys.exit`` all happen in the child.

What the server cannot reproduce -- a changed environment before the imports run, Ctrl-C while
they run -- the callers run as plain subprocesses (`run` falls back to one when given `env`).

Run by the tests (`CliServer`); ``python forked_cli.py MODULE...`` is the server: it reads one JSON
request a line on standard input and answers one JSON line ``{"rc": N}`` on standard output.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class CliServer:
    """The server process, started on first use; `run` is `subprocess.run` for ``python -m MODULE``."""

    def __init__(self, modules: list[str]) -> None:
        self.modules = modules
        self.proc: subprocess.Popen[bytes] | None = None
        self.folder = tempfile.TemporaryDirectory(prefix="rlvp-forked-cli-")

    def _server(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, *self.modules],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self.proc

    def run(
        self, module: str, args: list[str], cwd: Path, stdin: bytes | None, timeout: int
    ) -> subprocess.CompletedProcess[bytes]:
        """`module` run as ``python -m module *args`` in `cwd`: its exit status and its standard
        output and error as bytes; `stdin` is its standard input (None: an empty file, as the
        tests' ``subprocess.run`` without `input` gives the pytest process's, which is empty or a
        terminal pytest does not read).  A run past `timeout` seconds is killed (SIGALRM)."""
        folder = Path(self.folder.name)
        paths = {name: folder / name for name in ("in", "out", "err")}
        paths["in"].write_bytes(stdin or b"")
        request = {
            "module": module,
            "argv": [str(a) for a in args],
            "cwd": str(cwd),
            "timeout": timeout,
            **{name: str(p) for name, p in paths.items()},
        }
        server = self._server()
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write((json.dumps(request) + "\n").encode())
        server.stdin.flush()
        answer = server.stdout.readline()
        if not answer:
            raise RuntimeError(f"the CLI server died (exit {server.wait()})")
        rc = json.loads(answer)["rc"]
        argv = [sys.executable, "-m", module, *request["argv"]]
        return subprocess.CompletedProcess(argv, rc, paths["out"].read_bytes(), paths["err"].read_bytes())

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.folder.cleanup()


def _child(request: dict) -> None:
    """In the forked child: the request's streams and folder, then the module as ``__main__``."""
    import runpy
    import signal
    import traceback

    os.chdir(request["cwd"])
    write = os.O_WRONLY | os.O_TRUNC | os.O_CREAT
    for fd, name, flags in ((0, "in", os.O_RDONLY), (1, "out", write), (2, "err", write)):
        opened = os.open(request[name], flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    enc, errors = sys.__stdout__.encoding, sys.__stdout__.errors  # type: ignore[union-attr]
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding=enc, errors=errors)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.open(1, "wb", closefd=False), encoding=enc, errors=errors)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.open(2, "wb", closefd=False), encoding=enc, errors="backslashreplace", line_buffering=True
    )
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(int(request["timeout"]))
    sys.path[0] = os.getcwd()  # as `python -m` run here puts it
    sys.argv = [request["module"], *request["argv"]]
    if not request["loaded_by_package"]:  # `python -m` runs it fresh as __main__: no copy in sys.modules
        sys.modules.pop(request["module"], None)
    code: object = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


def _serve(modules: list[str]) -> None:
    """Import `modules` (the commands and so their libraries), then fork a child per request."""
    import importlib

    sys.path[0] = str(REPO)
    loaded_by_package = {}
    for module in modules:
        importlib.import_module(module.rpartition(".")[0])
        loaded_by_package[module] = module in sys.modules
    for module in modules:
        importlib.import_module(module)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        request = json.loads(line)
        request["loaded_by_package"] = loaded_by_package.get(request["module"], False)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _child(request)
            finally:
                os._exit(70)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        answers.write((json.dumps({"rc": rc}) + "\n").encode())
        answers.flush()


if __name__ == "__main__":
    _serve(sys.argv[1:])
