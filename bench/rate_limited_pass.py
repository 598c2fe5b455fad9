"""A closed load pass against a store's read budget: benchd's paced pass beside a naive loop.

Starts the reference store in-process with the real Zengram server's
default limits (120 reads and 60 writes per minute per key, fixed 60 s
windows), seeds the packaged smoke fixture, and runs a closed loop of
``--concurrency`` workers for ``--duration`` seconds two ways, each against
a fresh store (a fresh window):

- benchd's load pass, paced to the key's read budget (2 req/s at 120/min),
  pausing on 429 for its Retry-After and stopping early when it must;
- the same pass told a budget 50x what the store grants (6000/min): it
  meets the store's limit, and stops at the first 429s;
- the peer: a naive closed loop that sends back to back and ignores 429s,
  the way benchd's pass behaved before (issue 14: 16,035 429s and 101
  answers in 15 s against the real server).

It prints, for each, the requests the store counted, how many it answered
429, and benchd's outcome for the pass. Run from the repo root::

    .venv/bin/python bench/rate_limited_pass.py [--duration 15] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import secrets
import time
from dataclasses import dataclass

import anyio
import httpx

from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.cycle import load_pass
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.zengram import ZengramConfig
from benchd.load import LoadProfile
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.ratelimit import RateLimiter
from benchd.refstore.server import RunningRefStore, running_refstore

READS_PER_MIN = 120


@dataclass
class Counting:
    """The store's own limiter, counting every read it is asked about and every 429."""

    inner: RateLimiter
    reads: int = 0
    limited: int = 0

    @property
    def limits(self) -> dict[str, int]:
        return dict(self.inner.limits)

    def check(self, key: str, kind: str) -> int | None:
        wait = self.inner.check(key, kind)
        if kind == "read":
            self.reads += 1
            self.limited += wait is not None
        return wait


def _store(key: str) -> tuple[RefStoreConfig, Counting]:
    config = RefStoreConfig(
        api_key=key, retriever="bm25", read_limit_per_min=READS_PER_MIN, write_limit_per_min=60
    )
    return config, Counting(RateLimiter(READS_PER_MIN, 60))


def _probe(url: str, key: str, profile: LoadProfile) -> ProbeConfig:
    settings = ZengramConfig(url=url, namespace="benchd-bench", max_retries=0, verify=False)
    return ProbeConfig(
        name="bench",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", settings, Secret(key, "bench")),
        load=profile,
    )


async def _benchd(
    store: RunningRefStore, counting: Counting, args: argparse.Namespace, reads_per_min: float
) -> str:
    profile = LoadProfile(
        mode="closed",
        concurrency=args.concurrency,
        duration_s=args.duration,
        max_rate=reads_per_min / 60.0,
    )
    probe = _probe(store.url, store.api_key, profile)
    target = build_target("zengram", probe.target.settings, probe.target.secret)
    try:
        store.guard.limiter = counting  # type: ignore[assignment]
        run = await load_pass(target, probe, load_fixture(probe.fixture), profile)
    finally:
        await target.aclose()
    counts = run.counts()
    return f"answered {counts.get('ok', 0)}, rate_limited={run.rate_limited}"


async def _naive(
    store: RunningRefStore, counting: Counting, args: argparse.Namespace, _: float
) -> str:
    fixture = load_fixture(packaged_fixture("smoke"))
    stop = time.monotonic() + args.duration
    answered = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal answered
        i = 0
        while time.monotonic() < stop:
            query = fixture.queries[i % len(fixture.queries)]
            params = {"q": query.q, "client_id": "benchd-bench", "read_only": "true"}
            reply = await client.get("/memory/search", params=params)
            answered += reply.status_code == 200
            i += 1

    headers = {"x-api-key": store.api_key}
    async with httpx.AsyncClient(base_url=store.url, headers=headers) as client:
        store.guard.limiter = counting  # type: ignore[assignment]
        async with anyio.create_task_group() as tg:
            for _ in range(args.concurrency):
                tg.start_soon(worker, client)
    return f"answered {answered}"


async def main(args: argparse.Namespace) -> None:
    budget = READS_PER_MIN / 60.0 * args.duration
    print(
        f"closed loop, {args.concurrency} workers, {args.duration:g} s, store at "
        f"{READS_PER_MIN} reads/min: the budget admits {budget:.0f} over the pass"
    )
    runs = (
        ("benchd, budget 120/min", _benchd, READS_PER_MIN),
        ("benchd, told 6000/min", _benchd, 6000),  # a budget 50x what the store grants
        ("naive loop (peer)", _naive, 0),
    )
    for name, run, declared in runs:
        key = "bench-" + secrets.token_hex(8)
        config, counting = _store(key)
        async with running_refstore(config) as store:
            verdict = await run(store, counting, args, declared)
        print(
            f"  {name:<23} requests at the store {counting.reads:>6}, "
            f"429s {counting.limited:>6}, {verdict}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=4)
    anyio.run(main, parser.parse_args())
