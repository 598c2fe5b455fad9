"""Can wrong passwords starve an authenticated scrape? ``/metrics`` latency alone and
beside 60 clients sending wrong passwords, against a real ``benchd run``.

One command reproduces it::

    .venv/bin/python bench/auth_starve.py [--attackers 60] [--scrapes 40] [--cost 12]

benchd runs as a subprocess with a ``web_config`` holding one bcrypt user
(cost 12, bcrypt's default) and a probe on the reference store, so
``/metrics`` has real content. The scraper authenticates once (benchd
remembers the accepted header), then times ``--scrapes`` sequential
``GET /metrics``: first alone (the peer), then while ``--attackers`` clients
each send wrong passwords as fast as benchd answers them. A third figure is
what a *new* scraper (no remembered header, so it needs a bcrypt check)
sees under the same attack: one attempt, retried after ``429``. The goal is
an authenticated scrape under 1 s (Prometheus' default scrape timeout is 10 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import bcrypt
import httpx

KEY = "auth-bench-key"
USER, PASSWORD = "prometheus", "the-right-password-9f3"


def _write_config(folder: Path, store_url: str, cost: int) -> Path:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=cost)).decode()
    (folder / "web.toml").write_text(f'[basic_auth_users]\n{USER} = "{hashed}"\n')
    config = folder / "benchd.toml"
    config.write_text(
        f'[server]\nweb_config = "{folder / "web.toml"}"\n\n'
        '[[probe]]\nname = "bench"\nfixture = "packaged:smoke"\ninterval_s = 600\n'
        f'[probe.target]\nkind = "zengram"\nurl = "{store_url}"\napi_key_env = "BENCH_KEY"\n'
        'cleanup = "never"\n'
    )
    return config


def _start(config: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchd", "run", "--config", str(config),
         "--listen", f"127.0.0.1:{port}", "--log-format", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "BENCH_KEY": KEY},
    )  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_ready(url: str) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(600):
            try:
                reply = await client.get(url + "/readyz", auth=(USER, PASSWORD))
                if reply.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.1)
    raise SystemExit("benchd did not become ready")


async def _scrapes(client: httpx.AsyncClient, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        reply = await client.get("/metrics", auth=(USER, PASSWORD))
        times.append(time.perf_counter() - start)
        if reply.status_code != 200:
            raise SystemExit(f"scrape answered {reply.status_code}")
        await anyio.sleep(0.05)
    return times


async def _attack(url: str, stop: anyio.Event, codes: dict[int, int], i: int) -> None:
    """One client sending wrong passwords back to back on its own connection."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while not stop.is_set():
            try:
                reply = await client.get("/metrics", auth=(USER, f"wrong-{i}"))
                codes[reply.status_code] = codes.get(reply.status_code, 0) + 1
            except httpx.HTTPError:
                codes[0] = codes.get(0, 0) + 1


async def _attack_main(url: str, attackers: int, seconds: float) -> None:
    """The attackers' own process, so their client work never delays the scraper's."""
    stop, codes = anyio.Event(), {}
    async with anyio.create_task_group() as tg:
        for i in range(attackers):
            tg.start_soon(_attack, url, stop, codes, i)
        await anyio.sleep(seconds)
        stop.set()
        tg.cancel_scope.cancel()
    print(" ".join(f"{code}={n}" for code, n in sorted(codes.items())), flush=True)


async def _new_scraper(url: str) -> tuple[float, int]:
    """A scraper benchd has not seen: how long until its first 200 (and tries)."""
    start, tries = time.perf_counter(), 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while True:
            tries += 1
            reply = await client.get("/metrics", auth=(USER, PASSWORD), headers={"X-New": "1"})
            if reply.status_code == 200:
                return time.perf_counter() - start, tries
            await anyio.sleep(float(reply.headers.get("Retry-After", "1")))


def _row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"{name:<34} n={len(times):>3}  p50 {statistics.median(times) * 1000:8.1f} ms  "
        f"p99 {p99 * 1000:8.1f} ms  max {max(times) * 1000:8.1f} ms"
    )


async def _main(args: argparse.Namespace) -> None:
    # imported here: the attackers' process (--attack-only) needs nothing of benchd
    from benchd.refstore.server import RefStoreThread
    from benchd.refstore.testing import make_config

    with tempfile.TemporaryDirectory() as tmp, RefStoreThread(
        make_config(api_key=KEY, retriever="bm25")
    ) as store:  # fmt: skip
        config = _write_config(Path(tmp), store.url, args.cost)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        proc = _start(config, port)
        try:
            await _wait_ready(url)
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                alone = await _scrapes(client, args.scrapes)
                attack = subprocess.Popen(
                    [sys.executable, __file__, "--attack-only", url,
                     "--attackers", str(args.attackers), "--seconds", str(args.seconds)],
                    stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                await anyio.sleep(2.0)  # let the attack reach its steady state
                attacked = await _scrapes(client, args.scrapes)
                fresh_s, tries = await _new_scraper(url)
                out, _ = attack.communicate(timeout=args.seconds + 60)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        codes = dict(item.split("=") for item in out.split())
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"benchd run, bcrypt cost {args.cost}, {os.cpu_count()} CPUs, load average {load}")
    print(_row("authenticated /metrics, alone", alone))
    print(_row(f"... beside {args.attackers} wrong-password clients", attacked))
    total = sum(int(n) for n in codes.values())
    print(
        f"wrong-password answers during the attack: {total} in {args.seconds:.0f} s "
        f"({', '.join(f'{c}: {n}' for c, n in sorted(codes.items()))}; 0 = transport error)"
    )
    print(f"a new scraper under the attack: first 200 after {fresh_s:.2f} s ({tries} tries)")
    worst = max(attacked)
    print(f"goal: authenticated scrape < 1 s under attack -> {'met' if worst < 1 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attackers", type=int, default=60)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--cost", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the attack lasts")
    parser.add_argument("--attack-only", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack_only:
        anyio.run(_attack_main, args.attack_only, args.attackers, args.seconds)
    else:
        anyio.run(_main, args)


if __name__ == "__main__":
    main()
