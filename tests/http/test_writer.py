"""The adapters' requests written for the own pool: the bytes httpx would send, every one.

:class:`benchd.http.writer.RequestWriter` serializes a request without
building an :class:`httpx.Request`; what it writes must be what
``client.build_request`` and :meth:`RequestSpec.from_httpx` give, byte for
byte, and a request it does not write is built by httpx as before.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from connection_support import ConnectionSettings
from fake_store import FakeStore
from hypothesis import given, settings
from hypothesis import strategies as st
from json_exact import exact

from benchd.http.client import Clients, open_clients
from benchd.http.sender import PoolSender, RequestSpec
from benchd.http.writer import RequestWriter

KEY = "sk-writer-secret-0123"


class _Recorded(FakeStore):
    """A fake store that keeps every byte written to it, as the socket would carry them."""

    def __init__(self) -> None:
        super().__init__(lambda request: httpx.Response(200, json={}))
        self.wire: list[bytes] = []

    async def __call__(self, factory: Callable[[], Any], host: str, port: int, tls: Any) -> Any:
        def recording() -> Any:
            protocol = factory()
            made = protocol.connection_made

            def connection_made(transport: asyncio.Transport) -> None:
                write = transport.write

                def recorded(data: Any) -> None:
                    self.wire.append(bytes(data))
                    write(data)

                transport.write = recorded  # type: ignore[method-assign]
                made(transport)

            protocol.connection_made = connection_made
            return protocol

        return await super().__call__(recording, host, port, tls)


def _clients(url: str = "http://store.example:8080/api", connect: Any = None) -> Clients:
    settings = ConnectionSettings(url, headers={"X-Custom": "one", "Accept": "application/json"})
    return open_clients(settings, {"x-api-key": KEY}, connect or _Recorded())


RECORD = {"id": "benchd:ns:1", "content": "ünïcödé — “quoted” \u2028 line\nnext", "n": 1.5}
ASKED: dict[str, tuple[str, str, dict[str, Any]]] = {
    "health": ("GET", "/health", {}),
    "search": (
        "GET",
        "/memory/search",
        {"params": {"q": "café & tea/¿qué? a+b=c #1 ~x_y.z-", "limit": 10, "read_only": True}},
    ),
    "reserved": ("GET", "/export", {"params": {"a b": "c%20d", "e&f": "g=h", "i": None, "f": 0.5}}),
    "pairs": ("GET", "/export", {"params": [("a", "1"), ("b", "2"), ("a", "3")]}),
    "empty-params": ("GET", "/export", {"params": {}}),
    "import": ("POST", "/export/import", {"json": {"data": [RECORD], "operator_approved": True}}),
    "json-text": ("PUT", "/x", {"json": "ä"}),
    "post-empty": ("POST", "/memory/flush", {}),
    "delete": ("DELETE", "/memory/benchd%3Ans%3A1", {}),
    "delete-timeout": ("DELETE", "/memory/r1", {"timeout": 3.0}),
    "own-headers": ("POST", "/q", {"headers": {"X-Custom": "two", "x-trace": "t"}, "json": [1]}),
    "own-type": ("POST", "/q", {"headers": {"Content-Type": "application/vnd+json"}, "json": {}}),
    "connection": ("GET", "/q", {"headers": {"connection": "close"}}),
    "sub-delims": ("GET", "/a/b;c=d:e@f!$&'()*+,=", {}),
    "root": ("GET", "/", {"params": {"q": "x"}}),
}
"""Requests the writer writes itself (none is left to httpx)."""

LEFT: dict[str, tuple[str, str, dict[str, Any]]] = {
    "space-in-path": ("GET", "/a b", {}),
    "unicode-path": ("GET", "/mémoire", {}),
    "dot-segments": ("GET", "/a/../b/./c", {}),
    "query-in-path": ("GET", "/export?x=1", {"params": {"y": "2"}}),
    "raw-body": ("POST", "/rpc", {"content": b'{"a":1}'}),
    "list-values": ("GET", "/export", {"params": {"a": ["1", "2"]}}),
    "bytes-header": ("GET", "/q", {"headers": {"x-b": b"v"}}),
    "host-header": ("GET", "/q", {"headers": {"Host": "other.example"}}),
    "lower-method": ("get", "/health", {}),
    "absolute": ("GET", "http://store.example:8080/api/health", {}),
}
"""Requests the writer leaves to httpx: they are built there, the same as ever."""


def _httpx_spec(clients: Clients, method: str, path: str, kwargs: dict[str, Any]) -> RequestSpec:
    return PoolSender.prepare(clients.client.build_request(method, path, **kwargs))


def _writer(clients: Clients) -> RequestWriter:
    writer = RequestWriter.of(clients.client)
    assert writer is not None
    return writer


@pytest.mark.parametrize(("method", "path", "kwargs"), ASKED.values(), ids=ASKED.keys())
def test_the_writer_writes_what_httpx_builds(
    method: str, path: str, kwargs: dict[str, Any]
) -> None:
    clients = _clients()
    written = _writer(clients).write(method, path, kwargs)
    assert written == _httpx_spec(clients, method, path, kwargs)  # origin, wire and where


@pytest.mark.parametrize(("method", "path", "kwargs"), LEFT.values(), ids=LEFT.keys())
def test_what_the_writer_leaves_is_built_by_httpx(
    method: str, path: str, kwargs: dict[str, Any]
) -> None:
    assert _writer(_clients()).write(method, path, kwargs) is None


def _sent(clients: Clients, asked: list[tuple[str, str, dict[str, Any]]]) -> None:
    async def main() -> None:
        try:
            for method, path, kwargs in asked:
                assert (await clients.http.request(method, path, **kwargs)).status == 200
        finally:
            await clients.http.aclose()

    anyio.run(main)


def test_the_bytes_on_the_wire_are_httpxs_and_httpx_builds_none_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = _Recorded()
    clients = _clients(connect=store)
    asked = list(ASKED.values())
    expected = [_httpx_spec(clients, m, p, kw).wire for m, p, kw in asked]

    def refused(*args: Any, **kwargs: Any) -> httpx.Request:
        raise AssertionError("built by httpx")

    monkeypatch.setattr(clients.client, "build_request", refused)
    _sent(clients, asked)
    assert store.wire == expected
    assert all(KEY.encode() in wire for wire in store.wire)  # the key rides on every request


def test_requests_left_to_httpx_go_out_as_httpx_builds_them() -> None:
    store = _Recorded()
    clients = _clients(connect=store)
    asked = [(m, p, kw) for m, p, kw in LEFT.values() if m.isupper()]
    expected = [_httpx_spec(clients, m, p, kw).wire for m, p, kw in asked]
    _sent(clients, asked)
    assert store.wire == expected


def test_a_body_json_cannot_carry_fails_as_httpx_fails() -> None:
    clients = _clients()
    for body, error in (({"x": math.nan}, ValueError), ({"x": {1, 2}}, TypeError)):
        with pytest.raises(error) as ours:
            _writer(clients).write("POST", "/x", {"json": body})
        with pytest.raises(error) as theirs:
            clients.client.build_request("POST", "/x", json=body)
        assert str(ours.value) == str(theirs.value)


def test_a_body_that_contains_itself_fails_as_httpx_fails() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    clients = _clients()
    with pytest.raises(ValueError, match="Circular reference") as ours:
        _writer(clients).write("POST", "/x", {"json": {"data": looped}})
    with pytest.raises(ValueError) as theirs:
        clients.client.build_request("POST", "/x", json={"data": looped})
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9", "https://store.example", "http://[::1]:8080/a/b/", "http://h"]
)
def test_every_base_url_is_written_as_httpx_writes_it(url: str) -> None:
    clients = _clients(url)
    for method, path, kwargs in ASKED.values():
        written = _writer(clients).write(method, path, kwargs)
        assert written == _httpx_spec(clients, method, path, kwargs)


def test_a_client_whose_requests_only_httpx_builds_gets_no_writer() -> None:
    assert RequestWriter.of(httpx.AsyncClient(base_url="http://h", params={"a": "1"})) is None
    assert RequestWriter.of(httpx.AsyncClient(base_url="http://h", cookies={"c": "1"})) is None
    assert RequestWriter.of(httpx.AsyncClient(base_url="http://h", headers={"host": "x"})) is None
    assert RequestWriter.of(httpx.AsyncClient(base_url="http://h/?q=1")) is None
    assert RequestWriter.of(httpx.AsyncClient()) is None  # no base URL


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_SCALAR = st.one_of(_TEXT, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
_FINITE = st.floats(allow_nan=False, allow_infinity=False)  # (what JSON refuses: above)
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _FINITE, _TEXT),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_PATH = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=16)
_HEADER = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=":"))


@settings(max_examples=400, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
    path=_PATH.map(lambda p: "/" + p),
    params=st.one_of(
        st.dictionaries(_TEXT, _SCALAR, max_size=4),
        st.lists(st.tuples(_TEXT, _SCALAR), max_size=4),
    ),
    headers=st.dictionaries(_HEADER.filter(bool), _HEADER, max_size=3),
    body=st.one_of(st.none(), _JSON),
)
def test_any_request_the_writer_writes_is_what_httpx_builds(
    method: str, path: str, params: Any, headers: dict[str, str], body: Any
) -> None:
    clients = _clients()
    kwargs = {"params": params, "headers": headers, "json": body}
    written = _writer(clients).write(method, path, kwargs)
    try:
        expected = _httpx_spec(clients, method, path, kwargs)
    except (httpx.InvalidURL, UnicodeEncodeError):
        assert written is None  # httpx refuses it: so does the writer, leaving it to httpx
        return
    if written is not None:
        _assert_same_request(written, expected)
        assert json.loads(written.wire.partition(b"\r\n\r\n")[2] or b"null") == body


def _assert_same_request(written: RequestSpec, expected: RequestSpec) -> None:
    """The same request, its JSON body the same value (orjson may write a float otherwise:
    ``0.00001`` for ``1e-05``) and its ``Content-Length`` counted on the bytes sent."""
    assert (written.origin, written.method, written.where) == (
        expected.origin,
        expected.method,
        expected.where,
    )
    ours, _, our_body = written.wire.partition(b"\r\n\r\n")
    theirs, _, their_body = expected.wire.partition(b"\r\n\r\n")
    if our_body == their_body:
        assert written == expected
        return
    assert b"\r\nContent-Length: %d\r\n" % len(our_body) in ours + b"\r\n"
    sized = b"Content-Length: %d" % len(their_body)
    assert ours.replace(b"Content-Length: %d" % len(our_body), sized) == theirs
    assert exact(json.loads(our_body)) == exact(json.loads(their_body))
