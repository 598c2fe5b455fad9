"""Start and stop a reference store in-process: async context manager or background thread.

``running_refstore(config)`` binds the socket itself (so ``port = 0`` yields
a known ephemeral port before serving), runs uvicorn's startup on the
current asyncio loop and, on exit, uvicorn's graceful shutdown. It never
installs signal handlers: the embedding process (``benchd run``, pytest)
owns them. ``RefStoreThread`` runs the same thing on its own loop thread for
synchronous callers such as pytest fixtures.
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from anyio.from_thread import BlockingPortal, start_blocking_portal

from benchd.embed.models import EmbedderError, EmbedderSpecError
from benchd.errors import UsageError
from benchd.logging import get_logger
from benchd.redact import register_secret
from benchd.refstore.app import build_app
from benchd.refstore.clock import StoreClock
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.faults import FaultInjector, FaultSpecError, parse_faults
from benchd.refstore.guard import GuardState
from benchd.refstore.profiles import profile_named
from benchd.refstore.ratelimit import RateLimiter
from benchd.refstore.records import parse_timestamp
from benchd.refstore.store import RefStore

__all__ = [
    "RefStoreConfig",
    "RefStoreThread",
    "RunningRefStore",
    "running_refstore",
    "serve_app",
]

_log = get_logger("benchd.refstore")


@dataclass(frozen=True, slots=True)
class RunningRefStore:
    """A started store: where it listens, its key, and its in-process state."""

    url: str
    api_key: str
    host: str
    port: int
    store: RefStore
    guard: GuardState


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets
    # whose proto says TCP; without it Nagle + delayed ACK add ~40 ms per response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this; without it a response written as headers
    # then body waits ~40 ms on Nagle + the client's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"refstore: cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def _open_store(config: RefStoreConfig) -> tuple[RefStore, GuardState]:
    try:
        plan = parse_faults(config.faults)
        clock = StoreClock()
        if config.clock is not None:
            clock.set(parse_timestamp(config.clock))
        profile = profile_named(config.profile, config.import_pacing)
        store = await RefStore.open(config.db, config.embedder, config.retriever, profile, clock)
    except (FaultSpecError, EmbedderSpecError) as exc:
        raise UsageError(f"refstore: {exc}") from exc
    except EmbedderError as exc:
        raise UsageError(f"refstore: cannot embed the stored records: {exc}") from exc
    except sqlite3.Error as exc:
        raise UsageError(f"refstore: cannot open --db {config.db}: {exc}") from exc
    limiter = RateLimiter(config.read_limit_per_min, config.write_limit_per_min)
    return store, GuardState(config.api_key, limiter, FaultInjector(plan))


def _uvicorn_server(app: Any) -> uvicorn.Server:
    uv_config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=5,
    )
    uv_config.load()
    server = uvicorn.Server(uv_config)
    server.lifespan = uv_config.lifespan_class(uv_config)
    return server


@asynccontextmanager
async def serve_app(app: Any, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve any ASGI app with uvicorn on the current asyncio loop; yield its base URL.

    No signal handlers are installed and startup is awaited, not polled.
    Raises UsageError when the address cannot be bound.
    """
    sock = _bind(host, port)
    server = _uvicorn_server(app)
    try:
        await server.startup(sockets=[sock])
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        if server.started:
            await server.shutdown(sockets=[sock])
        sock.close()


@asynccontextmanager
async def running_refstore(config: RefStoreConfig) -> AsyncIterator[RunningRefStore]:
    """Serve a reference store on the current asyncio loop for the ``async with`` body."""
    register_secret(config.api_key)
    store, guard = await _open_store(config)
    try:
        async with serve_app(build_app(store, guard), config.host, config.port) as url:
            port = int(url.rsplit(":", 1)[1])
            running = RunningRefStore(url, config.api_key, config.host, port, store, guard)
            _log.info(
                "refstore listening",
                url=url,
                model=store.embedder.spec,
                retriever=store.retriever,
                profile=store.profile.name,
            )
            yield running
    finally:
        await store.close()
        _log.info("refstore stopped", url=f"{config.host}:{config.port}")


class RefStoreThread:
    """A reference store on a background event-loop thread, for synchronous callers.

    ``start()`` returns once the store is listening; ``stop()`` shuts it down.
    Also usable as a context manager.
    """

    def __init__(self, config: RefStoreConfig) -> None:
        self.config = config
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._store_cm: AbstractContextManager[RunningRefStore] | None = None
        self._running: RunningRefStore | None = None

    @property
    def running(self) -> RunningRefStore:
        if self._running is None:
            raise RuntimeError("RefStoreThread is not started")
        return self._running

    @property
    def url(self) -> str:
        return self.running.url

    @property
    def api_key(self) -> str:
        return self.config.api_key

    def start(self) -> RefStoreThread:
        portal_cm = start_blocking_portal(backend="asyncio")
        portal = portal_cm.__enter__()
        try:
            store_cm = portal.wrap_async_context_manager(running_refstore(self.config))
            self._running = store_cm.__enter__()
        except BaseException:
            portal_cm.__exit__(None, None, None)
            raise
        self._portal_cm, self._store_cm = portal_cm, store_cm
        return self

    def stop(self) -> None:
        store_cm, portal_cm = self._store_cm, self._portal_cm
        self._store_cm = self._portal_cm = None
        self._running = None
        try:
            if store_cm is not None:
                store_cm.__exit__(None, None, None)
        finally:
            if portal_cm is not None:
                portal_cm.__exit__(None, None, None)

    def __enter__(self) -> RefStoreThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
