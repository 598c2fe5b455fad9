"""ASGI middleware in front of every route: request id, auth, rate limits, faults.

Order per request: tag the response with ``x-request-id`` (echoed or made
up); ``/health`` passes; an IP locked out by the ``auth_lockout`` fault gets
429 without ``Retry-After``; a missing or wrong ``x-api-key`` gets 401;
``/admin`` passes (a drill must be able to lift a fault it set); then the
per-key rate limit (429 + ``Retry-After``) and the active fault plan.
Written as plain ASGI, not ``BaseHTTPMiddleware``, to keep the hot path short.
"""

from __future__ import annotations

import hmac
import json
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio

from benchd.refstore.faults import FaultInjector
from benchd.refstore.ratelimit import RateLimiter, request_class

__all__ = ["Guard", "GuardState", "route_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_SLOW_BODY_CHUNKS = 10
_MAX_REQUEST_ID = 128


@dataclass(slots=True)
class GuardState:
    """What the guard consults; ``injector`` is swapped by the admin endpoint."""

    api_key: str
    limiter: RateLimiter
    injector: FaultInjector


def route_of(method: str, path: str) -> str:
    """The fault scope of a request: search, import, export, delete or other."""
    if path == "/memory/search":
        return "search"
    if path == "/export/import":
        return "import"
    if path == "/export":
        return "export"
    if method == "DELETE" and path.startswith("/memory/"):
        return "delete"
    return "other"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _send_json(
    send: Send,
    status: int,
    payload: dict[str, Any],
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(payload).encode()
    start_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body})


def _request_id(given: str | None) -> str:
    """Echo a caller's id when it is short printable ASCII, else make one up."""
    if given and len(given) <= _MAX_REQUEST_ID and given.isascii() and given.isprintable():
        return given
    return uuid.uuid4().hex


def _with_request_id(send: Send, request_id: str) -> Send:
    async def tagged(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [
                *message.get("headers", []),
                (b"x-request-id", request_id.encode()),
            ]
        await send(message)

    return tagged


def _mangled(send: Send, malformed: bool, slow_s: float) -> Send:
    """Buffer the response, then cut it in half (2xx only) and/or dribble it out."""
    start: Message = {}
    chunks: list[bytes] = []

    async def mangle(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(chunks)
        if malformed and 200 <= start["status"] < 300:
            body = body[: len(body) // 2]
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await _send_body(send, body, slow_s)

    return mangle


async def _send_body(send: Send, body: bytes, slow_s: float) -> None:
    if slow_s <= 0 or len(body) < 2:
        await send({"type": "http.response.body", "body": body})
        return
    step = max(1, -(-len(body) // _SLOW_BODY_CHUNKS))
    pieces = [body[i : i + step] for i in range(0, len(body), step)]
    for number, piece in enumerate(pieces, start=1):
        last = number == len(pieces)
        await send({"type": "http.response.body", "body": piece, "more_body": not last})
        if not last:
            await anyio.sleep(slow_s / len(pieces))


class Guard:
    """The middleware; see the module docstring for the order of checks."""

    def __init__(self, app: ASGIApp, state: GuardState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_request_id(send, _request_id(_header(scope, b"x-request-id")))
        path: str = scope["path"]
        if path == "/health":
            await self.app(scope, receive, send)
            return
        key = _header(scope, b"x-api-key") or ""
        client = str((scope.get("client") or ("unknown", 0))[0])
        admin = path.startswith("/admin/")
        if not admin and self.state.injector.locked_out(client):
            await _send_json(send, 429, {"error": "Too many failed attempts. Try again later."})
            return
        if not hmac.compare_digest(key.encode(), self.state.api_key.encode()):
            self.state.injector.auth_failed(client)
            await _send_json(send, 401, {"error": "Unauthorized: invalid or missing x-api-key"})
            return
        if admin:
            await self.app(scope, receive, send)
            return
        await self._guarded(scope, receive, send, key)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, key: str) -> None:
        method: str = scope["method"]
        kind = request_class(method)
        retry_after = self.state.limiter.check(key, kind)
        if retry_after is not None:
            limit = self.state.limiter.limits[kind]
            message = f"Rate limit exceeded for {kind} requests. Try again in {retry_after}s."
            body = {"error": message, "limit": limit, "window_seconds": 60}
            await _send_json(send, 429, body, [(b"retry-after", str(retry_after).encode())])
            return
        route = route_of(method, scope["path"])
        faults = self.state.injector
        if faults.roll("rate_limit", route):
            body = {"error": "Rate limit exceeded (injected fault). Try again in 1s."}
            await _send_json(send, 429, body, [(b"retry-after", b"1")])
            return
        wait = faults.delay(route)
        if wait > 0:
            await anyio.sleep(wait)
        if faults.roll("error_rate", route):
            await _send_json(send, 500, {"error": "Internal server error (injected fault)"})
            return
        if route == "search" and faults.roll("degraded", route):
            body = {
                "error": "Vector search unavailable (injected fault)",
                "retrieval": {"degraded": True},
            }
            await _send_json(send, 503, body)
            return
        malformed, slow_s = faults.roll("malformed", route), faults.slow_body(route)
        if malformed or slow_s > 0:
            send = _mangled(send, malformed, slow_s)
        await self.app(scope, receive, send)
