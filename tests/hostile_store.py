"""A hostile Zengram-style store on loopback: a raw-socket proxy that breaks one route.

Requests to ``http://127.0.0.1:PORT/<mode>/<route>`` are forwarded to a real
reference store (``upstream``), except the one route a *mode* turns hostile.
So a probe pointed at ``.../<mode>`` seeds and verifies for real and meets
the hostile answer exactly where the mode says:

=================  ==================================================================
mode               what it does
=================  ==================================================================
``ok``             nothing: every request is forwarded
``deep-health``    ``GET /health``: JSON nested 1,000 deep
``deep-export``    ``GET /export``: JSON nested 1,000 deep
``deep-search``    ``GET /memory/search``: JSON nested 1,000 deep
``huge``           search: ``Content-Length: 1073741824`` declared, 64 KiB sent, then held
``forever``        export: ``has_more: true`` forever, 500 new ids on every page
``many``           search: 600,000 results for any ``limit``
``negative``       import: ``{"imported": -2000000, ...}``
``e30``            import: ``{"skipped": 1e30, ...}``
``huge-score``     search: forwarded, every ``effective_score`` set to ±1.7976931348623157e308
``ra-date``        search: 429 with an HTTP-date ``Retry-After`` one second ahead
``ra-1.5``         search: 429, ``Retry-After: 1.5``; likewise ``ra-nan``, ``ra--1``,
                   ``ra-1e12``
``ra-once``        search: 429 with ``Retry-After: 2`` once per distinct query, then forwarded
``r301``           every route: 301 to the recorder (another loopback port);
                   likewise ``r302``, ``r307``
=================  ==================================================================

:class:`Recorder` is the redirect's destination: it answers 200 and records
every request's headers, so a test can show the API key never reached it.

:class:`RawAnswers` is the other half: a loopback server (in its own thread)
that answers every request with whatever byte chunks its ``answer`` callable
yields — a compression bomb, a head that never ends, numbers no store should
send — and counts the bytes it got out before the client hung up.
Everything is plain asyncio on 127.0.0.1 and stops with the block.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "MODES",
    "Hostile",
    "HostileThread",
    "RawAnswers",
    "Recorder",
    "deep_json",
    "response",
    "running_hostile",
]

MODES = (
    "ok",
    "deep-health",
    "deep-export",
    "deep-search",
    "huge",
    "forever",
    "many",
    "negative",
    "e30",
    "huge-score",
    "ra-date",
    "ra-1.5",
    "ra-nan",
    "ra--1",
    "ra-1e12",
    "ra-once",
    "r301",
    "r302",
    "r307",
)


def deep_json(levels: int = 1000) -> bytes:
    """``{"a":{"a":...}}`` nested ``levels`` deep (about 6 bytes a level)."""
    return b'{"a":' * levels + b"1" + b"}" * levels


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, target, headers, body


_MANY: list[bytes] = []


def _many() -> bytes:
    """A 200 search answer with 600,000 results (12 MB), built once."""
    if not _MANY:
        results = ",".join(f'{{"id":"n{i}"}}' for i in range(600_000))
        _MANY.append(_response(200, f'{{"results":[{results}]}}'.encode()))
    return _MANY[0]


def response(status: int, body: bytes, extra: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer with a JSON content type and a Content-Length."""
    return _response(status, body, extra)


