"""The FastAPI application: routes, error answers, and the reload signal.

    app = create_app(holder, ServeSettings(max_body=DEFAULT_MAX_BODY, token=None))

Routes (docs/integrations.md, "rlvp serve"):

* ``POST /score[?rules=NAME&format=F&error_signal=S&name=FILE]`` -- the body is a trajectory file,
  or ``{"trajectory": ..., "tokens": ...}`` for per-token credit on token ids (`rlvp_dsl.serve.scoring`);
* ``POST /get_reward[?rules=NAME&template=T&error_signal=S]`` -- OpenRLHF's contract
  (`rlvp_dsl.serve.openrlhf`);
* ``POST /verify[?rules=NAME&error_signal=S]``, ``GET /reverify_mode`` -- NeMo Gym's verifier
  contract (`rlvp_dsl.serve.nemo_gym`);
* ``GET /healthz`` (no token needed), ``GET /rules``, ``GET /metrics``.

Every answer that used rules carries their hash (``rules_hash`` in the body and the
``X-RLVP-Rules-Hash`` header).  Errors are JSON ``{"error": KIND, "detail": ...}``: 401 without the
token, 413 past the body limit, 422 for a body that cannot be read or an unknown rule set (with
``record`` and ``field``, ``""`` where none applies; every route reads a body the one way of
`rlvp_dsl.serve.bodies`, so one mistake gets one message); a 500 only for a bug, logged with its traceback, the
worker alive.  A request reads the rule sets once: a reload (SIGHUP, `rlvp_dsl.serve.rulesets`)
replaces them whole between requests, never within one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import attrs
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .auth import BearerAuth
from .limits import DEFAULT_MAX_BODY, BodyTooLarge, read_limited
from .metrics import CONTENT_TYPE, Metrics, MetricsMiddleware, multiprocess_dir
from .models import ErrorAnswer, GetRewardAnswer, ScoreAnswer
from .nemo_gym import REVERIFY_MODE, verify_body
from .openrlhf import reward_body
from .rulesets import (
    RuleHolder,
    RuleSets,
    ServedRules,
    UnknownRules,
    compile_sets,
    describe,
    read_snapshot,
    snapshot_loader,
)
from .bodies import BadInput
from .scoring import checked_name, render, score_body

log = logging.getLogger("rlvp_dsl.serve")

#: The header naming the hash of the rules that answered.
HASH_HEADER = "X-RLVP-Rules-Hash"
#: Environment of a worker process (set by ``rlvp serve --workers N``): the parent's state folder,
#: and the token.
STATE_ENV = "RLVP_SERVE_STATE"
TOKEN_ENV = "RLVP_SERVE_TOKEN"
#: Files of the state folder.
SNAPSHOT_FILE = "rules.pickle"
SETTINGS_FILE = "settings.json"


@attrs.frozen
class ServeSettings:
    """How the application answers.

    Attributes:
        max_body: the longest request body, in bytes (longer: 413).
        token: the bearer token every route but ``/healthz`` needs, or None (not shown by ``repr``).
        multiprocess_dir: prometheus_client's multiprocess folder (several workers), or None.
        reload_on_sighup: whether SIGHUP reloads the rules (the process's main thread only).
    """

    max_body: int = DEFAULT_MAX_BODY
    token: str | None = attrs.field(default=None, repr=False)
    multiprocess_dir: str | None = None
    reload_on_sighup: bool = True


class _State:
    """What the routes share: the rules, the metrics, and the private folders request bodies are read
    in (one per thread, made once: a folder made and removed per request costs milliseconds on some
    file systems)."""

    def __init__(self, holder: RuleHolder, settings: ServeSettings, metrics: Metrics) -> None:
        self.holder = holder
        self.settings = settings
        self.metrics = metrics
        self._root: str | None = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def workdir(self) -> str:
        """This thread's private folder (under the server's own, mode 0700)."""
        folder = getattr(self._local, "folder", None)
        if folder is None or not os.path.isdir(folder):
            with self._lock:
                if self._root is None or not os.path.isdir(self._root):
                    self._root = tempfile.mkdtemp(prefix="rlvp-serve-")
                folder = tempfile.mkdtemp(dir=self._root, prefix="thread-")
            self._local.folder = folder
        return str(folder)

    def cleanup(self) -> None:
        with self._lock:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None


#: Bodies up to this many bytes are scored on the event loop (a few milliseconds); longer ones in a
#: worker thread, so that the server answers other requests (``/healthz``) meanwhile.
INLINE_BYTES = 64 * 1024

_T = TypeVar("_T")


async def _off_loop(size: int, function: Callable[[], _T]) -> _T:
    """``function()``: here for a body of at most `INLINE_BYTES`, else in a worker thread (one hop for
    the whole request, not one per step: each costs a thread wake-up)."""
    if size <= INLINE_BYTES:
        return function()
    return await run_in_threadpool(function)


def _rendered(body: bytes, rules_hash: str | None = None, status: int = 200) -> Response:
    headers = {HASH_HEADER: rules_hash} if rules_hash else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _json(answer: Any, status: int = 200, rules_hash: str | None = None) -> Response:
    return _rendered(render(answer), rules_hash, status)


def _error(
    status: int,
    kind: str,
    detail: str,
    *,
    record: str = "",
    field: str = "",
    rules_hash: str | None = None,
    errors: list[dict[str, str]] | None = None,
) -> Response:
    """An error answer (`ErrorAnswer`): a 422 always has ``record`` and ``field`` (``""`` where none
    applies), and ``errors`` when several records of the body were refused."""
    body: dict[str, Any] = {"error": kind, "detail": detail}
    if record or field or status == 422:
        body.update(record=record, field=field)
    if errors:
        body["errors"] = errors
    if rules_hash:
        body["rules_hash"] = rules_hash
    return _json(body, status, rules_hash)


async def _reload(state: _State) -> None:
    """Reload the rules off the event loop; log the outcome, count it."""
    outcome = await asyncio.get_running_loop().run_in_executor(None, state.holder.reload)
    state.metrics.count_reload(outcome.ok)
    (log.info if outcome.ok else log.error)("process %d %s", os.getpid(), outcome.message)


def _install_sighup(state: _State) -> Callable[[], None]:
    """SIGHUP -> `_reload`, where the process allows it (its main thread, a POSIX loop); the undo."""
    if not state.settings.reload_on_sighup or not hasattr(signal, "SIGHUP"):
        return lambda: None
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[None]] = set()  # held until done (the loop keeps only weak references)

    def reload() -> None:
        task = loop.create_task(_reload(state))
        running.add(task)
        task.add_done_callback(running.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - not a POSIX main loop
        return lambda: None

    def undo() -> None:
        loop.remove_signal_handler(signal.SIGHUP)

    return undo


def create_app(holder: RuleHolder, settings: ServeSettings) -> FastAPI:
    """The application serving `holder`'s rules (the module docstring lists the routes).

    Args:
        holder: the rule sets, reloadable.
        settings: the body limit, the token, the metrics folder.
    """
    metrics = Metrics(settings.multiprocess_dir)
    state = _State(holder, settings, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        undo = _install_sighup(state)
        log.info("process %d serving %s", os.getpid(), describe(holder.current))
        try:
            yield
        finally:
            undo()
            state.cleanup()

    app = FastAPI(
        title="rlvp serve",
        summary="rlvp rule credit as a reward service",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.rlvp = state
    _add_error_answers(app)
    _add_routes(app, state)
    if settings.token:
        app.add_middleware(BearerAuth, token=settings.token)
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # outermost: refused requests are counted too
    return app


def _add_error_answers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def bad_parameter(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, "bad_input", f"{where}: {first.get('msg', 'invalid')}", field=where)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"status_{exc.status_code}")
        return _error(exc.status_code, kind, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> Response:
        # Starlette sends this answer, then re-raises: uvicorn logs the traceback; the worker goes on
        return _error(500, "internal", f"internal error ({type(exc).__name__}); the server log has the traceback")


def _add_routes(app: FastAPI, state: _State) -> None:
    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorAnswer} for code in (401, 413, 422)}

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        """Alive: the rule sets served (name -> hash) and their generation.  Needs no token."""
        sets = state.holder.current
        return {"status": "ok", "rules": sets.hashes(), "generation": sets.generation}

    @app.get("/rules")
    def rules() -> dict[str, Any]:
        """Each rule set: name, file, hash, counts, and every rule's name, kind and location."""
        sets = state.holder.current
        return {
            "generation": sets.generation,
            "loaded_at": sets.loaded_at,
            "rule_sets": [served.summary() for served in sets.by_name.values()],
        }

    @app.get("/metrics")
    def metrics() -> Response:
        """Prometheus text exposition (rlvp_dsl.serve.metrics)."""
        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.post("/score", responses={200: {"model": ScoreAnswer}, **errors})
    async def score(
        request: Request,
        rules: str | None = Query(None, description="the rule set (its file stem), when several are served"),
        format: str | None = Query(None, description="tau2, tau_bench_v1, openai or swe_agent (default: detected)"),
        error_signal: str | None = Query(None, description="how a tool error is recognised (trl, mcp, ...)"),
        name: str | None = Query(None, description="the file name the body is read as (default request.json)"),
    ) -> Response:
        """Score the episodes of a trajectory file sent as the body (or ``{"trajectory", "tokens"}``:
        per-token credit on the token ids given, docs/integrations.md)."""

        def work(served: ServedRules, body: bytes) -> tuple[bytes, int]:
            file_name = checked_name(name)
            return score_body(
                served, body, name=file_name, format=format, error_signal=error_signal, workdir=state.workdir()
            )

        return await _answer(state, request, rules, "/score", work)

    @app.post("/get_reward", responses={200: {"model": GetRewardAnswer}, **errors})
    async def reward(
        request: Request,
        rules: str | None = Query(None, description="the rule set (its file stem), when several are served"),
        template: str = Query("auto", description="the chat template: auto, chatml, llama3 or none"),
        error_signal: str | None = Query(None, description="how a tool error is recognised (default openai)"),
    ) -> Response:
        """OpenRLHF's remote reward: ``{"query": [...], "prompts": [...], "labels": [...]}``."""
        return await _answer(
            state,
            request,
            rules,
            "/get_reward",
            lambda served, body: reward_body(served, body, template=template, error_signal=error_signal),
        )

    @app.get("/reverify_mode")
    def reverify_mode() -> str:
        """NeMo Gym's reverify mode: ``"stateless"`` (a stored rollout re-verified gets the same reward)."""
        return REVERIFY_MODE

    @app.post("/verify", responses=errors)
    async def verify(
        request: Request,
        rules: str | None = Query(None, description="the rule set (its file stem), when several are served"),
        error_signal: str | None = Query(None, description="how a tool error is recognised (default openai)"),
    ) -> Response:
        """NeMo Gym's verify: a Responses-API rollout -> ``reward`` and per-rule ``reward_components``."""
        return await _answer(
            state, request, rules, "/verify", lambda served, body: verify_body(served, body, error_signal=error_signal)
        )


