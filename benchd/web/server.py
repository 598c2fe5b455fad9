"""Serving benchd's ASGI app: uvicorn, with the limits a long-lived exporter needs.

uvicorn (with its C parser, httptools) serves the app inside the daemon's
event loop. On its own it has no timeout for *receiving* a request: its
keep-alive timer only runs between requests and is cancelled by any byte,
so a client that connects and then sends nothing, or one header byte every
few seconds, holds a connection (and a file descriptor) forever. Rather than
trade its parser for another server, :class:`_GuardedProtocol` adds what is
missing at the protocol level:

* **header timeout**: a deadline armed when a connection opens (and again
  after each response) and cancelled once the whole request has arrived;
  at the deadline the server closes the connection;
* **TLS handshake timeout**: uvicorn passes none to ``create_server``, so a
  client that opens a TLS connection and says nothing would hold it for
  asyncio's default 60 s before the header deadline (armed once the
  handshake is done) applies; :class:`_Server` bounds the handshake by the
  header timeout;
* **idle timeout**: uvicorn's keep-alive timeout between requests;
* **connection cap**: beyond ``max_connections`` open connections a new one
  gets ``503`` and is closed at once;
* **request-head cap**: a request line and headers past ``max_head_bytes``
  (or ``max_headers`` lines) get ``431`` and the connection is closed, counted
  as the bytes arrive: uvicorn's httptools protocol keeps the URL (``+=`` per
  piece: quadratic) and httptools a header's partial value with no bound, so
  50 clients sending endless heads held a gigabyte before the header timeout.
  Memory held by request heads is so at most ``max_connections`` x
  (``max_head_bytes`` + one 256 KiB read);
* **no forwarding trust**: uvicorn believes ``X-Forwarded-For`` from
  ``FORWARDED_ALLOW_IPS`` (an environment variable, 127.0.0.1 by default);
  benchd turns that off and believes only the proxies its ``web_config``
  names (:mod:`benchd.web.guard`);
* **out of file descriptors**: asyncio reports each failed ``accept()`` to the
  loop's exception handler with a traceback (up to ``backlog`` of them per
  wake-up, and schedules as many retries); :class:`_AcceptErrorLog` turns
  those into one log line a minute (with a count), silences retries that
  fire after the server closed, and accepting resumes by itself once
  descriptors are free again.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import math
import socket
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import anyio
import httptools
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from benchd.errors import InputError
from benchd.logging import get_logger

__all__ = ["BoundServer", "ServerLimits", "ServerStats", "is_loopback", "serve_web"]

log = get_logger("benchd.web")

_FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_REFUSED_BODY = b"too many open connections; retry shortly\n"
_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_REFUSED_BODY), _REFUSED_BODY)
)
_HEAD_BODY = b"request head too large\n"
_HEAD_REFUSED = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_HEAD_BODY), _HEAD_BODY)
)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """How long a client may take, and how many may be connected at once."""

    header_timeout_s: float = 10.0  # connection open (or last response) -> request received
    idle_timeout_s: float = 5.0  # keep-alive between requests
    max_connections: int = 256
    max_head_bytes: int = 16 * 1024  # request line + headers (Prometheus sends ~300 bytes)
    max_headers: int = 100
    log_interval_s: float = 60.0  # at most one line per kind of trouble per interval


@dataclass(slots=True)
class ServerStats:
    """Counters of what the limits did (read by tests and, one day, by /metrics)."""

    timed_out: int = 0  # connections closed at the header deadline
    refused: int = 0  # connections refused over the cap
    heads_refused: int = 0  # requests whose head passed max_head_bytes / max_headers
    accept_errors: int = 0  # accept() failures for want of file descriptors


class _RateLimitedLine:
    """Logs an event at most once per interval, saying how many were held back."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last = -math.inf
        self._held = 0

    def emit(self, level: str, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            self._held += 1
            return
        getattr(log, level)(event, **fields, suppressed=self._held)
        self._last, self._held = now, 0


class _HeadTooLarge(Exception):
    """Raised from a parser callback: the request head is past max_head_bytes / max_headers."""


def _guarded_protocol(limits: ServerLimits, stats: ServerStats) -> type[HttpToolsProtocol]:
    refused_line = _RateLimitedLine(limits.log_interval_s)

    class _GuardedProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol with a request deadline and a connection cap."""

        _deadline: asyncio.TimerHandle | None = None
        _head_bytes = 0  # bytes received while in the head (a partial value is httptools')
        _head_size = 0  # URL and header bytes parsed so far
        _head_lines = 0
        _in_head = True  # reading a request line and headers (from connect or the last request)

        def data_received(self, data: bytes) -> None:
            """uvicorn's, plus the head's bounds (431) checked as bytes arrive."""
            if self._in_head:
                self._head_bytes += len(data)
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserCallbackError as exc:
                if isinstance(exc.__context__, _HeadTooLarge):
                    self._refuse_head()
                else:
                    self.send_400_response("Invalid HTTP request received.")
                return
            except httptools.HttpParserError:
                self.send_400_response("Invalid HTTP request received.")
                return
            except httptools.HttpParserUpgrade:
                self._unsupported_upgrade_warning()  # benchd serves no websockets
            # still in the head after parsing it all: past the cap by at most this read
            if self._in_head and self._head_bytes > limits.max_head_bytes:
                self._refuse_head()

        def on_url(self, url: bytes) -> None:
            self._head_size += len(url)
            if self._head_size > limits.max_head_bytes:
                raise _HeadTooLarge  # stops the parser; data_received answers 431
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._head_lines += 1
            self._head_size += len(name) + len(value) + 4
            if self._head_lines > limits.max_headers or self._head_size > limits.max_head_bytes:
                raise _HeadTooLarge
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def _refuse_head(self) -> None:
            if self.transport.is_closing():
                return
            stats.heads_refused += 1
            self.transport.write(_HEAD_REFUSED)
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                stats.refused += 1
                refused_line.emit(
                    "warning", "web connection refused",
                    reason=f"more than max_connections={limits.max_connections} open",
                )  # fmt: skip
                transport.write(_REFUSED)
                transport.close()
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_complete(self) -> None:
            self._disarm()
            self._in_head = True  # the next request's head
            self._head_bytes = self._head_size = self._head_lines = 0
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and (
                self.cycle is None or self.cycle.response_complete
            ):
                self._arm()  # the next request has header_timeout_s to arrive

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(limits.header_timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                stats.timed_out += 1
                self.transport.close()

    return _GuardedProtocol


class _AcceptErrorLog:
    """A loop exception handler: accept() out of descriptors is one line a minute."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: ServerLimits, stats: ServerStats):
        self._loop = loop
        self._previous = loop.get_exception_handler()
        self._stats = stats
        self._line = _RateLimitedLine(limits.log_interval_s)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        callback = getattr(context.get("handle"), "_callback", None)
        if getattr(callback, "__name__", "") == "_start_serving" and self._stats.accept_errors:
            # asyncio retries accept() a second after each failure; a retry that
            # fires after the server closed its socket fails on fd -1: nothing to say.
            return
        if (
            isinstance(exc, OSError)
            and exc.errno in _FD_ERRNOS
            and "accept" in str(context.get("message", ""))
        ):
            self._stats.accept_errors += 1
            self._line.emit(
                "error", "web server cannot accept connections",
                error=f"{exc.strerror} ({errno.errorcode.get(exc.errno or 0, exc.errno)})",
                hint="raise the open-files limit (ulimit -n, LimitNOFILE) or lower "
                "server.max_connections; accepting resumes by itself",
            )  # fmt: skip
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def restore(self) -> None:
        """Put the previous handler back, unless accept() retries may still be pending."""
        if self._loop.get_exception_handler() is self and not self._stats.accept_errors:
            self._loop.set_exception_handler(self._previous)


@dataclass(frozen=True, slots=True)
class BoundServer:
    """Where :func:`serve_web` listens (the real port when 0 was asked for)."""

    host: str
    port: int
    scheme: str = "http"
    stats: ServerStats | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the server."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, as bound or as a client's) is a loopback address."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == "localhost"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before serving starts so the URL is valid at once."""
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or "0.0.0.0", port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InputError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise InputError(
            f"cannot listen on {where}: {exc.strerror or exc}; "
            "choose another address with --listen HOST:PORT"
        ) from None
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server on sockets bound beforehand, with a bound on the TLS handshake.

    Only the part of ``uvicorn.Server.startup`` benchd uses (given sockets,
    lifespan off), plus ``ssl_handshake_timeout``.
    """

    def __init__(self, config: uvicorn.Config, handshake_timeout_s: float) -> None:
        super().__init__(config)
        self._handshake_timeout_s = handshake_timeout_s

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        assert sockets is not None, "serve_web binds its socket itself"
        config = self.config

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=_loop,
            )

        loop = asyncio.get_running_loop()
        handshake = self._handshake_timeout_s if config.ssl is not None else None
        self.servers = [
            await loop.create_server(
                create_protocol,
                sock=sock,
                ssl=config.ssl,
                backlog=config.backlog,
                ssl_handshake_timeout=handshake,
            )
            for sock in sockets
        ]
        self.started = True


