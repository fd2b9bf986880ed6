"""The server's answers to malformed, early and late client messages, as JSON-RPC 2.0 (section 5.1)
and the Language Server Protocol (3.17, "Lifecycle Messages") want them.

pygls 2.1 answers a body that is not JSON, or JSON that is not a message object, with a
``window/showMessage`` pop-up ("Error in server: Expecting value ...") and no response; a request
before ``initialize`` with -32603 and a Python traceback in ``error.data``; a request whose params
do not fit its method, or any request after ``shutdown``, with nothing (the client waits forever).
`RuleProtocol` (pygls's ``protocol_cls`` hook) and `RuleServer.report_server_error` (pygls's
documented error hook, `rlvp_dsl.lsp.server`) answer instead:

| the client sends | the answer |
| --- | --- |
| a body that is not JSON (or not UTF-8, or nested past Python's recursion limit) | -32700 parse error, ``"id": null`` |
| JSON that is not a message: an array, a number, an object without ``"jsonrpc": "2.0"`` | -32600 invalid request, with the message's ``id`` when it has a valid one, else ``null`` |
| a request whose ``params`` do not fit its method | -32602 invalid params, naming the method |
| a request before ``initialize`` | -32002 server not initialized |
| a notification before ``initialize`` (``exit`` excepted) | none: dropped, as the LSP says |
| a request after ``shutdown`` | -32600 invalid request |
| a notification whose ``params`` do not fit | none: one ``window/logMessage`` (the client's log, not a pop-up) |

No answer carries a traceback.  Every other message goes to pygls unchanged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCRequest

logger = logging.getLogger(__name__)

#: JSON-RPC ids are strings or integers (a float or bool id is answered as null).
_IDS = (str, int)


@attrs.frozen
class Rejected:
    """A JSON-RPC object that could not be turned into its message type: the raw object and why."""

    data: dict[str, Any]
    error: JsonRpcException


def _valid_id(value: Any) -> str | int | None:
    return value if isinstance(value, _IDS) and not isinstance(value, bool) else None


def _kind(message: Any) -> str:
    """What a non-message JSON value is, for the error message ("an array", "a number" ...)."""
    if isinstance(message, list):
        return "an array"
    if isinstance(message, dict):
        return 'an object without "jsonrpc": "2.0"'
    if isinstance(message, bool) or message is None:
        return json.dumps(message)
    if isinstance(message, (int, float)):
        return "a number"
    if isinstance(message, str):
        return "a string"
    return type(message).__name__


class RuleProtocol(LanguageServerProtocol):
    """pygls's protocol, answering the messages of the module's table itself."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialize_seen = False  # an `initialize` request arrived
        self.shutdown_seen = False  # a `shutdown` request arrived

    # ---- answers ------------------------------------------------------------------------------

    def answer_error(self, msg_id: str | int | None, error: JsonRpcException) -> None:
        """Send a JSON-RPC error response (``"id": null`` when `msg_id` is None: lsprotocol's own
        response type would leave the member out, and JSON-RPC requires it); one warning line on
        standard error."""
        logger.warning("answered %s: %s", error.code, error.message)
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": error.code, "message": error.message}})

    def log_to_client(self, text: str) -> None:
        """One line in the client's log of this server (``window/logMessage``, not a pop-up), and on
        standard error."""
        logger.warning("%s", text)
        self.notify(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(type=types.MessageType.Warning, message=text))

    # ---- pygls's hooks ------------------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls's `structure_message` (the JSON parser's object hook); a message object that does not
        fit its type becomes `Rejected`, answered by `handle_message` (pygls raises out of the parser,
        which ends in a pop-up and, for a request, no response)."""
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            return Rejected(data, exc)

    def handle_message(self, message: Any) -> None:
        """Answer what the module's table lists; hand every other message to pygls."""
        if isinstance(message, Rejected):
            self._rejected(message)
            return
        if not hasattr(message, "jsonrpc"):  # parsed, but not into a message object
            raw_id = message.get("id") if isinstance(message, dict) else None
            what = f"Invalid Request: the body is {_kind(message)}, not a JSON-RPC 2.0 message"
            self.answer_error(_valid_id(raw_id), JsonRpcInvalidRequest(what))
            return
        method = getattr(message, "method", None)
        request = isinstance(message, RPCRequest)
        if message.jsonrpc != self.VERSION:
            what = f'Invalid Request: "jsonrpc" must be "2.0", not {json.dumps(message.jsonrpc)}'
            self.answer_error(message.id if request else None, JsonRpcInvalidRequest(what))
            return
        if not self.initialize_seen and method not in (types.INITIALIZE, types.EXIT):
            if request:
                what = f"the server is not initialized: send 'initialize' before {method!r}"
                self.answer_error(message.id, JsonRpcServerNotInitialized(what))
            return  # a notification before initialize: dropped
        if self.shutdown_seen and request:
            what = f"the server is shut down: no {method!r} after 'shutdown'"
            self.answer_error(message.id, JsonRpcInvalidRequest(what))
            return
        self.initialize_seen = self.initialize_seen or method == types.INITIALIZE
        self.shutdown_seen = self.shutdown_seen or (request and method == types.SHUTDOWN)
        super().handle_message(message)

    def _rejected(self, rejected: Rejected) -> None:
        data, error = rejected.data, rejected.error
        method, msg_id = data.get("method"), _valid_id(data.get("id"))
        if "method" not in data and ("result" in data or "error" in data):  # a response: nobody to answer
            self.log_to_client(f"ignored a malformed response: {error.message}")
        elif isinstance(method, str) and msg_id is not None:
            if isinstance(error, JsonRpcInvalidParams):
                self.answer_error(msg_id, JsonRpcInvalidParams(f"Invalid params: the params do not fit {method!r}"))
            else:
                self.answer_error(msg_id, JsonRpcInvalidRequest(f"Invalid Request: cannot read the {method!r} request"))
        elif isinstance(method, str) and "id" not in data:  # a notification: nobody to answer
            self.log_to_client(f"ignored a malformed {method!r} notification: {error.message}")
        else:
            what = (
                "Invalid Request: a message needs a string method and a string or integer id (none for a notification)"
            )
            self.answer_error(msg_id, JsonRpcInvalidRequest(what))

    def parse_error(self, error: Exception) -> None:
        """The answer to a body the JSON parser refused (`RuleServer.report_server_error`)."""
        self.answer_error(None, JsonRpcParseError(f"Parse error: the message body is not JSON ({error})"))


#: What the JSON reader raises for a body that is not JSON: bad syntax, bad UTF-8, nested too deep.
PARSE_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, RecursionError)
