"""benchd's own HTTP endpoints: an ASGI app over the result book, served by uvicorn.

=================  ==========================================================
``/``              landing page linking the endpoints (like an exporter's)
``/metrics``       Prometheus text format, or OpenMetrics when asked for
``/healthz``       200 while the process lives (never behind auth)
``/readyz``        200 once every probe has completed a cycle, else 503 + reason
``/api/status``    JSON: last result per probe and its recent history
``POST /-/reload`` re-read and apply the config: 200 or 500, one-line JSON
=================  ==========================================================

Optional authentication (basic or bearer, from an exporter-toolkit style
``web_config`` file) guards every route but ``/healthz``; the same file may
name a certificate and key (``[tls_server_config]``) to serve HTTPS. Responses that take
real work (``/metrics``, ``/api/status``) are built in a worker thread so a
scrape never delays the event loop that times the probes' requests.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import html
import importlib
import json
import math
import socket
import ssl
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import anyio
import uvicorn
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from benchd import __version__
from benchd.errors import BenchdError, ConfigError, InputError
from benchd.logging import get_logger
from benchd.surfacers.book import ResultBook
from benchd.surfacers.prometheus import build_registry
from benchd.surfacers.status import status_document

__all__ = [
    "BoundServer",
    "ReloadCallback",
    "WebAuth",
    "WebConfig",
    "WebTLS",
    "build_app",
    "hash_secret",
    "load_web_config",
    "read_web_config",
    "serve_web",
]

log = get_logger("benchd.web")

ReloadCallback = Callable[[], Awaitable[bool]]
_OPEN_PATHS = frozenset({"/healthz"})
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
_WEB_CONFIG_KEYS = frozenset({"basic_auth_users", "bearer_token_hashes", "tls_server_config"})
_TLS_KEYS = frozenset({"cert_file", "key_file"})


# --------------------------------------------------------------------------- auth


def hash_secret(secret: str) -> str:
    """A ``sha256:<hex>`` hash for ``web_config`` (fine for long random tokens;
    prefer bcrypt hashes for passwords people choose)."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def _bcrypt() -> ModuleType | None:
    try:
        return importlib.import_module("bcrypt")
    except ImportError:
        return None


def _check_hash_format(stored: str, where: str) -> None:
    if stored.startswith(_BCRYPT_PREFIXES):
        if _bcrypt() is None:
            raise ConfigError(
                f"{where}: a bcrypt hash needs the 'bcrypt' package "
                "(pip install bcrypt) or use a sha256:<hex> hash"
            )
        return
    digest = stored.removeprefix("sha256:")
    if not stored.startswith("sha256:") or len(digest) != 64 or not _is_hex(digest):
        raise ConfigError(
            f"{where}: unsupported hash; use a bcrypt hash ($2b$...) or "
            "sha256:<64 hex digits of the SHA-256 of the secret>"
        )


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def _verify(secret: str, stored: str) -> bool:
    """Compare ``secret`` with a stored hash in constant time (bcrypt is slow on purpose)."""
    if stored.startswith(_BCRYPT_PREFIXES):
        bcrypt = _bcrypt()
        return bool(bcrypt is not None and bcrypt.checkpw(secret.encode(), stored.encode()))
    return hmac.compare_digest(hash_secret(secret), stored)


# An unknown user still pays for one comparison, so timing does not reveal user names.
_DUMMY_HASH = hash_secret("benchd: no such user")


@dataclass(frozen=True, slots=True)
class WebAuth:
    """Who may call benchd's endpoints: basic-auth users and/or bearer tokens, all hashed."""

    basic_users: Mapping[str, str] = field(default_factory=dict)  # user -> hash
    bearer_tokens: tuple[str, ...] = ()  # hashes
    source: str = "web_config"

    def __post_init__(self) -> None:
        if not self.basic_users and not self.bearer_tokens:
            raise ConfigError(
                f"{self.source}: no basic_auth_users and no bearer_token_hashes; "
                "add one or remove server.web_config"
            )
        for user, stored in self.basic_users.items():
            _check_hash_format(stored, f"{self.source}: basic_auth_users.{user}")
        for i, stored in enumerate(self.bearer_tokens):
            _check_hash_format(stored, f"{self.source}: bearer_token_hashes[{i}]")

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value a 401 carries."""
        if self.basic_users:
            return 'Basic realm="benchd", charset="UTF-8"'
        return 'Bearer realm="benchd"'

    def check_basic(self, user: str, password: str) -> bool:
        stored = self.basic_users.get(user)
        ok = _verify(password, stored if stored is not None else _DUMMY_HASH)
        return ok and stored is not None

    def check_bearer(self, token: str) -> bool:
        # Compare against every token (no early exit) to keep the timing flat.
        results = [_verify(token, stored) for stored in self.bearer_tokens]
        return any(results)

    def check(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value grants access."""
        scheme, _, credentials = (authorization or "").partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "bearer" and self.bearer_tokens:
            return self.check_bearer(credentials)
        if scheme.lower() == "basic" and self.basic_users:
            pair = _decode_basic(credentials)
            return pair is not None and self.check_basic(*pair)
        return False


