"""The load engine's HTTP sender: adapters build requests and parse bodies, the engine sends.

Adapters stay sans-I/O: they describe a search as an :class:`httpx.Request`
(``build``) and turn ``(status, headers, body)`` into ranked ids (``parse``).
:func:`make_http_fire` owns the connections: each request is serialized once
per query index, then written on a pooled keep-alive HTTP/1.1 connection
whose answer is parsed by httptools (llhttp, the C parser uvicorn uses).

Why not a general client here: it costs a fraction of the CPU per request of
httpx's pool or aiohttp's (docs/load.md has the figures). It does one thing
only — replay prepared GET/POST requests: no HEAD, redirects, cookies or
proxies — and runs on asyncio, benchd's event loop. httpx stays the
request-building API. Connections are opened through a :class:`Connect`
(the network, or a test's fake store), so tests send through this path too.

Statuses and failures are translated by the one error map
(:mod:`benchd.http.error_map`: :func:`~benchd.http.error_map.status_error`
and :func:`~benchd.http.error_map.exchange_error`), which httpx's path uses
too; a body ``parse()`` rejects is a TargetProtocolError (kind "decode").

Every bound holds while the answer is read: the head is counted as its bytes
arrive, the body is inflated piece by piece as it arrives
(:class:`~benchd.http.answers.Inflater`), so neither memory nor the event
loop's time grows with what a store sends beyond the caps.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import httptools
import httpx

from benchd.errors import TargetError, TargetProtocolError, TargetUnreachable
from benchd.http.answers import (
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    Body,
    BodyBuffer,
    DecodeError,
    Inflater,
)
from benchd.http.error_map import (
    DEFAULT_MAX_RESPONSE_BYTES,
    NO_CONTEXT,
    Answer,
    BadHead,
    ErrorContext,
    TooLarge,
    exchange_error,
    status_error,
)
from benchd.store.target import Fire, SearchQuery

__all__ = [
    "Answer",
    "Build",
    "Connect",
    "HttpSearch",
    "Parse",
    "PoolSender",
    "RequestSpec",
    "make_http_fire",
    "open_connection",
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
_READ_BYTES = 64 * 1024  # a pool's read buffer: one read takes at most this much
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


_P = TypeVar("_P", bound=asyncio.BaseProtocol)


class Connect(Protocol):
    """Opens a connection to ``host:port`` (TLS with ``tls``) for the protocol ``factory`` makes.

    :meth:`asyncio.loop.create_connection`'s shape: the pool sender's one
    door to the network. Tests pass a fake that plays a store's bytes.
    """

    async def __call__(
        self, factory: Callable[[], _P], host: str, port: int, tls: ssl.SSLContext | None
    ) -> _P: ...


async def open_connection(
    factory: Callable[[], _P], host: str, port: int, tls: ssl.SSLContext | None
) -> _P:
    """A TCP (or TLS) connection from the running asyncio loop: the network itself."""
    _, protocol = await asyncio.get_running_loop().create_connection(
        factory, host, port, ssl=tls
    )
    return protocol


def _joined(lines: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header lines as a dict with lower-case names; a repeated name's values joined once."""
    headers: dict[str, str] = {}
    repeated: dict[str, list[str]] = {}
    for name, value in lines:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key in headers:
            repeated.setdefault(key, [headers[key]]).append(text)
        else:
            headers[key] = text
    for key, values in repeated.items():
        headers[key] = ", ".join(values)
    return headers


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection carrying one request at a time.

    Reads land in ``buffer``, which the connections of a pool share: a read
    is parsed before the next one starts, and the parser copies what it
    keeps. A plain ``asyncio.Protocol`` is handed a fresh ``bytes`` per read,
    allocated at asyncio's read size (256 KiB, past malloc's mmap threshold)
    and cut to what arrived: three more system calls per read.
    """

    def __init__(self, buffer: memoryview, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._size = 0
        self._parser = httptools.HttpResponseParser(self)
        self._buffer = buffer
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._headers: dict[str, str] = {}
        self._lines: list[tuple[bytes, bytes]] = []  # the head's lines, decoded once at its end
        self._head_bytes = 0
        self._inflater: Inflater | None = None
        self._body = BodyBuffer()
        self._headers_done = False
        self.received = False  # any byte of the current answer arrived
        self.open = True
        self.idle_since = 0.0  # time.monotonic() when it last went back to the pool
        self._loop = asyncio.get_running_loop()
        self._deadline = math.inf  # loop.time() by which the current answer must have come
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._disarm()
        if self._headers_done and self._delimited_by_close():
            self._complete()
        self._fail(ConnectionError("the store closed the connection before answering"))
        self._body.discard()  # never keep a dead connection's buffers alive

    def _delimited_by_close(self) -> bool:
        chunked = "chunked" in self._headers.get("transfer-encoding", "").lower()
        return "content-length" not in self._headers and not chunked

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._received(self._buffer[:nbytes])

    def _received(self, data: memoryview) -> None:
        self.received = True
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._refuse(exc)
            return
        # httptools holds a header's partial value itself: bound what the head has cost,
        # at most one read (_READ_BYTES) past the cap
        if self.open and not self._headers_done and self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(BadHead(f"its head runs past {MAX_HEAD_BYTES} bytes"))

    def _refuse(self, exc: Exception) -> None:
        self._fail(exc)
        self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.open:
            return
        lines = self._lines
        lines.append((name, value))
        if len(lines) > MAX_HEADERS:
            self._refuse(BadHead(f"more than {MAX_HEADERS} header lines"))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if not self.open:
            return
        self._headers = _joined(self._lines)
        coding = self._headers.get("content-encoding")
        if coding is not None:  # identity bodies (most) need no inflater
            try:
                self._inflater = Inflater(coding, self._max_bytes)
            except DecodeError as exc:
                self._refuse(exc)
                return
        declared = self._headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self._max_bytes:  # refused before reading
            self._fail(TooLarge(f"{declared} bytes (declared)"))
            self.close()

    def on_body(self, body: bytes) -> None:
        if not self.open:  # refused or failed: keep nothing more
            return
        self._size += len(body)
        if self._size > self._max_bytes:
            self._refuse(TooLarge(f"more than {self._max_bytes} bytes"))
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
        self._headers, self._lines, self._body, self._headers_done = {}, [], BodyBuffer(), False
        self._head_bytes = self._size = 0
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
        self._disarm()
        if self._transport is not None:
            self._transport.close()

    def on_running_loop(self) -> bool:
        """Whether this connection was opened on the event loop running now."""
        return self._loop is asyncio.get_running_loop()

    async def exchange(self, wire: bytes, timeout_s: float) -> Answer:
        """Write one request and wait for its whole answer, at most ``timeout_s``."""
        assert self._transport is not None and self._waiter is None
        loop = self._loop
        waiter: asyncio.Future[Answer] = loop.create_future()
        self._waiter = waiter
        self._body.discard()
        self._reset()
        self.received = False
        self._arm(loop.time() + timeout_s)
        self._transport.write(wire)
        try:
            return await waiter
        finally:
            self._deadline = math.inf

    def _arm(self, deadline: float) -> None:
        """Make sure the timer fires by ``deadline``.

        One timer per connection, re-armed when it fires early (the request it
        was set for was answered and another one went out): scheduling and
        cancelling a timer per request costs two heap operations on the loop.
        """
        self._deadline = deadline
        timer = self._timer
        if timer is not None:
            if timer.when() <= deadline:
                return
            timer.cancel()
        self._timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self._waiter is None or self._deadline == math.inf:
            return  # idle: nothing to time out
        if self._loop.time() < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._expire)
            return
        self._fail(TimeoutError())

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


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
        connect: Connect = open_connection,
    ) -> None:
        scheme, self.host, self.port = origin
        self._connect_to = connect
        self.max_bytes = max_bytes
        # Only https needs a context; building one costs the loop much CPU (docs/load.md).
        self.ssl = (context or ssl.create_default_context()) if scheme == "https" else None
        self.limit = limit
        self.idle_s = idle_s
        self.idle: deque[_Connection] = deque()
        self._buffer = memoryview(bytearray(_READ_BYTES))  # every connection's reads

    async def _connect(self, timeout_s: float) -> _Connection:
        async with asyncio.timeout(timeout_s):
            return await self._connect_to(
                lambda: _Connection(self._buffer, self.max_bytes), self.host, self.port, self.ssl
            )

    async def send(self, spec: RequestSpec, timeout_s: float, *, whole: bool = False) -> Answer:
        """Send on an idle connection (or a new one); retry a stale idle one once.

        ``timeout_s`` bounds connecting and, again, waiting for the answer; with
        ``whole``, the attempt as a whole (each step gets what is left of it).
        """
        until = asyncio.get_running_loop().time() + timeout_s if whole else math.inf
        while self.idle:
            conn = self.idle.pop()
            if self.idle_s is not None and time.monotonic() - conn.idle_since > self.idle_s:
                conn.close()
                self.close()  # the others went idle before it
                break
            if not conn.on_running_loop():  # a connection serves the loop that opened it
                conn.close()
                self.close()
                break
            if conn.open:
                try:
                    return await self._exchange(conn, spec, _left(timeout_s, until))
                except ConnectionError:
                    # Closed by the store while idle; safe to resend if nothing came back.
                    if conn.received or spec.method not in ("GET", "HEAD"):
                        raise
                break
        conn = await self._connect(_left(timeout_s, until))
        return await self._exchange(conn, spec, _left(timeout_s, until))

    async def _exchange(self, conn: _Connection, spec: RequestSpec, timeout_s: float) -> Answer:
        try:
            if timeout_s <= 0:
                raise TimeoutError  # the attempt's time went on connecting: nothing is sent
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


def _left(timeout_s: float, until: float) -> float:
    """What a step of an attempt may take: ``timeout_s``, at most what is left until ``until``."""
    if until == math.inf:
        return timeout_s
    return min(timeout_s, until - asyncio.get_running_loop().time())


async def _send(
    pool: _Pool, spec: RequestSpec, timeout_s: float, where: str = "", *, whole: bool = False
) -> Answer:
    """Send one request; return its answer or raise a benchd error naming ``where``."""
    try:
        return await pool.send(spec, timeout_s, whole=whole)
    except Exception as exc:
        error = exchange_error(
            exc, where or spec.where, timeout_s=timeout_s, max_bytes=pool.max_bytes
        )
        if error is None:
            raise
        raise error from None


async def _interpret(
    parse: Parse, spec: RequestSpec, query: int, answer: Answer, errors: ErrorContext
) -> tuple[str, ...]:
    status, headers, body = answer
    error = status_error(status, headers, body, spec.where, errors)
    if error is not None:
        raise error
    try:
        ranked = parse(query, status, headers, body)
        if isinstance(ranked, tuple):
            return ranked
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
    """Yield a :data:`~benchd.store.target.Fire` sending ``build(i)`` and returning ``parse(...)``.

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
    search costs what a load-pass request costs, not what httpx's client and
    pool cost (docs/load.md). Every bound of the load pass holds (head, size,
    decoded size, timeout); the request's ``Accept-Encoding`` is kept. HTTPS
    uses the certificates httpx would (:func:`httpx.create_ssl_context`).
    Idle keep-alive connections are kept per origin, at most ``keep``, and
    reused while idle for at most ``idle_s`` (httpx's defaults: 20, 5 s);
    none is shared by two requests at once. ``connect`` opens connections
    (the network; a test passes a fake store's).
    """

    def __init__(
        self,
        *,
        max_response_bytes: int,
        keep: int = 20,
        idle_s: float = 5.0,
        connect: Connect = open_connection,
    ) -> None:
        self._max_bytes = max_response_bytes
        self._keep = keep
        self._idle_s = idle_s
        self._connect = connect
        self._pools: dict[tuple[str, str, int], _Pool] = {}

    @staticmethod
    def prepare(request: httpx.Request) -> RequestSpec:
        """``request`` serialized once (it may be sent many times), ``Accept-Encoding`` kept."""
        return RequestSpec.from_httpx(request, encoded=True)

    async def send(self, spec: RequestSpec, where: str, timeout_s: float) -> Answer:
        """One attempt: the request's whole answer, or a benchd error naming ``where``.

        ``timeout_s`` bounds the attempt as a whole: connecting, writing the
        request and reading its whole answer (on the pool's own timers, no
        cancel scope of the caller's).
        """
        pool = self._pools.get(spec.origin)
        if pool is None:
            tls = httpx.create_ssl_context() if spec.origin[0] == "https" else None
            pool = _Pool(
                spec.origin, self._keep, tls, self._max_bytes, self._idle_s, self._connect
            )
            self._pools[spec.origin] = pool
        return await _send(pool, spec, timeout_s, where, whole=True)

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