async def _answer(
    state: _State,
    request: Request,
    rules: str | None,
    route: str,
    work: Callable[[ServedRules, bytes], tuple[bytes, int]],
) -> Response:
    """One scoring route: the rule set chosen once (a reload never changes it under this request), the
    body read within the limit, `work(served, body) -> (answer bytes, episodes)` off the event loop;
    413 for a body over the limit, 422 naming record and field for bad input, 499 when the client left."""
    served = _choose(state.holder.current, rules)
    if isinstance(served, Response):
        return served
    try:
        body = await read_limited(request.stream(), state.settings.max_body, request.headers.get("content-length"))
        rendered, count = await _off_loop(len(body), lambda: work(served, body))
    except BodyTooLarge as exc:
        return _error(413, "too_large", str(exc), rules_hash=served.hash)
    except ClientDisconnect:  # the client left mid-body: nobody reads an answer
        return Response(status_code=499)
    except BadInput as exc:
        return _error(
            422, "bad_input", str(exc), record=exc.record, field=exc.field, rules_hash=served.hash, errors=exc.errors
        )
    state.metrics.episodes.labels(route).inc(count)
    return _rendered(rendered, served.hash)


def _choose(sets: RuleSets, name: str | None) -> ServedRules | Response:
    """The rule set a request names, or the 422 saying why there is none."""
    try:
        return sets.choose(name)
    except UnknownRules as exc:
        return _error(422, "unknown_rules", str(exc), field="rules")


def worker_app() -> FastAPI:
    """The application of one worker process of ``rlvp serve --workers N`` (uvicorn's factory): the
    rules from the parent's snapshot, the settings and token from its environment."""
    folder = os.environ[STATE_ENV]
    with open(os.path.join(folder, SETTINGS_FILE), encoding="utf-8") as handle:
        saved = json.load(handle)
    snapshot = os.path.join(folder, SNAPSHOT_FILE)
    checked, generation = read_snapshot(snapshot)
    holder = RuleHolder(snapshot_loader(snapshot), compile_sets(checked, generation))
    # a SIGHUP sent while this worker starts finds it reading the newest snapshot already
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    settings = ServeSettings(
        max_body=int(saved["max_body"]),
        token=os.environ.get(TOKEN_ENV) or None,
        multiprocess_dir=multiprocess_dir(),
    )
    return create_app(holder, settings)
