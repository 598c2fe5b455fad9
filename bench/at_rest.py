"""At rest: the daemon's CPU share and RSS with 20 probes every 5 s, beside a plain client.

Starts a reference store (bm25, no rate limits) and ``benchd run`` with
``--probes`` probes (default 20), each its own namespace, the same fixture
(default the packaged smoke fixture; ``--records N``: ``benchd synth``, N
memories and 100 queries),
``interval_s = 5``, ``cleanup = "never"`` and a serial pass, so after the
first cycles seed the corpus every cycle is steady state: a listing, a lease
heartbeat and the serial searches. After ``--warmup`` seconds it alternates
``--pairs`` pairs of windows of ``--window`` seconds: benchd's (the daemon
running; its CPU and its children's, the decode worker, from /proc), then the
plain client's with the daemon stopped (SIGSTOP). The plain client is an
aiohttp process that sends, per probe every 5 s, what benchd sent per cycle in
its windows (the store counts requests by route): the same listings, imports,
deletes and searches (the fixture's queries) into the same namespaces, on one
connection pool. It prints benchd's CPU share of a core and the plain
client's per pair, the ratio as min/median/max, the daemon's RSS and its
peak (VmHWM); during benchd's windows it scrapes ``/metrics`` and
``/api/status`` every 15 s as Prometheus and a browser would, and at the end
each endpoint 40 times in a row, printing the median time of a scrape and
the daemon's CPU per scrape (less its share while cycles run). aiohttp comes
from ``--peer-python`` (default /work/bench-venv/bin/python; ``python -m venv
/work/bench-venv && /work/bench-venv/bin/pip install aiohttp`` makes one).
Run::

    .venv/bin/python bench/at_rest.py [--probes 20] [--warmup 60] [--window 45] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from scale import KEY_ENV, Store

KEY = "bench-scale-key-0123456789"

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system seconds of ``pid`` and of its live children."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024.0
    return values["VmRSS"], values["VmHWM"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(workdir: Path, url: str, fixture: str | Path, probes: int) -> Path:
    parts = []
    for i in range(probes):
        parts.append(
            f"""[[probe]]
name = "rest-{i:02d}"
fixture = "{fixture}"
k = [10]
interval_s = 5.0
timeout_s = 600.0

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{KEY_ENV}"
namespace = "bench-rest-{i:02d}"
cleanup = "never"

[probe.load]
mode = "serial"

