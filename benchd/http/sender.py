"""The load engine's HTTP sender: adapters build requests and parse bodies, the engine sends.

Adapters stay sans-I/O: they describe a search as an :class:`httpx.Request`
(``build``) and turn ``(status, headers, body)`` into ranked ids (``parse``).
:func:`make_http_fire` owns the connections: each request is serialized once
per query index, then written on a pooled keep-alive HTTP/1.1 connection
whose answer is parsed by httptools (llhttp, the C parser uvicorn uses).

Why not a general client here: on loopback against nginx, httpx's shared pool
reached 0.5–0.9k req/s and a client per worker ~2.1k, and aiohttp through the
engine 0.73x Locust FastHttpUser's req/s; this sender reaches 1.9–2.3x. With
JSON parsing it costs ~45 µs of CPU per request where aiohttp costs ~100
(docs/load.md). It does one thing only — replay prepared GET/POST requests:
no HEAD, redirects, cookies or proxies — and runs on asyncio, benchd's event
loop. httpx stays the request-building API.

Failures are translated with the adapters' error map
(:func:`benchd.http.client.status_error`: one map, one ``Retry-After``
parser); what only a raw sender meets is mapped here::

    connection refused / reset / DNS / TLS   -> TargetUnreachable   (kind "connect")
    no answer within timeout_s               -> TargetTimeout       (kind "timeout")
    malformed HTTP, or parse() rejects body  -> TargetProtocolError (kind "decode")
    declared or read body past the cap       -> TargetProtocolError (kind "decode")
    body past the cap once decoded, corrupt  -> TargetProtocolError (kind "decode")
    head past MAX_HEAD_BYTES / MAX_HEADERS   -> TargetProtocolError (kind "decode")

Every bound holds while the answer is read: the head is counted as its bytes
arrive, the body is inflated piece by piece as it arrives
(:class:`~benchd.http.answers.Inflater`), so neither memory nor the event
loop's time grows with what a store sends beyond the caps.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import httptools
import httpx

from benchd.errors import TargetError, TargetProtocolError, TargetTimeout, TargetUnreachable
from benchd.hooks import Fire
from benchd.http.answers import (
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    Body,
    BodyBuffer,
    DecodeError,
    Inflater,
)
from benchd.http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    NO_CONTEXT,
    Answer,
    ErrorContext,
    status_error,
    too_large,
)
from benchd.store.target import SearchQuery

__all__ = [
    "Answer",
    "Build",
    "HttpSearch",
    "Parse",
    "PoolSender",
    "RequestSpec",
    "make_http_fire",
    "search_fire",
]

Build = Callable[[int], httpx.Request]
"""Query index -> the search request (a pure function of the index: it is cached)."""

Parse = Callable[
    [int, int, Mapping[str, str], Body], tuple[str, ...] | Awaitable[tuple[str, ...]]
]
"""(query index, status, headers with lower-case names, body) -> ranked ids (or a coroutine).

A body past 512 KiB is a :class:`~benchd.http.answers.Spill` (a temporary
file); a parser that wants bytes reads ``Path(body.path).read_bytes()``, and
:func:`benchd.http.answers.decode` takes either.

