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

Failures are translated here, once, into benchd errors::

    connection refused / reset / DNS / TLS   -> TargetUnreachable   (kind "connect")
    no answer within timeout_s               -> TargetTimeout       (kind "timeout")
    401 / 403                                -> TargetAuthError     (kind "auth")
    any other status >= 400                  -> TargetHTTPError     (http_4xx|http_429|http_5xx)
    malformed HTTP, or parse() rejects body  -> TargetProtocolError (kind "decode")
    a body (decoded) past max_response_bytes -> TargetProtocolError (kind "decode")
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httptools
import httpx

from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.load import Fire
from benchd.targets.client import DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["Answer", "Build", "Parse", "RequestSpec", "make_http_fire", "retry_after_s"]

Build = Callable[[int], httpx.Request]
"""Query index -> the search request (a pure function of the index: it is cached)."""

Parse = Callable[[int, int, Mapping[str, str], bytes], tuple[str, ...]]
"""(query index, status, headers with lower-case names, body) -> ranked ids.

Raise ValueError (or KeyError, TypeError, IndexError) on a body that breaks
the contract; it becomes a TargetProtocolError."""

Answer = tuple[int, Mapping[str, str], bytes]
"""(status, headers with lower-case names, decoded body)."""

# The sender asks for identity bodies; it still inflates gzip/deflate if sent.
_DROPPED_HEADERS = frozenset({b"accept-encoding", b"connection"})


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """An HTTP/1.1 request serialized once from an :class:`httpx.Request`."""

    origin: tuple[str, str, int]  # (scheme, host, port)
    method: str
    wire: bytes  # request line, headers and body, ready to write
    where: str  # "METHOD scheme://host:port/path", safe for messages (no query string)

    @classmethod
    def from_httpx(cls, request: httpx.Request) -> RequestSpec:
        """Serialize a built httpx request (its body must not be a stream)."""
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if url.scheme not in ("http", "https"):
            raise TargetUnreachable(f"{url.scheme}://{url.host}: only http and https are supported")
        body = request.read()
        lines = [b"%s %s HTTP/1.1" % (request.method.encode(), url.raw_path)]
        lines += [
            b"%s: %s" % kv for kv in request.headers.raw if kv[0].lower() not in _DROPPED_HEADERS
        ]
        wire = b"\r\n".join(lines) + b"\r\n\r\n" + body
        where = f"{request.method} {url.scheme}://{url.host}:{port}{url.path}"
        return cls((url.scheme, url.host, port), request.method, wire, where)


class _TooLarge(Exception):
    """An answer bigger than the cap; the connection is dropped at once."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._size = 0
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._headers_done = False
        self.received = False  # any byte of the current answer arrived
        self.open = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._headers_done and self._delimited_by_close():
            self._complete()
        self._fail(ConnectionError("the store closed the connection before answering"))

    def _delimited_by_close(self) -> bool:
        chunked = "chunked" in self._headers.get("transfer-encoding", "").lower()
        return "content-length" not in self._headers and not chunked

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_bytes:
            self._fail(_TooLarge(f"more than {self._max_bytes} bytes"))
            self.close()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:  # 1xx: the real answer follows
            self._headers, self._body, self._headers_done = {}, [], False
            return
        if not self._parser.should_keep_alive():
            self.close()
        self._complete()

    def _complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            status = self._parser.get_status_code()
            waiter.set_result((status, self._headers, b"".join(self._body)))

    def _fail(self, exc: BaseException) -> None:
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
        self._headers, self._body, self.received, self._headers_done = {}, [], False, False
        self._size = 0
        timer = loop.call_later(timeout_s, self._fail, TimeoutError())
        self._transport.write(wire)
        try:
            return await waiter
        finally:
            timer.cancel()


class _Pool:
    """Idle keep-alive connections to one origin; at most ``limit`` kept."""

    def __init__(
        self,
        origin: tuple[str, str, int],
        limit: int,
        context: ssl.SSLContext,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        scheme, self.host, self.port = origin
        self.max_bytes = max_bytes
        self.ssl = context if scheme == "https" else None
        self.limit = limit
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
            self.idle.append(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()


def retry_after_s(value: str | None) -> float | None:
    """Parse a ``Retry-After`` header (delay seconds or an HTTP date) into seconds."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def _send(pool: _Pool, spec: RequestSpec, timeout_s: float) -> Answer:
    """Send one request; return its answer or raise a benchd error."""
    try:
        return await pool.send(spec, timeout_s)
    except TimeoutError:
        raise TargetTimeout(f"{spec.where}: no answer within {timeout_s:g} s") from None
    except httptools.HttpParserError as exc:
        raise TargetProtocolError(f"{spec.where}: malformed HTTP response ({exc})") from None
    except _TooLarge as exc:
        raise _too_large(spec, str(exc), pool.max_bytes) from None
    except ssl.SSLError as exc:
        raise TargetUnreachable(f"{spec.where}: TLS failed ({exc.reason})") from None
    except OSError as exc:  # ConnectionError, refused, DNS (socket.gaierror)
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise TargetUnreachable(f"{spec.where}: cannot connect ({reason})") from None


