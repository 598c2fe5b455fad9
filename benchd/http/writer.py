"""The adapters' requests serialized for benchd's own pool without building an httpx.Request.

:class:`RequestWriter` writes the bytes httpx would build
(``client.build_request``) and :meth:`~benchd.http.sender.RequestSpec.from_httpx`
would serialize, byte for byte but a JSON body's (below), for the requests the
kinds send most: a path of plain characters under the client's base URL,
scalar query parameters, a JSON body, string headers. The client's headers
are encoded once, the query string with httpx's own escaping
(:func:`urllib.parse.urlencode`, which :class:`httpx.QueryParams` uses). A
JSON body is :func:`~benchd.http.jsonbody.json_body`'s: the JSON value httpx
would send (or its error), in bytes that may differ where JSON allows it
(``0.00001`` for ``1e-05``), its ``Content-Length`` counted on them. Any
other request (a path httpx would escape or normalize, a raw body, a header
httpx would add or replace itself) is left to httpx: :meth:`RequestWriter.write`
answers None and the caller builds it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlencode

import httpx

from benchd.http.jsonbody import json_body
from benchd.http.sender import RequestSpec

__all__ = ["RequestWriter"]

_PATH_SAFE = frozenset(chr(i) for i in range(0x21, 0x7F)) - frozenset('"#<>?`{}')
"""What httpx keeps as it is in a path (its ``PATH_SAFE``), less ``?`` and ``#``."""

_METHODS = {m: m.encode("ascii") for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")}
_SIZED = frozenset({"POST", "PUT", "PATCH"})  # httpx says Content-Length: 0 without a body
_OWN_HEADERS = frozenset({b"host", b"content-length", b"transfer-encoding"})
_DROPPED = b"connection"  # RequestSpec.from_httpx drops it (the pool keeps connections alive)
_MAX_URL = 65536  # httpx refuses a URL component longer than this
_SCALARS = (str, int, float)


class RequestWriter:
    """Writes a :class:`RequestSpec` from what ``client.build_request`` is asked, or None.

    Built from the client as it is (its base URL and headers); made with
    :meth:`of`, which answers None for a client whose requests httpx alone
    builds (query parameters or cookies of its own, a base URL with a query).
    """

    def __init__(self, base: httpx.URL, headers: list[tuple[bytes, bytes]]) -> None:
        port = base.port or (443 if base.scheme == "https" else 80)
        self._origin = (base.scheme, base.host, port)
        self._where = f"{base.scheme}://{base.host}:{port}"
        self._prefix = base.raw_path.decode("ascii")  # ends with '/': httpx's base_url
        self._host = b"Host: " + base.netloc
        self._static = [(k, k.lower(), v) for k, v in headers]
        self._typed = any(low == b"content-type" for _, low, _ in self._static)
        lines = [b"%s: %s" % (k, v) for k, low, v in self._static if low != _DROPPED]
        self._after = b"\r\n".join([self._host, *lines])
        self._sized = b"\r\n".join([self._host, b"Content-Length: 0", *lines])

    @classmethod
    def of(cls, client: httpx.AsyncClient) -> RequestWriter | None:
        """A writer for ``client``'s requests, or None where httpx must build them all."""
        base = client.base_url
        names = {k.lower() for k, _ in client.headers.raw}
        if (
            base.scheme not in ("http", "https")
            or not base.host
            or base.query
            or client.params
            or client.cookies
            or names & _OWN_HEADERS
        ):
            return None
        return cls(base, list(client.headers.raw))

    def write(self, method: str, path: str, kwargs: Mapping[str, Any]) -> RequestSpec | None:
        """The request ``build_request(method, path, **kwargs)`` serialized; None: ask httpx."""
        params = headers = body = None
        for name, value in kwargs.items():
            if name == "params":
                params = value
            elif name == "json":
                body = value
            elif name == "headers":
                headers = value
            elif name != "timeout" and value is not None:
                return None  # a raw body, form data, cookies: httpx's
        verb = _METHODS.get(method)
        full = self._path(path)
        if verb is None or full is None:
            return None
        target = full
        if params:
            query = _query(params)
            if query is None or len(query) >= _MAX_URL:
                return None
            target = f"{full}?{query}"
        written = self._head(method, body is None, headers)
        if written is None:
            return None
        head, typed = written
        line = b"%s %s HTTP/1.1\r\n" % (verb, target.encode("ascii"))
        if body is None:
            wire = line + head + b"\r\n\r\n"
        else:
            content = json_body(body)
            kind = b"" if typed else b"\r\nContent-Type: application/json"
            sized = b"\r\nContent-Length: %d%s\r\n\r\n" % (len(content), kind)
            wire = b"".join((line, head, sized, content))
        where = f"{method} {self._where}{unquote(full)}"
        return RequestSpec(self._origin, method, wire, where)

    def _path(self, path: str) -> str | None:
        """The path under the base URL, if httpx would send ``path`` as it is."""
        if type(path) is not str or path[:1] != "/" or path[1:2] == "/":
            return None
        if not _PATH_SAFE.issuperset(path):
            return None
        if "." in path and any(s in (".", "..") for s in path.split("/")):
            return None  # httpx drops dot segments
        full = self._prefix + path[1:]
        return full if len(full) < _MAX_URL else None

    def _head(self, method: str, bodiless: bool, headers: Any) -> tuple[bytes, bool] | None:
        """The header lines after the request line (no final CRLF) in httpx's order, and
        whether they name a Content-Type (a JSON body's is then not added)."""
        sized = bodiless and method in _SIZED
        if not headers:
            return (self._sized if sized else self._after), self._typed
        if type(headers) is not dict:
            return None
        own: list[tuple[bytes, bytes, bytes]] = []
        for name, value in headers.items():
            if type(name) is not str or type(value) is not str:
                return None
            if not (name.isascii() and value.isascii()):
                return None  # httpx raises: let it
            raw = name.encode("ascii")
            own.append((raw, raw.lower(), value.encode("ascii")))
        replaced = {low for _, low, _ in own}
        if replaced & _OWN_HEADERS:
            return None
        merged = [h for h in self._static if h[1] not in replaced] + own
        lines = [self._host, *([b"Content-Length: 0"] if sized else [])]
        lines += [b"%s: %s" % (k, v) for k, low, v in merged if low != _DROPPED]
        return b"\r\n".join(lines), any(low == b"content-type" for _, low, _ in merged)


def _query(params: Any) -> str | None:
    """``params`` as httpx writes them in a query string, or None (not plain scalars)."""
    pairs: Iterable[tuple[Any, Any]] | None = None
    if type(params) is dict:
        pairs = params.items()
    elif type(params) is list or type(params) is tuple:
        pairs = _grouped(params)
    if pairs is None:
        return None
    items: list[tuple[str, str]] = []
    for key, value in pairs:
        if type(key) is not str:
            return None
        text = _text(value)
        if text is None:
            return None
        items.append((key, text))
    return urlencode(items)


def _grouped(params: list[Any] | tuple[Any, ...]) -> list[tuple[Any, Any]] | None:
    """Pairs grouped by name in order of first appearance, as :class:`httpx.QueryParams` does."""
    groups: dict[Any, list[Any]] = {}
    for item in params:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            return None
        groups.setdefault(item[0], []).append(item[1])
    return [(k, v) for k, values in groups.items() for v in values]


def _text(value: Any) -> str | None:
    """httpx's text for a query value (``true``/``false``, ``""`` for None), or None."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if type(value) in _SCALARS:
        return value if type(value) is str else str(value)
    return None
