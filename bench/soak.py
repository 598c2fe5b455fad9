"""Soak: thousands of probe cycles against a misbehaving reference store.

Starts ``benchd refstore`` as a subprocess on a free loopback port and drives
one probe in this process through :class:`benchd.probe.ProbeRunner` with no
pause between cycles (a six-memory fixture, so a cycle takes milliseconds),
recording every result in a :class:`~benchd.surfacers.book.ResultBook` and
rendering ``/metrics`` from it at each sample, as the daemon would. Every
``--phase`` cycles the store's faults change through its admin endpoint
(errors, 429s, malformed and slow bodies, stalls, degraded search) and once
the store is killed and restarted. Every ``--sample`` cycles it prints this
process's RSS, open file descriptors and asyncio tasks, and the outcomes.

It fails (exit 1) when an error falls outside the classified kinds, when the
last phase (faults off) does not recover, or when RSS, fds or tasks grew
between the first sample after warm-up and the end. Run from the repo root::

    .venv/bin/python bench/soak.py              # 10,000 cycles, about 15 minutes
    .venv/bin/python bench/soak.py --cycles 600 # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
from prometheus_client import generate_latest

from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.errors import ERROR_KINDS
from benchd.kinds.zengram import ZengramConfig
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.surfacers.book import ResultBook
from benchd.surfacers.prometheus import build_registry

KEY = "soak-key-" + os.urandom(6).hex()
KEY_ENV = "BENCHD_SOAK_KEY"
MiB = 1024 * 1024
# One fault plan per phase, in turn; None = kill the store for the phase, then restart it.
PHASES: list[list[str] | None] = [
    [],
    ["error_rate=0.3"],
    ["rate_limit=0.3"],
    ["malformed=0.3@search+export"],
    ["latency=uniform:1ms..4ms", "degraded=0.3@search"],
    ["slow_body=30ms@search"],
    ["stall=every:1.5s,for:0.8s@search"],
    None,
    ["error_rate=0.1", "rate_limit=0.1", "malformed=0.1@search"],
]
GROWTH = {"rss_mib": 24.0, "fds": 4, "tasks": 0}  # allowed growth, warm-up sample to end


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Store:
    """``benchd refstore`` on a fixed port, killable and restartable."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "benchd", "refstore", "--listen", f"127.0.0.1:{self.port}"]
        args += ["--api-key-env", KEY_ENV, "--read-limit", "0", "--write-limit", "0"]
        args += ["--log-level", "error"]
        env = {**os.environ, KEY_ENV: KEY}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()  # the URL, once it listens
        if not line.startswith("http://"):
            raise SystemExit(f"soak: the reference store did not start ({line!r})")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    async def faults(self, client: httpx.AsyncClient, specs: list[str]) -> None:
        reply = await client.post(
            f"{self.url}/admin/config", json={"faults": specs}, headers={"x-api-key": KEY}
        )
        reply.raise_for_status()


def tiny_fixture(folder: Path) -> Path:
    memories = [
        {"id": f"soak-{i}", "type": "fact", "content": text, "created_at": "2026-01-05T10:00:00Z"}
        for i, text in enumerate(
            [
                "The harbor ferry leaves pier nine at seven every morning.",
                "Quartz crystals in the museum cellar glow under ultraviolet lamps.",
                "The violin workshop repairs cracked spruce tops with hide glue.",
                "Glacier tours start from the northern lodge after the snowmelt.",
                "The corner bakery sells rye sourdough only on Saturdays.",
                "The weather satellite keeps a sun synchronous polar orbit.",
            ]
        )
    ]
    queries = [
        {"q": "harbor ferry pier nine", "expected_ids": ["soak-0"]},
        {"q": "quartz ultraviolet lamps", "expected_ids": ["soak-1"]},
        {"q": "violin spruce glue", "expected_ids": ["soak-2"]},
        {"q": "satellite polar orbit", "expected_ids": ["soak-5"]},
    ]
    path = folder / "soak.json"
    path.write_text(json.dumps({"memories": memories, "queries": queries}))
    return path


def probe_config(url: str, fixture: Path) -> ProbeConfig:
    settings = ZengramConfig(
        url=url,
        namespace="benchd-soak",
        timeout_s=0.25,  # searches take milliseconds; a 0.8 s stall outlasts a retry
        max_retries=1,
        backoff_s=0.01,
        max_retry_after_s=0.01,
        searchable_timeout_s=1.0,
    )
    target = TargetConfig(kind="zengram", settings=settings, secret=Secret(KEY, "env:soak"))
    return ProbeConfig(name="soak", fixture=fixture, target=target, k=(1, 3), timeout_s=3.0)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Tally:
    """Outcomes and error kinds, overall and since the last sample."""

    outcomes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    window: Counter[str] = field(default_factory=Counter)
    unclassified: list[str] = field(default_factory=list)
    last: str = ""

    def add(self, result: CycleResult) -> None:
        self.last = result.outcome
        self.outcomes[result.outcome] += 1
        self.window[result.outcome] += 1
        kinds = dict(result.errors)
        kinds.update({q.error: 1 for q in result.queries if q.error})
        for kind in kinds:
            self.kinds[kind] += 1
            if kind not in ERROR_KINDS:
                self.unclassified.append(f"cycle {result.cycle}: {kind}: {result.error_message}")


