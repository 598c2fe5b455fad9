"""At rest: the daemon's CPU share and RSS with 20 probes every 5 s.

Starts a reference store (bm25, no rate limits) and ``benchd run`` with
``--probes`` probes (default 20), each its own namespace, the same fixture
(default the packaged smoke fixture; ``--records N``: ``benchd synth``, N
memories and 100 queries),
``interval_s = 5``, ``cleanup = "never"`` and a serial pass, so after the
first cycles seed the corpus every cycle is steady state: a listing, a lease
heartbeat and the serial searches. After ``--warmup`` seconds it samples the
daemon's CPU (its own and its children's: the decode worker) from /proc for
``--duration`` seconds, scraping ``/metrics`` and ``/api/status`` every 15 s
as Prometheus and a browser would, and prints the CPU share of one core, RSS
at the end and the peak (VmHWM), and the cycles finished; then it scrapes
each endpoint 10 times in a row and prints the median time of a scrape and
the daemon's CPU per scrape (less its share while cycles run). Run::

    .venv/bin/python bench/at_rest.py [--probes 20] [--warmup 60] [--duration 120]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from scale import KEY_ENV, Store

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


SCRAPES = 10


def share(cpu: float, wall: float) -> float:
    return cpu / wall


def scrape_cost(
    client: httpx.Client, pid: int, path: str, background: float
) -> tuple[float, float]:
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


def cycles(client: httpx.Client) -> int:
    probes = client.get("/api/status").json().get("probes", {})
    return sum(int(p.get("cycles_total", 0)) for p in probes.values())


def outcomes(client: httpx.Client) -> dict[str, int]:
    """Cycles by outcome, over every probe, since the daemon started."""
    total: dict[str, int] = {}
    for probe in client.get("/api/status").json().get("probes", {}).values():
        for outcome, n in (probe.get("cycles") or {}).items():
            total[outcome] = total.get(outcome, 0) + int(n)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--records", type=int, default=0, help="a synthetic fixture instead")
    parser.add_argument("--warmup", type=float, default=60.0)
    parser.add_argument("--duration", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchd-at-rest-") as tmp:
        workdir = Path(tmp)
        fixture: str | Path = "packaged:smoke"
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
            env=os.environ | {KEY_ENV: "bench-scale-key-0123456789"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                time.sleep(args.warmup)
                done0, cpu0, t0 = cycles(client), cpu_s(daemon.pid), time.monotonic()
                while time.monotonic() - t0 < args.duration:
                    time.sleep(min(15.0, args.duration - (time.monotonic() - t0)))
                    got = client.get("/metrics")
                    metrics, metrics_wire = got.content, got.num_bytes_downloaded
                    got = client.get("/api/status")
                    status, status_wire = got.content, got.num_bytes_downloaded
                cpu1, t1 = cpu_s(daemon.pid), time.monotonic()
                done1 = cycles(client)
                ended = outcomes(client)
                rss, hwm = memory_mib(daemon.pid)
                scrapes = {path: scrape_cost(client, daemon.pid, path, share(cpu1 - cpu0, t1 - t0))
                           for path in ("/metrics", "/api/status")}  # fmt: skip
        finally:
            daemon.terminate()
            daemon.wait()
            store.stop()
    busy = share(cpu1 - cpu0, t1 - t0)
    what = f"{args.records} records, 100 queries" if args.records else "the smoke fixture"
    print(f"{args.probes} probes every 5 s, {what} each; load average {os.getloadavg()[0]:.1f}")
    print(f"cycles finished in {t1 - t0:.0f} s: {done1 - done0} (since start, by outcome: {ended})")
    print(f"CPU: {100 * busy:.1f}% of a core (daemon and its decode worker)")
    print(f"RSS: {rss:.0f} MiB at the end, peak {hwm:.0f} MiB")
    print(f"/metrics {len(metrics) / 1024:.0f} KiB ({metrics_wire / 1024:.0f} KiB gzipped), "
          f"/api/status {len(status) / 1024:.0f} KiB ({status_wire / 1024:.0f} KiB gzipped)")
    for path, (wall_ms, cpu_ms) in scrapes.items():
        print(f"{path}: {wall_ms:.0f} ms a scrape (median of {SCRAPES}), "
              f"~{cpu_ms:.0f} ms of the daemon's CPU (its cycles' share taken out)")


if __name__ == "__main__":
    main()
