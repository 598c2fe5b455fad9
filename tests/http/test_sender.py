"""The engine's HTTP sender: adapters' httpx requests sent over loopback, errors translated."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import json
import socket
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import httpx
import pytest
from fake_store import FakeStore
from loopback_target import LoopbackTarget, serve_target

from benchd.errors import (
    TargetAuthError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.client import ErrorContext, retry_after_s
from benchd.http.sender import PoolSender, RequestSpec, make_http_fire
from benchd.load import LoadProfile, LoadRun, run_load

pytestmark = pytest.mark.anyio

SECRET = "sk-very-secret-key"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def target() -> AsyncIterator[LoopbackTarget]:
    async with serve_target(LoopbackTarget()) as served:
        yield served


class _Builder:
    """Builds ``GET /q/<i>`` with an API key header, counting calls."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.calls = 0

    def __call__(self, query: int) -> httpx.Request:
        self.calls += 1
        url = f"{self.base_url}/q/{query}"
        return httpx.Request("GET", url, params={"q": "text"}, headers={"x-api-key": SECRET})


def _parse(_query: int, _status: int, _headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
    return tuple(item["id"] for item in json.loads(body)["results"])


async def _fire_once(target: LoopbackTarget, query: int, timeout_s: float = 5.0) -> tuple[str, ...]:
    async with make_http_fire(
        _Builder(target.base_url), _parse, concurrency=2, timeout_s=timeout_s
    ) as fire:
        return await fire(query)


async def test_fire_returns_the_parsed_ids_and_builds_each_request_once(
    target: LoopbackTarget,
) -> None:
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=2, timeout_s=5) as fire:
        answers = [await fire(i % 2) for i in range(6)]
    assert answers == [("doc-0",), ("doc-1",)] * 3
    assert build.calls == 2


@pytest.mark.parametrize(
    ("status", "kind"), [(404, "http_4xx"), (429, "rate_limited"), (503, "http_5xx")]
)
async def test_an_error_status_becomes_a_target_http_error_of_its_kind(
    target: LoopbackTarget, status: int, kind: str
) -> None:
    target.statuses = {3: status}
    with pytest.raises(TargetHTTPError) as caught:
        await _fire_once(target, 3)
    assert caught.value.kind == kind
    assert caught.value.status == status
    assert caught.value.retry_after_s == (2.0 if status == 429 else None)


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_an_auth_error_that_never_shows_the_key(
    target: LoopbackTarget, status: int
) -> None:
    target.statuses = {0: status}
    with pytest.raises(TargetAuthError) as caught:
        await _fire_once(target, 0)
    assert SECRET not in str(caught.value)
    assert "GET http://127.0.0.1" in str(caught.value)
    assert "q=text" not in str(caught.value)


async def test_a_refused_key_under_load_names_where_the_key_came_from(
    target: LoopbackTarget,
) -> None:
    target.statuses = {0: 401}
    errors = ErrorContext(key_source="api_key_env BRAIN_API_KEY")
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=1, timeout_s=5, errors=errors) as fire:
        with pytest.raises(TargetAuthError) as caught:
            await fire(0)
    assert str(caught.value).endswith("refused the API key from api_key_env BRAIN_API_KEY")


async def test_a_body_the_parser_rejects_is_a_protocol_error(target: LoopbackTarget) -> None:
    target.garbage = {0}
    with pytest.raises(TargetProtocolError, match="unexpected response body"):
        await _fire_once(target, 0)


async def test_a_refused_connection_is_target_unreachable() -> None:
    async with serve_target(LoopbackTarget()) as gone:
        dead = LoopbackTarget(port=gone.port)
    with pytest.raises(TargetUnreachable, match="cannot connect"):
        await _fire_once(dead, 0)


async def test_no_answer_within_the_timeout_is_target_timeout(target: LoopbackTarget) -> None:
    target.hang = {0}
    # the target never answers: only the 0.2 s request timeout can end this, and
    # the 60 s guard only catches a timeout that is not enforced at all.
    with anyio.fail_after(60), pytest.raises(TargetTimeout):
        await _fire_once(target, 0, timeout_s=0.2)


