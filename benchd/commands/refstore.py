"""``benchd refstore``: serve the reference store (a Zengram-compatible memory API)."""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

import anyio

from benchd.errors import UsageError
from benchd.logging import configure_logging, get_logger
from benchd.refstore.config import DEFAULT_EMBEDDER, DEFAULT_RETRIEVER, RefStoreConfig
from benchd.refstore.profiles import DEFAULT_PROFILE, PROFILES
from benchd.refstore.retrievers import RETRIEVERS
from benchd.refstore.server import running_refstore

__all__ = ["parse_listen", "register"]

DEFAULT_LISTEN = "127.0.0.1:8084"
DEFAULT_KEY_ENV = "BRAIN_API_KEY"


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8084`` for IPv6) → (host, port); raises UsageError."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen '{value}' is not HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host, int(port)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "refstore",
        help="serve the reference store (a Zengram-compatible memory API)",
        description=(
            "Serve benchd's reference store: a small Zengram-compatible memory API "
            "(SQLite FTS5 BM25, dense vectors, hybrid RRF, tag scorer) with fault "
            "injection for drills. The API key is read from an environment variable."
        ),
    )
    _add_arguments(p)
    p.set_defaults(handler=run)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_LISTEN}; port 0 = any free port)",
    )
    p.add_argument(
        "--api-key-env",
        default=DEFAULT_KEY_ENV,
        metavar="NAME",
        help=f"environment variable holding the API key (default {DEFAULT_KEY_ENV})",
    )
    p.add_argument("--db", metavar="PATH", help="SQLite file to persist to (default: in memory)")
    p.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        default=DEFAULT_RETRIEVER,
        help=f"ranking (default {DEFAULT_RETRIEVER})",
    )
    p.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        metavar="SPEC",
        help=f"hash:DIMS | openai:URL#MODEL | minilm (default {DEFAULT_EMBEDDER})",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="inject a fault, e.g. latency=fixed:20ms or error_rate=0.1 (repeatable)",
    )
    p.add_argument(
        "--read-limit",
        type=int,
        default=120,
        metavar="N",
        help="reads per minute per key (default 120; 0 = unlimited)",
    )
    p.add_argument(
        "--write-limit",
        type=int,
        default=60,
        metavar="N",
        help="writes per minute per key (default 60; 0 = unlimited)",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default=DEFAULT_PROFILE,
        help=(
            "behaviour: default (the designed contract) or zengram-4.3 (the real server: "
            "paced imports, millisecond export cursor, no model in /health, confidence decay)"
        ),
    )
    p.add_argument(
        "--import-pacing",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="scale zengram-4.3's import pause of 100 ms per 10 records (default 1; 0 = none)",
    )
    p.add_argument(
        "--clock",
        metavar="ISO8601",
        help="start the store's clock at this time, e.g. 2026-07-01T00:00:00Z (default: now)",
    )
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def config_from_args(args: argparse.Namespace) -> RefStoreConfig:
    """Build the store config; the key comes only from the named environment variable."""
    key = os.environ.get(args.api_key_env, "")
    if not key:
        raise UsageError(
            f"refstore: environment variable {args.api_key_env} is not set: export the API key "
            "there (or name another variable with --api-key-env)"
        )
    host, port = parse_listen(args.listen)
    return RefStoreConfig(
        api_key=key,
        host=host,
        port=port,
        db=args.db,
        retriever=args.retriever,
        embedder=args.embedder,
        faults=tuple(args.fault),
        read_limit_per_min=args.read_limit,
        write_limit_per_min=args.write_limit,
        profile=args.profile,
        import_pacing=args.import_pacing,
        clock=args.clock,
    )


async def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM, then shut down gracefully.

    SIGHUP is ignored with a log line: the store has no config file to reload,
    and a ``kill -HUP`` meant for a benchd daemon must not take it down.
    """
    config = config_from_args(args)
    configure_logging(args.log_level)
    log = get_logger("benchd.refstore")
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async with running_refstore(config) as store:
            print(store.url, flush=True)
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("refstore ignores SIGHUP", reason="nothing to reload")
                    continue
                log.info("refstore stopping", signal=signal.Signals(signum).name)
                break
    return 0
