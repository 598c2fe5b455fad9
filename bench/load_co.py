"""Coordinated omission: a 1 s stall mid-run, at most 4 in flight, benchd beside wrk.

The target (bench/load_server.py) answers in 5 ms but stalls once for 1 s,
4 s after its first request. benchd sends at a constant 100 req/s, at most 4
in flight: its *corrected* latency (from each request's scheduled time, as
wrk2 measures) must show the stall at p99 while its *service* latency (from
the actual send) does not. wrk (closed loop, 4 connections; Debian has no
wrk2) runs against a fresh stalled target as the peer: its connections stop
sending during the stall, but it corrects its histogram after the
fact (it back-fills samples at a connection's mean request interval, HdrHistogram's
"corrected" recording), so its p99 should show the stall too.

    .venv/bin/python bench/load_co.py [--duration 10] [--stall 1.0]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import delay_server, describe_machine, run_wrk, wrk_binary

from benchd.http.sender import make_http_fire
from benchd.load import LoadProfile, run_load
from benchd.result import LatencySummary, LoadResult

PATH = "/memory/search?q=stall&limit=10"
RATE = 100.0
IN_FLIGHT = 4


def parse(_i: int, _status: int, _headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
    return tuple(str(item["id"]) for item in json.loads(body)["results"])


async def benchd_run(url: str, duration_s: float) -> LoadResult:
    profile = LoadProfile(mode="open", rate=RATE, duration_s=duration_s, concurrency=IN_FLIGHT)

    def build(_i: int) -> httpx.Request:
        return httpx.Request("GET", url + PATH)

    async with make_http_fire(build, parse, concurrency=IN_FLIGHT, timeout_s=10) as fire:
        run = await run_load(fire, 1, profile)
    return run.to_result()


def _row(name: str, p50: float, p99: float, top: float | None = None) -> None:
    tail = f"{top * 1000:9.1f} ms" if top is not None else ""
    print(f"  {name:26}{p50 * 1000:9.1f} ms{p99 * 1000:9.1f} ms{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--stall", type=float, default=1.0)
    args = parser.parse_args()
    stall_after = args.duration * 0.4
    wrk_binary()  # skip now, not after benchd's run
    print(describe_machine())
    with delay_server(5.0, stall_after_s=stall_after, stall_s=args.stall) as url:
        result = anyio.run(benchd_run, url, args.duration)
    with delay_server(5.0, stall_after_s=stall_after, stall_s=args.stall) as url:
        wrk = run_wrk(url + PATH, IN_FLIGHT, args.duration)
    corrected = result.corrected or LatencySummary.empty()
    print(
        f"{args.stall:g} s stall at {stall_after:g} s;"
        f" open loop {RATE:g} req/s, <= {IN_FLIGHT} in flight"
    )
    print(
        f"  requests {sum(result.requests.values())}  late {result.late}  dropped {result.dropped}"
    )
    print(f"  {'':26}{'p50':>12}{'p99':>12}{'max':>12}")
    _row("benchd corrected", corrected.p50, corrected.p99, corrected.max)
    _row("benchd service", result.service.p50, result.service.p99, result.service.max)
    _row(f"wrk -c{IN_FLIGHT} (back-filled)", wrk["p50"], wrk["p99"])
    shows = corrected.p99 >= 0.5 * args.stall
    hides = result.service.p99 < 0.1 * args.stall
    print(
        f"  {'ok' if shows else 'MISSED'}: corrected p99 shows the stall (>= {args.stall / 2:g} s)"
    )
    print(f"  {'ok' if hides else 'MISSED'}: service p99 does not (< {args.stall / 10:g} s)")


if __name__ == "__main__":
    main()
