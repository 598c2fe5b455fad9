"""The reference store's HTTP routes (Starlette), speaking the target API's contract.

Every error is ``{"error": "..."}`` with a 4xx/5xx status; bad input is a
400 naming the parameter, never a 500. Route handlers only parse and shape:
the behaviour lives in :class:`benchd.refstore.store.RefStore`.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from benchd.embed.models import EmbedderError, EmbedderSpecError
from benchd.logging import get_logger
from benchd.refstore.faults import FaultInjector, FaultPlan, FaultSpecError, parse_faults
from benchd.refstore.guard import Guard, GuardState
from benchd.refstore.records import parse_timestamp
from benchd.refstore.retrievers import RETRIEVERS
from benchd.refstore.shapes import FORMATS
from benchd.refstore.store import ExportQuery, RefStore, SearchQuery
from benchd.refstore.structured import StructuredQuery, table_of

__all__ = ["BadRequest", "build_app"]

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_QUERY_CHARS = 2000
MAX_IMPORT = 500
_MIN_YEAR, _MAX_YEAR = 1000, 9000
_ADMIN_KEYS = frozenset({"faults", "embedder", "query_embedder", "retriever", "clock", "pin"})
_log = get_logger("benchd.refstore")


class BadRequest(Exception):
    """A request the store refuses; becomes ``{"error": message}`` with ``status``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _param(request: Request, name: str, max_chars: int = 256) -> str | None:
    value = request.query_params.get(name)
    if value is not None and len(value) > max_chars:
        raise BadRequest(f"query parameter {name} exceeds {max_chars} characters")
    return value or None


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise BadRequest(f"query parameter {name} must be an integer, got '{raw[:40]}'") from exc
    if value < low:
        raise BadRequest(f"query parameter {name} must be >= {low}")
    return min(value, high)


