"""benchd bounds what it reads from a store: size (max_response_bytes) and time (timeout_s).

A real loopback server answers with a body that is huge, inflates into a
huge one, or is dribbled out; the zengram adapter and the load pass's sender
must stop with a classified, one-line error long before
memory or the cycle budget run out.
"""

from __future__ import annotations

import gzip
from typing import Any

import anyio
import pytest

from benchd.errors import TargetProtocolError, TargetTimeout
from benchd.http.sender import search_fire
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.server import serve_app
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

CHUNK = b"x" * 65536


async def endless(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Chunked 200 with no content-length: 64 MiB, far past the client's cap."""
    start = {"type": "http.response.start", "status": 200, "headers": []}
    await send(start)
    for _ in range(1024):
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def dribble(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A valid JSON answer sent one byte every 100 ms (about 6 s in all)."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for byte in b'{"results": []' + b" " * 45 + b"}":
        await send({"type": "http.response.body", "body": bytes([byte]), "more_body": True})
        await anyio.sleep(0.1)
    await send({"type": "http.response.body", "body": b""})


async def declared_huge(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = [(b"content-length", str(1 << 40).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": CHUNK, "more_body": True})


@pytest.mark.parametrize("app", [endless, declared_huge], ids=["chunked", "content-length"])
async def test_an_oversized_body_stops_at_max_response_bytes(app: Any) -> None:
    async with serve_app(app) as url:
        target = ZengramTarget(
            ZengramConfig(url=url, max_retries=0, max_response_bytes=1 << 20), None
        )
        try:
            with pytest.raises(TargetProtocolError) as caught:
                await target.search(SearchQuery(q="anything", limit=5))
        finally:
            await target.aclose()
    message = str(caught.value)
    assert caught.value.kind == "decode"
    assert "max_response_bytes = 1048576" in message and "\n" not in message
    assert url + "/memory/search" in message


async def test_a_dribbled_body_is_cut_off_by_the_request_deadline() -> None:
    async with serve_app(dribble) as url:
        # Each byte arrives well within httpx's per-read timeout; only a
        # whole-request deadline can stop this.
        target = ZengramTarget(ZengramConfig(url=url, max_retries=0, timeout_s=0.4), None)
        try:
            # the body would arrive whole after ~6 s with no read ever timing out:
            # a timeout can only come from the whole-request deadline
            with pytest.raises(TargetTimeout):
                await target.search(SearchQuery(q="anything", limit=5))
        finally:
            await target.aclose()


async def test_the_default_cap_is_8_mib() -> None:
    assert ZengramConfig(url="http://127.0.0.1:1").max_response_bytes == 8 * 1024 * 1024


BOMB = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB inflated, ~64 KiB on the wire


async def gzip_bomb(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = [(b"content-encoding", b"gzip"), (b"content-length", str(len(BOMB)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BOMB})


@pytest.mark.parametrize("app", [endless, gzip_bomb], ids=["chunked", "gzip-bomb"])
async def test_the_load_pass_sender_bounds_bodies_too(app: Any) -> None:
    async with serve_app(app) as url:
        target = ZengramTarget(ZengramConfig(url=url), None)
        try:
            async with search_fire(
                target,
                [SearchQuery(q="anything", limit=5)],
                concurrency=1,
                timeout_s=10,
                max_response_bytes=1 << 20,
            ) as fire:
                with pytest.raises(TargetProtocolError, match="max_response_bytes = 1048576"):
                    await fire(0)
        finally:
            await target.aclose()
