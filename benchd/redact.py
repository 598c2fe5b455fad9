"""The one place benchd masks secrets, and the one way text leaves the process.

:func:`text` is the output path for every string that came from a store or a
config: it makes the string encodable (a lone surrogate, valid in JSON but
not in UTF-8, becomes U+FFFD), masks secrets *before* cutting (a key split
across line breaks too, and a fragment of a key that something upstream
already cut), then bounds its length. :func:`label` is the same for a
Prometheus label value, on one line and shorter.

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
  any text, registered or not. A URL's query parameters named like a
  credential (``?api-key=...``) are registered by :func:`register_url`.

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
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = [
    "LABEL_CHARS",
    "LOG_CHARS",
    "MASK",
    "MIN_FRAGMENT",
    "MIN_SECRET_LEN",
    "SECRET_HEADERS",
    "TEXT_CHARS",
    "clear_secrets",
    "encodable",
    "generation",
    "label",
    "mask",
    "mask_value",
    "processor",
    "public_url",
    "register_secret",
    "register_url",
    "text",
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

TEXT_CHARS = 2000
"""Longest text shown from a store or config (an error message, a query text, an id)."""

LABEL_CHARS = 256
"""Longest Prometheus label value benchd exports (``validate`` refuses longer config labels)."""

LOG_CHARS = 16384
"""Longest single value in a log line (a traceback fits)."""

MIN_FRAGMENT = 12
"""A run of at least this many characters of a secret's start (or end) is masked anywhere.

