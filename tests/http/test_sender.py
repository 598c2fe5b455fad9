"""The engine's HTTP sender: adapters' httpx requests sent over loopback, errors translated."""

from __future__ import annotations

import email.utils
import gzip
import json
import time
from collections.abc import AsyncIterator, Mapping

import anyio
import httpx
import pytest
from loopback_target import LoopbackTarget, serve_target

from benchd.errors import (
    TargetAuthError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.client import ErrorContext, retry_after_s
from benchd.http.sender import RequestSpec, make_http_fire
from benchd.load import LoadProfile, run_load

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
