"""The load engine's HTTP sender: adapters build requests and parse bodies, the engine sends.

Adapters stay sans-I/O: they describe a search as an :class:`httpx.Request`
(``build``) and turn ``(status, headers, body)`` into ranked ids (``parse``).
:func:`make_http_fire` owns the connections and sends those requests through
one aiohttp session whose pool is sized to the load's concurrency. Why not
httpx here: on loopback httpx's shared pool managed 0.5–0.9k req/s and a
client per worker ~2.1k, against ~10k+ for aiohttp (see docs/load.md), and
the throughput goal is to match Locust's FastHttpUser. httpx stays the
request-building API, so adapters need no second HTTP library.

Failures are translated here, once, into benchd errors::

    connection refused / reset / DNS     -> TargetUnreachable   (kind "connect")
    no answer within timeout_s           -> TargetTimeout       (kind "timeout")
    401 / 403                            -> TargetAuthError     (kind "auth")
    any other status >= 400              -> TargetHTTPError     (http_4xx|http_429|http_5xx)
    malformed HTTP, or parse() rejects   -> TargetProtocolError (kind "decode")
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import httpx
from yarl import URL

from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.load import Fire

__all__ = ["Build", "Parse", "RequestSpec", "make_http_fire", "retry_after_s"]

Build = Callable[[int], httpx.Request]
"""Query index -> the search request (a pure function of the index: it is cached)."""

Parse = Callable[[int, int, Mapping[str, str], bytes], tuple[str, ...]]
"""(query index, status, headers, body) -> ranked ids; raise ValueError on a bad body."""

# Headers aiohttp computes itself from the URL and the body.
_DERIVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """An HTTP request ready to send, converted once from an :class:`httpx.Request`."""

    method: str
    url: URL
    headers: Mapping[str, str]
    body: bytes | None
    where: str  # "METHOD scheme://host/path", safe for messages (no query string)

    @classmethod
    def from_httpx(cls, request: httpx.Request) -> RequestSpec:
        """Convert a built httpx request (its body must not be a stream)."""
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DERIVED_HEADERS}
        body = request.read() or None
        url = request.url
        where = f"{request.method} {url.scheme}://{url.netloc.decode()}{url.path}"
        return cls(request.method, URL(str(url), encoded=True), headers, body, where)


def retry_after_s(value: str | None) -> float | None:
    """Parse a ``Retry-After`` header (delay seconds or an HTTP date) into seconds."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_error(spec: RequestSpec, status: int, headers: Mapping[str, str]) -> TargetError:
    if status in (401, 403):
        return TargetAuthError(
            f"{spec.where}: the store refused the API key (HTTP {status}); check the key"
        )
    retry = retry_after_s(headers.get("Retry-After"))
    hint = f", retry after {retry:.0f} s" if retry is not None else ""
    return TargetHTTPError(f"{spec.where}: HTTP {status}{hint}", status, retry)


async def _send(
    session: aiohttp.ClientSession, spec: RequestSpec
) -> tuple[int, Mapping[str, str], bytes]:
    """Send one request; return (status, headers, body) or raise a benchd error."""
    try:
        async with session.request(
            spec.method, spec.url, headers=spec.headers, data=spec.body
        ) as response:
            return response.status, response.headers, await response.read()
    except TimeoutError as exc:
        raise TargetTimeout(f"{spec.where}: no answer in time") from exc
    except aiohttp.ClientConnectionError as exc:
        raise TargetUnreachable(f"{spec.where}: cannot connect ({exc})") from exc
    except aiohttp.ClientError as exc:
        raise TargetProtocolError(f"{spec.where}: malformed HTTP response ({exc})") from exc


def _parse(
    parse: Parse, spec: RequestSpec, query: int, answer: tuple[int, Mapping[str, str], bytes]
) -> tuple[str, ...]:
    status, headers, body = answer
    if status >= 400:
        raise _status_error(spec, status, headers)
    try:
        return parse(query, status, headers, body)
    except TargetError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise TargetProtocolError(f"{spec.where}: unexpected response body ({exc})") from exc


@asynccontextmanager
async def make_http_fire(
    build: Build, parse: Parse, *, concurrency: int, timeout_s: float
) -> AsyncIterator[Fire]:
    """Yield a :data:`~benchd.load.Fire` sending ``build(i)`` and returning ``parse(...)``.

    One keep-alive pool of ``concurrency`` connections serves every request;
    it is closed when the block exits. Requests are built once per query
    index and reused, so ``build`` must depend on the index only. Statuses
    >= 400 raise before ``parse`` is called; ``parse`` sees only successes.
    """
    specs: dict[int, RequestSpec] = {}
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    # No cookie jar: a prober must not carry state from one search to the next.
    jar = aiohttp.DummyCookieJar()
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, cookie_jar=jar
    ) as session:

        async def fire(query: int) -> tuple[str, ...]:
            spec = specs.get(query)
            if spec is None:
                spec = specs[query] = RequestSpec.from_httpx(build(query))
            return _parse(parse, spec, query, await _send(session, spec))

        yield fire
