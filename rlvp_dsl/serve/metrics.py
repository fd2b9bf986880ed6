"""``GET /metrics``: Prometheus text exposition, written by prometheus_client (the ``serve`` extra).

Metrics (labels: ``route`` is one of the server's routes or ``other``, never a path a client made up):

* ``rlvp_serve_requests_total{route,status}`` -- requests answered;
* ``rlvp_serve_request_seconds{route}`` -- a histogram of the time to answer, in seconds;
* ``rlvp_serve_episodes_total{route}`` -- episodes scored (one per ``/get_reward`` query);
* ``rlvp_serve_errors_total{route,kind}`` -- error answers by kind (``unauthorized``, ``too_large``,
  ``bad_input``, ``not_found``, ``internal``, ...);
* ``rlvp_serve_reloads_total{result}`` -- rule reloads (SIGHUPs), ``ok`` or ``failed``: one per
  reload, however many workers serve.

With several worker processes each writes its values to files in a folder the parent made
(prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``), and ``/metrics`` adds them
up, whichever worker answers.  Reloads are the parent's to count there: it checks the rule files
(a failed check reaches no worker) and has every worker reload a good set, so it counts each
reload once (`count_parent_reload`, in `RELOADS_FILE` of that folder) and the workers count none.
Nothing a client sends (headers, the token, bodies) is a label.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .auth import ASGIApp, Message, Receive, Scope, Send

#: The environment variable prometheus_client reads (at import) for its multiprocess folder.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: The routes named in labels; any other path is ``other``.
ROUTES = frozenset(
    {"/score", "/get_reward", "/verify", "/reverify_mode", "/healthz", "/rules", "/metrics", "/openapi.json"}
)

#: The parent's reload counts in the multiprocess folder: ``{"ok": n, "failed": m}`` (a name
#: prometheus_client's collector, which reads ``*.db``, passes over).
RELOADS_FILE = "reloads.json"
RELOADS_NAME = "rlvp_serve_reloads"
RELOADS_HELP = "Rule reloads, by result."

#: The histogram's buckets, in seconds: a one-episode request takes about a millisecond, a batch of
#: 10,000 several seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: The error kind of each status code (other codes of 400 and above: ``status_NNN``).
ERROR_KINDS = {
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    422: "bad_input",
    499: "client_closed",
    500: "internal",
}

CONTENT_TYPE = CONTENT_TYPE_LATEST


def route_label(path: str) -> str:
    """`path` when it is one of `ROUTES`, else ``other``."""
    return path if path in ROUTES else "other"


class Metrics:
    """The server's metrics, in a registry of their own (or shared across processes).

    Args:
        multiprocess_dir: the folder of prometheus_client's multiprocess mode, or None for one
            process.  It must be the folder named by ``PROMETHEUS_MULTIPROC_DIR`` when
            prometheus_client was imported.
    """

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self._multiprocess_dir = multiprocess_dir
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no ``*_created`` series
        self._registry = CollectorRegistry()
        # in multiprocess mode the values live in files; the registry of `exposition` reads them
        owner = None if multiprocess_dir else self._registry
        self.requests = Counter("rlvp_serve_requests", "Requests answered.", ["route", "status"], registry=owner)
        self.seconds = Histogram(
            "rlvp_serve_request_seconds",
            "Time to answer a request, in seconds.",
            ["route"],
            buckets=BUCKETS,
            registry=owner,
        )
        self.episodes = Counter("rlvp_serve_episodes", "Episodes scored.", ["route"], registry=owner)
        self.errors = Counter("rlvp_serve_errors", "Error answers, by kind.", ["route", "kind"], registry=owner)
        self.reloads = Counter(RELOADS_NAME, RELOADS_HELP, ["result"], registry=owner)

    def observe(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request (and its error kind, for a status of 400 and above)."""
        self.requests.labels(route, str(status)).inc()
        self.seconds.labels(route).observe(seconds)
        if status >= 400:
            self.errors.labels(route, ERROR_KINDS.get(status, f"status_{status}")).inc()

    def count_reload(self, ok: bool) -> None:
        """Count one reload of this process's rules -- in one process only: with several, the parent
        counts each reload once (`count_parent_reload`)."""
        if not self._multiprocess_dir:
            self.reloads.labels("ok" if ok else "failed").inc()

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format (version 0.0.4), summed over processes."""
        if self._multiprocess_dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self._multiprocess_dir)  # type: ignore[no-untyped-call]
            registry.register(_ParentReloads(self._multiprocess_dir))
            return generate_latest(registry)
        return generate_latest(self._registry)


def _reload_counts(folder: str) -> dict[str, int]:
    try:
        with open(os.path.join(folder, RELOADS_FILE), encoding="utf-8") as handle:
            counts = json.load(handle)
    except (OSError, ValueError):  # none yet (or a torn file: the writer renames, so never)
        return {}
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}


def count_parent_reload(folder: str, ok: bool) -> None:
    """Count one reload in the multiprocess `folder` (the parent of ``--workers N``: the one writer,
    one signal at a time); written whole, then renamed: a worker reads the old counts or the new."""
    counts = _reload_counts(folder)
    key = "ok" if ok else "failed"
    counts[key] = counts.get(key, 0) + 1
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".reloads-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(counts, out)
    os.replace(temporary, os.path.join(folder, RELOADS_FILE))


class _ParentReloads(Collector):
    """``rlvp_serve_reloads_total`` from the parent's counts (`count_parent_reload`)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def collect(self) -> Iterator[Metric]:
        counts = _reload_counts(self.folder)
        if counts:
            family = CounterMetricFamily(RELOADS_NAME, RELOADS_HELP, labels=["result"])
            for result, value in sorted(counts.items()):
                family.add_metric([result], float(value))
            yield family


class MetricsMiddleware:
    """ASGI middleware timing and counting every HTTP request, the ones refused included."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.observe(route_label(str(scope.get("path", ""))), status, time.perf_counter() - start)


def multiprocess_dir() -> str | None:
    """The multiprocess folder this process was started with (``PROMETHEUS_MULTIPROC_DIR``), or None."""
    return os.environ.get(MULTIPROCESS_ENV) or None