12, not less: a shorter run is as likely a probe or model name that happens to share a
key's first word (a probe "embedded" beside the key "embedded-daemon-key-...") as a leak,
and masking it would blank a metric label. At most 11 characters of a key can show.
"""

_ELLIPSIS = "\u2026"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
# between two characters of a secret: a line break (real or JSON-escaped) and its indent
_BREAK = r"(?:\r\n|\r|\n|\\r\\n|\\n|\\r)[ \t>]*"
_BROKEN = re.compile(r"[\r\n]|\\[rn]")
_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, so a key inside a longer secret is masked whole
_split: tuple[re.Pattern[str], ...] = ()  # each secret with a line break allowed anywhere in it
_NOTHING = re.compile(r"(?!)")
_probe: re.Pattern[str] = _NOTHING  # any secret's first or last MIN_FRAGMENT characters
# text()'s answers for the secrets registered now; a new dict whenever they change
_memo: dict[tuple[str, int, bool], str] = {}
_generation = 0  # see generation()
MEMO_KEPT = 16384
"""Most texts :func:`text` remembers (ids, labels, queries: the same every scrape)."""


def register_secret(value: str) -> None:
    """Mask ``value`` everywhere from now on (with its percent- and JSON-escaped forms)."""
    global _secrets
    value = value.strip()
    if len(value) < MIN_SECRET_LEN:
        return
    forms = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
    global _split, _probe
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | forms, key=len, reverse=True))
        _split = tuple(
            re.compile(f"(?:{_BREAK})?".join(re.escape(c) for c in form)) for form in _secrets
        )
        ends = {e for f in _secrets for e in (f[:MIN_FRAGMENT], f[-MIN_FRAGMENT:])}
        _probe = re.compile("|".join(re.escape(e) for e in sorted(ends)))
        _forget()


_URL_START = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://")
_CREDENTIAL_PARAM = re.compile(r"(?i)key|token|secret|sig|pass|auth|cred|session")
"""Query parameters whose values are secrets (``api-key``, ``access_token``, ``sig``, ...)."""


def register_url(url: str) -> None:
    """Register the password (and the whole user info) of ``url``, and credential parameters.

    ``url`` may follow a prefix (``openai:https://...#model``). A query
    parameter named like a credential (:data:`_CREDENTIAL_PARAM`) is a secret too.
    """
    start = _URL_START.search(url)
    if start is not None:
        url = url[start.start() :]
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return
    for name, value in parse_qsl(parts.query):
        if _CREDENTIAL_PARAM.search(name):
            register_secret(value)
    if password:
        register_secret(password)
        userinfo = parts.netloc.rpartition("@")[0]
        register_secret(userinfo)
        # what an HTTP client sends for it (Authorization: Basic ...), which a store may echo
        plain = f"{unquote(parts.username or '')}:{unquote(password)}"
        register_secret(base64.b64encode(plain.encode()).decode())


def clear_secrets() -> None:
    """Forget every registered secret (tests only)."""
    global _secrets, _split, _probe
    with _lock:
        _secrets, _split, _probe = (), (), _NOTHING
        _forget()


def _forget() -> None:
    """Drop what text() remembered: set after the secrets, so a reader that finds the new
    (empty) memo reads the new secrets too; an answer made meanwhile lands in the old one."""
    global _memo, _generation
    _memo = {}
    _generation += 1


def generation() -> int:
    """A number that changes whenever the registered secrets do (a cache of masked text
    keyed on it is never served after a new secret)."""
    return _generation


def text(value: object, limit: int = TEXT_CHARS, *, one_line: bool = False) -> str:
    """``value`` as text any output can carry: encodable, secrets masked, at most ``limit`` long.

    The order matters: masking runs on the whole text before it is cut, so a
    cut never leaves part of a key standing. ``one_line`` turns line breaks
    and other control characters into spaces (labels, table cells).

    Answers are remembered until a secret is registered (at most
    :data:`MEMO_KEPT`): ``/metrics`` and ``/api/status`` mask the same ids,
    labels and query texts at every scrape, which was a quarter of their CPU.
    """
    memo = _memo  # read before the secrets: see _forget
    raw = value if isinstance(value, str) else str(value)
    key = (raw, limit, one_line)
    out = memo.get(key)
    if out is None:
        out = _text(raw, limit, one_line)
        if len(memo) >= MEMO_KEPT:
            memo.clear()
        memo[key] = out
    return out


def _text(raw: str, limit: int, one_line: bool) -> str:
    out = _masked(encodable(raw))
    if one_line:
        out = _CONTROLS.sub(" ", out)
    if len(out) > limit:
        out = out[: max(0, limit - 1)] + _ELLIPSIS
    return out


def label(value: object) -> str:
    """:func:`text` for a Prometheus label value: one line, at most :data:`LABEL_CHARS`."""
    return text(value, LABEL_CHARS, one_line=True)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def encodable(value: str) -> str:
    """``value`` with every code point UTF-8 cannot carry (lone surrogates) replaced by U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # a high surrogate followed by a low one is a pair: utf-16 joins it, lone ones become U+FFFD
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


def mask(value: str) -> str:
    """``value`` with secrets masked and made encodable, not cut (see :func:`text`)."""
    return _masked(encodable(value))


def _masked(out: str) -> str:
    secrets = _secrets
    if not secrets:
        return _USERINFO.sub(rf"\1{MASK}@", out) if "@" in out else out
    if _BROKEN.search(out) is not None:  # a secret split across lines, masked whole first
        for pattern in _split:
            out = pattern.sub(MASK, out)
    # one regex pass finds any whole secret or any fragment long enough to mask
    if _probe.search(out) is not None:
        for secret in secrets:
            if secret in out:
                out = out.replace(secret, MASK)
        out = _fragments(out, secrets)
    return _USERINFO.sub(rf"\1{MASK}@", out) if "@" in out else out


def _fragments(out: str, secrets: tuple[str, ...]) -> str:
    """Mask runs of :data:`MIN_FRAGMENT`+ characters that begin or end a secret.

    A store (or an adapter) that cut a label before benchd saw it leaves a
    key's prefix standing; whole secrets are already masked when this runs.
    """
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        if len(secret) <= MIN_FRAGMENT:
            continue
        head, tail = secret[:MIN_FRAGMENT], secret[-MIN_FRAGMENT:]
        start = out.find(head)
        while start >= 0:
            n = MIN_FRAGMENT
            while start + n < len(out) and n < len(secret) and out[start + n] == secret[n]:
                n += 1
            spans.append((start, start + n))
            start = out.find(head, start + n)
        end = out.find(tail)
        while end >= 0:
            stop, n = end + MIN_FRAGMENT, MIN_FRAGMENT
            while end - 1 >= 0 and n < len(secret) and out[end - 1] == secret[-n - 1]:
                end, n = end - 1, n + 1
            spans.append((end, stop))
            end = out.find(tail, stop)
    if not spans:
        return out
    pieces, at = [], 0
    for start, stop in sorted(spans):
        if stop <= at:
            continue
        pieces += [out[at : max(at, start)], MASK]
        at = stop
    return "".join(pieces) + out[at:]


def mask_value(value: Any, limit: int = LOG_CHARS) -> Any:
    """:func:`text` applied to every string inside ``value`` (dicts, lists, tuples), keys too."""
    if isinstance(value, str):
        return text(value, limit)
    if isinstance(value, Mapping):
        return {mask_value(k, limit): mask_value(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask_value(v, limit) for v in value)
    if isinstance(value, BaseException):
        return text(f"{type(value).__name__}: {value}", limit)
    if value is None or isinstance(value, bool | int | float):
        return value
    # any other object would be rendered by its repr, unmasked: render it here instead
    return text(repr(value), limit)


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