def _too_large(spec: RequestSpec, size: str, limit: int) -> TargetProtocolError:
    return TargetProtocolError(
        f"{spec.where}: answer of {size} exceeds max_response_bytes = {limit}"
    )


def _decoded(spec: RequestSpec, headers: Mapping[str, str], body: bytes, limit: int) -> bytes:
    coding = headers.get("content-encoding", "identity").strip().lower()
    if coding in ("identity", ""):
        return body
    if coding not in ("gzip", "deflate"):
        raise TargetProtocolError(f"{spec.where}: unsupported content-encoding {coding!r}")
    inflate = zlib.decompressobj(wbits=47)  # 47: gzip or zlib, detected
    try:
        out = inflate.decompress(body, limit + 1)  # bounded: a small bomb stays small
    except zlib.error as exc:
        raise TargetProtocolError(f"{spec.where}: corrupt {coding} body ({exc})") from None
    if len(out) > limit:
        raise _too_large(spec, f"more than {limit} bytes once inflated", limit)
    return out


def _status_error(spec: RequestSpec, status: int, headers: Mapping[str, str]) -> TargetError:
    if status in (401, 403):
        return TargetAuthError(
            f"{spec.where}: the store refused the API key (HTTP {status}); check the key"
        )
    retry = retry_after_s(headers.get("retry-after"))
    hint = f", retry after {retry:.0f} s" if retry is not None else ""
    return TargetHTTPError(f"{spec.where}: HTTP {status}{hint}", status, retry)


def _interpret(
    parse: Parse, spec: RequestSpec, query: int, answer: Answer, limit: int
) -> tuple[str, ...]:
    status, headers, body = answer
    if status >= 400:
        raise _status_error(spec, status, headers)
    try:
        return parse(query, status, headers, _decoded(spec, headers, body, limit))
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
) -> AsyncIterator[Fire]:
    """Yield a :data:`~benchd.load.Fire` sending ``build(i)`` and returning ``parse(...)``.

    Up to ``concurrency`` keep-alive connections per origin are kept; all are
    closed when the block exits. ``timeout_s`` bounds connecting and, again,
    waiting for the answer. Requests are built once per query index and
    replayed, so ``build`` must depend on the index only. Statuses >= 400
    raise before ``parse`` is called. A body past ``max_response_bytes`` (also
    once inflated) is a decode error and its connection is dropped. Asyncio only.
    """
    specs: dict[int, RequestSpec] = {}
    pools: dict[tuple[str, str, int], _Pool] = {}
    context = ssl_context or ssl.create_default_context()

    async def fire(query: int) -> tuple[str, ...]:
        spec = specs.get(query)
        if spec is None:
            spec = specs[query] = RequestSpec.from_httpx(build(query))
        pool = pools.get(spec.origin)
        if pool is None:
            pool = pools[spec.origin] = _Pool(spec.origin, concurrency, context, max_response_bytes)
        answer = await _send(pool, spec, timeout_s)
        return _interpret(parse, spec, query, answer, max_response_bytes)

    try:
        yield fire
    finally:
        for pool in pools.values():
            pool.close()
