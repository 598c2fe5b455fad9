"""Shared HTTP plumbing for adapters: error translation and bounded retries.

This is the one place where httpx exceptions and unexpected statuses become
:mod:`benchd.errors`. Retries are bounded and counted: 429 waits for
``Retry-After`` (capped), 5xx and connection errors back off with full
jitter, 401/403 are never retried (the real store locks an IP out after ten
failed authentications). Every answer is read under a size cap and every
attempt under a total deadline, so an oversized or dribbled body is a
classified error (``decode`` / ``timeout``), never unbounded memory or a hang.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import anyio
import httpx

from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.progress import report_wait

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ClientSettings",
    "Clients",
    "RetryPolicy",
    "RetryingClient",
    "decode_answer",
    "decode_json",
    "http_url_problem",
    "open_clients",
    "positive_problem",
    "raise_for_status",
    "retry_after_s",
    "run_bounded",
]

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.25
    max_backoff_s: float = 5.0
    max_retry_after_s: float = 30.0


def retry_after_s(response: httpx.Response) -> float | None:
    """Seconds from a numeric ``Retry-After`` header, if any."""
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


def raise_for_status(response: httpx.Response, what: str) -> None:
    """Translate a non-2xx answer into a TargetError naming ``what`` (an endpoint)."""
    status = response.status_code
    if status < 300:
        return
    detail = _error_detail(response)
    if status in (401, 403):
        raise TargetAuthError(
            f"{what}: HTTP {status} {detail}: the store refused the API key; "
            "check the key in the configured environment variable or file"
        )
    raise TargetHTTPError(f"{what}: HTTP {status} {detail}", status, retry_after_s(response))


def decode_json(response: httpx.Response, what: str) -> Any:
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        raise TargetProtocolError(
            f"{what}: HTTP {response.status_code} with a body that is not JSON "
            f"({len(response.content)} bytes)"
        ) from None


def decode_answer(body: bytes, what: str) -> Any:
    """A 2xx answer's raw body as JSON (the load engine's searches come as bytes)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise TargetProtocolError(f"{what}: answer is not JSON ({len(body)} bytes)") from None


