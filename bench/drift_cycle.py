"""Drift stage cost: seconds per cycle at 100, 1,000 and 10,000 queries.

Builds seeded synthetic cycles of a noisy store (14 metric keys: recall,
ndcg, mrr, precision, hit, map, recall_all at 5 and 10; each cycle, 30% of
the queries swap one adjacent pair in their top 10 and their values move;
every query's top score jitters by ~0.1%, as a real store's do) and times
what the daemon does after each cycle: :func:`benchd.drift.tracker.compare`
against the rolling window of the 5 cycles before it (noise tests, sign-flip
tests, bootstrap CIs, ranking overlap and the top-score shift), with the
default settings (10,000 permutations, 2,000 bootstrap resamples). Prints
the median wall and CPU seconds (all threads) per cycle over ``--cycles`` consecutive cycles, a
digest of every outcome so two versions can be checked to agree, and a digest of the
verdicts alone (which keys drifted, whether the model changed, and which p-values fell
below ``alpha``): versions whose resampling draws differently agree on that one::

    .venv/bin/python bench/drift_cycle.py [--sizes 100 1000 10000] [--cycles 5]
    PYTHONPATH=/path/to/other/checkout python bench/drift_cycle.py   # the other version
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

import numpy as np

from benchd.config.drift import DriftSettings
from benchd.drift.tracker import Snapshot, compare, rolling_reference
from benchd.drift_outcome import DriftOutcome

METRICS = ("recall", "ndcg", "mrr", "precision", "hit", "map", "recall_all")
SWAP_SHARE = 0.3
WINDOW = 5


def cycles(n_queries: int, count: int, seed: int) -> list[Snapshot]:
    """``count`` consecutive snapshots of one unchanged, noisy store."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:05d}" for i in range(n_queries)]
    base = rng.random((n_queries, len(METRICS) * 2))
    top = 10.0 + 5.0 * rng.random(n_queries)
    out = []
    for _ in range(count):
        swapped = rng.random(n_queries) < SWAP_SHARE
        where = rng.integers(1, 10, n_queries)
        values = np.where(swapped[:, None], base * 0.9, base)
        scores = top * (1.0 + 0.001 * rng.standard_normal(n_queries))
        metrics, rankings = {}, {}
        for i, q in enumerate(ids):
            metrics[q] = {
                f"{m}@{k}": float(values[i, 2 * j + (k == 10)])
                for j, m in enumerate(METRICS)
                for k in (5, 10)
            }
            ranked = [f"{q}-r{j}" for j in range(10)]
            if swapped[i]:
                w = int(where[i])
                ranked[w - 1], ranked[w] = ranked[w], ranked[w - 1]
            rankings[q] = tuple(ranked)
        top_scores = {q: float(s) for q, s in zip(ids, scores, strict=True)}
        out.append(Snapshot("h", metrics, {}, rankings, top_scores=top_scores))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    settings = DriftSettings()
    print(f"{'queries':>8}{'wall s':>9}{'CPU s':>9}  outcome / verdict digest")
    for n in args.sizes:
        snaps = cycles(n, WINDOW + args.cycles, seed=n)
        times, cpus, digest, verdicts = [], [], hashlib.sha256(), hashlib.sha256()
        for c in range(WINDOW, WINDOW + args.cycles):
            start, cpu = time.perf_counter(), time.process_time()
            reference = rolling_reference(snaps[c - WINDOW : c], 10)
            outcome = compare(reference, snaps[c], settings, kind="rolling", depth=10)
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            digest.update(repr(outcome).encode())
            verdicts.update(repr(verdict(outcome, settings.alpha)).encode())
        wall, cpu_s = statistics.median(times), statistics.median(cpus)
        sums = f"{digest.hexdigest()[:16]} / {verdicts.hexdigest()[:16]}"
        print(f"{n:8d}{wall:9.3f}{cpu_s:9.3f}  {sums}")


def verdict(outcome: DriftOutcome, alpha: float) -> tuple[object, ...]:
    """What a cycle decided: per key, drift and p < alpha; the ranking signals' the same."""
    keys = tuple(
        (key, m.detected, m.p_value < alpha, m.p_value_queries < alpha)
        for key, m in sorted(outcome.metrics.items())
    )
    change = outcome.change
    signals = None
    if change is not None:
        score_p = change.score_p_value
        signals = (change.model_changed, change.overlap_p_value < alpha,
                   score_p is not None and score_p < alpha)  # fmt: skip
    return outcome.detected, keys, signals


if __name__ == "__main__":
    main()
