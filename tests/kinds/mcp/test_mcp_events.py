"""An event stream cut at its JSON-RPC answer (benchd.kinds.mcp.events), from bytes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from benchd.errors import TargetProtocolError
from benchd.kinds.mcp.events import _AnswerStream, is_answer

pytestmark = pytest.mark.anyio


class Chunks:
    """A response stream of fixed chunks; ``closed`` once the reader let it go."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size, self.closed, self.sent = data, size, False, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.size):
            self.sent = start + self.size
            yield self.data[start : start + self.size]

    async def aclose(self) -> None:
        self.closed = True


async def read(data: bytes, size: int = 7, max_bytes: int = 1 << 20) -> tuple[bytes, Chunks]:
    inner = Chunks(data, size)
    stream = _AnswerStream(inner, max_bytes, "POST http://x/mcp")
    out = b"".join([piece async for piece in stream])
    await stream.aclose()
    return out, inner


def event(message: dict[str, object], newline: bytes = b"\n") -> bytes:
    return b"event: message" + newline + b"data: " + json.dumps(message).encode() + newline * 2


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("size", [1, 7, 4096])
async def test_notifications_are_dropped_and_the_stream_ends_at_the_answer(
    newline: bytes, size: int
) -> None:
    notes = b"".join(
        event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": i}}, newline)
        for i in range(50)
    )
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"text": "the method is sound"}}
    tail = b": keep-alive" + newline * 2
    data = b": hello" + newline * 2 + notes + event(answer, newline) + tail * 1000
    out, inner = await read(data, size)
    assert json.loads(out) == answer
    assert inner.sent < len(data)  # the keep-alive comments after it were never read
    assert inner.closed


async def test_an_answer_in_several_data_lines_is_joined_with_newlines() -> None:
    data = b'data: {"jsonrpc": "2.0",\ndata: "id": 1, "result": {}}\n\n'
    out, _ = await read(data)
    assert json.loads(out) == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_stream_ending_inside_the_answer_event_still_gives_it() -> None:
    out, _ = await read(b'data: {"id": 1, "result": {}}')
    assert json.loads(out) == {"id": 1, "result": {}}


async def test_a_stream_without_an_answer_gives_an_empty_body() -> None:
    out, _ = await read(event({"jsonrpc": "2.0", "method": "notifications/message"}) * 3)
    assert out == b""


async def test_an_event_past_max_bytes_is_decode() -> None:
    data = b"data: " + b"x" * 5000 + b"\n\n"
    with pytest.raises(TargetProtocolError, match="max_response_bytes = 1000"):
        await read(data, max_bytes=1000)


async def test_a_large_answer_is_handed_on_in_pieces_and_whole() -> None:
    answer = {"id": 1, "result": {"text": "y" * 3_000_000}}
    out, _ = await read(event(answer), size=65536, max_bytes=8 << 20)
    assert json.loads(out) == answer


def test_what_is_taken_as_an_answer() -> None:
    assert is_answer(b'{"id": 1, "result": {"method": "x"}}')
    assert not is_answer(b'{"method": "ping", "id": 1}')
    assert is_answer(b"not json")
