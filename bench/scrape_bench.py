"""Scrape cost: benchd's custom collector beside the usual labeled-Gauge exporter.

One command reproduces it::

    .venv/bin/python bench/scrape_bench.py [--probes 10] [--categories 10]

It records three cycles per probe (3 cut-offs, every measure, N categories,
an open-loop load pass) into a ``ResultBook`` and times a full ``/metrics``
render of benchd's own registry (``build_registry``: the book collector plus
process/platform/GC collectors), ``BookCollector.collect()`` alone, and a scrape
as ``/metrics`` serves it (``MetricsCache``: cached, then after one probe's
cycle, OpenMetrics and gzipped as Prometheus asks). The
peer is the way most exporters are written (blackbox_exporter's style in
client_python terms): one ``Gauge``/``Counter``/``Histogram`` per family with
labels, set from the same results, rendered by the same
``generate_latest``. The peer carries only the dominant families (quality,
per-category quality, latency histogram, cycles), so the fair comparison is
the cost per exported sample, printed last. The collector must stay well
under 50 ms at 10 probes x 3 k x 10 categories.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import choose_encoder

from benchd.result import CycleResult, LatencySummary, LoadResult
from benchd.surfacers.prometheus import (
    BookCollector,
    build_registry,
    process_registry,
    split_metric_key,
)
from benchd.surfacers.rendered import MetricsCache
from benchd.surfacers.result_book import DEFAULT_BUCKETS, ResultBook

OPENMETRICS = "application/openmetrics-text; version=1.0.0"  # what Prometheus asks for
MEASURES = ("hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map")
KS = (1, 5, 10)


def _means(base: float) -> dict[str, float]:
    out = {f"{m}@{k}": base + 0.01 * i for i, m in enumerate(MEASURES) for k in KS}
    out.update({"rr": base, "ap": base, "r_precision": base})
    return out


def _result(probe: str, cycle: int, categories: int) -> CycleResult:
    samples = tuple(0.001 * (i % 97 + 1) for i in range(300))
    summary = LatencySummary(300, 0.05, 0.09, 0.095, 0.099, 0.1, 0.05)
    load = LoadResult(
        mode="open",
        duration_s=3.0,
        requests={"ok": 300},
        service=summary,
        corrected=summary,
        service_samples=samples,
        corrected_samples=samples,
        achieved_rate=100.0,
        target_rate=100.0,
        aggregate=_means(0.4),
    )
    return CycleResult(
        probe=probe,
        target="zengram",
        corpus="bench",
        cycle=cycle,
        started_at=1e9 + cycle,
        finished_at=1e9 + cycle + 4,
        outcome="success",
        phases={"seed": 0.2, "serial": 0.8, "load": 3.0},
        ks=KS,
        aggregate=_means(0.5),
        by_category={f"cat{c}": _means(0.6) for c in range(categories)},
        ci={f"recall@{k}": (0.4, 0.7) for k in KS},
        relevant_found=dict.fromkeys(KS, 40),
        relevant_expected=48,
        serial_latency=summary,
        load=load,
    )


def _peer(results: list[CycleResult]) -> CollectorRegistry:
    """The same series, written the conventional way: labeled metric objects."""
    reg = CollectorRegistry()
    head = ["probe", "target", "corpus"]
    quality = Gauge("benchd_quality", "q", [*head, "pass", "metric", "k"], registry=reg)
    category = Gauge(
        "benchd_category_quality", "q", [*head, "category", "metric", "k"], registry=reg
    )
    cycles = Counter("benchd_cycles", "c", ["probe", "outcome"], registry=reg)
    latency = Histogram(
        "benchd_request_duration_seconds",
        "l",
        ["probe", "pass", "latency"],
        buckets=DEFAULT_BUCKETS,
        registry=reg,
    )
    for r in results:
        h = [r.probe, r.target, r.corpus]
        cycles.labels(r.probe, r.outcome).inc()
        for key, v in r.aggregate.items():
            quality.labels(*h, "serial", *split_metric_key(key)).set(v)
        for name, means in r.by_category.items():
            for key, v in means.items():
                category.labels(*h, name, *split_metric_key(key)).set(v)
        assert r.load is not None
        for s in r.load.service_samples:
            latency.labels(r.probe, "load", "service").observe(s)
    return reg


def _best_ms(fn: Callable[[], object], repeat: int = 20) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _samples(registry: CollectorRegistry) -> int:
    return sum(len(m.samples) for m in registry.collect())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--categories", type=int, default=10)
    args = parser.parse_args()
    results = [
        _result(f"probe{p}", c, args.categories) for c in range(1, 4) for p in range(args.probes)
    ]
    book = ResultBook()
    start = time.perf_counter()
    for r in results:
        book.record(r)
    record_ms = (time.perf_counter() - start) * 1000 / len(results)
    ours, peer = build_registry(book), _peer(results)
    collector = BookCollector(book)
    collect_ms = _best_ms(lambda: list(collector.collect()))
    ours_ms, peer_ms = (
        _best_ms(lambda: generate_latest(ours)),
        _best_ms(lambda: generate_latest(peer)),
    )
    ours_n, peer_n = _samples(ours), _samples(peer)
    cache = MetricsCache(book, process_registry())
    encoder, content_type = choose_encoder(OPENMETRICS)

    def changed() -> None:  # one probe's next cycle, then a gzipped scrape
        book.record(replace(results[0], cycle=book.latest(results[0].probe).cycle + 1))
        cache.render(encoder, content_type, gzip=True)

    cached_ms = _best_ms(lambda: cache.render(encoder, content_type, gzip=True))
    changed_ms = _best_ms(changed)
    print(f"{args.probes} probes x {len(KS)} k x {args.categories} categories")
    print(f"benchd ResultBook.record        {record_ms:8.2f} ms per cycle")
    print(f"benchd BookCollector.collect()  {collect_ms:8.2f} ms  (budget 50 ms)")
    print(f"benchd /metrics render          {ours_ms:8.2f} ms  {ours_n:>6} samples")
    print(f"peer labeled-metric render      {peer_ms:8.2f} ms  {peer_n:>6} samples")
    print(f"benchd /metrics served, cached  {cached_ms:8.2f} ms  (OpenMetrics, gzipped)")
    print(f"  after one probe's cycle       {changed_ms:8.2f} ms  (that probe rendered again)")
    ours_us, peer_us = 1000 * ours_ms / ours_n, 1000 * peer_ms / peer_n
    ratio = ours_us / peer_us
    print(f"per sample: benchd {ours_us:.2f} us, peer {peer_us:.2f} us, ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
