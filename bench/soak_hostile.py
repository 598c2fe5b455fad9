"""Soak: hostile stores and hostile clients beside a healthy probe, for minutes (issue #21).

Starts ``benchd refstore`` and ``benchd run`` as subprocesses on free
loopback ports, plus a hostile store in this process. The daemon runs one
healthy probe (against the reference store, every ``--interval`` s) and one
probe per hostile mode, each pointed at the hostile store, which answers
every request of that mode with:

=============  ===================================================================
``bomb``       a body under two stacked gzip codings that inflates to 256 MiB
``endless``    a header block that never ends
``surrogate``  JSON with lone surrogates (valid JSON, not UTF-8 text) in every string
``extreme``    search scores of 1.7e308 and counts of 1e308
``error``      HTTP 500 whose error text holds lone surrogates and a line break
=============  ===================================================================

Meanwhile ``--web-attackers`` clients send benchd's own server request heads
that never end, reconnecting each time they are cut off. Every
``--sample`` seconds it prints the daemon's RSS. At the end it checks that
the healthy probe completed at least 90% of the cycles its interval allows,
that ``/metrics``, ``/api/status`` and the page answer 200, that the
daemon's RSS stayed under ``--rss-bound-mib``, and prints ``soak-hostile: ok``
(exit 0) or what failed (exit 1). Run from the repo root::

    .venv/bin/python bench/soak_hostile.py                 # 10 minutes
    .venv/bin/python bench/soak_hostile.py --duration 90   # what CI runs
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

KEY = "soak-hostile-" + os.urandom(6).hex()
KEY_ENV = "BENCHD_SOAK_HOSTILE_KEY"
MIB = 1 << 20
MODES = ("bomb", "endless", "surrogate", "extreme", "error")

_BOMB: list[bytes] = []


def bomb() -> bytes:
    """256 MiB of zeros under gzip, twice (about 1 KiB on the wire); built once."""
    if not _BOMB:
        inner = gzip.compress(b"\0" * (256 * MIB), compresslevel=9)
        _BOMB.append(gzip.compress(inner, compresslevel=9))
    return _BOMB[0]


def _response(status: int, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _json(value: object) -> bytes:
    # ensure_ascii keeps lone surrogates as \\udXXX escapes: valid JSON, not UTF-8 text
    return json.dumps(value).encode()


def hostile_answer(mode: str, path: str) -> bytes | None:
    """One answer for ``mode`` (None: the endless head, written by the caller)."""
    if mode == "bomb":
        return _response(200, bomb(), "Content-Encoding: gzip, gzip\r\n")
    if mode == "endless":
        return None
    if mode == "error":
        return _response(500, _json({"error": f"index \ud800 broken\nsecond line {KEY}"}))
    bad = "\ud800\udfff-\udbff"
    if path.startswith("/health"):
        model = {"surrogate": f"model-{bad}", "extreme": "extreme-model"}[mode]
        return _response(200, _json({"status": "ok", "model": model, "version": bad}))
    if path.startswith("/export/import"):
        if mode == "extreme":
            return _response(200, b'{"imported": 1e308, "skipped": 0, "errors": 0}')
        return _response(200, _json({"imported": 0, "skipped": 0, "errors": 0, "note": bad}))
    if path.startswith("/export"):
        return _response(200, _json({"memories": [], "total": 0, "has_more": False, "x": bad}))
    if path.startswith("/memory/search"):
        score = 1.7e308 if mode == "extreme" else 0.5
        results = [
            {"id": f"id-{i}{bad}", "effective_score": score, "summary": bad} for i in range(5)
        ]
        return _response(200, _json({"query": bad, "count": 5, "results": results}))
    return _response(200, _json({"id": bad, "deleted": True}))


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, int]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return lines[0].split(" ")[1], length


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            target, length = await _read_head(reader)
            await reader.readexactly(length)
            _, mode, rest = target.split("/", 2)
            answer = hostile_answer(mode, "/" + rest)
            if answer is None or mode == "endless":
                writer.write(b"HTTP/1.1 200 OK\r\n")
                for i in range(10_000_000):
                    writer.write(b"X-Endless-%d: %s\r\n" % (i, b"v" * 200))
                    await writer.drain()
                return
            writer.write(answer)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


class HostileStore:
    """The hostile store on a loopback port, in a thread of its own."""

    def __init__(self) -> None:
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await server.serve_forever()

    def start(self) -> HostileStore:
        bomb()
        self._thread.start()
        self._ready.wait(30)
        return self


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def probe_toml(name: str, url: str, interval: float) -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
k = [1, 5]
interval_s = {interval}
timeout_s = 30
jitter_s = 0.0

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{KEY_ENV}"
namespace = "soak-{name}"
timeout_s = 5.0
max_retries = 0
searchable_timeout_s = 2.0
"""


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_daemon(config: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "run", "--config", str(config),
         "--listen", "127.0.0.1:0", "--log-format", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env={**os.environ, KEY_ENV: KEY},
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "started":
            drain = threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True)
            drain.start()
            return proc, str(event["url"])
    raise SystemExit("benchd did not start")