Only 2xx answers reach it. Raise ValueError (or KeyError, TypeError,
IndexError) on a body that breaks the contract; it becomes a
TargetProtocolError."""


@runtime_checkable
class HttpSearch(Protocol):
    """The sans-I/O halves of an HTTP target's ``search``, for :func:`search_fire`.

    The target decides what a request looks like and what an answer means;
    the sender owns the connections.
    """

    def build_search_request(self, query: SearchQuery) -> httpx.Request: ...

    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ...
    ) -> tuple[str, ...]: ...

# The sender asks for identity bodies; it still inflates gzip/deflate if sent (bounded).
_DROPPED_HEADERS = frozenset({b"accept-encoding", b"connection"})
_CONNECTION_ONLY = frozenset({b"connection"})


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """An HTTP/1.1 request serialized once from an :class:`httpx.Request`."""

    origin: tuple[str, str, int]  # (scheme, host, port)
    method: str
    wire: bytes  # request line, headers and body, ready to write
    where: str  # "METHOD scheme://host:port/path", safe for messages (no query string)

    @classmethod
    def from_httpx(cls, request: httpx.Request, *, encoded: bool = False) -> RequestSpec:
        """Serialize a built httpx request (its body must not be a stream).

        ``encoded``: keep the request's ``Accept-Encoding`` (the adapters ask for
        gzip/deflate, which :class:`Inflater` undoes within the caps); the load
        pass asks for identity bodies.
        """
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if url.scheme not in ("http", "https"):
            raise TargetUnreachable(f"{url.scheme}://{url.host}: only http and https are supported")
        body = request.read()
        dropped = _CONNECTION_ONLY if encoded else _DROPPED_HEADERS
        lines = [b"%s %s HTTP/1.1" % (request.method.encode(), url.raw_path)]
        lines += [b"%s: %s" % kv for kv in request.headers.raw if kv[0].lower() not in dropped]
        wire = b"\r\n".join(lines) + b"\r\n\r\n" + body
        where = f"{request.method} {url.scheme}://{url.host}:{port}{url.path}"
        return cls((url.scheme, url.host, port), request.method, wire, where)


class _TooLarge(Exception):
    """An answer bigger than the cap; the connection is dropped at once."""


class _BadHead(Exception):
    """A status line and headers past the bounds; the connection is dropped at once."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._size = 0
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._headers: dict[str, str] = {}
        self._lines: dict[str, list[str]] = {}  # repeated header lines, joined once at the end
        self._head_bytes = self._header_count = 0
        self._inflater: Inflater | None = None
        self._body = BodyBuffer()
        self._headers_done = False
        self.received = False  # any byte of the current answer arrived
        self.open = True
        self.idle_since = 0.0  # time.monotonic() when it last went back to the pool

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._headers_done and self._delimited_by_close():
            self._complete()
        self._fail(ConnectionError("the store closed the connection before answering"))
        self._body.discard()  # never keep a dead connection's buffers alive

    def _delimited_by_close(self) -> bool:
        chunked = "chunked" in self._headers.get("transfer-encoding", "").lower()
        return "content-length" not in self._headers and not chunked

    def data_received(self, data: bytes) -> None:
        self.received = True
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._refuse(exc)
            return
        # httptools holds a header's partial value itself: bound what the head has cost,
        # at most one read (256 KiB) past the cap
        if self.open and not self._headers_done and self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(_BadHead(f"its head runs past {MAX_HEAD_BYTES} bytes"))

    def _refuse(self, exc: Exception) -> None:
        self._fail(exc)
        self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.open:
            return
        key = name.decode("latin-1").lower()
        lines = self._lines.setdefault(key, [])
        lines.append(value.decode("latin-1"))
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            self._refuse(_BadHead(f"more than {MAX_HEADERS} header lines"))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if not self.open:
            return
        self._headers = {k: ", ".join(v) for k, v in self._lines.items()}
        try:
            self._inflater = Inflater(self._headers.get("content-encoding"), self._max_bytes)
        except DecodeError as exc:
            self._refuse(exc)
            return
        declared = self._headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self._max_bytes:  # refused before reading
            self._fail(_TooLarge(f"{declared} bytes (declared)"))
            self.close()

    def on_body(self, body: bytes) -> None:
        if not self.open:  # refused or failed: keep nothing more
            return
        self._size += len(body)
        if self._size > self._max_bytes:
            self._refuse(_TooLarge(f"more than {self._max_bytes} bytes"))
            return
        inflater = self._inflater
        if inflater is None or inflater.identity:
            self._body.add(body)
            return
        try:
            for piece in inflater.feed(body):
                self._body.add(piece)
        except DecodeError as exc:
            self._refuse(exc)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:  # 1xx: the real answer follows
            self._body.discard()
            self._reset()
            return
        if not self._parser.should_keep_alive():
            self.close()
        self._complete()

    def _reset(self) -> None:
        self._headers, self._lines, self._body, self._headers_done = {}, {}, BodyBuffer(), False
        self._head_bytes = self._header_count = self._size = 0
        self._inflater = None

    def _complete(self) -> None:
        if not self.open and self._waiter is None:
            return
        if self._inflater is not None:
            try:
                self._inflater.finish()
            except DecodeError as exc:
                self._refuse(exc)
                return
            if not self._inflater.identity:  # the body is decoded: say so
                self._headers.pop("content-encoding", None)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            status = self._parser.get_status_code()
            waiter.set_result(Answer(status, self._headers, self._body.take()))
        self._body.discard()

    def _fail(self, exc: BaseException) -> None:
        self._body.discard()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.open = False
        if self._transport is not None:
            self._transport.close()

    async def exchange(self, wire: bytes, timeout_s: float) -> Answer:
        """Write one request and wait for its whole answer."""
        assert self._transport is not None and self._waiter is None
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Answer] = loop.create_future()
        self._waiter = waiter
        self._body.discard()
        self._reset()
        self.received = False
        timer = loop.call_later(timeout_s, self._fail, TimeoutError())
        self._transport.write(wire)
        try:
            return await waiter
        finally:
            timer.cancel()


