"""Who may call the server: the bearer token, and which addresses need one.

* `BearerAuth` -- ASGI middleware: with a token, every route but ``/healthz`` needs
  ``Authorization: Bearer <token>`` (401 otherwise, before the body is read); the token is compared
  in constant time (`hmac.compare_digest`), and never written to a log, an answer or ``/metrics``.
* `is_loopback` -- whether a bind address is reachable only from this machine (``127.0.0.0/8``,
  ``::1``, ``localhost``); ``rlvp serve`` refuses any other address without a token.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

#: Routes answered without a token (a load balancer's health check).
OPEN_PATHS = frozenset({"/healthz"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_UNAUTHORIZED = (
    b'{"error":"unauthorized","detail":"this server needs a bearer token: '
    b'send the header Authorization: Bearer <token>"}'
)


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches: ``localhost``, ``127.x.x.x``, ``::1``.

    Any other name or address (``0.0.0.0``, ``::``, a LAN address, a host name) is not, whatever it
    resolves to now."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(header: bytes | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (scheme in any case), compared
    in constant time."""
    if header is None:
        return False
    scheme, _, given = header.partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(given.strip(), token)


class BearerAuth:
    """ASGI middleware requiring the bearer `token` on every HTTP route but `OPEN_PATHS`.

    Args:
        app: the application it guards.
        token: the token (text, not empty).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app = app
        self._token = token.encode("utf-8")

    def __repr__(self) -> str:  # never the token
        return "BearerAuth(token=<hidden>)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = next((value for key, value in scope.get("headers", ()) if key == b"authorization"), None)
        if token_matches(header, self._token):
            await self.app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(_UNAUTHORIZED)).encode()),
                    (b"www-authenticate", b'Bearer realm="rlvp"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": _UNAUTHORIZED})