@dataclass(frozen=True)
class Sample:
    cycle: int
    rss_mib: float
    fds: int
    tasks: int


def sample(cycle: int) -> Sample:
    return Sample(cycle, rss_mib(), len(os.listdir("/proc/self/fd")), len(asyncio.all_tasks()))


async def soak(cycles: int, phases: int, every: int) -> tuple[list[Sample], Tally, float]:
    store = Store(free_port())
    store.start()
    book, tally, samples = ResultBook(history=20), Tally(), []
    registry = build_registry(book)
    with tempfile.TemporaryDirectory() as folder:
        runner = ProbeRunner(probe_config(store.url, tiny_fixture(Path(folder))))
        book.set_probes(["soak"])
        started = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=10) as admin:
                current = -1
                for i in range(1, cycles + 1):
                    if (phase := (i - 1) * phases // cycles) != current:
                        current = phase
                        await switch(store, admin, PHASES[phase % len(PHASES)], i)
                    result = await runner.run_once()
                    book.record(result)
                    tally.add(result)
                    if i % every == 0:
                        generate_latest(registry)  # a scrape, as Prometheus would
                        samples.append(sample(i))
                        report(samples[-1], tally)
        finally:
            await runner.aclose()
            store.kill()
        return samples, tally, time.perf_counter() - started


async def switch(
    store: Store, admin: httpx.AsyncClient, plan: list[str] | None, cycle: int
) -> None:
    if plan is None:
        print(f"{cycle:>7}  -- store killed for this phase", flush=True)
        store.kill()
        return
    if store.proc is None or store.proc.poll() is not None:
        store.start()  # the phase after a kill: same port, a fresh empty store
        print(f"{cycle:>7}  -- store restarted", flush=True)
    await store.faults(admin, plan)
    print(f"{cycle:>7}  -- faults: {', '.join(plan) or 'none'}", flush=True)


def report(s: Sample, tally: Tally) -> None:
    window = ", ".join(f"{k} {v}" for k, v in sorted(tally.window.items()))
    print(f"{s.cycle:>7}  rss {s.rss_mib:7.1f} MiB  fds {s.fds:>4}  tasks {s.tasks:>3}  | {window}")
    tally.window.clear()


def verdict(samples: list[Sample], tally: Tally, last_phase_ok: bool) -> list[str]:
    problems = list(tally.unclassified[:5])
    if len(samples) >= 2:
        warm, end = samples[1] if len(samples) > 2 else samples[0], samples[-1]
        growth = {
            "rss_mib": end.rss_mib - warm.rss_mib,
            "fds": end.fds - warm.fds,
            "tasks": end.tasks - warm.tasks,
        }
        for name, grew in growth.items():
            if grew > GROWTH[name]:
                problems.append(f"{name} grew by {grew:g} (allowed {GROWTH[name]:g})")
    if not last_phase_ok:
        problems.append("the last cycle did not succeed: no recovery after the faults")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000, help="cycles to run (10000)")
    parser.add_argument("--sample", type=int, default=0, help="cycles between samples (auto)")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the store subprocess is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.cycles < 2 * len(PHASES) + 1:
        parser.error(f"--cycles must be at least {2 * len(PHASES) + 1}")
    # Every fault phase twice over the run, then a fault-free phase to recover in.
    phases = 2 * len(PHASES) + 1
    every = args.sample or max(1, args.cycles // 20)
    print(f"soak: {args.cycles} cycles in {phases} phases, sample every {every}")
    print(f"{'cycle':>7}  figures (this process)                       | outcomes since last")
    samples, tally, elapsed = anyio.run(soak, args.cycles, phases, every)
    last_ok = tally.last == "success"
    print()
    done = sum(tally.outcomes.values())
    print(f"cycles {done} in {elapsed:.0f} s ({done / elapsed:.0f}/s)")
    print(f"outcomes {dict(tally.outcomes)}")
    print(f"error kinds seen (cycles with at least one): {dict(tally.kinds)}")
    if samples:
        first, warm, end = samples[0], samples[min(1, len(samples) - 1)], samples[-1]
        print(f"rss MiB  first {first.rss_mib:.1f}  warm {warm.rss_mib:.1f}  end {end.rss_mib:.1f}")
        print(f"fds      first {first.fds}  warm {warm.fds}  end {end.fds}")
        print(f"tasks    first {first.tasks}  warm {warm.tasks}  end {end.tasks}")
    problems = verdict(samples, tally, last_ok)
    for line in problems:
        print(f"soak: FAIL: {line}")
    print("soak: ok" if not problems else "soak: failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
