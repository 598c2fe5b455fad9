"""benchd's HTTP client for the kinds and the embedder: bounded reads and retries.

Every answer is judged by the one error map (:mod:`benchd.http.error_map`:
``status_error`` for statuses, ``exchange_error`` for failed exchanges; the
names the kinds use are re-exported here), whichever path carried it:
benchd's own pool (:class:`~benchd.http.sender.PoolSender`, what
:func:`open_clients` sends through) or httpx (a proxy named by the
environment, an MCP session).

Redirects are never followed, so the API key never reaches the address a
store redirects to. Retries are bounded and counted, with the seconds spent
waiting: 429 waits for ``Retry-After`` (capped), 5xx and connection errors
back off with full jitter, 401/403 and a 429 without ``Retry-After`` are never
retried (the real store locks an IP out after ten failed authentications).
Each attempt is under one deadline, body included, and the answering
attempt's service time is noted (:func:`benchd.store.target.note_service_time`)
so a latency never includes benchd's own waits.
"""

from __future__ import annotations

import math
import random
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

import anyio
import httpx

from benchd.config.schema import url_problem
from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetRateLimited,
    TargetRedirect,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.answers import MAX_HEADERS, Body, BodyBuffer, Inflater
from benchd.http.error_map import (
    DEFAULT_MAX_RESPONSE_BYTES,
    NO_CONTEXT,
    RETRY_AFTER_CEILING_S,
    Answer,
    BadHead,
    ErrorContext,
    TooLarge,
    declared_too_large,
    exchange_error,
    retry_after_s,
    status_error,
    too_large,
)
from benchd.http.jsonbody import json_body
from benchd.http.sender import Connect, PoolSender, RequestSpec, open_connection
from benchd.http.writer import RequestWriter
from benchd.progress import WaitClock, report_wait, waited_window
from benchd.store.target import note_service_time

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "NO_CONTEXT",
    "RETRY_AFTER_CEILING_S",
    "Answer",
    "ClientSettings",
    "Clients",
    "ErrorContext",
    "RetryPolicy",
    "RetryingClient",
    "declared_too_large",
    "http_url_problem",
    "open_clients",
    "positive_problem",
    "retry_after_s",
    "status_error",
    "too_large",
]

# -- the retrying client adapters use ----------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.25
    max_backoff_s: float = 5.0
    max_retry_after_s: float = 30.0


