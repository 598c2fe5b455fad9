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
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from connection_support import ConnectionSettings
from fake_store import FakeStore
from hostile_store import RawAnswers, response
from support import self_signed_cert

from benchd.errors import TargetError, TargetUnreachable
from benchd.http import client as client_module
from benchd.http import sender as sender_module
from benchd.http.answers import MAX_HEADERS
from benchd.http.client import PREPARED_KEPT, Clients, open_clients
from benchd.http.sender import PoolSender, open_connection
from benchd.http.writer import RequestWriter


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
    clients = open_clients(ConnectionSettings(raw.url), {"x-api-key": "k"})
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
    clients = open_clients(ConnectionSettings(raw.url), {})
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
    write = RequestWriter.write

    def counting(self: RequestWriter, method: str, path: str, kwargs: Any) -> Any:
        built.append(method)
        return write(self, method, path, kwargs)

    monkeypatch.setattr(RequestWriter, "write", counting)
    clients = open_clients(ConnectionSettings(raw.url), {})
    search = ("GET", "/memory/search", {"q": "harbor ferry", "limit": 10})
    deletes = [("DELETE", f"/memory/r{i}", {}) for i in range(PREPARED_KEPT + 44)]
    _send_all(clients, [search, *deletes, search])
    assert len(got) == len(deletes) + 2  # every request was sent ...
    assert built.count("GET") == 1  # ... and the search was built once, then replayed
    assert built.count("DELETE") == len(deletes)
    assert len(clients.http._prepared) == 1  # no delete kept