def _error_detail(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return ""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return f"({body['error'][:200]})"
    return ""


class RetryingClient:
    """An httpx.AsyncClient wrapper that translates errors and retries within bounds."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        base: str,
        *,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        deadline_s: float | None = None,
    ) -> None:
        self._client = client
        self._policy = policy
        self._base = base
        self._max_bytes = max_response_bytes
        self._deadline_s = deadline_s  # whole attempt, body included (httpx's is per read)
        self.retries = 0  # counted, never hidden

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request_allowing(method, path, allow=(), **kwargs)

    async def request_allowing(
        self,
        method: str,
        path: str,
        *,
        allow: tuple[int, ...],
        deadline_s: float | None = None,
        retry_timeouts: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        """Like :meth:`request`, but statuses in ``allow`` are answers, not errors.

        ``deadline_s`` replaces the client's timeout for this request (a slow
        import gets more time than a search); ``retry_timeouts=False`` raises
        a timeout at once, for a write the caller must read back before it
        sends it again.
        """
        what = f"{method} {self._base}{path}"
        attempt = 0
        while True:
            try:
                response = await self._send(method, path, what, deadline_s, **kwargs)
                if response.status_code not in allow:
                    raise_for_status(response, what)
                return response
            except TargetError as exc:
                delay = self._retry_delay(exc, attempt)
                if delay is None or (isinstance(exc, TargetTimeout) and not retry_timeouts):
                    raise
                if isinstance(exc, TargetHTTPError) and exc.status == 429:
                    report_wait(delay, "429 Retry-After")  # the cycle's progress line shows it
            attempt += 1
            self.retries += 1
            await anyio.sleep(delay)

    async def _send(
        self, method: str, path: str, what: str, deadline_s: float | None, **kwargs: Any
    ) -> httpx.Response:
        if deadline_s is not None:
            kwargs["timeout"] = deadline_s
        request = self._client.build_request(method, path, **kwargs)
        try:
            with anyio.fail_after(deadline_s if deadline_s is not None else self._deadline_s):
                response = await self._client.send(request, stream=True)
                try:
                    body = await _read_bounded(response, self._max_bytes, what)
                finally:
                    await response.aclose()
        except (httpx.TimeoutException, TimeoutError):
            raise TargetTimeout(f"{what}: no complete answer within the timeout") from None
        except httpx.DecodingError:
            raise TargetProtocolError(f"{what}: the body's content-encoding is corrupt") from None
        except httpx.TransportError as exc:
            raise TargetUnreachable(
                f"{what}: cannot connect ({type(exc).__name__}); is the store running "
                "and is the url right?"
            ) from None
        headers = [(k, v) for k, v in response.headers.multi_items() if k not in _DROPPED_HEADERS]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    def _retry_delay(self, exc: TargetError, attempt: int) -> float | None:
        policy = self._policy
        if attempt >= policy.max_retries or isinstance(exc, TargetAuthError):
            return None
        if isinstance(exc, TargetHTTPError):
            if exc.status == 429:
                # without Retry-After a 429 is the store's auth lockout: do not hammer it.
                if exc.retry_after_s is None:
                    return None
                return min(exc.retry_after_s, policy.max_retry_after_s)
            if exc.status < 500:
                return None
        elif not isinstance(exc, TargetUnreachable | TargetTimeout):
            return None
        ceiling = min(policy.max_backoff_s, policy.backoff_s * (2**attempt))
        return random.uniform(0.0, ceiling)  # full jitter


async def _read_bounded(response: httpx.Response, limit: int, what: str) -> bytes:
    """The (decoded) body, or TargetProtocolError as soon as it exceeds ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(what, f"{declared} bytes", limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise _too_large(what, f"more than {limit} bytes", limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(what: str, size: str, limit: int) -> TargetProtocolError:
    return TargetProtocolError(
        f"{what}: answer of {size} exceeds max_response_bytes = {limit}; "
        "raise max_response_bytes in [probe.target] if the store really answers this much"
    )


async def run_bounded(
    items: Sequence[T], fn: Callable[[T], Awaitable[None]], *, limit: int
) -> None:
    """Run ``fn(item)`` for every item, at most ``limit`` at a time.

    The first :class:`TargetError` cancels the rest and is re-raised as
    itself (not wrapped in an ExceptionGroup), so callers see one error.
    """
    limiter = anyio.CapacityLimiter(max(1, limit))
    failure: list[TargetError] = []

    async def one(item: T, scope: anyio.CancelScope) -> None:
        async with limiter:
            if failure:
                return
            try:
                await fn(item)
            except TargetError as exc:
                failure.append(exc)
                scope.cancel()

    async with anyio.create_task_group() as tg:
        for item in items:
            tg.start_soon(one, item, tg.cancel_scope)
    if failure:
        raise failure[0]


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


def open_clients(settings: ClientSettings, auth: dict[str, str]) -> Clients:
    """Connect as a target config says; ``auth`` headers go last (they win)."""
    headers = {"accept": "application/json", "user-agent": "benchd", **settings.headers, **auth}
    base = settings.url.rstrip("/")
    client = httpx.AsyncClient(base_url=base, headers=headers, timeout=settings.timeout_s)
    policy = RetryPolicy(
        settings.max_retries, settings.backoff_s, max_retry_after_s=settings.max_retry_after_s
    )
    http = RetryingClient(
        client,
        policy,
        base,
        max_response_bytes=settings.max_response_bytes,
        deadline_s=settings.timeout_s,
    )
    return Clients(base, client, http)


def http_url_problem(v: str) -> str | None:
    """Config check for ``url``: an http(s) URL."""
    return None if v.startswith(("http://", "https://")) else "must start with http:// or https://"


def positive_problem(v: Any) -> str | None:
    """Config check for counts, sizes and durations that must be above zero."""
    return None if v > 0 else "must be > 0"