def _decode_basic(credentials: str) -> tuple[str, str] | None:
    try:
        text = base64.b64decode(credentials, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


@dataclass(frozen=True, slots=True)
class WebTLS:
    """A server certificate (chain) and its private key, as PEM files."""

    cert_file: Path
    key_file: Path
    source: str = "web_config"

    def context(self) -> ssl.SSLContext:
        """A TLS 1.2+ server context; an unreadable or mismatched pair is a ConfigError."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
            raise ConfigError(
                f"{self.source}: tls_server_config: cannot load cert_file {self.cert_file} "
                f"with key_file {self.key_file} ({reason}); give PEM files of one key pair"
            ) from None
        return context


@dataclass(frozen=True, slots=True)
class WebConfig:
    """What a ``web_config`` file asks for: authentication, TLS, or both."""

    auth: WebAuth | None = None
    tls: WebTLS | None = None


def _tls(table: object, source: str, base: Path) -> WebTLS:
    where = f"{source}: tls_server_config"
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: must be a table with cert_file = "..." and key_file = "..."')
    unknown = sorted(set(table) - _TLS_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; expected cert_file and key_file")
    files = [table.get(name) for name in ("cert_file", "key_file")]
    if not all(isinstance(f, str) and f for f in files):
        raise ConfigError(f"{where}: cert_file and key_file are both required (paths to PEM files)")
    cert, key = (base / Path(str(f)).expanduser() for f in files)
    return WebTLS(cert_file=cert, key_file=key, source=source)


def read_web_config(path: str | Path) -> WebConfig:
    """Read a ``web_config`` TOML file: ``basic_auth_users``, ``bearer_token_hashes``
    and/or ``[tls_server_config]`` (paths relative to the file)."""
    source = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read web config: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - _WEB_CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r}; expected basic_auth_users, "
            "bearer_token_hashes and/or [tls_server_config]"
        )
    tls = None
    if "tls_server_config" in data:
        tls = _tls(data["tls_server_config"], source, Path(path).resolve().parent)
    auth = None
    if tls is None or "basic_auth_users" in data or "bearer_token_hashes" in data:
        auth = _auth(data, source)
    return WebConfig(auth=auth, tls=tls)


def _auth(data: dict[str, object], source: str) -> WebAuth:
    users = data.get("basic_auth_users", {})
    tokens = data.get("bearer_token_hashes", [])
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise ConfigError(f'{source}: basic_auth_users must be a table of user = "hash"')
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise ConfigError(f"{source}: bearer_token_hashes must be a list of hash strings")
    return WebAuth(basic_users=users, bearer_tokens=tuple(tokens), source=source)


def load_web_config(path: str | Path) -> WebAuth:
    """The authentication part of a ``web_config`` file (a ConfigError if it has none)."""
    auth = read_web_config(path).auth
    if auth is None:
        raise ConfigError(f"{path}: no basic_auth_users and no bearer_token_hashes")
    return auth


class _AuthMiddleware:
    """Pure ASGI middleware: 401 unless the request authenticates (``/healthz`` is open)."""

    _CACHE_SIZE = 64

    def __init__(self, app: ASGIApp, auth: WebAuth) -> None:
        self._app = app
        self._auth = auth
        # bcrypt costs ~0.1 s per check; remember recent good headers (as digests) instead.
        self._granted: dict[bytes, None] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        if await self._allowed(Headers(scope=scope).get("authorization")):
            await self._app(scope, receive, send)
            return
        response = JSONResponse(
            {"status": "error", "message": "authentication required"},
            status_code=401,
            headers={"WWW-Authenticate": self._auth.challenge},
        )
        await response(scope, receive, send)

    async def _allowed(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        key = hashlib.sha256(authorization.encode()).digest()
        if key in self._granted:
            return True
        ok = await anyio.to_thread.run_sync(self._auth.check, authorization)
        if ok:
            if len(self._granted) >= self._CACHE_SIZE:
                self._granted.pop(next(iter(self._granted)))
            self._granted[key] = None
        return ok


# --------------------------------------------------------------------------- routes

_LANDING = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>benchd</title></head>
<body>
<h1>benchd</h1>
<p>Continuous relevance and latency prober for retrieval stores. Version {version}.</p>
<ul>
<li><a href="metrics">Metrics</a> (Prometheus / OpenMetrics)</li>
<li><a href="api/status">Status</a> (JSON: last result per probe, recent cycles)</li>
<li><a href="readyz">Readiness</a> (200 once every probe has completed a cycle)</li>
<li><a href="healthz">Health</a></li>
</ul>
<p>Probes: {probes}. Reload the configuration with <code>POST /-/reload</code>.</p>
</body>
</html>
"""


@dataclass(frozen=True, slots=True)
class _Endpoints:
    """The route handlers, closed over the book, the registry and the reload callback."""

    book: ResultBook
    registry: CollectorRegistry
    reload_callback: ReloadCallback | None

    async def landing(self, request: Request) -> Response:
        probes = ", ".join(self.book.snapshot().probes) or "none yet"
        body = _LANDING.format(version=html.escape(__version__), probes=html.escape(probes))
        return HTMLResponse(body)

    async def metrics(self, request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = await anyio.to_thread.run_sync(encoder, self.registry)
        return Response(body, headers={"Content-Type": content_type})

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("OK\n")

    async def readyz(self, request: Request) -> Response:
        if self.book.ready():
            return JSONResponse({"status": "ready"})
        if not self.book.configured():
            reason = "probes are not loaded yet"
        else:
            pending = ", ".join(self.book.snapshot().pending)
            reason = f"waiting for the first cycle of: {pending}"
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)

    async def status(self, request: Request) -> Response:
        body = await anyio.to_thread.run_sync(_status_body, self.book)
        return Response(body, media_type="application/json")

    async def reload(self, request: Request) -> Response:
        if self.reload_callback is None:
            return _message(501, "error", "reload is not available in this mode")
        try:
            ok = await self.reload_callback()
        except BenchdError as exc:
            return _message(500, "error", f"reload failed: {exc}")
        if not ok:
            return _message(
                500, "error", "reload failed; the previous configuration stays active (see the log)"
            )
        return _message(200, "success", "configuration reloaded")


def _status_body(book: ResultBook) -> bytes:
    document = status_document(book)
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode()


def _message(status_code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse({"status": status, "message": message}, status_code=status_code)


def build_app(
    book: ResultBook,
    *,
    reload: ReloadCallback | None = None,
    auth: WebAuth | None = None,
    extra_collectors: Iterable[Collector] = (),
) -> Starlette:
    """benchd's ASGI app over ``book``; ``extra_collectors`` join ``/metrics``."""
    endpoints = _Endpoints(book, build_registry(book, extra=extra_collectors), reload)
    routes = [
        Route("/", endpoints.landing, methods=["GET"]),
        Route("/metrics", endpoints.metrics, methods=["GET"]),
        Route("/healthz", endpoints.healthz, methods=["GET"]),
        Route("/readyz", endpoints.readyz, methods=["GET"]),
        Route("/api/status", endpoints.status, methods=["GET"]),
        Route("/-/reload", endpoints.reload, methods=["POST"]),
    ]
    middleware = [Middleware(GZipMiddleware, minimum_size=1024)]
    if auth is not None:
        middleware.append(Middleware(_AuthMiddleware, auth=auth))
    return Starlette(routes=routes, middleware=middleware)


# --------------------------------------------------------------------------- serving


@dataclass(frozen=True, slots=True)
class BoundServer:
    """Where :func:`serve_web` listens (the real port when 0 was asked for)."""

    host: str
    port: int
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before serving starts so the URL is valid at once."""
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or "0.0.0.0", port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InputError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise InputError(
            f"cannot listen on {where}: {exc.strerror or exc}; "
            "choose another address with --listen HOST:PORT"
        ) from None
    return sock


@asynccontextmanager
async def serve_web(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    grace_s: float = 5.0,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[BoundServer]:
    """Serve ``app`` with uvicorn in this event loop for the duration of the block.

    The socket is bound first (port 0 picks a free one), so requests to
    ``bound.url`` succeed as soon as the block starts: no startup polling.
    uvicorn's own signal handling is not used; the caller owns the signals.
    With ``ssl_context`` the server speaks HTTPS only.
    """
    sock = _listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    bound = BoundServer(bound_host, bound_port, "https" if ssl_context else "http")
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=max(1, math.ceil(grace_s)),
    )
    config.load()
    config.ssl = ssl_context  # uvicorn's own loader only takes file names
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    log.debug("web listening", url=bound.url)
    # A bare asyncio task, not a task group: an error in the caller's block must
    # reach the caller as itself, not wrapped in an ExceptionGroup.
    ticker = asyncio.get_running_loop().create_task(server.main_loop())  # Date header
    try:
        yield bound
    finally:
        ticker.cancel()
        with anyio.move_on_after(grace_s + 1.0, shield=True):
            with suppress(asyncio.CancelledError):
                await ticker
            await server.shutdown(sockets=[sock])
