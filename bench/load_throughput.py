"""Closed-loop throughput and CPU per request: benchd beside Locust FastHttpUser.

Both load a private nginx on loopback that answers every search with a
canned 10-result Zengram body, at 8, 32 and 64 in flight (``--concurrency``),
each in its own process, for the same duration. Pairs alternate (benchd
first in odd pairs, Locust first in even ones) and are repeated
(``--pairs``). For each run it measures, over the request window only
(never the interpreter's start-up or imports):

- req/s: requests answered / the window's wall time;
- CPU per request: the process's user + system time over the window
  (``/proc/PID/stat``, all threads) / requests;
- busy: that CPU time / wall time (the share of one core it used);
- run-queue wait: the time its threads were runnable but waited for a CPU
  (``/proc/PID/task/*/schedstat``) / wall time;
- idle: 1 - busy - wait, the share of the window it slept (in ``epoll_wait``
  with nothing to do). Idle near 0 means the process never held itself
  back: the box, not the process, set its pace.

benchd's window includes JSON parsing of every body (in the pass) and,
after it, the scoring a cycle does of a load pass's answers
(``benchd.cycle.load_quality`` at k=5,10: each distinct ranking of a
query scored once, then means per query). Every line carries the 1-minute
load average; the summary gives benchd÷Locust ratios as min/median/max over
the pairs.

Needs nginx (``apt-get install -y nginx-light``) and Locust in its own venv
(``python3 -m venv /tmp/locust-venv && /tmp/locust-venv/bin/pip install locust``).
Run from the repository root::

    .venv/bin/python bench/load_throughput.py [--concurrency 8,32,64] [--duration 10] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import (
    SEARCH_PATH,
    ProcessSampler,
    canned_search_body,
    describe_machine,
    locust_binary,
    nginx_binary,
    nginx_serving,
    run_locust_sampled,
)

QUERIES = [f"what did alice say about deploy number {i}" for i in range(12)]
RELEVANCE = [{f"mem-{i % 10}": 1, f"mem-{(i + 3) % 10}": 2, "mem-missing": 1} for i in range(12)]
KS = (5, 10)


@dataclass(frozen=True)
class Figures:
    """One run of one side, over its request window."""

    requests: int
    wall_s: float
    cpu_s: float
    wait_s: float
    load: float  # 1-minute load average at the end of the run

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s

    @property
    def cpu_us(self) -> float:
        return 1e6 * self.cpu_s / self.requests

    def text(self) -> str:
        return (
            f"{self.rate:7.0f} req/s {self.cpu_us:5.0f} µs/req"
            f" busy {self.busy:.2f} wait {self.wait_s / self.wall_s:.2f} idle {self.idle:.2f}"
        )

    @property
    def busy(self) -> float:
        return self.cpu_s / self.wall_s

    @property
    def idle(self) -> float:
        return max(0.0, 1.0 - (self.cpu_s + self.wait_s) / self.wall_s)


def scorer() -> Callable[[Sequence[tuple[int, tuple[str, ...]]]], dict[str, float]]:
    """What scores a pass's answers the way a cycle scores its load pass
    (``benchd.cycle.load_quality``); its imports are done here, before any window."""
    from benchd.cycle import load_quality
    from benchd.fixtures.model import LabeledQuery

    queries = [LabeledQuery(id=f"q{i}", q=q, relevance=RELEVANCE[i]) for i, q in enumerate(QUERIES)]
    return lambda answers: load_quality(queries, answers, KS)


def _child(host: str, concurrency: int, duration_s: float) -> None:
    """In benchd's own process: one closed-loop pass plus scoring; print its window."""
    import anyio
    import httpx

    from benchd.http.sender import make_http_fire
    from benchd.load import LoadProfile, run_load

    def build(i: int) -> httpx.Request:
        params = {"q": QUERIES[i], "limit": "10", "format": "index", "read_only": "true"}
        params["client_id"] = "benchd-bench"
        return httpx.Request("GET", f"{host}{SEARCH_PATH}", params=params)

    def parse(_i: int, _status: int, _headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
        return tuple(str(item["id"]) for item in json.loads(body)["results"])

    score = scorer()

    async def main() -> None:
        profile = LoadProfile(mode="closed", concurrency=concurrency, duration_s=duration_s)
        async with make_http_fire(build, parse, concurrency=concurrency, timeout_s=10) as fire:
            began = time.time()
            run = await run_load(fire, len(QUERIES), profile)
        answered = list(run.answers())
        if len(answered) != len(run):
            raise SystemExit(f"benchd saw errors: {run.counts()}")
        score(answered)
        print(json.dumps({"requests": len(run), "start": began, "end": time.time()}), flush=True)
        sys.stdin.read()  # the parent takes its last sample, then closes stdin

    anyio.run(main)


def run_benchd(host: str, concurrency: int, duration_s: float) -> Figures:
    """benchd's pass in a child process, sampled from outside like Locust's."""
    args = [sys.executable, __file__, "--child", host, str(concurrency), str(duration_s)]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        with ProcessSampler(proc.pid) as sampler:
            line = proc.stdout.readline()
            sampler.sample()
        proc.stdin.close()
        if proc.wait() != 0 or not line:
            raise SystemExit(f"benchd's pass failed (exit {proc.returncode})")
    window = json.loads(line)
    cpu_s, wait_s = sampler.between(window["start"], window["end"])
    wall = window["end"] - window["start"]
    return Figures(window["requests"], wall, cpu_s, wait_s, os.getloadavg()[0])


def run_locust(host: str, concurrency: int, duration_s: float) -> Figures:
    path = f"{SEARCH_PATH}?q=what+did+alice+say&limit=10&format=index&read_only=true"
    requests, start, end, (cpu_s, wait_s) = run_locust_sampled(host, path, concurrency, duration_s)
    return Figures(requests, end - start, cpu_s, wait_s, os.getloadavg()[0])


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}/{statistics.median(values):.2f}/{max(values):.2f}"


