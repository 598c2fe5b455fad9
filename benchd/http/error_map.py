"""The one error map: what an HTTP answer's status, or a failed exchange, is as a benchd error.

Both request paths judge here: benchd's own pool (:mod:`benchd.http.sender`)
and httpx (:class:`~benchd.http.client.RetryingClient` over a proxy or an
MCP session). A status goes through :func:`status_error`, with one
``Retry-After`` parser; a failed exchange, whichever stack raised it,
through :func:`exchange_error`::

    2xx                                -> an answer (read under the size cap)
    3xx, never followed                -> TargetRedirect      (kind "redirect")
    401 / 403, never retried           -> TargetAuthError     (kind "auth")
    429 (.retry_after_s)               -> TargetRateLimited   (kind "rate_limited")
    any other status >= 400            -> TargetHTTPError     (kind "http_4xx" | "http_5xx")
    declared or read body past the cap -> TargetProtocolError (kind "decode")
    past the cap once decoded, corrupt -> TargetProtocolError (kind "decode")
    head past its bounds, bad HTTP     -> TargetProtocolError (kind "decode")
    refused / reset / DNS / TLS        -> TargetUnreachable   (kind "connect")
    no answer within the timeout       -> TargetTimeout       (kind "timeout")

It imports neither the client nor the sender: both import it.
"""

from __future__ import annotations

import email.utils
import math
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools
import httpx

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
from benchd.http.answers import Body, DecodeError
from benchd.http.messages import store_message

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "NO_CONTEXT",
    "RETRY_AFTER_CEILING_S",
    "Answer",
    "BadHead",
    "ErrorContext",
    "TooLarge",
    "declared_too_large",
    "exchange_error",
    "retry_after_s",
    "status_error",
    "too_large",
]

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


# -- statuses ---------------------------------------------------------------------


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


# -- failed exchanges ---------------------------------------------------------------


class TooLarge(Exception):
    """An answer bigger than the cap, seen while reading it; its connection is dropped."""


class BadHead(Exception):
    """A status line and headers past the bounds; the connection is dropped at once."""


def exchange_error(
    exc: BaseException, where: str, *, timeout_s: float, max_bytes: int
) -> TargetError | None:
    """The benchd error a failed exchange is, naming ``where``; None if ``exc`` is none.

    One table for both paths: benchd's pool raises the socket's, httptools'
    and the bounded reader's exceptions, httpx raises its own around the
    socket's (the socket's cause, where there is one, is read instead).
    """
    if isinstance(exc, httpx.TransportError):
        exc = _socket_cause(exc)
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return TargetTimeout(f"{where}: no answer within {_seconds(timeout_s)}")
    if isinstance(exc, httptools.HttpParserError | httpx.RemoteProtocolError):
        return TargetProtocolError(f"{where}: malformed HTTP response ({exc})")
    if isinstance(exc, TooLarge):
        return too_large(where, str(exc), max_bytes)
    if isinstance(exc, DecodeError):
        if exc.too_large:
            return too_large(where, str(exc), max_bytes)
        return TargetProtocolError(f"{where}: {exc}")
    if isinstance(exc, BadHead):
        return TargetProtocolError(f"{where}: refused an answer: {exc}")
    if isinstance(exc, ssl.SSLError):
        return TargetUnreachable(f"{where}: TLS failed ({exc.reason})")
    if isinstance(exc, OSError | httpx.TransportError):  # refused, reset, DNS (gaierror)
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        return TargetUnreachable(
            f"{where}: cannot connect ({reason or type(exc).__name__}); is the store running "
            "and is the url right?"
        )
    return None


def _socket_cause(exc: httpx.TransportError) -> BaseException:
    """The OSError (refused, reset, TLS) that httpx's error wraps, else the error itself."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, OSError):
            return cause
        cause = cause.__cause__
    return exc


def _seconds(timeout_s: float) -> str:
    return f"{timeout_s:g} s" if math.isfinite(timeout_s) else "the timeout"