def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_a_proxy_named_for_the_store_carries_its_requests(
    server: tuple[RawAnswers, list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, got = server
    opened: list[str] = []

    async def counted(factory: Any, host: str, port: int, tls: Any) -> Any:
        opened.append(host)
        return await open_connection(factory, host, port, tls)

    monkeypatch.setattr(client_module, "open_connection", counted)
    _no_proxies(monkeypatch)
    relayed: list[tuple[str, str]] = []
    store, health = ConnectionSettings(raw.url), [("GET", "/health", {})]
    with RawAnswers() as proxy:
        proxy.route = lambda m, target: relayed.append((m, target)) or response(200, b"{}")
        _send_all(open_clients(store, {}), health)  # straight to the store, over the pool
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        _send_all(open_clients(store, {}), health)  # (for https stores only)
        monkeypatch.setenv("ALL_PROXY", proxy.url)
        _send_all(open_clients(store, {}), health)  # through the proxy, over httpx
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        _send_all(open_clients(store, {}), health)  # bypassed
    assert got == [("GET", "/health")] * 3
    assert opened == ["127.0.0.1"] * 3
    assert relayed == [("GET", f"{raw.url}/health")]


def _header_flood() -> bytes:
    head = "".join(f"X-H{i}: v\r\n" for i in range(MAX_HEADERS + 1))
    return f"HTTP/1.1 200 OK\r\n{head}Content-Length: 2\r\n\r\n{{}}".encode()


HOSTILE = {
    "header-flood": _header_flood(),
    "past-the-cap": b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * (2 << 20),  # ends when it closes
    "corrupt-gzip": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 6\r\n\r\n"
    + b"\x1f\x8bnot",
}


def _failure(url: str) -> tuple[str, str]:
    async def main() -> tuple[str, str]:
        clients = open_clients(ConnectionSettings(url), {})
        try:
            await clients.http.request("GET", "/health")
        except TargetError as exc:
            return exc.kind, str(exc)
        finally:
            await clients.http.aclose()
        raise AssertionError("the hostile answer was taken")

    return anyio.run(main)


@pytest.mark.parametrize("answer", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_proxied_answer_fails_as_it_fails_over_the_pool(
    answer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one error map judges both paths: the same answer, the same error, word for word."""
    _no_proxies(monkeypatch)
    with RawAnswers() as store, RawAnswers() as proxy:
        store.answer = proxy.answer = lambda: [answer]
        direct = _failure(store.url)
        monkeypatch.setenv("ALL_PROXY", proxy.url)
        proxied = _failure(store.url)
    assert proxy.requests == 1
    assert direct[0] == "decode"
    assert proxied == direct


def test_a_fake_store_is_sent_to_over_benchds_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's fake store stands for the network: never proxied, one keep-alive connection."""
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    seen: list[tuple[str, str, str]] = []
    connections: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.headers["x-api-key"]))
        return httpx.Response(200, json={})

    class Counted(FakeStore):
        async def __call__(self, factory: Any, host: str, port: int, tls: Any) -> Any:
            connections.append(f"{host}:{port}")
            return await super().__call__(factory, host, port, tls)

    settings = ConnectionSettings("http://store.example")
    clients = open_clients(settings, {"x-api-key": "k"}, Counted(answer))
    _send_all(clients, [("GET", "/health", {}), ("GET", "/health", {})])
    assert seen == [("GET", "/health", "k")] * 2
    assert connections == ["store.example:80"]


def _never(request: httpx.Request) -> Awaitable[httpx.Response]:
    return asyncio.get_running_loop().create_future()  # never done


def _reset(request: httpx.Request) -> httpx.Response:
    raise ConnectionResetError("reset by the fake store")


PLAYED: dict[str, tuple[Any, str, str, int]] = {
    "reset": (_reset, "connect", "cannot connect", 2),
    "silence": (_never, "timeout", "no complete answer within the timeout", 2),
    "garbage": (lambda request: b"HTTP/1.1 2OO OK\r\n\r\n", "decode", "malformed HTTP", 1),
}


@pytest.mark.parametrize(("played", "kind", "words", "sent"), PLAYED.values(), ids=PLAYED.keys())
def test_failures_a_fake_store_plays_are_judged_as_the_networks(
    played: Any, kind: str, words: str, sent: int
) -> None:
    """What a connection meets, played: the pool's error map, the client's retries."""
    calls: list[str] = []

    def answer(request: httpx.Request) -> Any:
        calls.append(request.method)
        return played(request)

    settings = ConnectionSettings("http://store.example", timeout_s=0.5, max_retries=1)
    clients = open_clients(settings, {}, FakeStore(answer))

    async def main() -> TargetError:
        try:
            with pytest.raises(TargetError) as failed:
                await clients.http.request("GET", "/health")
        finally:
            await clients.http.aclose()
        return failed.value

    error = anyio.run(main)
    assert (error.kind, words in str(error)) == (kind, True), error
    assert calls == ["GET"] * sent and clients.http.retries == sent - 1  # max_retries = 1


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
        clients = open_clients(ConnectionSettings(f"https://127.0.0.1:{port}"), {})
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


def _timed_out(clients: Clients) -> TargetError:
    async def main() -> TargetError:
        try:
            with pytest.raises(TargetError) as failed:
                await clients.http.request("POST", "/export/import", json={"data": []})
        finally:
            await clients.http.aclose()
        return failed.value

    return anyio.run(main)


def test_one_deadline_bounds_connecting_and_the_answer_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool's own timers bound the whole attempt: the answer gets what connecting left."""
    given: list[float] = []
    exchange = sender_module._Connection.exchange

    async def recorded(self: Any, wire: bytes, timeout_s: float) -> Any:
        given.append(timeout_s)
        return await exchange(self, wire, timeout_s)

    monkeypatch.setattr(sender_module._Connection, "exchange", recorded)

    class SlowToConnect(FakeStore):
        async def __call__(self, factory: Any, host: str, port: int, tls: Any) -> Any:
            await anyio.sleep(0.2)
            return await super().__call__(factory, host, port, tls)

    settings = ConnectionSettings("http://store.example", timeout_s=1.0)
    error = _timed_out(open_clients(settings, {}, SlowToConnect(_never)))
    assert error.kind == "timeout" and "no complete answer within the timeout" in str(error)
    assert len(given) == 1 and given[0] <= 0.81


def test_a_request_is_not_written_once_connecting_took_its_whole_time() -> None:
    written: list[bytes] = []

    class Stubborn(FakeStore):
        """Connects whatever the deadline says, long after it."""

        async def __call__(self, factory: Any, host: str, port: int, tls: Any) -> Any:
            try:
                await asyncio.sleep(1.0)
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)  # and still comes up, past the deadline
            protocol = await super().__call__(factory, host, port, tls)
            protocol._transport.write = written.append
            return protocol

    settings = ConnectionSettings("http://store.example", timeout_s=0.1)
    error = _timed_out(open_clients(settings, {}, Stubborn(lambda request: httpx.Response(200))))
    assert error.kind == "timeout" and written == []