def summary(concurrency: int, ours: list[Figures], theirs: list[Figures]) -> str:
    pairs = list(zip(ours, theirs, strict=True))
    rate = [a.rate / b.rate for a, b in pairs]
    cpu = [a.cpu_us / b.cpu_us for a, b in pairs]
    loads = [f.load for f in ours + theirs]
    return (
        f"{concurrency:>5}  req/s {spread(rate):>14}  CPU/req {spread(cpu):>14}"
        f"  benchd {statistics.median(f.rate for f in ours):6.0f} req/s"
        f" {statistics.median(f.cpu_us for f in ours):4.0f} µs"
        f" busy {spread([f.busy for f in ours])} idle {spread([f.idle for f in ours])}"
        f"  Locust {statistics.median(f.rate for f in theirs):6.0f} req/s"
        f" {statistics.median(f.cpu_us for f in theirs):4.0f} µs"
        f" busy {spread([f.busy for f in theirs])}"
        f"  load {min(loads):.1f}-{max(loads):.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="8,32,64", help="in flight, comma-separated")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), float(args.child[2]))
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    nginx_binary()  # say what is missing now, not after the first run
    locust_binary()
    print(describe_machine())
    ours: dict[int, list[Figures]] = {c: [] for c in levels}
    theirs: dict[int, list[Figures]] = {c: [] for c in levels}
    with nginx_serving(canned_search_body()) as host:
        for pair in range(1, args.pairs + 1):
            for c in levels:
                sides = [(ours, run_benchd), (theirs, run_locust)]
                for into, run in sides if pair % 2 else sides[::-1]:
                    into[c].append(run(host, c, args.duration))
                a, b = ours[c][-1], theirs[c][-1]
                print(
                    f"pair {pair} c={c:<3} benchd {a.text()} load {a.load:.1f}"
                    f" | Locust {b.text()} load {b.load:.1f}",
                    flush=True,
                )
    print(
        f"\nbenchd÷Locust, min/median/max of {args.pairs} pairs, {args.duration:g} s each;"
        " busy, idle = shares of the window; load = 1-minute load average"
    )
    for c in levels:
        print(summary(c, ours[c], theirs[c]))


if __name__ == "__main__":
    main()