[probe.budget]
unlimited = true
"""
        )
    config = workdir / "benchd.toml"
    config.write_text("\n".join(parts))
    return config


SCRAPES = 40  # a cycle lands every 0.25 s: many scrapes average its share out


def share(cpu: float, wall: float) -> float:
    return cpu / wall


def scrape_cost(client: Any, pid: int, path: str, background: float) -> tuple[float, float]:
    """Median wall ms of ``SCRAPES`` scrapes of ``path`` in a row, and the daemon's CPU ms
    per scrape beyond ``background`` (its share of a core while cycles run)."""
    walls = []
    cpu0, t0 = cpu_s(pid), time.monotonic()
    for _ in range(SCRAPES):
        start = time.perf_counter()
        client.get(path).raise_for_status()
        walls.append(time.perf_counter() - start)
    cpu = cpu_s(pid) - cpu0 - background * (time.monotonic() - t0)
    return 1000 * sorted(walls)[SCRAPES // 2], 1000 * max(0.0, cpu) / SCRAPES


def cycles(client: Any) -> int:
    probes = client.get("/api/status").json().get("probes", {})
    return sum(int(p.get("cycles_total", 0)) for p in probes.values())


def outcomes(client: Any) -> dict[str, int]:
    """Cycles by outcome, over every probe, since the daemon started."""
    total: dict[str, int] = {}
    for probe in client.get("/api/status").json().get("probes", {}).values():
        for outcome, n in (probe.get("cycles") or {}).items():
            total[outcome] = total.get(outcome, 0) + int(n)
    return total


def routes(store: Store) -> dict[str, int]:
    """Requests the store has answered so far, by route."""
    total: dict[str, int] = {}
    for span in store.sequence():
        total[span.route] = total.get(span.route, 0) + span.n
    return total


# -- the plain client: aiohttp, the same requests per cycle -----------------------------


def peer_main(spec_path: str) -> None:
    """Send ``spec``'s requests per probe every ``interval`` s until killed (aiohttp only)."""
    import asyncio

    import aiohttp

    spec = json.loads(Path(spec_path).read_text())
    headers = {"x-api-key": spec["key"]}

    async def cycle(session: Any, ns: str, n: int) -> None:
        base, mix, queries = spec["url"], spec["mix"], spec["queries"]
        for _ in range(mix.get("GET /health", 0)):
            async with session.get(f"{base}/health") as r:
                await r.read()
        for _ in range(mix.get("GET /export", 0)):
            params = {"client_id": ns, "limit": "500", "offset": "0"}
            async with session.get(f"{base}/export", params=params) as r:
                await r.json()
        for i in range(mix.get("POST /export/import", 0)):
            record = {"id": f"peer:{ns}:lease", "content": f"lease {n} {i}", "type": "fact",
                      "client_id": ns, "key": f"peer:{ns}:lease"}  # fmt: skip
            body = {"data": [record], "operator_approved": True}
            async with session.post(f"{base}/export/import", json=body) as r:
                await r.json()
        for _ in range(mix.get("DELETE /memory/{id}", 0)):
            async with session.delete(f"{base}/memory/peer:{ns}:none") as r:
                await r.read()
        for i in range(mix.get("GET /memory/search", 0)):
            q = queries[(n + i) % len(queries)]
            params = {"q": q, "limit": "10", "format": "index", "client_id": ns,
                      "read_only": "true"}  # fmt: skip
            async with session.get(f"{base}/memory/search", params=params) as r:
                await r.json()

    async def probe(session: Any, ns: str, offset: float) -> None:
        await asyncio.sleep(offset)
        n = 0
        while True:
            started = time.monotonic()
            await cycle(session, ns, n)
            n += 1
            await asyncio.sleep(max(0.0, spec["interval"] - (time.monotonic() - started)))

    async def main() -> None:
        async with aiohttp.ClientSession(headers=headers) as session:
            count = len(spec["namespaces"])
            await asyncio.gather(*(probe(session, ns, i * spec["interval"] / count)
                                   for i, ns in enumerate(spec["namespaces"])))  # fmt: skip

    asyncio.run(main())


def peer_spec(workdir: Path, url: str, probes: int, mix: dict[str, int], fixture: Path) -> Path:
    data = json.loads(fixture.read_text())
    spec = {
        "url": url,
        "key": KEY,
        "interval": 5.0,
        "namespaces": [f"bench-rest-{i:02d}" for i in range(probes)],
        "mix": mix,
        "queries": [q["q"] for q in data["queries"]],
    }
    path = workdir / "peer.json"
    path.write_text(json.dumps(spec))
    return path


def per_cycle(before: dict[str, int], after: dict[str, int], done: int) -> dict[str, int]:
    """What benchd sent per cycle, by route (rounded to whole requests)."""
    mix = {r: (after.get(r, 0) - before.get(r, 0)) / max(1, done) for r in after}
    return {r: round(n) for r, n in mix.items() if round(n) > 0}


def window(pid: int, seconds: float) -> float:
    """``pid``'s CPU share of one core over ``seconds``."""
    cpu0, t0 = cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_s(pid) - cpu0) / (time.monotonic() - t0)


