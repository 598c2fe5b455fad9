"""The generic ``http`` target beside the native ``zengram`` adapter, on one reference store.

One command::

    .venv/bin/python bench/http_target.py [--rounds 3] [--duration 2] [--concurrency 8]

Starts the reference store in-process on loopback (``bm25``), then, in
alternating rounds so machine noise hits both alike, runs a full probe cycle
of the packaged smoke fixture through ``configs/http-zengram.toml`` (the
store described by templates, no store-specific code) and through
``kind = "zengram"``: seed time, serial search p50, and closed-loop
searches/s under load. It prints the medians side by side with ratios, and
exits 1 unless both give the same rankings for every query.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import anyio

from benchd.config.load import ProbeConfig, TargetConfig, load_config
from benchd.config.secrets import Secret
from benchd.cycle import run_cycle
from benchd.fixtures.model import Fixture, load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.zengram import ZengramConfig
from benchd.load import LoadProfile
from benchd.refstore.server import running_refstore
from benchd.refstore.testing import make_config
from benchd.result import CycleResult

REPO = Path(__file__).resolve().parents[1]


def targets(url: str, key: str) -> dict[str, TargetConfig]:
    """The two ways to reach the same store."""
    os.environ["BRAIN_API_KEY"] = key
    http = load_config(REPO / "configs" / "http-zengram.toml").probes[0].target
    return {
        "http": dataclasses.replace(http, settings=dataclasses.replace(http.settings, url=url)),
        "zengram": TargetConfig("zengram", ZengramConfig(url=url), Secret(key, "bench")),
    }


async def one_cycle(target: TargetConfig, fixture: Fixture, load: LoadProfile) -> CycleResult:
    probe = ProbeConfig(
        name=target.kind, fixture=Path(fixture.path), target=target, k=(5, 10), load=load
    )
    adapter = build_target(target.kind, target.settings, target.secret)
    try:
        return await run_cycle(probe, fixture, adapter)
    finally:
        await adapter.aclose()


def figures(result: CycleResult) -> dict[str, float]:
    assert result.seed is not None and result.load is not None, result.error_message
    return {
        "seed_s": result.seed.duration_s,
        "serial_p50_ms": result.serial_latency.p50 * 1000,
        "load_rps": result.load.achieved_rate,
    }


async def bench(args: argparse.Namespace) -> int:
    fixture = load_fixture(packaged_fixture("smoke"))
    load = LoadProfile(mode="closed", concurrency=args.concurrency, duration_s=args.duration)
    runs: dict[str, list[dict[str, float]]] = {"http": [], "zengram": []}
    rankings: dict[str, Any] = {}
    async with running_refstore(make_config(retriever="bm25")) as store:
        kinds = targets(store.url, store.api_key)
        for _ in range(args.rounds):
            for name, target in kinds.items():
                result = await one_cycle(target, fixture, load)
                runs[name].append(figures(result))
                rankings[name] = [q.ranked_ids for q in result.queries]
    report(runs, args)
    same = rankings["http"] == rankings["zengram"]
    print(f"\nrankings identical on all {len(fixture.queries)} queries: {same}")
    return 0 if same else 1


def report(runs: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    print(
        f"smoke fixture, bm25 reference store, {args.rounds} alternating rounds, "
        f"closed load c={args.concurrency} for {args.duration:g}s (medians)\n"
    )
    print(f"{'measure':<16}{'http':>12}{'zengram':>12}{'http/zengram':>15}")
    for key, label in (
        ("seed_s", "seed (s)"),
        ("serial_p50_ms", "serial p50 (ms)"),
        ("load_rps", "searches/s"),
    ):
        a = statistics.median(r[key] for r in runs["http"])
        b = statistics.median(r[key] for r in runs["zengram"])
        print(f"{label:<16}{a:>12.3f}{b:>12.3f}{a / b:>15.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="load seconds per cycle")
    parser.add_argument("--concurrency", type=int, default=8)
    return anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
