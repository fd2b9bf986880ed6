"""The `rlvp-lsp` command line: its help, a missing pygls said in one line with the install command
(exit 2, no traceback), and a session that the client ends (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys

from .client import REPO


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, input=stdin, capture_output=True, text=True, timeout=60)


def test_help():
    done = _run("-m", "rlvp_dsl.lsp", "--help")
    assert done.returncode == 0 and "usage: rlvp-lsp" in done.stdout and "docs/lsp.md" in done.stdout
    done = _run("-m", "rlvp_dsl.lsp", "--version")
    assert done.returncode == 0 and done.stdout.startswith("rlvp-lsp ")


def test_missing_pygls_is_one_line_and_exit_2():
    code = "import sys; sys.modules['pygls'] = None; from rlvp_dsl.lsp import command; command()"
    done = _run("-c", code)
    assert done.returncode == 2
    assert (
        done.stderr == "rlvp-lsp: error: pygls is not installed: pip install 'rlvp[lsp]'  (pygls 2.1 and lsprotocol)\n"
    )


def _framed(*messages: dict) -> str:
    return "".join(f"Content-Length: {len(json.dumps(m))}\r\n\r\n{json.dumps(m)}" for m in messages)


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"processId": None, "capabilities": {}}}
SHUTDOWN, EXIT = {"jsonrpc": "2.0", "id": 1, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}


def test_shutdown_then_exit_is_status_0_and_exit_alone_1():
    done = _run("-m", "rlvp_dsl.lsp", stdin=_framed(INIT, SHUTDOWN, EXIT))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith('{"id": 1, "jsonrpc": "2.0", "result": null}')
    done = _run("-m", "rlvp_dsl.lsp", stdin=_framed(EXIT))
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")


def test_messages_pygls_cannot_read_are_one_line_each_and_the_session_goes_on():
    """A body that is not JSON, or JSON that is no message: answered (-32700, -32600: test_protocol.py),
    and one line on stderr each, no traceback; the next, good messages are still answered."""
    garbage = "Content-Length: 5\r\n\r\n{{{{{" + "Content-Length: 2\r\n\r\n[]"
    done = _run("-m", "rlvp_dsl.lsp", stdin=_framed(INIT) + garbage + _framed(SHUTDOWN, EXIT))
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "rlvp-lsp: error: Unable to handle message (JSONDecodeError: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1))",
        "rlvp-lsp: warning: answered -32700: Parse error: the message body is not JSON (Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1))",
        "rlvp-lsp: warning: answered -32600: Invalid Request: the body is an array, not a JSON-RPC 2.0 message",
    ]
    assert done.returncode == 0 and done.stdout.endswith('{"id": 1, "jsonrpc": "2.0", "result": null}')
