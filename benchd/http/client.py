"""benchd's one HTTP client module: the error map, ``Retry-After``, bounded reads, retries.

Every HTTP answer any target kind gets — through :class:`RetryingClient`
(adapters) or :mod:`benchd.http.sender` (the load pass's sender) — is
judged here, by :func:`status_error`, with one ``Retry-After`` parser::

    2xx                                -> an answer (read under the size cap)
    3xx, never followed                -> TargetRedirect      (kind "redirect")
    401 / 403, never retried           -> TargetAuthError     (kind "auth")
    429 (.retry_after_s)               -> TargetRateLimited   (kind "rate_limited")
    any other status >= 400            -> TargetHTTPError     (kind "http_4xx" | "http_5xx")
    declared or read body past the cap -> TargetProtocolError (kind "decode")
    past the cap once decoded, corrupt -> TargetProtocolError (kind "decode")
    head past its bounds, bad HTTP     -> TargetProtocolError (kind "decode")
    refused / reset / DNS / TLS        -> TargetUnreachable   (kind "connect")
    no complete answer by the deadline -> TargetTimeout       (kind "timeout")

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

import email.utils
import math
import random
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx

from benchd.config.schema import url_problem
from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetRateLimited,
    TargetRedirect,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.hooks import WaitClock, report_wait, waited_window
from benchd.http.answers import MAX_HEADERS, Body, BodyBuffer, DecodeError, Inflater
from benchd.http.messages import store_message
from benchd.store.target import note_service_time

if TYPE_CHECKING:  # transport imports this module
    from benchd.http.sender import PoolSender, RequestSpec

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
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

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Largest answer read (declared or received, once inflated); see docs/failure-modes.md."""

RETRY_AFTER_CEILING_S = 3600.0
"""A ``Retry-After`` beyond an hour (or NaN, or infinite) is read as an hour."""



class Answer(NamedTuple):
    """A store's answer: status, headers (lower-case names) and the (inflated) body.

    A body past :data:`~benchd.http.answers.INLINE_DECODE_BYTES` is a
    :class:`~benchd.http.answers.Spill`; hand it to ``answers.decode``.
    """

    status: int
    headers: Mapping[str, str]
    body: Body


# -- the error map -----------------------------------------------------------------


def retry_after_s(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delay seconds (decimals too) or an HTTP date.

    Negative delays and past dates are 0; NaN, infinite and huge delays are
    :data:`RETRY_AFTER_CEILING_S` (a store that says "wait" is never retried
    at once). A value that is neither a number nor a date is None, as if absent.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        until = _seconds_until(text, time.time() if now is None else now)
        if until is None:
            return None
        seconds = until
    if math.isnan(seconds) or seconds > RETRY_AFTER_CEILING_S:
        return RETRY_AFTER_CEILING_S
    return max(0.0, seconds)


def _seconds_until(text: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are UTC
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - now


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What a store error names besides the store's own words.

    ``api`` names what the kind expects to talk to (``"a Zengram API"``,
    ``"an MCP server"``): a 404 or 405 asks whether the URL serves it.
    ``key_source`` says where the API key came from, as the config names it
    (``api_key_env BRAIN_API_KEY``; see :class:`benchd.config.secrets.Secret`):
    a refused key names it.
    """

    api: str = ""
    key_source: str = ""


NO_CONTEXT = ErrorContext()


def status_error(
    status: int,
    headers: Mapping[str, str],
    body: Body,
    where: str,
    context: ErrorContext = NO_CONTEXT,
) -> TargetError | None:
    """The error a non-2xx answer is (None for 2xx); ``headers`` have lower-case names.

    ``where`` is ``"METHOD url-without-query"``. The store's own message
    (:func:`store_message`) follows the status, masked before it is cut; in a
    refused key's message anything shaped like a credential is hidden (a
    store may echo a key benchd does not know as a secret).
    """
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return TargetRedirect(
            f"{where}: HTTP {status} redirect{_location(headers.get('location'))}; benchd never "
            "follows redirects (the API key would go with it): set url to the address "
            "that answers",
            status,
        )
    if status in (401, 403):
        said = _said(store_message(body, credentials=False))
        source = context.key_source or "the configured api_key_env or api_key_file"
        return TargetAuthError(
            f"{where}: HTTP {status}{said}; the store refused the API key from {source}"
        )
    said = _said(store_message(body))
    if status == 429:
        retry = retry_after_s(headers.get("retry-after"))
        hint = f", Retry-After {retry:g} s" if retry is not None else ", no Retry-After"
        return TargetRateLimited(f"{where}: HTTP 429 rate limited{hint}{said}", retry)
    hint = _api_hint(status, where, context)
    return TargetHTTPError(f"{where}: HTTP {status}{said}{hint}", status)


def _said(message: str) -> str:
    return f": {message}" if message else ""


def _api_hint(status: int, where: str, context: ErrorContext) -> str:
    """``; is this a Zengram API? GET /health answered 404`` for a route the store lacks."""
    if status not in (404, 405) or not context.api:
        return ""
    method, _, url = where.partition(" ")
    path = urlsplit(url).path or "/"
    return f"; is this {context.api}? {method} {path} answered {status}"


def _location(raw: str | None) -> str:
    """Where a redirect points, as scheme://host:port only (no path, query or userinfo)."""
    if not raw:
        return ""
    try:
        parts = urlsplit(raw.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return " to an unreadable Location"
    if not host:
        return " to another path on the same server"
    return f" to {parts.scheme or 'http'}://{host}" + (f":{port}" if port else "")


def too_large(where: str, size: str, limit: int) -> TargetProtocolError:
    return TargetProtocolError(
        f"{where}: answer of {size} exceeds max_response_bytes = {limit}; "
        "raise max_response_bytes in [probe.target] if the store really answers this much"
    )


def declared_too_large(headers: Mapping[str, str], limit: int, where: str) -> None:
    """Refuse, before reading, an answer whose ``Content-Length`` is over ``limit``."""
    declared = headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise too_large(where, f"{declared} bytes (declared)", limit)


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
    :func:`open_clients`), else through the httpx client itself (an injected
    transport, an MCP session). With a sender, a request without a body
    (a search, a listing page, a lease read) is built and serialized once and
    replayed while it is among the last :data:`PREPARED_KEPT` asked, as the
    load pass replays its searches: httpx's request building (URL parsing
    and merging) cost ~0.1 ms of CPU per request, as much as the exchange.
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
        self._prepared: dict[tuple[Any, ...], RequestSpec] = {}
        self.context = context  # what its errors name: the kind's API, the key's source
        self._policy = policy
        self._base = base
        self.max_bytes = max_response_bytes
        self._deadline_s = deadline_s  # whole attempt, body included (httpx's is per read)
        self.retries = 0  # counted, never hidden
        self.retry_wait_s = 0.0  # seconds slept before retries (backoff and Retry-After)

    @property
    def sends_over_own_pool(self) -> bool:
        """True where requests go through benchd's pool (:class:`PoolSender`), not httpx."""
        return self._sender is not None

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
        if self._sender is not None:
            spec = self._prepare(self._sender, method, path, kwargs)
            try:
                with anyio.fail_after(deadline):
                    return await self._sender.send(spec, where, deadline or math.inf)
            except TimeoutError:
                raise TargetTimeout(f"{where}: no complete answer within the timeout") from None
        request = self._client.build_request(method, path, **kwargs)
        try:
            with anyio.fail_after(deadline):
                response = await self._client.send(request, stream=True, follow_redirects=False)
                try:
                    headers = _headers(response, where)
                    body = await _read_bounded(response, headers, self.max_bytes, where)
                finally:
                    await response.aclose()
        except (httpx.TimeoutException, TimeoutError):
            raise TargetTimeout(f"{where}: no complete answer within the timeout") from None
        except httpx.DecodingError:
            raise TargetProtocolError(f"{where}: the body's content-encoding is corrupt") from None
        except httpx.RemoteProtocolError as exc:  # h11: a head past 100 KiB, malformed HTTP
            raise TargetProtocolError(f"{where}: malformed HTTP answer ({exc})") from None
        except httpx.TransportError as exc:
            raise TargetUnreachable(
                f"{where}: cannot connect ({type(exc).__name__}); is the store running "
                "and is the url right?"
            ) from None
        return Answer(response.status_code, headers, body)

    def _prepare(
        self, sender: PoolSender, method: str, path: str, kwargs: dict[str, Any]
    ) -> RequestSpec:
        """The request serialized for ``sender``: replayed if asked lately (no body only)."""
        key = _replay_key(method, path, kwargs)
        spec = None if key is None else self._prepared.get(key)
        if spec is None:
            spec = sender.prepare(self._client.build_request(method, path, **kwargs))
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


