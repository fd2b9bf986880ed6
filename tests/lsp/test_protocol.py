"""Malformed, early and late client messages get the JSON-RPC 2.0 / LSP answers (rlvp_dsl/lsp/protocol.py),
over a real stdio session of ``python -m rlvp_dsl.lsp``: the raw bytes in, every framed message out.
No ``window/showMessage`` pop-up, no traceback, one stderr line each; the session goes on."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from .client import REPO

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
URI = "file:///nonexistent/early.rlvp"
OPEN = {
    "jsonrpc": "2.0",
    "method": "textDocument/didOpen",
    "params": {"textDocument": {"uri": URI, "languageId": "rlvp", "version": 1, "text": "tool a : read\n"}},
}
HOVER = {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 5}}


def frame(body: bytes | dict | list) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def session(*bodies: bytes | dict | list) -> tuple[list[dict], str, int]:
    """Run the server on the framed `bodies`: (every message it wrote, in order; stderr; exit status)."""
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.lsp"],
        cwd=REPO,
        input=b"".join(map(frame, bodies)),
        capture_output=True,
        timeout=60,
    )
    out, messages = done.stdout, []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        match = re.search(rb"Content-Length: (\d+)", head)
        assert match, out[:200]
        size = int(match.group(1))
        messages.append(json.loads(rest[:size]))
        out = rest[size:]
    return messages, done.stderr.decode(), done.returncode


def request(msg_id: int, method: str, params: object = None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def test_early_malformed_and_late_messages_get_the_specified_answers():
    messages, stderr, status = session(
        request(0, "textDocument/hover", HOVER),  # before initialize: -32002
        OPEN,  # a notification before initialize: dropped (no diagnostics published)
        INIT,
        INITIALIZED,
        b'{"jsonrpc": "2.0", "id": 99, "method": ',  # not JSON: -32700, id null
        [1, 2, 3],  # JSON, not a message: -32600, id null
        {"id": 7, "method": "shutdown"},  # no "jsonrpc": -32600 with its id
        request(8, "textDocument/hover", {"bogus": 1}),  # params that do not fit: -32602
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"x": 1}},  # logged, not answered
        {"jsonrpc": "1.0", "id": 10, "method": "shutdown"},  # the wrong version: -32600
        request(11, "textDocument/hover", HOVER),  # a good request still answered (nothing open: null)
        request(12, "shutdown"),
        request(13, "textDocument/hover", HOVER),  # after shutdown: -32600
        {"jsonrpc": "2.0", "method": "exit"},
    )
    assert status == 0
    assert [m.get("id", "-") for m in messages] == [0, 1, None, None, 7, 8, "-", 10, 11, 12, 13]
    assert messages[1]["result"]["serverInfo"]["name"] == "rlvp-lsp"
    assert messages[6] == {
        "jsonrpc": "2.0",
        "method": "window/logMessage",
        "params": {"type": 2, "message": "ignored a malformed 'textDocument/didOpen' notification: Invalid Params"},
    }
    assert messages[8]["result"] is None and messages[9]["result"] is None  # hover (nothing open), shutdown
    errors = [(m["id"], m["error"]) for m in messages if "error" in m]
    assert errors == [
        (
            0,
            {"code": -32002, "message": "the server is not initialized: send 'initialize' before 'textDocument/hover'"},
        ),
        (
            None,
            {
                "code": -32700,
                "message": "Parse error: the message body is not JSON (Expecting value: line 1 column 40 (char 39))",
            },
        ),
        (None, {"code": -32600, "message": "Invalid Request: the body is an array, not a JSON-RPC 2.0 message"}),
        (
            7,
            {
                "code": -32600,
                "message": 'Invalid Request: the body is an object without "jsonrpc": "2.0", not a JSON-RPC 2.0 message',
            },
        ),
        (8, {"code": -32602, "message": "Invalid params: the params do not fit 'textDocument/hover'"}),
        (10, {"code": -32600, "message": 'Invalid Request: "jsonrpc" must be "2.0", not "1.0"'}),
        (13, {"code": -32600, "message": "the server is shut down: no 'textDocument/hover' after 'shutdown'"}),
    ]  # no "data" (pygls put a traceback there), and "id": null where none can be read
    assert not any(m.get("method") in ("window/showMessage", "textDocument/publishDiagnostics") for m in messages)
    lines = stderr.splitlines()
    assert "Traceback" not in stderr and all(line.startswith("rlvp-lsp: ") for line in lines)
    assert sum(line.startswith("rlvp-lsp: warning: answered -32") for line in lines) == 7


def test_exit_before_initialize_ends_the_session_with_status_1():
    messages, stderr, status = session({"jsonrpc": "2.0", "method": "exit"})
    assert (messages, stderr, status) == ([], "", 1)
