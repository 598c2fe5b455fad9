"""Do one probe's large answers delay another's sends? Probe b's corrected p99, alone and beside.

One command::

    .venv/bin/python bench/decode_isolation.py [--seconds 10] [--rate 50] [--separate-stores]

A loopback store runs in a subprocess: ``/a/memory/search`` answers a 10 MB
search result (580,000 ids, with ``Content-Length``), ``/b/memory/search``
a small one. In this process, on one event loop as in the daemon, probe b
runs an open-loop load pass at ``--rate`` through the zengram adapter's
load sender (the code path a probe uses), first alone, then beside probe a,
which runs a closed loop (concurrency 1) against the 10 MB answers with
``max_response_bytes`` raised to 16 MiB so they are decoded, not refused.
It prints b's corrected p99 in both runs and their ratio (the goal: beside
within 5 ms of alone), then b beside probe a at the default
``max_response_bytes`` (8 MiB: the 10 MB answers are refused on their
declared length, unread — what a default probe does), then the beside-run
with the decode worker turned off (every answer decoded on the loop), to
show what the worker buys. One store process serves both probes unless
``--separate-stores``: then b's answers cannot queue behind a's 10 MB in the
store stand-in itself, and what is left is benchd's own cost (and the
machine's cores). Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import anyio

from benchd.http import answers
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.load import LoadProfile, LoadRun, run_load
from benchd.store.target import SearchQuery

BIG_IDS = 580_000  # about 10 MB
QUERY = SearchQuery(q="anything", limit=10)


# -- the store (subprocess) -----------------------------------------------------------


def _bodies() -> dict[bytes, bytes]:
    big = json.dumps({"results": [{"id": f"n{i}"} for i in range(BIG_IDS)]}).encode()
    small = json.dumps({"results": [{"id": f"d{i}", "summary": "x" * 40} for i in range(10)]})
    return {b"a": big, b"b": small.encode()}


async def _serve() -> None:
    bodies = _bodies()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                which = head.split(b" ", 2)[1].split(b"/")[1]
                body = bodies.get(which, b"{}")
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


# -- the probes (this process) --------------------------------------------------------


def _target(url: str, **extra: Any) -> ZengramTarget:
    return ZengramTarget(ZengramConfig(url=url, max_retries=0, **extra), None)


async def _pass(target: ZengramTarget, profile: LoadProfile) -> LoadRun:
    sender = target.load_sender([QUERY], concurrency=profile.concurrency, timeout_s=60)
    async with sender as fire:
        return await run_load(fire, 1, profile)


class _Ticker:
    """How late a 1 ms timer fires on this loop: how long the loop itself was held."""

    def __init__(self) -> None:
        self.lags: list[float] = []

    async def run(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while (now := time.perf_counter()) < end:
            await anyio.sleep(0.001)
            self.lags.append(time.perf_counter() - now - 0.001)

    def worst_ms(self) -> float:
        return max(self.lags, default=0.0) * 1000


def _p99_ms(run: LoadRun) -> float:
    result = run.to_result()
    assert result.corrected is not None
    return result.corrected.p99 * 1000


async def _measure(base_a: str, base_b: str, seconds: float, rate: float) -> dict[str, Any]:
    b = _target(f"{base_b}/b")
    a = _target(f"{base_a}/a", max_response_bytes=16 << 20)
    open_b = LoadProfile(mode="open", rate=rate, duration_s=seconds, concurrency=8)
    closed_a = LoadProfile(mode="closed", concurrency=1, duration_s=seconds, request_timeout_s=60)
    try:
        await _pass(a, LoadProfile(mode="closed", concurrency=1, requests=1))  # worker up
        alone = await _pass(b, open_b)
        beside: dict[str, LoadRun] = {}

        async def run_a() -> None:
            beside["a"] = await _pass(a, closed_a)

        async def run_b() -> None:
            beside["b"] = await _pass(b, open_b)

        ticker = _Ticker()
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            tg.start_soon(run_b)
            tg.start_soon(ticker.run, seconds)
        # At the default max_response_bytes (8 MiB) the 10 MB answers are
        # refused on their declared length, unread: what a default probe does.
        a_default = _target(f"{base_a}/a")
        capped: dict[str, LoadRun] = {}

        async def run_a_capped() -> None:
            capped["a"] = await _pass(a_default, closed_a)

        async def run_b_capped() -> None:
            capped["b"] = await _pass(b, open_b)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_a_capped)
                tg.start_soon(run_b_capped)
        finally:
            await a_default.aclose()
        inline_limit = answers.INLINE_DECODE_BYTES
        answers.INLINE_DECODE_BYTES = 1 << 40  # the worker off: every decode on the loop
        try:
            async with anyio.create_task_group() as tg:
                beside_off: dict[str, LoadRun] = {}

                async def run_a_off() -> None:
                    beside_off["a"] = await _pass(a, closed_a)

                async def run_b_off() -> None:
                    beside_off["b"] = await _pass(b, open_b)

                tg.start_soon(run_a_off)
                tg.start_soon(run_b_off)
        finally:
            answers.INLINE_DECODE_BYTES = inline_limit
    finally:
        await a.aclose()
        await b.aclose()
    return {
        "alone": alone,
        "beside": beside,
        "capped": capped,
        "off": beside_off,
        "stall_ms": ticker.worst_ms(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument(
        "--separate-stores",
        action="store_true",
        help="serve probe a and probe b from two store processes (two stores, as when the "
        "probes point at different services), so b's answers never queue behind a's 10 MB",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    count = 2 if args.separate_stores else 1
    stores = [
        subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    try:
        bases = []
        for store in stores:
            assert store.stdout is not None
            bases.append(f"http://127.0.0.1:{int(store.stdout.readline())}")
        runs = anyio.run(_measure, bases[0], bases[-1], args.seconds, args.rate)
    finally:
        for store in stores:
            store.terminate()
            store.wait(timeout=10)
    layout = "a store process each" if args.separate_stores else "one store process for both"
    print(f"stores: {layout}")
    alone, beside, off = runs["alone"], runs["beside"], runs["off"]
    p_alone, p_beside, p_off = _p99_ms(alone), _p99_ms(beside["b"]), _p99_ms(off["b"])
    print(f"probe b, open loop {args.rate:g}/s for {args.seconds:g} s, corrected p99:")
    print(f"  alone                                   {p_alone:8.2f} ms   late {alone.late}")
    print(
        f"  beside probe a (10 MB answers, worker)  {p_beside:8.2f} ms   late "
        f"{beside['b'].late}   ({len(beside['a'])} answers of {BIG_IDS:,} ids decoded)"
    )
    print(
        f"  ratio beside/alone {p_beside / p_alone:.2f}, difference "
        f"{p_beside - p_alone:+.2f} ms (goal: within 5 ms)"
    )
    print(f"  longest the event loop was held beside probe a: {runs['stall_ms']:.1f} ms")
    capped = runs["capped"]
    p_capped = _p99_ms(capped["b"])
    refused = sum(1 for o in capped["a"].outcome if o != 0)
    print(
        f"  beside probe a at the default cap (8 MiB) {p_capped:6.2f} ms   late "
        f"{capped['b'].late}   ({refused} of {len(capped['a'])} answers refused unread), "
        f"difference {p_capped - p_alone:+.2f} ms"
    )
    print(
        f"  beside probe a, decode worker off       {p_off:8.2f} ms   late {off['b'].late}"
        f"   ({len(off['a'])} answers decoded on the loop)"
    )


if __name__ == "__main__":
    main()
