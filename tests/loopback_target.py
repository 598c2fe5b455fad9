"""A tiny keep-alive HTTP/1.1 search target on loopback for the load-engine tests.

``GET /q/<i>`` answers ``{"results": [{"id": "doc-<i>"}]}`` after ``delay_s``.
Tests shape behaviour per query index (``statuses``, ``garbage``, ``hang``,
``raw``: exact bytes, then close) or for a time window (``stall_from`` /
``stall_until``, perf_counter times: a request arriving inside the window is
held until the window closes).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from benchd.errors import TargetHTTPError, TargetProtocolError, TargetUnreachable
from benchd.store.target import Fire

__all__ = ["LoopbackTarget", "httpx_fire", "serve_target"]


@dataclass
class LoopbackTarget:
    """Behaviour knobs of the target; change them between runs."""

    delay_s: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)  # query -> HTTP status
    garbage: set[int] = field(default_factory=set)  # queries answered with invalid JSON
    hang: set[int] = field(default_factory=set)  # queries never answered
    raw: dict[int, bytes] = field(default_factory=dict)  # exact bytes, then close
    stall_from: float = float("inf")
    stall_until: float = float("-inf")
    retry_after: bytes | None = b"2"  # the Retry-After of a 429 (None: no header)
    port: int = 0
    served: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _answer(self, query: int) -> tuple[int, bytes]:
        now = time.perf_counter()
        if self.stall_from <= now < self.stall_until:
            await anyio.sleep(self.stall_until - now)
        if query in self.hang:
            await anyio.sleep_forever()
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        self.served += 1
        if query in self.garbage:
            return 200, b"{not json"
        status = self.statuses.get(query, 200)
        return status, json.dumps({"results": [{"id": f"doc-{query}"}]}).encode()

    async def handle(self, stream: SocketStream) -> None:
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            while True:
                try:
                    head = await reader.receive_until(b"\r\n\r\n", 65536)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                path = head.split(b" ", 2)[1].decode().partition("?")[0]
                query = int(path.rsplit("/", 1)[1])
                if query in self.raw:
                    await stream.send(self.raw[query])
                    return
                status, body = await self._answer(query)
                extra = b""
                if status == 429 and self.retry_after is not None:
                    extra = b"Retry-After: %s\r\n" % self.retry_after
                await stream.send(
                    b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d"
                    b"\r\n\r\n%s" % (status, extra, len(body), body)
                )


@asynccontextmanager
async def serve_target(target: LoopbackTarget) -> AsyncIterator[LoopbackTarget]:
    """Serve ``target`` on an ephemeral loopback port for the duration of the block."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    target.port = listener.extra(SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, target.handle)
        try:
            yield target
        finally:
            tg.cancel_scope.cancel()


def httpx_fire(client: httpx.AsyncClient) -> Fire:
    """A Fire over httpx that translates failures into benchd errors."""

    async def fire(query: int) -> tuple[str, ...]:
        try:
            response = await client.get(f"/q/{query}")
        except httpx.TransportError as exc:
            raise TargetUnreachable(f"cannot reach the loopback target: {exc}") from exc
        if response.status_code >= 400:
            retry = response.headers.get("retry-after")
            raise TargetHTTPError(
                f"status {response.status_code}",
                response.status_code,
                None if retry is None else float(retry),
            )
        try:
            return tuple(item["id"] for item in response.json()["results"])
        except ValueError as exc:
            raise TargetProtocolError(f"bad JSON: {exc}") from exc

    return fire