def _response(status: int, body: bytes, extra: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json"]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _huge_scores(body: bytes) -> bytes:
    """A search answer with every score at the edge of a double, alternating in sign."""
    data = json.loads(body)
    for i, item in enumerate(data.get("results", [])):
        item["effective_score"] = 1.7976931348623157e308 * (-1 if i % 2 else 1)
    return json.dumps(data).encode()


@dataclass
class Recorder:
    """The address redirects point at; records each request's headers."""

    port: int = 0
    seen: list[dict[str, str]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                _, _, headers, _ = await _read_request(reader)
                self.seen.append(headers)
                writer.write(_response(200, b'{"results": [], "memories": []}'))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class Hostile:
    """The proxy; ``upstream`` is a reference store's base url."""

    upstream: str
    recorder: Recorder
    port: int = 0
    hits: dict[str, int] = field(default_factory=dict)  # mode -> hostile answers sent
    pages: int = 0  # export pages sent in mode "forever"
    limited: set[str] = field(default_factory=set)  # searches already given their 429

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mode_url(self, mode: str) -> str:
        return f"{self.url}/{mode}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with httpx.AsyncClient(base_url=self.upstream, timeout=30) as client:
            try:
                while True:
                    request = await _read_request(reader)
                    if not await self._answer(request, client, writer):
                        return
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

    async def _answer(
        self,
        request: tuple[str, str, dict[str, str], bytes],
        client: httpx.AsyncClient,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; False when the connection must end."""
        method, target, headers, body = request
        _, mode, rest = target.split("/", 2)
        path = "/" + rest.partition("?")[0]
        if mode == "huge" and path == "/memory/search":
            self.hits[mode] = self.hits.get(mode, 0) + 1
            writer.write(b"HTTP/1.1 200 X\r\nContent-Length: 1073741824\r\n\r\n" + b"[" * 65536)
            await writer.drain()
            await asyncio.sleep(30)  # hold it: the client must not wait for the rest
            return False
        hostile = self._hostile(mode, method, path, rest)
        if hostile is None:
            forwarded = await client.request(
                method,
                "/" + rest,
                headers={k: v for k, v in headers.items() if k in ("x-api-key", "content-type")},
                content=body,
            )
            content = forwarded.content
            if mode == "huge-score" and path == "/memory/search" and forwarded.status_code == 200:
                content = _huge_scores(content)
            writer.write(_response(forwarded.status_code, content))
            await writer.drain()
            return True
        self.hits[mode] = self.hits.get(mode, 0) + 1
        writer.write(hostile)
        await writer.drain()
        return True

    def _hostile(self, mode: str, method: str, path: str, path_query: str) -> bytes | None:
        """The hostile answer for this request, or None to forward it."""
        search = path == "/memory/search"
        if mode.startswith("r3"):
            location = f"http://127.0.0.1:{self.recorder.port}{path}?token=secret-in-location"
            return _response(int(mode[1:]), b"", {"Location": location})
        if (
            (mode == "deep-health" and path == "/health")
            or (mode == "deep-export" and path == "/export")
            or (mode == "deep-search" and search)
        ):
            return _response(200, deep_json())
        if mode == "forever" and path == "/export" and method == "GET":
            self.pages += 1
            base = self.pages * 500
            page = [{"id": f"x{base + i}", "content": f"r{i}"} for i in range(500)]
            return _response(200, json.dumps({"memories": page, "has_more": True}).encode())
        if mode == "many" and search:
            return _many()
        if mode in ("negative", "e30") and path == "/export/import":
            counts = (
                b'{"imported": -2000000, "skipped": 0, "errors": 0}'
                if mode == "negative"
                else b'{"imported": 0, "skipped": 1e30, "errors": 0}'
            )
            return _response(200, counts)
        if mode == "ra-once" and search:
            if path_query in self.limited:
                return None
            self.limited.add(path_query)
            return _response(429, b'{"error": "slow down"}', {"Retry-After": "2"})
        if mode.startswith("ra-") and search:
            value = mode[3:]
            if value == "date":
                value = email.utils.formatdate(time.time() + 1, usegmt=True)
            return _response(429, b'{"error": "slow down"}', {"Retry-After": value})
        return None


@asynccontextmanager
async def running_hostile(upstream: str) -> AsyncIterator[Hostile]:
    """Serve the recorder and the hostile proxy on ephemeral loopback ports.

    On exit the connection handlers still running are cancelled and awaited here, while
    the loop runs: ``Server.close()`` leaves them running, and a handler forwarding a
    request (a probe that gave up on it) would otherwise be cancelled by the loop's own
    teardown. If that falls in the step in which httpx's connect has just spawned anyio's
    ``try_connect``, that task is cancelled before it ever ran, its coroutine is never
    awaited, and the RuntimeWarning fails whichever test the garbage collector meets it in
    (seen once in six runs of tests/hardening on a busy box).
    """
    recorder = Recorder()
    hostile = Hostile(upstream, recorder)
    handlers: set[asyncio.Task[Any]] = set()

    def tracked(
        handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handlers.add(task)
            try:
                await handle(reader, writer)
            except asyncio.CancelledError:
                pass  # cancelled below, on exit: the connection's end, not an error to log
            finally:
                handlers.discard(task)

        return run

    rec_server = await asyncio.start_server(tracked(recorder.handle), "127.0.0.1", 0)
    server = await asyncio.start_server(tracked(hostile.handle), "127.0.0.1", 0)
    recorder.port = rec_server.sockets[0].getsockname()[1]
    hostile.port = server.sockets[0].getsockname()[1]
    async with rec_server, server:
        try:
            yield hostile
        finally:
            server.close()
            rec_server.close()
            for task in list(handlers):
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)


class HostileThread:
    """:func:`running_hostile` in a background thread, for tests that drive a subprocess."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.hostile: Hostile | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with running_hostile(self.upstream) as hostile:
            self.hostile = hostile
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Hostile:
        self._thread.start()
        if not self._ready.wait(20) or self.hostile is None:
            raise RuntimeError("the hostile store did not start")
        return self.hostile

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)


class RawAnswers:
    """A loopback server answering every request with ``answer()``'s chunks, in a thread.

    ``sent`` counts the bytes written for the latest request (a bound on what
    the client let through before it hung up); ``requests`` counts requests.
    The connection closes after each answer.
    """

    def __init__(self) -> None:
        self.answer: Callable[[], Iterable[bytes]] = lambda: [_response(200, b"{}")]
        # when set, answers by request target (path and query) instead, keeping the connection
        self.route: Callable[[str, str], bytes] | None = None
        self.sent = 0
        self.requests = 0
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, target, _, _ = await _read_request(reader)
            self.requests += 1
            while self.route is not None:  # keep-alive: one answer per request
                writer.write(self.route(method, target))
                await writer.drain()
                method, target, _, _ = await _read_request(reader)
                self.requests += 1
            self.sent = 0
            for chunk in self.answer():
                writer.write(chunk)
                self.sent += len(chunk)
                await writer.drain()  # a client that stopped reading stops the answer here
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> RawAnswers:
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("the raw answer server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
