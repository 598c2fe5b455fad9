"""Closed-loop throughput: benchd (parse + score every answer) beside Locust FastHttpUser.

Both load a private nginx on loopback that answers every search with a
canned 10-result Zengram body, one process each, same concurrency and
duration, in alternating rounds; the median req/s of each is compared.
benchd's figure counts JSON parsing of every body and ranking metrics
(benchd.scoring.ranking.query_metrics at k=5,10) for every answer: the time
spent scoring is added to the load window before dividing.

    .venv/bin/python bench/load_throughput.py [--concurrency 32] [--duration 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import (
    SEARCH_PATH,
    canned_search_body,
    describe_machine,
    locust_binary,
    nginx_serving,
    run_locust,
)

from benchd.http.sender import Build, make_http_fire
from benchd.load import LoadProfile, run_load
from benchd.scoring.ranking import query_metrics

QUERIES = [f"what did alice say about deploy number {i}" for i in range(12)]
RELEVANCE = [{f"mem-{i % 10}": 1, f"mem-{(i + 3) % 10}": 2, "mem-missing": 1} for i in range(12)]
KS = (5, 10)


def _build(host: str) -> Build:
    def build(i: int) -> httpx.Request:
        params = {"q": QUERIES[i], "limit": "10", "format": "index", "read_only": "true"}
        params["client_id"] = "benchd-bench"
        return httpx.Request("GET", f"{host}{SEARCH_PATH}", params=params)

    return build


def parse(_i: int, _status: int, _headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
    return tuple(str(item["id"]) for item in json.loads(body)["results"])


async def benchd_rate(host: str, concurrency: int, duration_s: float) -> tuple[float, float]:
    """benchd's req/s including scoring, and the share of time spent scoring."""
    profile = LoadProfile(mode="closed", concurrency=concurrency, duration_s=duration_s)
    async with make_http_fire(_build(host), parse, concurrency=concurrency, timeout_s=10) as fire:
        run = await run_load(fire, len(QUERIES), profile)
    began = time.perf_counter()
    scored = [query_metrics(ranked, RELEVANCE[q], KS) for q, ranked in run.answers()]
    scoring_s = time.perf_counter() - began
    if len(scored) != len(run):
        raise SystemExit(f"benchd saw errors: {run.counts()}")
    return len(run) / (run.elapsed_s + scoring_s), scoring_s / (run.elapsed_s + scoring_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    locust_binary()  # skip now, not after benchd's first round
    print(describe_machine())
    ours: list[float] = []
    theirs: list[float] = []
    with nginx_serving(canned_search_body()) as host:
        path = f"{SEARCH_PATH}?q=what+did+alice+say&limit=10&format=index&read_only=true"
        for round_no in range(1, args.rounds + 1):
            rate, share = anyio.run(benchd_rate, host, args.concurrency, args.duration)
            ours.append(rate)
            theirs.append(run_locust(host, path, args.concurrency, args.duration))
            print(
                f"round {round_no}: benchd {ours[-1]:8.0f} req/s (scoring {share:.1%})"
                f"   locust {theirs[-1]:8.0f} req/s   ratio {ours[-1] / theirs[-1]:.2f}"
            )
    a, b = statistics.median(ours), statistics.median(theirs)
    ratios = [x / y for x, y in zip(ours, theirs, strict=True)]
    print(
        f"\nclosed loop, c={args.concurrency}, {args.duration:g} s x {args.rounds} rounds (median)"
    )
    print(f"  benchd (parse + score every answer)  : {a:8.0f} req/s")
    print(f"  Locust FastHttpUser:                   {b:8.0f} req/s")
    print(f"  ratio benchd / Locust:                 {a / b:8.2f}x  (goal >= 1.00x)")
    print(f"  per-round ratios: {min(ratios):.2f}x to {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
