"""The adapters' requests over benchd's own pool: the request sent is the one asked, always.

:func:`benchd.http.client.open_clients` sends through the load pass's pool
(:class:`benchd.http.sender.PoolSender`) and replays a body-less
request it serialized lately instead of building it again; these tests read
what a loopback server received. (The hostile-answer bounds of this path are
in tests/hardening/test_hostile_answers.py, stack ``adapter``.)
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hostile_store import RawAnswers, response
from support import self_signed_cert

from benchd.errors import TargetUnreachable
from benchd.http.client import PREPARED_KEPT, Clients, open_clients
from benchd.http.sender import PoolSender


@dataclass(frozen=True)
class _Connection:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    max_retries: int = 0
    backoff_s: float = 0.0
    max_retry_after_s: float = 0.0
    max_response_bytes: int = 1 << 20


@pytest.fixture
def server() -> Iterator[tuple[RawAnswers, list[tuple[str, str]]]]:
    got: list[tuple[str, str]] = []

    def route(method: str, target: str) -> bytes:
        got.append((method, target))
        return response(200, b"{}")

    with RawAnswers() as raw:
        raw.route = route
        yield raw, got


def _send_all(clients: Clients, asked: list[tuple[str, str, dict[str, Any]]]) -> None:
    async def main() -> None:
        try:
            for method, path, params in asked:
                answer = await clients.http.request(method, path, params=params)
                assert answer.status == 200
        finally:
            await clients.http.aclose()

    anyio.run(main)


def test_each_request_sent_is_the_one_asked_when_requests_are_replayed(
    server: tuple[RawAnswers, list[tuple[str, str]]],
) -> None:
    raw, got = server
    clients = open_clients(_Connection(raw.url), {"x-api-key": "k"})
    assert clients.http.sends_over_own_pool
    a = {"q": "harbor ferry", "limit": 11, "client_id": "ns"}
    b = {"q": "harbor ferry", "limit": 11, "client_id": "ns", "reference_date": "2026-05-01"}
    asked = [
        ("GET", "/memory/search", a),
        ("GET", "/memory/search", b),  # the corpus's anchor came: a new request
        ("GET", "/memory/search", a),
        ("GET", "/export", {"flag": True}),  # a bool is sent as "true" ...
        ("GET", "/export", {"flag": 1}),  # ... an int as "1", though True == 1 as keys
        ("DELETE", "/memory/benchd%3Ans%3A1", {}),
        ("DELETE", "/memory/benchd%3Ans%3A2", {}),
        ("DELETE", "/memory/benchd%3Ans%3A1", {}),
    ]
    _send_all(clients, asked)
    built = httpx.AsyncClient(base_url=raw.url)
    expected = [
        (m, str(built.build_request(m, p, params=q).url.raw_path, "ascii")) for m, p, q in asked
    ]
    assert got == expected
    assert got[3][1].endswith("flag=true") and got[4][1].endswith("flag=1")


def test_requests_kept_for_replay_are_bounded(
    server: tuple[RawAnswers, list[tuple[str, str]]],
) -> None:
    raw, got = server
    clients = open_clients(_Connection(raw.url), {})
    asked = [("GET", "/export", {"offset": i}) for i in range(PREPARED_KEPT + 10)]
    asked += [("GET", "/export", {"offset": 0})]  # dropped as the oldest: built again, the same
    _send_all(clients, asked)
    assert len(clients.http._prepared) == PREPARED_KEPT
    assert [t for _, t in got] == [f"/export?offset={q['offset']}" for _, _, q in asked]


def test_a_cleanups_deletes_do_not_push_a_repeated_search_out_of_the_replay(
    server: tuple[RawAnswers, list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, got = server
    built: list[str] = []
    prepare = PoolSender.prepare

    def counting(request: httpx.Request) -> Any:
        built.append(request.method)
        return prepare(request)

    monkeypatch.setattr(PoolSender, "prepare", staticmethod(counting))
    clients = open_clients(_Connection(raw.url), {})
    search = ("GET", "/memory/search", {"q": "harbor ferry", "limit": 10})
    deletes = [("DELETE", f"/memory/r{i}", {}) for i in range(PREPARED_KEPT + 44)]
    _send_all(clients, [search, *deletes, search])
    assert len(got) == len(deletes) + 2  # every request was sent ...
    assert built.count("GET") == 1  # ... and the search was built once, then replayed
    assert built.count("DELETE") == len(deletes)
    assert len(clients.http._prepared) == 1  # no delete kept


def test_a_proxy_named_for_the_store_sends_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    store = _Connection("http://store.example:8080")
    assert open_clients(store, {}).http.sends_over_own_pool
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert open_clients(store, {}).http.sends_over_own_pool  # for https only
    monkeypatch.setenv("ALL_PROXY", "http://proxy.example:3128")
    assert not open_clients(store, {}).http.sends_over_own_pool
    monkeypatch.setenv("NO_PROXY", "store.example")
    assert open_clients(store, {}).http.sends_over_own_pool


def test_an_injected_transport_is_used_as_given() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={})

    clients = open_clients(_Connection("http://store.example"), {}, httpx.MockTransport(answer))
    assert not clients.http.sends_over_own_pool
    _send_all(clients, [("GET", "/health", {})])
    assert seen == ["http://store.example/health"]


async def _https_answer(cert: Path, key: Path) -> int:
    """Status of GET /health from an https store with a self-signed ``cert``."""
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(response(200, b"{}"))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    async with server:
        clients = open_clients(_Connection(f"https://127.0.0.1:{port}"), {})
        assert clients.http.sends_over_own_pool
        try:
            return (await clients.http.request("GET", "/health")).status
        finally:
            await clients.http.aclose()


def test_https_stores_are_verified_with_the_certificates_httpx_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed_cert(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(TargetUnreachable, match="TLS failed"):
        anyio.run(_https_answer, cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted as httpx trusts it (trust_env)
    assert anyio.run(_https_answer, cert, key) == 200


async def _connections_for(requests: int, idle_s: float) -> int:
    """Connections a store saw for ``requests`` GETs in a row, each after 10 ms idle."""
    accepted = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            while True:  # keep-alive: one answer per request
                await reader.readuntil(b"\r\n\r\n")
                writer.write(response(200, b"{}"))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        sender = PoolSender(max_response_bytes=1 << 20, idle_s=idle_s)
        spec = sender.prepare(httpx.Request("GET", f"http://127.0.0.1:{port}/health"))
        try:
            for _ in range(requests):
                assert (await sender.send(spec, "GET /health", 30.0)).status == 200
                await anyio.sleep(0.01)  # idle: the clock moves on
        finally:
            await sender.aclose()
    return accepted


def test_a_connection_idle_past_its_time_is_not_reused() -> None:
    """A load balancer may forget an idle connection silently: benchd does not wait on it."""
    assert anyio.run(_connections_for, 3, 3600.0) == 1
    assert anyio.run(_connections_for, 3, 0.001) == 3