def _headers(response: httpx.Response, where: str) -> dict[str, str]:
    """The answer's headers with lower-case names (repeated ones joined), at most MAX_HEADERS."""
    raw = response.headers.raw  # h11 already bounds the head's bytes (100 KiB)
    if len(raw) > MAX_HEADERS:
        raise TargetProtocolError(f"{where}: refused an answer of over {MAX_HEADERS} headers")
    lines: dict[str, list[str]] = {}
    for name, value in raw:
        lines.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return {k: ", ".join(v) for k, v in lines.items()}


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as sent (still encoded); also for a response built whole (MockTransport)."""
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
    """
    declared_too_large(headers, limit, where)  # (an encoded body only grows when inflated)
    buffer = BodyBuffer()
    wire = 0
    try:
        inflater = Inflater(headers.get("content-encoding"), limit)
        async for chunk in _raw(response):
            wire += len(chunk)
            if wire > limit:
                raise too_large(where, f"more than {limit} bytes", limit)
            for piece in inflater.feed(chunk):
                buffer.add(piece)
        inflater.finish()
    except DecodeError as exc:
        buffer.discard()
        if exc.too_large:
            raise too_large(where, str(exc), limit) from None
        raise TargetProtocolError(f"{where}: {exc}") from None
    except BaseException:
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
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    context: ErrorContext = NO_CONTEXT,
) -> Clients:
    """Connect as a target config says; ``auth`` headers go last (they win).

    ``transport`` replaces the network (tests shape one precise answer with
    :class:`httpx.MockTransport`); ``context`` is what the store's errors
    name besides its words (:class:`ErrorContext`).

    Without one, requests go through benchd's own pool
    (:class:`~benchd.http.sender.PoolSender`) and the httpx client
    only builds them (it then holds no connections and no TLS context: 0.9
    MiB and 25 ms of CPU each). Where the environment names a proxy for the
    store (``HTTPS_PROXY``, ``ALL_PROXY``, ... not bypassed by ``NO_PROXY``),
    httpx sends them, through the proxy, as before.
    """
    from benchd.http.sender import PoolSender  # (transport imports this module)

    sender = None
    if transport is None and not _proxied(settings.url):
        sender = PoolSender(max_response_bytes=settings.max_response_bytes)
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