class RetryingClient:
    """Sends requests built by an httpx.AsyncClient; translates errors, retries within bounds.

    Each attempt goes through ``sender`` where one is given (the adapters':
    :func:`open_clients`), else through the httpx client itself (a proxy, an
    MCP session). With a sender, a request is written straight to its bytes
    by a :class:`~benchd.http.writer.RequestWriter` (the bytes httpx would
    build; httpx builds those it does not write, a JSON body either way
    encoded by :func:`~benchd.http.jsonbody.json_body`): httpx's request building
    (URL parsing and merging) costs as much CPU as the exchange. A request
    without a body (a search, a listing page, a lease read) is serialized
    once and replayed while it is among the last :data:`PREPARED_KEPT` asked,
    as the load pass replays its searches.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        base: str,
        *,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        deadline_s: float | None = None,
        context: ErrorContext = NO_CONTEXT,
        sender: PoolSender | None = None,
    ) -> None:
        self._client = client
        self._sender = sender
        self._writer = None if sender is None else RequestWriter.of(client)
        self._prepared: dict[tuple[Any, ...], RequestSpec] = {}
        self.context = context  # what its errors name: the kind's API, the key's source
        self._policy = policy
        self._base = base
        self.max_bytes = max_response_bytes
        self._deadline_s = deadline_s  # whole attempt, body included (httpx's is per read)
        self.retries = 0  # counted, never hidden
        self.retry_wait_s = 0.0  # seconds slept before retries (backoff and Retry-After)

    async def request(self, method: str, path: str, **kwargs: Any) -> Answer:
        return await self.request_allowing(method, path, allow=(), **kwargs)

    async def request_allowing(
        self,
        method: str,
        path: str,
        *,
        allow: tuple[int, ...],
        deadline_s: float | None = None,
        retry_timeouts: bool = True,
        before_retry: Callable[[], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> Answer:
        """Like :meth:`request`, but statuses in ``allow`` are answers, not errors.

        ``deadline_s`` replaces the client's timeout for this request (a slow
        import gets more time than a search); ``retry_timeouts=False`` raises
        a timeout at once, for a write the caller must read back before it
        sends it again; ``before_retry`` is awaited after each wait, before the
        request goes again (a delete checks its record is still benchd's; what
        it raises ends the request).
        """
        where = f"{method} {self._base}{path}"
        attempt = 0
        while True:
            try:
                started = time.perf_counter()
                answer = await self._send(method, path, where, deadline_s, **kwargs)
                error = (
                    None if answer.status in allow else status_error(*answer, where, self.context)
                )
                if error is None:
                    note_service_time(time.perf_counter() - started)
                    return answer
                raise error
            except TargetError as exc:
                delay = self._retry_delay(exc, attempt)
                if delay is None or (isinstance(exc, TargetTimeout) and not retry_timeouts):
                    raise
                if isinstance(exc, TargetHTTPError) and exc.status == 429:
                    report_wait(delay, "429 Retry-After")  # the cycle's progress line shows it
            attempt += 1
            self.retries += 1
            await self._sleep(delay)
            if before_retry is not None:
                await before_retry()

    async def _sleep(self, delay: float) -> None:
        """Sleep before a retry; count the time slept (at most ``delay``), never more.

        The sleep is a window on the cycle's clock (Retry-After and backoff
        alike), the same span ``retry_wait_s`` adds; a sleep cut short (the
        cycle cancelled) counts what it slept, and its window ends there too.
        """
        window = waited_window(delay)
        started = time.monotonic() if window is None else window[0]
        try:
            await anyio.sleep(delay)
        finally:
            ended = time.monotonic()
            self.retry_wait_s += min(delay, ended - started)
            if window is not None:
                WaitClock.cut(window, ended)

    async def _send(
        self, method: str, path: str, where: str, deadline_s: float | None, **kwargs: Any
    ) -> Answer:
        if deadline_s is not None:
            kwargs["timeout"] = deadline_s
        deadline = deadline_s if deadline_s is not None else self._deadline_s
        if self._sender is not None:  # the pool bounds the attempt on its own timers
            spec = self._prepare(self._sender, method, path, kwargs)
            try:
                return await self._sender.send(spec, where, _finite(deadline))
            except TargetTimeout:
                raise _late(where) from None
        try:
            with anyio.fail_after(deadline):
                return await self._send_over_httpx(method, path, where, deadline, kwargs)
        except TimeoutError:
            raise _late(where) from None

    async def _send_over_httpx(
        self, method: str, path: str, where: str, deadline: float | None, kwargs: dict[str, Any]
    ) -> Answer:
        """One attempt through the httpx client (a proxy, an MCP session): the same error map."""
        request = _build(self._client, method, path, kwargs)
        try:
            response = await self._client.send(request, stream=True, follow_redirects=False)
            try:
                headers = _headers(response)
                body = await _read_bounded(response, headers, self.max_bytes, where)
            finally:
                await response.aclose()
        except Exception as exc:
            timeout_s = deadline or math.inf
            error = exchange_error(exc, where, timeout_s=timeout_s, max_bytes=self.max_bytes)
            if error is None:
                raise
            raise error from None
        return Answer(response.status_code, headers, body)

    def _prepare(
        self, sender: PoolSender, method: str, path: str, kwargs: dict[str, Any]
    ) -> RequestSpec:
        """The request serialized for ``sender``: replayed if asked lately (no body only)."""
        key = _replay_key(method, path, kwargs)
        spec = None if key is None else self._prepared.get(key)
        if spec is None:
            writer = self._writer
            spec = None if writer is None else writer.write(method, path, kwargs)
            if spec is None:
                spec = sender.prepare(_build(self._client, method, path, kwargs))
            if key is not None:
                if len(self._prepared) >= PREPARED_KEPT:
                    del self._prepared[next(iter(self._prepared))]  # the oldest
                self._prepared[key] = spec
        return spec

    async def aclose(self) -> None:
        """Close the sender's connections and the httpx client's."""
        if self._sender is not None:
            await self._sender.aclose()
        await self._client.aclose()

    def _retry_delay(self, exc: TargetError, attempt: int) -> float | None:
        policy = self._policy
        if attempt >= policy.max_retries or isinstance(exc, TargetAuthError | TargetRedirect):
            return None
        if isinstance(exc, TargetRateLimited):
            # without Retry-After a 429 is the store's auth lockout: do not hammer it.
            if exc.retry_after_s is None:
                return None
            return min(exc.retry_after_s, policy.max_retry_after_s)
        if isinstance(exc, TargetHTTPError):
            if exc.status < 500:
                return None
        elif not isinstance(exc, TargetUnreachable | TargetTimeout):
            return None
        ceiling = min(policy.max_backoff_s, policy.backoff_s * (2**attempt))
        return random.uniform(0.0, ceiling)  # full jitter


def _build(
    client: httpx.AsyncClient, method: str, path: str, kwargs: Mapping[str, Any]
) -> httpx.Request:
    """``client.build_request(method, path, **kwargs)``, its ``json=`` body encoded by
    :func:`~benchd.http.jsonbody.json_body` (the JSON value httpx would send, or its
    error): Content-Length and then Content-Type (unless the request names one), as
    httpx sets them for ``json=``."""
    body = kwargs.get("json")
    if body is None or any(kwargs.get(k) is not None for k in ("content", "data", "files")):
        return client.build_request(method, path, **kwargs)  # httpx sends no JSON then
    rest = {k: v for k, v in kwargs.items() if k != "json"}
    request = client.build_request(method, path, content=json_body(body), **rest)
    request.headers.setdefault("Content-Type", "application/json")
    return request


def _late(where: str) -> TargetTimeout:
    """An attempt that outlived its deadline, whichever path carried it."""
    return TargetTimeout(f"{where}: no complete answer within the timeout")


def _finite(deadline: float | None) -> float:
    """A deadline for the pool: None (no timeout) is an endless one."""
    return math.inf if deadline is None else deadline


PREPARED_KEPT = 256
"""Requests a :class:`RetryingClient` keeps serialized for replay (~0.5 KiB each)."""


_REPLAYED = frozenset({"GET", "HEAD"})
"""Methods whose requests repeat: searches, listing pages, lease reads. Not DELETE: one
per record, never asked twice, a cleanup's would push every repeated request out."""


