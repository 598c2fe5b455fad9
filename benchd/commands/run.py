"""``benchd run``: the daemon — scheduled probes, /metrics, status, reload."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchd.commands.collector import for_cycles
from benchd.config.load import load_config, parse_listen, with_adopted_namespaces
from benchd.config.locate import locate_config
from benchd.errors import EXIT_OK, OutputError
from benchd.logging import configure_logging

__all__ = ["LISTEN_ENV", "pid_file", "register", "resolve_listen"]

LISTEN_ENV = "BENCHD_LISTEN"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run the daemon: probes on their schedules, metrics on /metrics",
        description=(
            "Run every probe on its own interval and serve / (landing page), /metrics, "
            "/healthz, /readyz, /api/status and POST /-/reload. With no config (--config, "
            "$BENCHD_CONFIG or ./benchd.toml), runs the embedded default: the reference "
            "store in-process on loopback, probed with the "
            "packaged smoke fixture. SIGHUP or POST /-/reload reloads the config; "
            "SIGTERM/SIGINT stop cleanly (exit 0). Exit codes: 0 stopped cleanly, "
            "2 bad config/fixture/flags, 5 the pid file could not be written."
        ),
    )
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config (default: $BENCHD_CONFIG, else ./benchd.toml, else embedded)",
    )
    p.add_argument(
        "--listen",
        "-l",
        metavar="HOST:PORT",
        help=(
            f"override [server] listen (default: ${LISTEN_ENV} if set, else [server] listen, "
            "else 127.0.0.1:9108)"
        ),
    )
    p.add_argument(
        "--pid-file",
        metavar="FILE",
        help="write the daemon's process id here (for kill -HUP $(cat FILE)); removed on exit",
    )
    p.add_argument(
        "--adopt-namespace",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help=(
            "seed into this namespace although it holds records benchd did not write, "
            "beside them and never deleting them (repeatable; applies to the probes "
            "using it at start, never to probes a reload adds)"
        ),
    )
    p.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default="auto",
        help="log lines: JSON when not on a terminal (auto), or forced",
    )
    p.set_defaults(handler=_handle)


def resolve_listen(flag: str | None) -> str | None:
    """The listen address from ``--listen``, else ``$BENCHD_LISTEN``, else None (the config's)."""
    if flag:
        parse_listen(flag)
        return flag
    from_env = os.environ.get(LISTEN_ENV, "").strip()
    if from_env:
        parse_listen(from_env, f"environment variable {LISTEN_ENV}")
        return from_env
    return None


@contextlib.contextmanager
def pid_file(path: str | None) -> Iterator[None]:
    """Write this process's id to ``path`` for the daemon's lifetime (nothing if None).

    A file that cannot be written is an :class:`OutputError` (exit 5). On exit
    the file is removed only if it is a regular file that still holds our pid.
    """
    if not path:
        yield
        return
    target = Path(path)
    pid = str(os.getpid())
    try:
        with target.open("w", encoding="ascii") as handle:
            handle.write(pid + "\n")
    except OSError as exc:
        raise OutputError.from_os_error(exc, f"writing the pid file {target}") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if target.is_file() and target.read_text(encoding="ascii").strip() == pid:
                target.unlink()


async def _handle(args: argparse.Namespace) -> int:
    from benchd.daemon import Daemon

    listen = resolve_listen(args.listen)
    json_logs = None if args.log_format == "auto" else args.log_format == "json"
    from benchd.kinds import register_kinds

    source = locate_config(args.config)
    source.announce(as_json=not sys.stderr.isatty() if json_logs is None else json_logs)
    register_kinds()  # config decodes [probe.target] with the kinds handed to it
    config = load_config(source.path) if source.path else None
    # Until the daemon's own handler is installed a SIGHUP would kill the process
    # (its default action); a reload before start-up has nothing to reload anyway.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with pid_file(args.pid_file), for_cycles():  # before the daemon loads a fixture
        if config is not None:
            if args.adopt_namespace:
                config = with_adopted_namespaces(config, args.adopt_namespace)
            configure_logging(config.server.log_level, json=json_logs)
            daemon = Daemon(
                config,
                config_path=source.path,
                listen=listen,
            )
            await daemon.run()
            return EXIT_OK
        from benchd.commands.embedded import embedded_default

        configure_logging("info", json=json_logs)
        async with embedded_default() as embedded:
            await Daemon(embedded, listen=listen).run()
    return EXIT_OK
