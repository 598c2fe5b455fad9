"""benchd's own HTTP endpoints: an ASGI app over the result book, served by uvicorn.

==============================  ==========================================
Optional authentication (basic or bearer, from an exporter-toolkit style
``web_config`` file) guards every route but ``/healthz``; without it the
``POST`` routes answer only loopback clients. Responses that take real work
(the page, ``/metrics``, ``/api/status``) are built in a worker thread so a
scrape never delays the event loop that times the probes' requests.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import anyio
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from benchd.config.web import WebAuth
from benchd.errors import BenchdError
from benchd.logging import get_logger
from benchd.redact import text
from benchd.schedule import Busy, OverBudget, Schedule, Started, TriggerOutcome
from benchd.surfacers.prometheus import process_registry
from benchd.surfacers.rendered import MetricsCache, StatusCache, wants_gzip
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import status_document
from benchd.web.auth import Authenticator, Verdict
from benchd.web.guard import GuardHolder, GuardPolicy, RefusedCollector, RequestGuard
from benchd.web.page import render_page, render_probe_page
from benchd.web.server import is_loopback

__all__ = ["Control", "ReloadCallback", "build_app", "set_auth", "set_guard"]

log = get_logger("benchd.web")

ReloadCallback = Callable[[], Awaitable[bool]]
_OPEN_PATHS = frozenset({"/healthz"})
_SAFE_METHODS = frozenset({"GET", "HEAD"})


class Control(Protocol):
    """What the endpoints may ask of the daemon (:class:`benchd.daemon.Daemon` is one)."""

    async def reload(self) -> bool: ...

    def run_now(self, name: str) -> TriggerOutcome | None: ...

    def schedules(self) -> Mapping[str, Schedule]: ...


# --------------------------------------------------------------------------- auth


class _AuthGate:
    """Pure ASGI middleware: credentials when configured, else loopback-only writes.

    ``authenticator`` is swapped by :func:`set_auth` when a reload changes the
    web config; ``/healthz`` is always open.
    """

    def __init__(self, app: ASGIApp, holder: _AuthHolder) -> None:
        self._app = app
        self._holder = holder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        authenticator = self._holder.authenticator
        if authenticator is None:
            response = _loopback_only(scope)
        else:
            verdict = await authenticator.verdict(Headers(scope=scope).get("authorization"))
            response = _refusal(verdict, authenticator)
        if response is None:
            await self._app(scope, receive, send)
        else:
            await response(scope, receive, send)


@dataclass(slots=True)
class _AuthHolder:
    authenticator: Authenticator | None


def _loopback_only(scope: Scope) -> Response | None:
    if scope["method"] in _SAFE_METHODS:
        return None
    client = scope.get("client")
    if client and is_loopback(str(client[0])):
        return None
    return _message(
        403,
        "error",
        f"{scope['method']} {scope['path']} answers only loopback clients unless "
        "server.web_config configures authentication",
    )


def _refusal(verdict: Verdict, authenticator: Authenticator) -> Response | None:
    if verdict is Verdict.GRANTED:
        return None
    if verdict is Verdict.BUSY:
        response = _message(429, "error", "too many authentication attempts at once; retry")
        response.headers["Retry-After"] = "1"
        return response
    return JSONResponse(
        {"status": "error", "message": "authentication required"},
        status_code=401,
        headers={"WWW-Authenticate": authenticator.challenge},
    )


def set_guard(app: Starlette, policy: GuardPolicy) -> None:
    """Apply a new Host / Origin / proxy policy (the listener, a reload's web config) at once."""
    holder: GuardHolder = app.state.guard
    holder.policy = policy


def set_auth(app: Starlette, authenticator: Authenticator | None) -> None:
    """Apply new credentials (a reload's web config) to a running app at once."""
    holder: _AuthHolder = app.state.auth
    holder.authenticator = authenticator


# --------------------------------------------------------------------------- routes


@dataclass(frozen=True, slots=True)
class _Endpoints:
    """The route handlers, closed over the book, its rendered bodies and the daemon's controls."""

    book: ResultBook
    metrics_cache: MetricsCache
    status_cache: StatusCache
    reload_callback: ReloadCallback | None
    control: Control | None

    def _schedules(self) -> Mapping[str, Schedule]:
        return self.control.schedules() if self.control is not None else {}

    async def landing(self, request: Request) -> Response:
        schedules = self._schedules()
        body = await anyio.to_thread.run_sync(_page_body, self.book, schedules)
        return HTMLResponse(body)

    async def probe_page(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.book.snapshot().probes:
            return _message(404, "error", _no_probe(name, self.book.snapshot().probes))
        schedules = self._schedules()
        body = await anyio.to_thread.run_sync(_probe_page_body, self.book, schedules, name)
        return HTMLResponse(body)

    async def metrics(self, request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        gzip = wants_gzip(request.headers.get("accept-encoding", ""))
        body = await anyio.to_thread.run_sync(
            lambda: self.metrics_cache.render(encoder, content_type, gzip=gzip)
        )
        return _body(body, content_type, gzip=gzip)

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("OK\n")

    async def readyz(self, request: Request) -> Response:
        # Ready = up with its config loaded; a failing probe must stay scraped (docs/endpoints.md).
        if self.book.ready():
            return JSONResponse({"status": "ready"})
        reason = "the configuration is not loaded yet"
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)

    async def status(self, request: Request) -> Response:
        params = request.query_params
        queries = _flag(params.get("queries", "true"))
        if queries is None:
            return _message(400, "error", "/api/status: queries must be true or false")
        names = params.getlist("probe") or None
        if names is not None:
            known = self.book.snapshot().probes
            unknown = [n for n in names if n not in known]
            if unknown:
                return _message(404, "error", _no_probe(unknown[0], known))
        schedules = self._schedules()
        gzip = wants_gzip(request.headers.get("accept-encoding", ""))

        def render() -> bytes:
            zipped = self.status_cache.render(schedules, names, queries=queries)
            return zipped.gzip() if gzip else zipped.body

        body = await anyio.to_thread.run_sync(render)
        return _body(body, "application/json", gzip=gzip)

    async def run_probe(self, request: Request) -> Response:
        if self.control is None:
            return _message(501, "error", "cycles on demand are not available in this mode")
        name = request.path_params["name"]
        outcome = self.control.run_now(name)
        if outcome is None:
            return _message(404, "error", _no_probe(name, self.book.snapshot().probes))
        return _trigger_response(name, outcome)

    async def reload(self, request: Request) -> Response:
        callback = self.control.reload if self.control is not None else self.reload_callback
        if callback is None:
            return _message(501, "error", "reload is not available in this mode")
        try:
            ok = await callback()
        except BenchdError as exc:
            return _message(500, "error", f"reload failed: {exc}")
        if not ok:
            error = self.book.snapshot().reload_error or "see the log"
            return _message(
                500, "error", f"reload failed; the previous configuration stays active: {error}"
            )
        return _message(200, "success", "configuration reloaded")


def _trigger_response(name: str, outcome: TriggerOutcome) -> Response:
    if isinstance(outcome, Started):
        body = {"status": "started", "probe": name, "cycle": outcome.cycle}
        return JSONResponse(body, status_code=202)
    if isinstance(outcome, Busy):
        return _message(409, "error", f"probe {name!r}: a cycle is already running")
    assert isinstance(outcome, OverBudget)
    wait = max(1, math.ceil(outcome.retry_after_s))
    response = _message(
        429,
        "error",
        f"probe {name!r}: the store key's read budget cannot take another cycle "
        f"for {wait} s (the last cycle's reads are still in it)",
    )
    response.headers["Retry-After"] = str(wait)
    return response


def _flag(value: str) -> bool | None:
    return {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
        value.strip().lower()
    )


def _no_probe(name: str, known: Iterable[str]) -> str:
    return f"no probe named {name!r} (probes: {', '.join(known) or 'none'})"


def _page_body(book: ResultBook, schedules: Mapping[str, Schedule]) -> str:
    return render_page(status_document(book, schedules, queries=False))


def _probe_page_body(book: ResultBook, schedules: Mapping[str, Schedule], name: str) -> str:
    return render_probe_page(status_document(book, schedules, probes=[name]), name)


def _body(body: bytes, content_type: str, *, gzip: bool) -> Response:
    """A rendered body, gzipped already when ``gzip`` (the middleware then passes it on; it
    adds ``Vary`` to a plain one)."""
    headers = {"Content-Type": content_type}
    if gzip:
        headers |= {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
    return Response(body, headers=headers)


def _message(status_code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse({"status": status, "message": text(message)}, status_code=status_code)


def build_app(
    book: ResultBook,
    *,
    reload: ReloadCallback | None = None,
    control: Control | None = None,
    auth: Authenticator | WebAuth | None = None,
    extra_collectors: Iterable[Collector] = (),
    policy: GuardPolicy | None = None,
) -> Starlette:
    """benchd's ASGI app over ``book``; ``extra_collectors`` join ``/metrics``.

    ``control`` (the daemon) serves reloads, cycles on demand and schedules;
    ``reload`` alone serves only ``POST /-/reload``.
    """
    guard = GuardHolder(policy or GuardPolicy())
    extra = (*extra_collectors, RefusedCollector(guard))
    metrics = MetricsCache(book, process_registry(extra))
    endpoints = _Endpoints(book, metrics, StatusCache(book), reload, control)
    routes = [
        Route("/", endpoints.landing, methods=["GET"]),
        Route("/probe/{name}", endpoints.probe_page, methods=["GET"]),
        Route("/metrics", endpoints.metrics, methods=["GET"]),
        Route("/healthz", endpoints.healthz, methods=["GET"]),
        Route("/readyz", endpoints.readyz, methods=["GET"]),
        Route("/api/status", endpoints.status, methods=["GET"]),
        Route("/api/probes/{name}/run", endpoints.run_probe, methods=["POST"]),
        Route("/-/reload", endpoints.reload, methods=["POST"]),
    ]
    if isinstance(auth, WebAuth):
        auth = Authenticator(auth)
    holder = _AuthHolder(auth)
    middleware = [
        Middleware(RequestGuard, holder=guard),  # Host, Origin, forwarded: before credentials
        Middleware(GZipMiddleware, minimum_size=1024),
        Middleware(_AuthGate, holder=holder),
    ]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.auth = holder
    app.state.guard = guard
    return app
