"""A store played over fake connections: what a test passes as the pool sender's ``connect``.

``FakeStore(answer)`` stands for the network (:class:`benchd.http.sender.Connect`):
a kind built with ``connect=FakeStore(answer)`` (or :func:`benchd.http.client.open_clients`)
sends over benchd's production path — its pool, httptools' parser, every bound of an
answer, the one error map — and each request it writes is read back as an
:class:`httpx.Request` and answered by ``answer`` (a function, or a subclass's method):

- an :class:`httpx.Response`: its status, headers and body as given (still encoded),
  written the way a server writes them: chunked if its headers say so, else closing
  the connection after it when it declares no ``Content-Length``;
- ``bytes``: written as they are (a malformed or hostile answer), then the connection
  is closed;
- an :class:`OSError` raised: the connection drops without an answer (a reset); any
  other exception drops it too, and is raised again (the test is wrong, not the store);
- never returning: no answer (the sender's timeout ends the wait).

:meth:`FakeStore.forward` passes a request on to a real server (a reference store
on loopback) and returns its answer, for a fake that only watches or delays.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httptools
import httpx

__all__ = ["FakeStore", "Played"]

Played = httpx.Response | bytes
"""What a fake store answers a request with."""

P = TypeVar("P", bound=asyncio.Protocol)
PIECE = 64 * 1024  # bytes handed to the protocol at once, as one read of a socket would


class FakeStore:
    """Opens fake connections (the :class:`~benchd.http.sender.Connect` shape) to a played store."""

    def __init__(
        self, answer: Callable[[httpx.Request], Played | Awaitable[Played]] | None = None
    ) -> None:
        self._answer = answer

    async def answer(self, request: httpx.Request) -> Played:
        """The answer to ``request``; a subclass overrides this or passes a function.

        A body that must stay as given (corrupt gzip) goes in ``stream=httpx.ByteStream(...)``:
        ``content=`` makes httpx decode it at once.
        """
        assert self._answer is not None, "FakeStore needs an answer function or an override"
        played = self._answer(request)
        return await played if inspect.isawaitable(played) else played

    async def forward(self, request: httpx.Request) -> httpx.Response:
        """``request`` sent to the real server its URL names; its whole answer."""
        async with httpx.AsyncHTTPTransport() as real:
            reply = await real.handle_async_request(request)
            try:
                raw = b"".join([chunk async for chunk in reply.aiter_raw()])
            finally:
                await reply.aclose()
        framing = {b"transfer-encoding", b"content-length", b"connection"}
        headers = [(k, v) for k, v in reply.headers.raw if k.lower() not in framing]
        headers.append((b"content-length", str(len(raw)).encode()))
        return httpx.Response(reply.status_code, headers=headers, content=raw)

    async def __call__(
        self, factory: Callable[[], P], host: str, port: int, tls: ssl.SSLContext | None
    ) -> P:
        protocol = factory()
        origin = f"{'https' if tls is not None else 'http'}://{host}:{port}"
        protocol.connection_made(_FakeSocket(self, protocol, origin))
        return protocol


class _FakeSocket(asyncio.Transport):
    """One fake connection: reads the requests written on it, plays the store's answers."""

    def __init__(self, store: FakeStore, protocol: asyncio.BaseProtocol, origin: str) -> None:
        super().__init__()
        self._store, self._protocol, self._origin = store, protocol, origin
        self._parser = httptools.HttpRequestParser(self)
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body = b""

    # -- the request, as httptools reads it
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", [], b""

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        method = self._parser.get_method().decode()
        url = self._origin + self._url.decode("latin-1")
        request = httpx.Request(method, url, headers=self._headers, content=self._body)
        self._task = asyncio.get_running_loop().create_task(self._serve(request))

    # -- asyncio.Transport
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._parser.feed_data(bytes(data))

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._task is not None:
            self._task.cancel()
        asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self._closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    # -- the answer
    async def _serve(self, request: httpx.Request) -> None:
        try:
            played = await self._store.answer(request)
        except OSError as exc:
            self._drop(exc)
            return
        except Exception as exc:
            self._drop(ConnectionResetError(f"the fake store failed: {exc!r}"))
            raise
        if isinstance(played, bytes):
            wire, close = played, True
        else:
            wire, close = await _serialized(played)
        for start in range(0, max(len(wire), 1), PIECE):
            if self._closing:
                return
            _deliver(self._protocol, wire[start : start + PIECE])
        if close:
            self._drop(None)

    def _drop(self, exc: Exception | None) -> None:
        if not self._closing:
            self._closing = True
            self._protocol.connection_lost(exc)


def _deliver(protocol: asyncio.BaseProtocol, data: bytes) -> None:
    """Hand ``data`` to ``protocol`` the way asyncio's transports do, buffered or not."""
    if isinstance(protocol, asyncio.BufferedProtocol):
        view = memoryview(data)
        while view:
            buffer = memoryview(protocol.get_buffer(len(view)))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            protocol.buffer_updated(n)
            view = view[n:]
    elif isinstance(protocol, asyncio.Protocol):
        protocol.data_received(data)


async def _serialized(response: httpx.Response) -> tuple[bytes, bool]:
    """``response`` as a server writes it, and whether its connection closes after it."""
    body = b"".join([chunk async for chunk in _raw(response)])
    names = {k.lower(): v.lower() for k, v in response.headers.raw}
    chunked = b"chunked" in names.get(b"transfer-encoding", b"")
    if chunked:
        body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    close = (not chunked and b"content-length" not in names) or names.get(
        b"connection"
    ) == b"close"
    head = [b"HTTP/1.1 %d %s" % (response.status_code, response.reason_phrase.encode())]
    head += [b"%s: %s" % kv for kv in response.headers.raw]
    return b"\r\n".join(head) + b"\r\n\r\n" + body, close


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as given (still encoded), for a response built whole or streamed."""
    if response.is_stream_consumed and isinstance(response.stream, httpx.AsyncByteStream):
        async for chunk in response.stream:
            yield chunk
        return
    async for chunk in response.aiter_raw():
        yield chunk
