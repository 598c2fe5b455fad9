"""A streamable-HTTP event stream read up to its JSON-RPC answer, and no further.

A server may answer a POST with a ``text/event-stream`` that carries its own
notifications and requests, then the answer; it SHOULD close the stream
then, but need not (a stream kept open with ``: keep-alive`` comments is
allowed). :func:`answer_events` is an httpx response hook: it replaces such
a stream with one that yields only the ``data`` of the first event that is
a JSON-RPC answer and ends there, so the bounded reader
(:class:`~benchd.http.client.RetryingClient`) returns at that answer and
the body it hands over is that answer's JSON, decoded like any other
(in the decode worker when large). Events before it are dropped; the bytes
held at a time are bounded by ``max_bytes``.

An event is taken as the answer when its data never names ``"method"``, or
when it does and decodes to an object without a ``method`` member; an event
too large to decode on the loop that names ``"method"`` is taken as the
answer, and the wire's decode then finds whether it is.

A stream that is compressed (``Content-Encoding``) is left whole, as before:
its events cannot be split before the body is inflated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
import httpx

from benchd.errors import TargetProtocolError

__all__ = ["ANSWER_CONTENT_TYPE", "EVENT_STREAM", "answer_events", "is_answer"]

EVENT_STREAM = "text/event-stream"

ANSWER_CONTENT_TYPE = "application/json; benchd-from=text/event-stream"
"""The content type of a stream :func:`answer_events` cut to its answer (the wire says
"event stream" in its errors)."""

_PARSE_BYTES = 64 * 1024
"""Events up to this size that name ``"method"`` are decoded to tell a notification."""

_PIECE_BYTES = 256 * 1024
"""The answer event is handed on in pieces of this size (see :func:`_pieces`)."""

_YIELD_EVERY = 64
"""Events dropped between two checkpoints (a flood of notifications never holds the loop)."""


def answer_events(max_bytes: int) -> Callable[[httpx.Response], Coroutine[Any, Any, None]]:
    """The response hook (see the module docstring)."""

    async def hook(response: httpx.Response) -> None:
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != EVENT_STREAM or response.headers.get("content-encoding"):
            return
        where = f"{response.request.method} {response.request.url}"
        response.stream = _AnswerStream(response.stream, max_bytes, where)
        response.headers["content-type"] = ANSWER_CONTENT_TYPE
        response.headers.pop("content-length", None)

    return hook


def is_answer(data: bytes) -> bool:
    """Whether an event's data is taken as a JSON-RPC answer (see the module docstring)."""
    if len(data) > _PARSE_BYTES or b'"method"' not in data:
        return True
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return True  # not JSON: the wire's decode says so
    return not (isinstance(value, dict) and "method" in value)


async def _pieces(event: bytes) -> AsyncIterator[bytes]:
    """``event`` in :data:`_PIECE_BYTES` pieces, a checkpoint between two: the reader
    writes a large answer to its spill file a piece at a time, the loop free between."""
    if len(event) <= _PIECE_BYTES:
        yield event
        return
    with memoryview(event) as view:
        for start in range(0, len(event), _PIECE_BYTES):
            if start:
                await anyio.lowlevel.checkpoint()
            yield bytes(view[start : start + _PIECE_BYTES])


def _data(pending: bytearray, end: int) -> bytes | None:
    """The value of the ``data`` line ending at ``end`` (one copy), else None."""
    if not pending.startswith(b"data:"):
        return None
    stop = end - 1 if end > 0 and pending[end - 1] == 13 else end  # a CR before the LF
    start = 6 if pending.startswith(b"data: ") else 5
    with memoryview(pending) as view:
        return bytes(view[start:max(start, stop)])


class _AnswerStream(httpx.AsyncByteStream):
    """The data of the first answer event of ``inner`` (see the module docstring)."""

    def __init__(self, inner: Any, max_bytes: int, where: str) -> None:
        self._inner = inner
        self._max = max_bytes
        self._where = where

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = bytearray()  # the line being read
        scanned = 0
        data: list[bytes] = []  # the event's data lines so far
        held = 0
        dropped = 0
        async for chunk in self._inner:
            pending += chunk
            while (end := pending.find(b"\n", scanned)) >= 0:
                value = _data(pending, end)
                blank = end == 0 or (end == 1 and pending[0] == 13)
                del pending[: end + 1]
                scanned = 0
                if value is not None:
                    data.append(value)
                    held += len(value)
                    continue
                if not blank:  # another field, or a comment (": keep-alive")
                    continue
                if not data:
                    continue
                event = b"\n".join(data)
                data, held = [], 0
                if is_answer(event):
                    async for piece in _pieces(event):
                        yield piece
                    return
                dropped += 1
                if dropped % _YIELD_EVERY == 0:
                    await anyio.lowlevel.checkpoint()
            scanned = len(pending)
            if scanned + held > self._max:
                raise TargetProtocolError(
                    f"{self._where}: an event of more than max_response_bytes = {self._max} "
                    "bytes in the event stream"
                )
        if (value := _data(pending, len(pending))) is not None:  # a last line, unended
            data.append(value)
        if data:  # the stream ended inside the event (no blank line after it)
            event = b"\n".join(data)
            if is_answer(event):
                async for piece in _pieces(event):
                    yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()
