"""CPU per request: the adapters' serial path beside the load pass's transport.

Starts a reference store (bm25, no limits) in its own process, seeds one
corpus into it with one ``benchd`` cycle (``cleanup = "never"``), then sends
the same labeled queries, one at a time, through each of the two request
paths of the same zengram target:

- **serial**: ``target.search(query)`` — what the serial pass sends (the
  adapter's retrying httpx client, error map, decode, mapping to fixture ids);
- **built**: the same, with the client's replayed requests forgotten before
  each one, so each is written anew, as every import, delete and listing
  page is (:class:`benchd.http.writer.RequestWriter`, or httpx where it
  cannot);
- **load**: the target's ``load_sender`` at concurrency 1 — the load engine's
  own transport (``benchd.http.sender``), same parsing and mapping.

Each path runs ``--rounds`` times over the queries, alternating, and the CPU
of this process (user + system, ``resource.getrusage``; the store is another
process) per request is taken from the best round of each (the least disturbed
by neighbours on a shared box). It prints both, their ratio, and the load
average. Run from the repo root::

    .venv/bin/python bench/serial_cpu.py [--records 0] [--rounds 5]

``--records N`` uses ``benchd synth`` (N memories, 100 queries) instead of the
packaged smoke fixture.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from load_common import zengram_config
from scale import KEY_ENV, Store

KEY = "bench-scale-key-0123456789"


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_config(workdir: Path, url: str, fixture: str | Path) -> Path:
    return zengram_config(
        workdir / "benchd.toml",
        name="serial-cpu",
        url=url,
        fixture=fixture,
        key_env=KEY_ENV,
        namespace="bench-serial-cpu",
        probe_timeout_s=600.0,
    )


async def timed(send: Callable[[int], Awaitable[object]], n: int) -> float:
    """CPU seconds per request for ``n`` requests sent one at a time."""
    start = cpu_s()
    for i in range(n):
        await send(i)
    return (cpu_s() - start) / n


async def measure(
    config_path: Path, rounds: int
) -> tuple[list[float], list[float], list[float], int]:
    from benchd.assemble import load_parts
    from benchd.config.load import load_config
    from benchd.cycle import _search_query, run_cycle
    from benchd.fixtures.model import load_fixture
    from benchd.kinds import register_kinds

    register_kinds()
    probe = load_config(config_path).probes[0]
    fixture = load_fixture(probe.fixture)
    _, target = load_parts(probe)
    try:
        result = await run_cycle(probe, fixture, target)
        if result.outcome != "success":
            raise SystemExit(f"seeding: {result.outcome} {result.error_message}")
        queries = [_search_query(q, probe, fixture) for q in fixture.queries]
        n = len(queries)

        async def serial(i: int) -> object:
            return await target.search(queries[i % n])

        replayed = getattr(target, "store", target)._http._prepared  # the retrying client's

        async def built(i: int) -> object:
            replayed.clear()
            return await target.search(queries[i % n])

        serial_s: list[float] = []
        built_s: list[float] = []
        load_s: list[float] = []
        async with target.load_sender(queries, concurrency=1, timeout_s=60.0) as fire:
            await serial(0)  # connections open, caches warm: neither path pays a first send
            await fire(0)
            for _ in range(rounds):
                serial_s.append(await timed(serial, max(n, 200)))
                built_s.append(await timed(built, max(n, 200)))
                load_s.append(await timed(fire, max(n, 200)))
        return serial_s, built_s, load_s, max(n, 200)
    finally:
        await target.aclose()


def show(name: str, values: Sequence[float]) -> str:
    ms = sorted(1000 * v for v in values)
    return f"{name:<8} {ms[0]:7.3f} ms best, {ms[len(ms) // 2]:7.3f} ms median"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=0, help="a synthetic fixture instead")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ[KEY_ENV] = KEY
    with tempfile.TemporaryDirectory(prefix="benchd-serial-cpu-") as tmp:
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
        try:
            load0 = os.getloadavg()[0]
            started = time.monotonic()
            serial_s, built_s, load_s, n = anyio.run(
                measure, write_config(workdir, store.url, fixture), args.rounds
            )
            wall = time.monotonic() - started
        finally:
            store.stop()
    what = f"{args.records} records, 100 queries" if args.records else "the smoke fixture"
    print(f"{what}; {args.rounds} rounds of {n} requests per path, one at a time ({wall:.0f} s)")
    print(f"load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("CPU per request (this process; the store apart):")
    print(show("serial", serial_s))
    print(show("built", built_s))
    print(show("load", load_s))
    print(
        f"ratio serial / load: {min(serial_s) / min(load_s):.2f}x best, "
        f"{sorted(serial_s)[len(serial_s) // 2] / sorted(load_s)[len(load_s) // 2]:.2f}x median"
    )


if __name__ == "__main__":
    main()