@asynccontextmanager
async def serve_web(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    grace_s: float = 5.0,
    ssl_context: ssl.SSLContext | None = None,
    limits: ServerLimits | None = None,
) -> AsyncIterator[BoundServer]:
    """Serve ``app`` with uvicorn in this event loop for the duration of the block.

    The socket is bound first (port 0 picks a free one), so requests to
    ``bound.url`` succeed as soon as the block starts: no startup polling.
    uvicorn's own signal handling is not used; the caller owns the signals.
    With ``ssl_context`` the server speaks HTTPS only.
    """
    limits = limits or ServerLimits()
    stats = ServerStats()
    sock = _listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    bound = BoundServer(bound_host, bound_port, "https" if ssl_context else "http", stats)
    config = uvicorn.Config(
        app,
        http=_guarded_protocol(limits, stats),
        lifespan="off",
        log_config=None,
        access_log=False,
        # also how many accept() calls asyncio makes per wake-up (and, when
        # descriptors run out, how many failures per second): keep it near the cap
        backlog=max(128, min(2048, limits.max_connections)),
        timeout_keep_alive=max(1, math.ceil(limits.idle_timeout_s)),
        timeout_graceful_shutdown=max(1, math.ceil(grace_s)),
        # believe no X-Forwarded-* here, whatever FORWARDED_ALLOW_IPS says: the
        # proxies web_config names are believed by benchd.web.guard
        proxy_headers=False,
        forwarded_allow_ips=[],
    )
    config.load()
    config.ssl = ssl_context  # uvicorn's own loader only takes file names
    server = _Server(config, limits.header_timeout_s)
    server.lifespan = config.lifespan_class(config)
    loop = asyncio.get_running_loop()
    handler = _AcceptErrorLog(loop, limits, stats)
    loop.set_exception_handler(handler)
    try:
        await server.startup(sockets=[sock])
    except BaseException:
        handler.restore()
        raise
    log.debug("web listening", url=bound.url)
    # A bare asyncio task, not a task group: an error in the caller's block must
    # reach the caller as itself, not wrapped in an ExceptionGroup.
    ticker = loop.create_task(server.main_loop())  # Date header
    try:
        yield bound
    finally:
        ticker.cancel()
        with anyio.move_on_after(grace_s + 1.0, shield=True):
            with suppress(asyncio.CancelledError):
                await ticker
            await server.shutdown(sockets=[sock])
        handler.restore()
