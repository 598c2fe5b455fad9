"""``benchd run``: the daemon — scheduled probes, /metrics, status, reload."""

from __future__ import annotations

import argparse
from typing import Any

from benchd.config.load import load_config, parse_listen, with_adopted_namespaces
from benchd.errors import EXIT_OK
from benchd.logging import configure_logging

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run the daemon: probes on their schedules, metrics on /metrics",
        description=(
            "Run every probe on its own interval and serve / (landing page), /metrics, "
            "/healthz, /readyz, /api/status and POST /-/reload. With no --config, runs the "
            "embedded default: the reference store in-process on loopback, probed with the "
            "packaged smoke fixture. SIGHUP reloads the config; SIGTERM/SIGINT stop cleanly "
            "(exit 0). Exit codes: 0 stopped cleanly, 2 bad config/fixture/flags."
        ),
    )
    p.add_argument("--config", "-c", metavar="FILE", help="TOML config (default: embedded)")
    p.add_argument(
        "--listen",
        "-l",
        metavar="HOST:PORT",
        help="override [server] listen (default 127.0.0.1:9108)",
    )
    p.add_argument(
        "--adopt-namespace",
        action="store_true",
        help="seed into namespaces that hold records benchd did not write (marks them as benchd's)",
    )
    p.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default="auto",
        help="log lines: JSON when not on a terminal (auto), or forced",
    )
    p.set_defaults(handler=_handle)


async def _handle(args: argparse.Namespace) -> int:
    from benchd.daemon import Daemon

    if args.listen:
        parse_listen(args.listen)
    json_logs = None if args.log_format == "auto" else args.log_format == "json"
    if args.config:
        config = load_config(args.config)
        if args.adopt_namespace:
            config = with_adopted_namespaces(config)
        configure_logging(config.server.log_level, json=json_logs)
        daemon = Daemon(
            config,
            config_path=args.config,
            listen=args.listen,
            adopt_namespaces=args.adopt_namespace,
        )
        await daemon.run()
        return EXIT_OK
    from benchd.commands.embedded import embedded_default

    configure_logging("info", json=json_logs)
    async with embedded_default() as config:
        await Daemon(config, listen=args.listen).run()
    return EXIT_OK
