"""A sync handle on the real `rlvp-lsp` (``python -m rlvp_dsl.lsp``) driven over stdio by pygls's own
`LanguageClient`, its client on an event loop in a thread, so the tests stay plain functions."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")

#: Seconds any one exchange with the server may take before the test fails.
TIMEOUT = 20


class Session:
    """A started server and its client.  `published` holds the latest diagnostics per uri, and
    `published_version` the version they were published with (None: not an open document's)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.published: dict[str, list[types.Diagnostic]] = {}
        self.published_version: dict[str, int | None] = {}
        self.client: LanguageClient = self.call(self._start())
        self.versions: dict[str, int] = {}

    async def _start(self) -> LanguageClient:
        client = LanguageClient("rlvp-lsp-tests", "1")

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
            self.published[params.uri] = list(params.diagnostics)
            self.published_version[params.uri] = params.version

        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        await client.start_io(sys.executable, "-m", "rlvp_dsl.lsp", cwd=str(REPO), env=env)
        await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=os.getpid())
        )
        client.initialized(types.InitializedParams())
        return client

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT)

    def send(self, fn: Callable[[Any], None], params: Any) -> None:
        """Send a notification, then wait for the server to have handled it (a request answered
        after it: the server handles messages in order, and publishes before it answers)."""
        self.loop.call_soon_threadsafe(fn, params)
        self.barrier()

    def barrier(self) -> None:
        self.call(
            self.client.text_document_document_symbol_async(
                types.DocumentSymbolParams(types.TextDocumentIdentifier("file:///nonexistent.rlvp"))
            )
        )

    # ---- documents ------------------------------------------------------------------------

    def open(self, path: Path, text: str | None = None) -> str:
        uri = path.resolve().as_uri()
        self.versions[uri] = 1
        item = types.TextDocumentItem(uri, "rlvp", 1, path.read_text(encoding="utf-8") if text is None else text)
        self.send(self.client.text_document_did_open, types.DidOpenTextDocumentParams(item))
        return uri

    def replace(self, uri: str, text: str) -> None:
        """The whole text replaced (one full-content change)."""
        self.versions[uri] += 1
        change = types.TextDocumentContentChangeWholeDocument(text=text)
        params = types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]), [change]
        )
        self.send(self.client.text_document_did_change, params)

    def close(self, uri: str) -> None:
        self.send(
            self.client.text_document_did_close, types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )

    def stop(self) -> None:
        self.call(self.client.shutdown_async(None))
        self.client.exit(None)
        self.call(self.client.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