def _bool_param(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise BadRequest(f"query parameter {name} must be true or false")


def _time_param(request: Request, name: str) -> datetime | None:
    raw = _param(request, name, 64)
    if raw is None:
        return None
    try:
        moment = parse_timestamp(raw)
    except ValueError as exc:
        raise BadRequest(
            f"query parameter {name} must be an ISO 8601 date, e.g. 2026-05-01"
        ) from exc
    if not _MIN_YEAR <= moment.year <= _MAX_YEAR:
        # Date arithmetic near datetime's limits would overflow.
        raise BadRequest(f"query parameter {name} must be a year in {_MIN_YEAR}..{_MAX_YEAR}")
    return moment


def _no_constants(name: str) -> Any:
    """Refuse NaN and Infinity: valid for Python's parser, not JSON, and unanswerable."""
    raise ValueError(f"{name} is not valid JSON")


async def _json_body(request: Request) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadRequest(f"request body exceeds {MAX_BODY_BYTES} bytes", 413)
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"request body exceeds {MAX_BODY_BYTES} bytes", 413)
    try:
        return json.loads(body, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from exc


def _search_query(request: Request) -> SearchQuery:
    q = request.query_params.get("q")
    if not q or not q.strip():
        raise BadRequest("Missing required query parameter: q")
    if len(q) > MAX_QUERY_CHARS:
        raise BadRequest(f"query parameter q exceeds {MAX_QUERY_CHARS} characters")
    fmt = _param(request, "format") or "default"
    if fmt not in FORMATS:
        raise BadRequest(f"query parameter format must be one of {', '.join(FORMATS)}")
    read_only = _bool_param(request, "read_only", False)
    track = _bool_param(request, "track_access", True)
    date_from, date_to = _time_param(request, "date_from"), _time_param(request, "date_to")
    return SearchQuery(
        q=q,
        limit=_int_param(request, "limit", 10, 1, 100),
        client_id=_param(request, "client_id"),
        type=_param(request, "type"),
        format=fmt,
        track_access=track and not read_only,
        reference=_time_param(request, "reference_date") or _time_param(request, "at_time"),
        date_from=date_from.timestamp() if date_from else None,
        date_to=date_to.timestamp() if date_to else None,
    )


def _export_query(request: Request) -> ExportQuery:
    since = _time_param(request, "since")
    return ExportQuery(
        since_ts=since.timestamp() if since else None,
        client_id=_param(request, "client_id"),
        type=_param(request, "type"),
        limit=_int_param(request, "limit", 1000, 1, 5000),
        offset=_int_param(request, "offset", 0, 0, 1 << 31),
        active_only=_bool_param(request, "active_only", True),
    )


def _approved(request: Request, body: dict[str, Any]) -> bool:
    return (
        body.get("operator_approved") is True
        or request.query_params.get("operator_approved") == "true"
    )


class Routes:
    """Route handlers bound to one store and its guard state."""

    def __init__(self, store: RefStore, guard: GuardState) -> None:
        self.store = store
        self.guard = guard

    async def health(self, request: Request) -> Response:
        body = self.store.health()
        if self.store.profile.health_model:
            body["faults"] = list(self.guard.injector.plan.specs)
        return JSONResponse(body)

    async def search(self, request: Request) -> Response:
        body = await self.store.search(_search_query(request))
        self.guard.injector.swap_ranks(body["results"])
        return JSONResponse(body)

    async def get_one(self, request: Request) -> Response:
        if not self.store.profile.get_by_id:  # the real server has no such route
            return _cannot_get(request)
        memory_id = str(request.path_params["memory_id"])
        found = self.store.get(memory_id, _param(request, "client_id"))
        if found is None:
            return _error(404, "Memory not found")
        return JSONResponse(found)

    async def query(self, request: Request) -> Response:
        if not self.store.profile.structured:
            raise BadRequest(
                "Structured queries require a database backend "
                "(the reference store keeps one in its zengram-4.3 profile)"
            )
        table = table_of(_param(request, "type"))
        if table is None:
            raise BadRequest("query parameter type must be fact or status on the reference store")
        match = _param(request, "key" if table == "facts" else "subject")
        found = StructuredQuery(
            table=table,
            client_id=_param(request, "client_id"),
            match=match,
            limit=_int_param(request, "limit", 50, 1, 500),
        )
        return JSONResponse(self.store.query(found))

    async def export(self, request: Request) -> Response:
        return JSONResponse(self.store.export(_export_query(request)))

    async def import_(self, request: Request) -> Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise BadRequest('Request body must be a JSON object with a "data" array')
        if not _approved(request, body):
            raise BadRequest("operator_approved=true is required for import restores", 403)
        data = body.get("data")
        if not isinstance(data, list):
            raise BadRequest('Request body must contain a "data" array of memory objects')
        if len(data) > MAX_IMPORT:
            raise BadRequest(
                f"Import limited to {MAX_IMPORT} records per request (received {len(data)})"
            )
        return JSONResponse(await self.store.import_records(data))

    async def delete(self, request: Request) -> Response:
        memory_id = str(request.path_params["memory_id"])
        reply = self.store.delete(memory_id)
        if reply is None:
            return _error(404, "Memory not found")
        return JSONResponse(reply)

    def _admin_view(self, reembedded: int | None = None) -> dict[str, Any]:
        view: dict[str, Any] = {
            "faults": list(self.guard.injector.plan.specs),
            "model": self.store.embedder.spec,
            "query_model": self.store.query_model,
            "retriever": self.store.retriever,
            "profile": self.store.profile.name,
            "clock": self.store.clock.iso_now() if self.store.clock.shifted else None,
            "pin": list(self.store.pinned),
        }
        if reembedded is not None:
            view["reembedded"] = reembedded
        return view

    async def admin_get(self, request: Request) -> Response:
        return JSONResponse(self._admin_view())

    async def admin_post(self, request: Request) -> Response:
        body = await _json_body(request)
        if not isinstance(body, dict) or not set(body) <= _ADMIN_KEYS:
            raise BadRequest(f"admin body must be an object with keys among {sorted(_ADMIN_KEYS)}")
        plan = _admin_faults(body)
        clock = _admin_clock(body)
        retriever = body.get("retriever")
        if retriever is not None and retriever not in RETRIEVERS:
            raise BadRequest(f"retriever must be one of {', '.join(RETRIEVERS)}")
        for key in ("embedder", "query_embedder"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise BadRequest(f"{key} must be a spec string such as hash:1024")
        if body.get("embedder") is not None and body.get("query_embedder") is not None:
            raise BadRequest(
                "give embedder (re-embed everything) or query_embedder (searches only), not both"
            )
        pin = body.get("pin")
        if pin is not None and (
            not isinstance(pin, list) or not all(isinstance(i, str) for i in pin)
        ):
            raise BadRequest("pin must be a list of memory ids (empty list clears)")
        reembedded = None
        if body.get("embedder") is not None:
            reembedded = await self.store.switch_embedder(body["embedder"])
        if body.get("query_embedder") is not None:
            await self.store.switch_query_embedder(body["query_embedder"])
        if retriever is not None:
            self.store.retriever = retriever
        if plan is not None:
            self.guard.injector = FaultInjector(plan)
        if "clock" in body:
            self.store.clock.set(clock)
        if pin is not None:
            self.store.pinned = tuple(pin)
        view = self._admin_view(reembedded)
        _log.info("refstore reconfigured", **view)
        return JSONResponse(view)


def _cannot_get(request: Request) -> Response:
    """Express's answer to a route it does not have: 404 with a small HTML page."""
    path = html.escape(request.url.path)
    body = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Error</title>\n</head>\n<body>\n<pre>Cannot GET {path}</pre>\n"
        "</body>\n</html>\n"
    )
    return HTMLResponse(body, status_code=404)


def _admin_clock(body: dict[str, Any]) -> datetime | None:
    """``clock``: an ISO 8601 time the store's clock jumps to, or null for system time."""
    raw = body.get("clock")
    if raw is None:
        return None
    try:
        moment = parse_timestamp(raw) if isinstance(raw, str) else None
    except ValueError:
        moment = None
    if moment is None or not _MIN_YEAR <= moment.year <= _MAX_YEAR:
        raise BadRequest("clock must be an ISO 8601 time such as 2026-07-01T00:00:00Z, or null")
    return moment


def _admin_faults(body: dict[str, Any]) -> FaultPlan | None:
    faults = body.get("faults")
    if faults is None:
        return None
    if not isinstance(faults, list) or not all(isinstance(f, str) for f in faults):
        raise BadRequest("faults must be a list of fault spec strings (empty list clears)")
    return parse_faults(faults)


async def _bad_request(request: Request, exc: Exception) -> Response:
    if isinstance(exc, BadRequest):
        return _error(exc.status, exc.message)
    return await _translated(request, exc)


async def _translated(request: Request, exc: Exception) -> Response:
    if isinstance(exc, FaultSpecError | EmbedderSpecError):
        return _error(400, str(exc))
    if isinstance(exc, EmbedderError):
        return _error(503, f"embedder unavailable: {exc}")
    if isinstance(exc, HTTPException):
        return _error(exc.status_code, str(exc.detail))
    _log.error("refstore internal error", error=f"{type(exc).__name__}: {exc}")
    return _error(500, "Internal server error")


def build_app(store: RefStore, guard: GuardState) -> Guard:
    """The ASGI app: Starlette routes wrapped in the :class:`Guard` middleware."""
    routes = Routes(store, guard)
    app = Starlette(
        routes=[
            Route("/health", routes.health, methods=["GET"]),
            Route("/memory/search", routes.search, methods=["GET"]),
            Route("/memory/query", routes.query, methods=["GET"]),
            Route("/memory/{memory_id:path}", routes.get_one, methods=["GET"]),
            Route("/memory/{memory_id:path}", routes.delete, methods=["DELETE"]),
            Route("/export", routes.export, methods=["GET"]),
            Route("/export/import", routes.import_, methods=["POST"]),
            Route("/admin/config", routes.admin_get, methods=["GET"]),
            Route("/admin/config", routes.admin_post, methods=["POST"]),
        ],
        exception_handlers={
            BadRequest: _bad_request,
            HTTPException: _translated,
            FaultSpecError: _translated,
            EmbedderSpecError: _translated,
            EmbedderError: _translated,
            Exception: _translated,
        },
    )
    return Guard(app, guard)