def _replay_key(method: str, path: str, kwargs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What a body-less request that repeats is built from, or None (not kept for replay).

    Only plain ``str``/``int`` query values: they are the request (a ``bool``
    equals an ``int`` as a key but is sent as ``true``).
    """
    if method not in _REPLAYED:
        return None
    for name, value in kwargs.items():  # no body, no headers of its own
        if name not in ("params", "timeout") and value is not None and value != {}:
            return None
    params = kwargs.get("params") or {}
    if not isinstance(params, dict):
        return None
    items = tuple(params.items())
    if not all(type(v) is str or type(v) is int for _, v in items):
        return None
    return (method, path, items, kwargs.get("timeout"))


def _headers(response: httpx.Response) -> dict[str, str]:
    """The answer's headers with lower-case names (repeated ones joined), at most MAX_HEADERS."""
    raw = response.headers.raw  # h11 already bounds the head's bytes (100 KiB)
    if len(raw) > MAX_HEADERS:
        raise BadHead(f"more than {MAX_HEADERS} header lines")
    lines: dict[str, list[str]] = {}
    for name, value in raw:
        lines.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return {k: ", ".join(v) for k, v in lines.items()}


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as sent (still encoded); also for a response built whole."""
    if response.is_stream_consumed and isinstance(response.stream, httpx.AsyncByteStream):
        async for chunk in response.stream:  # httpx.ByteStream: the bytes it was given
            yield chunk
        return
    async for chunk in response.aiter_raw():
        yield chunk


async def _read_bounded(
    response: httpx.Response, headers: dict[str, str], limit: int, where: str
) -> Body:
    """The decoded body, refused before reading if declared too large, else cut at ``limit``.

    The raw bytes are read and decoded here, by :class:`Inflater` (httpx's own
    decoders inflate a chunk whole, unbounded), so the cap holds while decoding.
    Past the cap or corrupt, it raises :class:`TooLarge` or
    :class:`~benchd.http.answers.DecodeError` for :func:`exchange_error`.
    """
    declared_too_large(headers, limit, where)  # (an encoded body only grows when inflated)
    buffer = BodyBuffer()
    wire = 0
    try:
        inflater = Inflater(headers.get("content-encoding"), limit)
        async for chunk in _raw(response):
            wire += len(chunk)
            if wire > limit:
                raise TooLarge(f"more than {limit} bytes")
            for piece in inflater.feed(chunk):
                buffer.add(piece)
        inflater.finish()
    except BaseException:  # DecodeError and TooLarge are mapped by the caller
        buffer.discard()
        raise
    if not inflater.identity:
        headers.pop("content-encoding", None)  # the body is decoded: say so
    return buffer.take()


# -- connection settings shared by the HTTP target kinds -------------------------


class ClientSettings(Protocol):
    """The ``[probe.target]`` keys every HTTP target kind has for its connection."""

    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def backoff_s(self) -> float: ...
    @property
    def max_retry_after_s(self) -> float: ...
    @property
    def max_response_bytes(self) -> int: ...


class Clients(NamedTuple):
    """What :func:`open_clients` builds: the base URL and the two client layers."""

    base: str  # the url without a trailing '/'
    client: httpx.AsyncClient  # pooled; also builds the sans-I/O search requests
    http: RetryingClient  # the same pool, with retries and error translation


def open_clients(
    settings: ClientSettings,
    auth: dict[str, str],
    connect: Connect | None = None,
    *,
    context: ErrorContext = NO_CONTEXT,
) -> Clients:
    """Connect as a target config says; ``auth`` headers go last (they win).

    Requests go through benchd's own pool (:class:`~benchd.http.sender.PoolSender`),
    which opens its connections with ``connect`` (the network; tests pass a
    fake store's), and the httpx client only builds them (it then holds no
    connections and no TLS context). ``context`` is what the store's errors
    name besides its words (:class:`ErrorContext`). Where the environment
    names a proxy for the store (``HTTPS_PROXY``, ``ALL_PROXY``, ... not
    bypassed by ``NO_PROXY``) and no ``connect`` is given, httpx sends them
    through the proxy, their failures judged by the same error map.
    """
    sender = None
    transport: httpx.AsyncBaseTransport | None = None
    if connect is not None or not _proxied(settings.url):
        sender = PoolSender(
            max_response_bytes=settings.max_response_bytes, connect=connect or open_connection
        )
        transport = _BUILD_ONLY
    headers = {
        "accept": "application/json",
        "accept-encoding": "gzip, deflate",  # what Inflater undoes (httpx may add br, zstd)
        "user-agent": "benchd",
        **settings.headers,
        **auth,
    }
    base = settings.url.rstrip("/")
    client = httpx.AsyncClient(
        base_url=base,
        headers=headers,
        timeout=settings.timeout_s,
        follow_redirects=False,
        transport=transport,
    )
    policy = RetryPolicy(
        settings.max_retries, settings.backoff_s, max_retry_after_s=settings.max_retry_after_s
    )
    http = RetryingClient(
        client,
        policy,
        base,
        max_response_bytes=settings.max_response_bytes,
        deadline_s=settings.timeout_s,
        context=context,
        sender=sender,
    )
    return Clients(base, client, http)


class _BuildOnly(httpx.AsyncBaseTransport):
    """The transport of an httpx client that only builds requests (a PoolSender sends them)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise RuntimeError("benchd sends this client's requests through its own pool")


_BUILD_ONLY = _BuildOnly()


def _proxied(url: str) -> bool:
    """Whether the environment names a proxy that httpx (``trust_env``) would use for ``url``."""
    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(url)
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


def http_url_problem(v: str) -> str | None:
    """Config check for ``url``: an http(s) URL with a host and a port in 1..65535."""
    return url_problem(v)


def positive_problem(v: Any) -> str | None:
    """Config check for counts, sizes and durations that must be above zero."""
    return None if v > 0 else "must be > 0"


def non_negative_problem(v: Any) -> str | None:
    """Config check for retry counts and waits, where zero means none."""
    return None if v >= 0 else "must be >= 0"
