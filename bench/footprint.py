"""Footprint: RSS growth of the daemon over many cycles of the embedded default.

Runs the real Daemon in-process (scheduler, probe cycles against the
in-process reference store with the packaged smoke fixture, the result
book, /metrics and /api/status scraped as Prometheus would) with the probe
interval set to 0.05 s, and prints RSS and open file descriptors after a
warm-up and at the end. Goal (issue 5): 2,000 cycles grow RSS by < 5 MB.

The embedded default's 3 s closed-loop pass is replaced by the serial pass
alone (``--load serial``, the default here) so that 2,000 cycles take
minutes, not hours; ``--load closed`` keeps it.

    .venv/bin/python bench/footprint.py [--cycles 2000] [--warmup 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import anyio
import httpx

from benchd.commands.embedded import embedded_default
from benchd.daemon import Daemon
from benchd.load import LoadProfile
from benchd.logging import configure_logging


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def cycles_done(daemon: Daemon) -> int:
    state = daemon.book.snapshot().states.get("embedded")
    return 0 if state is None else sum(state.cycles.values())


async def wait_cycles(daemon: Daemon, client: httpx.AsyncClient, target: int) -> None:
    while cycles_done(daemon) < target:
        await client.get("/metrics")  # scrape as Prometheus would, ~every 0.5 s
        await client.get("/api/status")
        await anyio.sleep(0.5)


async def main(args: argparse.Namespace) -> None:
    async with embedded_default(listen="127.0.0.1:0") as config:
        probe = dataclasses.replace(
            config.probes[0],
            interval_s=0.05,
            jitter_s=0.0,
            load=LoadProfile(mode=args.load, concurrency=4, duration_s=1.0),
        )
        daemon = Daemon(dataclasses.replace(config, probes=(probe,)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run)
            await daemon.started.wait()
            async with httpx.AsyncClient(base_url=daemon.url) as client:
                started = time.monotonic()
                await wait_cycles(daemon, client, args.warmup)
                base_rss, base_fds = rss_mb(), open_fds()
                print(f"after {args.warmup:>5} cycles: RSS {base_rss:7.1f} MB  fds {base_fds}")
                await wait_cycles(daemon, client, args.cycles)
                end_rss, end_fds = rss_mb(), open_fds()
                elapsed = time.monotonic() - started
                print(
                    f"after {args.cycles:>5} cycles: RSS {end_rss:7.1f} MB  fds {end_fds}"
                    f"  ({elapsed:.0f} s)"
                )
            daemon.stop()
    growth = end_rss - base_rss
    verdict = "OK" if growth < 5.0 else "OVER"
    print(
        f"RSS growth over {args.cycles - args.warmup} cycles: {growth:+.2f} MB "
        f"(goal < 5 MB: {verdict}); fd change {end_fds - base_fds:+d}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--load", choices=("serial", "closed"), default="serial")
    configure_logging("warning")
    anyio.run(main, parser.parse_args())
