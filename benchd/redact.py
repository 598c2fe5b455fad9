"""The one place benchd masks secrets, used by every way out of the process.

Logs (a structlog processor), the ``once`` table and JSON, stderr, ``/api/status``,
``/metrics`` and error text quoted from a store's answer all pass through here.
Two rules, applied together by :func:`mask`:

- **Registered secrets.** Every secret benchd reads is registered with
  :func:`register_secret` when the config loads: the API key (from its
  variable or file), the password of a URL's user info, header values that
  came from ``${VAR}`` or sit under a credential header name
  (:data:`SECRET_HEADERS`), and ``web_config`` passwords. Each is replaced by
  ``***`` wherever it appears, also percent-encoded (as a store echoes a URL)
  and JSON-escaped (as a store echoes a body). Values shorter than
  :data:`MIN_SECRET_LEN` characters are not registered: masking "ab" would
  garble every text while protecting nothing.
- **URL user info.** ``scheme://user:pass@host`` becomes ``scheme://***@host`` in
  any text, registered or not.

:func:`public_url` goes further for URLs shown to anyone: no user info, no
query string, no fragment.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping, MutableMapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "MIN_SECRET_LEN",
    "SECRET_HEADERS",
    "clear_secrets",
    "mask",
    "mask_value",
    "processor",
    "public_url",
    "register_secret",
    "register_url",
]

MASK = "***"
MIN_SECRET_LEN = 4
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-access-token",
    }
)
"""Header names whose values are always secrets, wherever their value came from."""

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, so a key inside a longer secret is masked whole


def register_secret(value: str) -> None:
    """Mask ``value`` everywhere from now on (with its percent- and JSON-escaped forms)."""
    global _secrets
    value = value.strip()
    if len(value) < MIN_SECRET_LEN:
        return
    forms = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | forms, key=len, reverse=True))


def register_url(url: str) -> None:
    """Register the password (and the whole user info) of ``url``, if it has any."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return
    if password:
        register_secret(password)
        userinfo = parts.netloc.rpartition("@")[0]
        register_secret(userinfo)
        # what an HTTP client sends for it (Authorization: Basic ...), which a store may echo
        plain = f"{unquote(parts.username or '')}:{unquote(password)}"
        register_secret(base64.b64encode(plain.encode()).decode())


def clear_secrets() -> None:
    """Forget every registered secret (tests only)."""
    global _secrets
    with _lock:
        _secrets = ()


def mask(text: str) -> str:
    """``text`` with every registered secret and every URL's user info masked."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return _USERINFO.sub(rf"\1{MASK}@", text) if "@" in text else text


def mask_value(value: Any) -> Any:
    """:func:`mask` applied to every string inside ``value`` (dicts, lists, tuples), keys too."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return {mask_value(k): mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask_value(v) for v in value)
    if isinstance(value, BaseException):
        return mask(f"{type(value).__name__}: {value}")
    return value


def processor(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask secrets in every value of the event (tracebacks included)."""
    for key in list(event_dict):
        event_dict[key] = mask_value(event_dict[key])
    return event_dict


def public_url(url: str) -> str:
    """``url`` without user info, query string or fragment: safe to show anyone."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