def peer_window(python: str, spec: Path, seconds: float) -> float:
    """The plain client's CPU share over ``seconds``, after 5 s of start-up."""
    proc = subprocess.Popen([python, __file__, "--peer", str(spec)])
    try:
        time.sleep(5.0)
        if proc.poll() is not None:
            code = proc.returncode
            raise SystemExit(f"the plain client exited ({code}): is aiohttp in {python}?")
        return window(proc.pid, seconds)
    finally:
        proc.terminate()
        proc.wait()


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}/{statistics.median(values):.2f}/{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--records", type=int, default=0, help="a synthetic fixture instead")
    parser.add_argument("--warmup", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=45.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--peer-python", default="/work/bench-venv/bin/python")
    parser.add_argument("--peer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer_main(args.peer)
        return
    import httpx

    with tempfile.TemporaryDirectory(prefix="benchd-at-rest-") as tmp:
        workdir = Path(tmp)
        fixture: str | Path = "packaged:smoke"
        queries = Path(__file__).parent.parent / "benchd" / "data" / "smoke.json"
        if args.records:
            fixture = workdir / "synth.jsonl"
            subprocess.run(
                [sys.executable, "-m", "benchd", "synth", "--memories", str(args.records),
                 "--queries", "100", "--out", str(fixture)],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        store = Store(workdir)
        port = free_port()
        config = write_config(workdir, store.url, fixture, args.probes)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "benchd", "run", "-c", str(config),
             "--listen", f"127.0.0.1:{port}"],
            env=os.environ | {KEY_ENV: KEY},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        ours: list[float] = []
        theirs: list[float] = []
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                time.sleep(args.warmup)
                for pair in range(args.pairs):
                    if pair:
                        os.kill(daemon.pid, signal.SIGCONT)
                        time.sleep(10.0)  # the overdue cycles run at once: not measured
                    done0, seen0 = cycles(client), routes(store)
                    cpu0, t0 = cpu_s(daemon.pid), time.monotonic()
                    while time.monotonic() - t0 < args.window:
                        time.sleep(min(15.0, args.window - (time.monotonic() - t0)))
                        got = client.get("/metrics")
                        metrics, metrics_wire = got.content, got.num_bytes_downloaded
                        got = client.get("/api/status")
                        status, status_wire = got.content, got.num_bytes_downloaded
                    ours.append((cpu_s(daemon.pid) - cpu0) / (time.monotonic() - t0))
                    mix = per_cycle(seen0, routes(store), cycles(client) - done0)
                    spec = peer_spec(workdir, store.url, args.probes, mix, queries)
                    os.kill(daemon.pid, signal.SIGSTOP)
                    theirs.append(peer_window(args.peer_python, spec, args.window))
                os.kill(daemon.pid, signal.SIGCONT)
                time.sleep(10.0)
                ended = outcomes(client)
                rss, hwm = memory_mib(daemon.pid)
                busy = ours[-1]
                scrapes = {path: scrape_cost(client, daemon.pid, path, busy)
                           for path in ("/metrics", "/api/status")}  # fmt: skip
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
            daemon.terminate()
            daemon.wait()
            store.stop()
    what = f"{args.records} records, 100 queries" if args.records else "the smoke fixture"
    print(f"{args.probes} probes every 5 s, {what} each; load average {os.getloadavg()[0]:.1f}")
    print(f"benchd's requests per cycle, sent alike by the plain client: {mix}")
    print(f"cycles since start, by outcome: {ended}")
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        print(f"pair {i + 1}: benchd {100 * a:.1f}% of a core, plain aiohttp {100 * b:.1f}%, "
              f"ratio {a / b:.2f}x")  # fmt: skip
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    shares = spread([100 * a for a in ours]), spread([100 * b for b in theirs])
    print(f"benchd / plain client CPU, min/median/max: {spread(ratios)}x "
          f"(benchd {shares[0]}%, plain {shares[1]}%)")  # fmt: skip
    print(f"RSS: {rss:.0f} MiB at the end, peak {hwm:.0f} MiB")
    print(f"/metrics {len(metrics) / 1024:.0f} KiB ({metrics_wire / 1024:.0f} KiB gzipped), "
          f"/api/status {len(status) / 1024:.0f} KiB ({status_wire / 1024:.0f} KiB gzipped)")
    for path, (wall_ms, cpu_ms) in scrapes.items():
        print(f"{path}: {wall_ms:.0f} ms a scrape (median of {SCRAPES}), "
              f"~{cpu_ms:.1f} ms of the daemon's CPU (its cycles' share taken out)")


if __name__ == "__main__":
    main()
