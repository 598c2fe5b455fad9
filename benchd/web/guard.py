"""Who may address benchd's endpoints, before credentials are looked at.

Three rules, one ASGI middleware (:class:`RequestGuard`), applied to every
route but ``/healthz``:

* **Forwarded addresses.** ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are
  believed only from a proxy ``web_config`` names (``trusted_proxies``);
  benchd turns uvicorn's own forwarding trust off, so ``FORWARDED_ALLOW_IPS``
  in the environment opens nothing.
* **Host.** A loopback listener answers only a ``Host`` that is an IP
  literal, ``localhost`` or a name in ``allowed_hosts`` (a page on a
  rebound DNS name cannot read ``/api/status`` or ``/metrics``); a listener
  on another address answers any ``Host`` for reads (Prometheus scrapes
  ``benchd:9108``) but the same short list for a ``POST``.
* **Origin.** A ``POST`` that a browser says came from another origin
  (``Sec-Fetch-Site`` other than ``same-origin`` / ``none``, or an
  ``Origin`` whose scheme, host and port differ from the request's) is refused, unless
  it carries a bearer token — a header no page can add on another's
  behalf, and which the auth gate then checks. Basic credentials do not
  lift it: a browser attaches them to cross-site requests by itself.
  Clients that are not browsers send neither header and are unaffected.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from benchd.config.web import WebHttp
from benchd.redact import text

__all__ = [
    "GuardHolder",
    "GuardPolicy",
    "RefusedCollector",
    "RequestGuard",
    "host_allowed",
    "is_cross_origin",
]

_OPEN_PATHS = frozenset({"/healthz"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME = frozenset({"same-origin", "none"})
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """The guard's settings: the listener's kind and ``[http_server_config]``."""

    loopback: bool = True  # strict until the daemon says where it listens
    allowed_hosts: tuple[str, ...] = ()
    proxies: tuple[Network, ...] = field(default=())

    @classmethod
    def from_config(cls, http: WebHttp, *, loopback: bool) -> GuardPolicy:
        nets = tuple(ipaddress.ip_network(p, strict=False) for p in http.trusted_proxies)
        return cls(loopback=loopback, allowed_hosts=http.allowed_hosts, proxies=nets)


def _split_host(value: str) -> tuple[str, str]:
    """``Host`` as (lower-case name without brackets, port or '')."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest.removeprefix(":")
    name, _, port = value.partition(":") if value.count(":") == 1 else (value, "", "")
    return name.rstrip("."), port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    return True


def host_allowed(host: str | None, allowed: Sequence[str]) -> bool:
    """Whether ``host`` (a ``Host`` header) is an IP literal, localhost or an allowed name."""
    if host is None:
        return True  # HTTP/1.0 without Host: no browser sends that
    name, _ = _split_host(host)
    if not name:
        return False
    if _is_ip(name) or name == "localhost" or name.endswith(".localhost"):
        return True
    for entry in allowed:
        if entry == "*" or entry == name:
            return True
        if entry.startswith("*.") and name.endswith(entry[1:]):
            return True
    return False


def _default_port(scheme: str) -> str:
    return "443" if scheme in ("https", "wss") else "80"


def is_cross_origin(headers: Headers, scheme: str) -> bool:
    """Whether a browser marked this request as coming from another origin."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in _SAME:
        return True
    origin = headers.get("origin")
    if origin is None:
        return False
    try:
        parts = urlsplit(origin.strip())
        port = str(parts.port) if parts.port else _default_port(parts.scheme)
    except ValueError:
        return True
    if not parts.hostname:
        return True  # "null": a sandboxed or file: page
    name, host_port = _split_host(headers.get("host", ""))
    ours = (scheme, name, host_port or _default_port(scheme))
    return (parts.scheme.lower(), parts.hostname.lower(), port) != ours


def _bearer(headers: Headers) -> bool:
    return headers.get("authorization", "").strip().lower().startswith("bearer ")


def _forwarded(scope: Scope, proxies: Sequence[Network]) -> Scope:
    """``scope`` with the client and scheme a trusted proxy reported (else unchanged)."""
    client = scope.get("client")
    if not proxies or not client or not _within(str(client[0]), proxies):
        return scope
    headers = Headers(scope=scope)
    hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
    # the right-most hop no trusted proxy added is the client
    for hop in reversed(hops):
        if not _within(hop, proxies):
            client = (hop, 0)
            break
    scheme = headers.get("x-forwarded-proto", "").strip().lower()
    updated = dict(scope)
    updated["client"] = client
    if scheme in ("http", "https"):
        updated["scheme"] = scheme
    return updated


def _within(address: str, proxies: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in proxies)


def _refused(status: int, message: str) -> JSONResponse:
    return JSONResponse({"status": "error", "message": text(message)}, status_code=status)


@dataclass(slots=True)
class GuardHolder:
    """The policy a running app applies (swapped whole by a reload) and what it refused."""

    policy: GuardPolicy = field(default_factory=GuardPolicy)
    refused: dict[str, int] = field(default_factory=lambda: {"host": 0, "origin": 0})


class RefusedCollector(Collector):
    """``benchd_web_requests_refused_total{reason}``: what the guard turned away."""

    def __init__(self, holder: GuardHolder) -> None:
        self._holder = holder

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "benchd_web_requests_refused",
            "Requests to benchd's endpoints refused for a Host it does not answer to "
            "(reason host) or as a cross-origin write (reason origin).",
            labels=["reason"],
        )
        for reason, count in sorted(self._holder.refused.items()):
            family.add_metric([reason], count)
        yield family


class RequestGuard:
    """Pure ASGI middleware applying :class:`GuardPolicy` (see the module docstring)."""

    def __init__(self, app: ASGIApp, holder: GuardHolder) -> None:
        self._app = app
        self._holder = holder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        policy = self._holder.policy
        scope = _forwarded(scope, policy.proxies)
        refusal = _refusal(scope, policy)
        if refusal is None:
            await self._app(scope, receive, send)
            return
        reason, response = refusal
        self._holder.refused[reason] += 1
        await response(scope, receive, send)


def _refusal(scope: Scope, policy: GuardPolicy) -> tuple[str, JSONResponse] | None:
    headers = Headers(scope=scope)
    write = scope["method"] not in _SAFE_METHODS
    if (policy.loopback or write) and not host_allowed(headers.get("host"), policy.allowed_hosts):
        return "host", _refused(
            421,
            f"Host {headers.get('host', '')!r} is not one benchd answers to "
            "(an IP address, localhost, or http_server_config.allowed_hosts in server.web_config)",
        )
    if write and is_cross_origin(headers, scope.get("scheme", "http")) and not _bearer(headers):
        return "origin", _refused(
            403,
            f"{scope['method']} {scope['path']}: refused a request a browser sent from "
            "another origin (Origin / Sec-Fetch-Site); send it from benchd's own page, "
            "or from a client with a bearer token",
        )
    return None