class _Pool:
    """Idle keep-alive connections to one origin; at most ``limit`` kept.

    ``idle_s``: a connection idle longer is closed, not reused (None: kept
    while the store keeps it). Between two cycles a connection may sit idle
    for the probe's interval, and a load balancer or NAT that forgets it
    silently would make the next request wait for its whole timeout.
    """

    def __init__(
        self,
        origin: tuple[str, str, int],
        limit: int,
        context: ssl.SSLContext | None,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        idle_s: float | None = None,
    ) -> None:
        scheme, self.host, self.port = origin
        self.max_bytes = max_bytes
        # Only https needs a context; building one costs ~0.15 s of CPU on the loop.
        self.ssl = (context or ssl.create_default_context()) if scheme == "https" else None
        self.limit = limit
        self.idle_s = idle_s
        self.idle: deque[_Connection] = deque()

    async def _connect(self, timeout_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            _, conn = await loop.create_connection(
                lambda: _Connection(self.max_bytes), self.host, self.port, ssl=self.ssl
            )
        return conn

    async def send(self, spec: RequestSpec, timeout_s: float) -> Answer:
        """Send on an idle connection (or a new one); retry a stale idle one once."""
        while self.idle:
            conn = self.idle.pop()
            if self.idle_s is not None and time.monotonic() - conn.idle_since > self.idle_s:
                conn.close()
                self.close()  # the others went idle before it
                break
            if conn.open:
                try:
                    return await self._exchange(conn, spec, timeout_s)
                except ConnectionError:
                    # Closed by the store while idle; safe to resend if nothing came back.
                    if conn.received or spec.method not in ("GET", "HEAD"):
                        raise
                break
        return await self._exchange(await self._connect(timeout_s), spec, timeout_s)

    async def _exchange(self, conn: _Connection, spec: RequestSpec, timeout_s: float) -> Answer:
        try:
            answer = await conn.exchange(spec.wire, timeout_s)
        except BaseException:
            conn.close()  # its state is unknown: never reuse it
            raise
        if conn.open and len(self.idle) < self.limit:
            conn.idle_since = time.monotonic()
            self.idle.append(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()


async def _send(pool: _Pool, spec: RequestSpec, timeout_s: float, where: str = "") -> Answer:
    """Send one request; return its answer or raise a benchd error naming ``where``."""
    where = where or spec.where
    try:
        return await pool.send(spec, timeout_s)
    except TimeoutError:
        raise TargetTimeout(f"{where}: no answer within {timeout_s:g} s") from None
    except httptools.HttpParserError as exc:
        raise TargetProtocolError(f"{where}: malformed HTTP response ({exc})") from None
    except _TooLarge as exc:
        raise too_large(where, str(exc), pool.max_bytes) from None
    except DecodeError as exc:
        if exc.too_large:
            raise too_large(where, str(exc), pool.max_bytes) from None
        raise TargetProtocolError(f"{where}: {exc}") from None
    except _BadHead as exc:
        raise TargetProtocolError(f"{where}: refused an answer: {exc}") from None
    except ssl.SSLError as exc:
        raise TargetUnreachable(f"{where}: TLS failed ({exc.reason})") from None
    except OSError as exc:  # ConnectionError, refused, DNS (socket.gaierror)
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise TargetUnreachable(
            f"{where}: cannot connect ({reason}); is the store running and is the url right?"
        ) from None


async def _interpret(
    parse: Parse, spec: RequestSpec, query: int, answer: Answer, errors: ErrorContext
) -> tuple[str, ...]:
    status, headers, body = answer
    error = status_error(status, headers, body, spec.where, errors)
    if error is not None:
        raise error
    try:
        ranked = parse(query, status, headers, body)
        return await ranked if inspect.isawaitable(ranked) else ranked
    except TargetError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise TargetProtocolError(f"{spec.where}: unexpected response body ({exc})") from exc


@asynccontextmanager
async def make_http_fire(
    build: Build,
    parse: Parse,
    *,
    concurrency: int,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    errors: ErrorContext = NO_CONTEXT,
) -> AsyncIterator[Fire]:
    """Yield a :data:`~benchd.hooks.Fire` sending ``build(i)`` and returning ``parse(...)``.

    Up to ``concurrency`` keep-alive connections per origin are kept; all are
    closed when the block exits. ``timeout_s`` bounds connecting and, again,
    waiting for the answer. Requests are built once per query index and
    replayed, so ``build`` must depend on the index only. A non-2xx status
    raises (one error map) before ``parse`` is called; redirects are never
    followed. A body declared or read past ``max_response_bytes`` (also once
    inflated) is a decode error and its connection is dropped. ``errors`` is
    what a store error names besides its words (the key's source, the API).
    Asyncio only.
    """
    specs: dict[int, RequestSpec] = {}
    pools: dict[tuple[str, str, int], _Pool] = {}
    context = ssl_context

    async def fire(query: int) -> tuple[str, ...]:
        spec = specs.get(query)
        if spec is None:
            spec = specs[query] = RequestSpec.from_httpx(build(query))
        pool = pools.get(spec.origin)
        if pool is None:
            pool = pools[spec.origin] = _Pool(spec.origin, concurrency, context, max_response_bytes)
        answer = await _send(pool, spec, timeout_s)
        return await _interpret(parse, spec, query, answer, errors)

    try:
        yield fire
    finally:
        for pool in pools.values():
            pool.close()


class PoolSender:
    """The adapters' request path: one exchange at a time over the load pass's own pool.

    :class:`~benchd.http.client.RetryingClient` sends each attempt through
    it (retries, deadlines and the error map stay the client's), so a serial
    search costs what a load-pass request costs: ``bench/serial_cpu.py``
    measured 1.5 ms of CPU per serial search through httpx's client and pool
    (URL merging, httpcore's pool and events, anyio's socket wrapper,
    cookies), 0.22 ms through this, 0.16-0.23 ms in the load pass. Every bound
    of the load pass holds (head, size, decoded size, timeout); the request's
    ``Accept-Encoding`` is kept. HTTPS uses the certificates httpx would
    (:func:`httpx.create_ssl_context`). Idle keep-alive connections are kept
    per origin, at most ``keep``, and reused while idle for at most
    ``idle_s`` (httpx's defaults: 20, 5 s); none is shared by two requests
    at once.
    """

    def __init__(self, *, max_response_bytes: int, keep: int = 20, idle_s: float = 5.0) -> None:
        self._max_bytes = max_response_bytes
        self._keep = keep
        self._idle_s = idle_s
        self._pools: dict[tuple[str, str, int], _Pool] = {}

    @staticmethod
    def prepare(request: httpx.Request) -> RequestSpec:
        """``request`` serialized once (it may be sent many times), ``Accept-Encoding`` kept."""
        return RequestSpec.from_httpx(request, encoded=True)

    async def send(self, spec: RequestSpec, where: str, timeout_s: float) -> Answer:
        """One attempt: the request's whole answer, or a benchd error naming ``where``.

        ``timeout_s`` bounds connecting and, again, waiting for the answer
        (the caller bounds the attempt as a whole).
        """
        pool = self._pools.get(spec.origin)
        if pool is None:
            tls = httpx.create_ssl_context() if spec.origin[0] == "https" else None
            pool = _Pool(spec.origin, self._keep, tls, self._max_bytes, self._idle_s)
            self._pools[spec.origin] = pool
        return await _send(pool, spec, timeout_s, where)

    async def aclose(self) -> None:
        """Close every idle connection."""
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


def search_fire(
    target: HttpSearch,
    queries: Sequence[SearchQuery],
    *,
    concurrency: int,
    timeout_s: float,
    max_response_bytes: int,
    errors: ErrorContext = NO_CONTEXT,
) -> AbstractAsyncContextManager[Fire]:
    """:func:`make_http_fire` for an HTTP target's searches: ``fire(i)`` asks ``queries[i % n]``."""
    n = len(queries)

    def build(i: int) -> httpx.Request:
        return target.build_search_request(queries[i % n])

    async def parse(
        i: int, status: int, headers: Mapping[str, str], body: Body
    ) -> tuple[str, ...]:
        return await target.parse_search_response(Answer(status, headers, body), queries[i % n])

    return make_http_fire(
        build,
        parse,
        concurrency=concurrency,
        timeout_s=timeout_s,
        max_response_bytes=max_response_bytes,
        errors=errors,
    )