def start_refstore(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "refstore", "--listen", f"127.0.0.1:{port}",
         "--read-limit", "0", "--write-limit", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "BRAIN_API_KEY": KEY},
    )  # fmt: skip
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the reference store did not start")


def web_attacker(
    host: str, port: int, stop: threading.Event, cut: list[int], pace_s: float = 0.01
) -> None:
    """Send benchd request heads that never end, reconnecting each time benchd cuts them."""
    line = b"X-Endless: " + b"v" * 1000 + b"\r\n"
    while not stop.is_set():
        try:
            with socket.create_connection((host, port), timeout=10) as sock:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while not stop.is_set():
                    sock.sendall(line)
                    time.sleep(pace_s)  # 100 KiB/s a client: the box has other work too
        except OSError:
            cut.append(1)


def metric_sum(text: str, name: str, **labels: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--interval", type=float, default=2.0, help="healthy probe interval")
    parser.add_argument("--sample", type=float, default=15.0, help="seconds between RSS lines")
    parser.add_argument("--web-attackers", type=int, default=10)
    parser.add_argument("--rss-bound-mib", type=float, default=150.0)
    parser.add_argument("--modes", default=",".join(MODES), help="hostile modes to run")
    args = parser.parse_args()
    store_port = free_port()
    store = start_refstore(store_port)
    hostile = HostileStore().start()
    stop = threading.Event()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchd-soak-hostile-") as tmp:
        config = Path(tmp) / "benchd.toml"
        probes = probe_toml("healthy", f"http://127.0.0.1:{store_port}", args.interval)
        modes = [m for m in args.modes.split(",") if m]
        for mode in modes:
            probes += probe_toml(mode, f"http://127.0.0.1:{hostile.port}/{mode}", 1.0)
        config.write_text("[server]\nhistory = 20\n" + probes)
        daemon, url = start_daemon(config)
        began = time.monotonic()
        try:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            cut: list[int] = []
            attackers = [
                threading.Thread(
                    target=web_attacker, args=(host, int(port), stop, cut), daemon=True
                )
                for _ in range(args.web_attackers)
            ]
            for thread in attackers:
                thread.start()
            peak = 0
            next_sample = began
            while (elapsed := time.monotonic() - began) < args.duration:
                now_rss = rss(daemon.pid)
                peak = max(peak, now_rss)
                if time.monotonic() >= next_sample:
                    print(f"t={elapsed:5.0f} s  rss={now_rss / MIB:6.1f} MiB  heads cut={len(cut)}")
                    next_sample += args.sample
                time.sleep(0.5)
            stop.set()
            elapsed = time.monotonic() - began
            with httpx.Client(base_url=url, timeout=30) as client:
                metrics = client.get("/metrics")
                status = client.get("/api/status")
                page = client.get("/")
            for name, answer in (("/metrics", metrics), ("/api/status", status), ("/", page)):
                if answer.status_code != 200:
                    failures.append(f"{name} answered {answer.status_code}")
            ok = metric_sum(metrics.text, "benchd_cycles_total", probe="healthy", outcome="success")
            expected = int(elapsed // args.interval)
            print(f"healthy: {ok:.0f} successful cycles of {expected} expected in {elapsed:.0f} s")
            for outcome in ("failed", "timeout", "degraded"):
                n = metric_sum(
                    metrics.text, "benchd_cycles_total", probe="healthy", outcome=outcome
                )
                if n:
                    print(f"healthy: {n:.0f} {outcome}")
            for mode in modes:
                n = metric_sum(metrics.text, "benchd_cycles_total", probe=mode)
                print(f"{mode}: {n:.0f} cycles")
            print(f"rss peak {peak / MIB:.1f} MiB (bound {args.rss_bound_mib:.0f} MiB); "
                  f"request heads cut {len(cut)}")  # fmt: skip
            if ok < 0.9 * expected:
                failures.append(f"healthy probe: {ok:.0f} of {expected} cycles (< 90%)")
            if peak > args.rss_bound_mib * MIB:
                failures.append(f"RSS peaked at {peak / MIB:.1f} MiB")
            if KEY in metrics.text + status.text + page.text:
                failures.append("the API key shows in an output")
        finally:
            stop.set()
            daemon.terminate()
            daemon.wait(timeout=60)
            store.terminate()
            store.wait(timeout=30)
    for failure in failures:
        print(f"soak-hostile: FAILED: {failure}")
    if not failures:
        print("soak-hostile: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