async def test_run_load_over_the_http_fire_classifies_every_outcome(
    target: LoopbackTarget,
) -> None:
    target.statuses = {1: 500}
    target.garbage = {2}
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=4, timeout_s=5) as fire:
        run = await run_load(fire, 4, LoadProfile(mode="closed", concurrency=4, requests=40))
    assert run.counts() == {"ok": 20, "http_5xx": 10, "decode": 10}
    assert {ids for _, ids in run.answers()} == {("doc-0",), ("doc-3",)}


async def test_concurrent_answers_read_through_one_buffer_stay_apart(
    target: LoopbackTarget,
) -> None:
    """The pool's connections share a read buffer: every answer is still its own query's."""
    target.delay_s = 0.001  # answers interleave across the connections
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=8, timeout_s=30) as fire:
        run = await run_load(fire, 8, LoadProfile(mode="closed", concurrency=8, requests=400))
    assert run.counts() == {"ok": 400}
    assert all(ids == (f"doc-{query}",) for query, ids in run.answers())
    assert _max_in_flight(run) > 1


def test_request_spec_serializes_the_request_once_without_accept_encoding() -> None:
    client = httpx.Client(base_url="http://store.test:8080")
    request = client.build_request(
        "POST", "/export/import?x=1", json={"data": []}, headers={"x-api-key": SECRET}
    )
    spec = RequestSpec.from_httpx(request)
    head, _, body = spec.wire.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /export/import?x=1 HTTP/1.1"
    assert b"host: store.test:8080" in [line.lower() for line in lines]
    assert b"x-api-key: " + SECRET.encode() in lines
    assert b"content-length: 11" in [line.lower() for line in lines]
    assert not [line for line in lines if line.lower().startswith(b"accept-encoding")]
    assert body == b'{"data":[]}'
    assert spec.origin == ("http", "store.test", 8080)
    assert spec.where == "POST http://store.test:8080/export/import"


_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
_BODY = b'{"results": [{"id": "a"}, {"id": "b"}]}'


@pytest.mark.parametrize(
    "raw",
    [
        _HEAD
        + b"Transfer-Encoding: chunked\r\n\r\n5\r\n"
        + _BODY[:5]
        + b"\r\n"
        + hex(len(_BODY) - 5)[2:].encode()
        + b"\r\n"
        + _BODY[5:]
        + b"\r\n0\r\n\r\n",
        _HEAD
        + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
        % (len(gzip.compress(_BODY)), gzip.compress(_BODY)),
        _HEAD + b"Connection: close\r\n\r\n" + _BODY,  # delimited by closing
        b"HTTP/1.1 100 Continue\r\n\r\n"
        + _HEAD
        + b"Content-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY),
    ],
    ids=["chunked", "gzip", "close-delimited", "after-100-continue"],
)
async def test_answers_are_read_whatever_their_framing(target: LoopbackTarget, raw: bytes) -> None:
    target.raw = {0: raw}
    assert await _fire_once(target, 0) == ("a", "b")


async def test_a_connection_the_store_closed_is_replaced_transparently(
    target: LoopbackTarget,
) -> None:
    target.raw = {0: _HEAD + b"Content-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY)}
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=1, timeout_s=5) as fire:
        assert [await fire(0) for _ in range(3)] == [("a", "b")] * 3  # server closes each time


async def test_a_malformed_status_line_is_a_protocol_error(target: LoopbackTarget) -> None:
    target.raw = {0: b"HTTX/9 nonsense\r\n\r\n"}
    with pytest.raises(TargetProtocolError, match="malformed HTTP"):
        await _fire_once(target, 0)


def test_retry_after_accepts_seconds_and_http_dates_and_ignores_garbage() -> None:
    assert retry_after_s("7") == 7.0
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert retry_after_s(future) == pytest.approx(30, abs=2)
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None


def _max_in_flight(run: LoadRun) -> int:
    events = sorted([(s, 1) for s in run.start] + [(e, -1) for e in run.end])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def _count_benchd_timers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every timer benchd's own code schedules on the running loop from now on."""
    loop = asyncio.get_running_loop()
    armed: list[object] = []
    schedule = loop.call_at

    def counting(when: float, callback: Callable[..., object], *args: object) -> object:
        if getattr(callback, "__module__", "").startswith("benchd."):
            armed.append(callback)
        return schedule(when, callback, *args)

    monkeypatch.setattr(loop, "call_at", counting)
    return armed


async def test_a_connection_times_many_answers_with_one_timer(
    target: LoopbackTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timer per request costs two heap operations on the loop; one per connection holds."""
    armed = _count_benchd_timers(monkeypatch)
    build = _Builder(target.base_url)
    async with make_http_fire(build, _parse, concurrency=1, timeout_s=30) as fire:
        answers = [await fire(0) for _ in range(40)]
    assert answers == [("doc-0",)] * 40
    assert len(armed) == 1


async def test_a_shorter_timeout_on_a_reused_connection_still_holds(
    target: LoopbackTarget,
) -> None:
    """The connection's timer, armed for a long timeout, is brought forward for a short one."""
    target.hang = {1}
    sender = PoolSender(max_response_bytes=1 << 20)
    build = _Builder(target.base_url)
    try:
        answered = await sender.send(sender.prepare(build(0)), "GET /q/0", timeout_s=600)
        assert answered.status == 200
        # only the 0.2 s timeout can end this; the 60 s guard catches one that is not enforced
        with anyio.fail_after(60), pytest.raises(TargetTimeout):
            await sender.send(sender.prepare(build(1)), "GET /q/1", timeout_s=0.2)
    finally:
        await sender.aclose()


def _serve_canned(sock: socket.socket, answer: bytes, stop: threading.Event) -> None:
    """A keep-alive HTTP server for one connection at a time, reading in small pieces."""
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            head = b""
            while chunk := conn.recv(4096):
                head += chunk
                while b"\r\n\r\n" in head:
                    _, _, head = head.partition(b"\r\n\r\n")
                    conn.sendall(answer)


async def test_reading_a_small_answer_allocates_no_large_buffer() -> None:
    """Reads land in the connection's own buffer, not in a fresh read-sized bytes each."""
    body = json.dumps({"results": [{"id": "a"}, {"id": "b"}]}).encode()
    answer = _HEAD + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
        server = threading.Thread(target=_serve_canned, args=(sock, answer, stop), daemon=True)
        server.start()
        build = _Builder(f"http://127.0.0.1:{port}")
        try:
            async with make_http_fire(build, _parse, concurrency=1, timeout_s=30) as fire:
                assert await fire(0) == ("a", "b")  # the connection and its buffer exist now
                tracemalloc.start()
                try:
                    before = tracemalloc.get_traced_memory()[0]
                    answers = [await fire(0) for _ in range(20)]
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
        finally:
            stop.set()
            sock.close()
            server.join(timeout=10)
    assert answers == [("a", "b")] * 20
    assert peak - before < 64 * 1024


def test_an_idle_connection_is_not_reused_on_another_event_loop() -> None:
    """A pool kept across ``anyio.run`` calls opens a new connection on the new loop."""
    opened: list[object] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"results": []})

    store = FakeStore(answer)

    async def connect(factory: Any, host: str, port: int, tls: Any) -> Any:
        protocol = await store(factory, host, port, tls)
        opened.append(protocol)
        return protocol

    sender = PoolSender(max_response_bytes=1 << 20, connect=connect)
    spec = sender.prepare(httpx.Request("GET", "http://store.test/health"))

    async def once() -> int:
        return (await sender.send(spec, "GET /health", 5.0)).status

    assert anyio.run(once) == 200
    assert anyio.run(once) == 200
    assert len(opened) == 2  # the first loop's idle connection was closed, not reused
