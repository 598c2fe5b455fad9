"""Exact latency percentiles over raw samples (seconds): pure, no clocks.

Percentiles use the *nearest-rank* definition, the one wrk2 and HdrHistogram
report: the p-th percentile of ``n`` sorted samples is the smallest sample
such that at least ``p`` % of all samples are less than or equal to it, i.e.
the sample at 1-based rank ``ceil(p / 100 * n)`` (rank 1 for ``p = 0``).
It is always an observed value — never an interpolation between two — so a
p99 over 100 samples is the 99th smallest, and over 10 samples it is the
largest. ``numpy.percentile(..., method="inverted_cdf")`` agrees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchd.result import LatencySummary

__all__ = ["percentile", "summarize"]


def percentile(sorted_samples: Sequence[float], p: float) -> float:
    """Return the nearest-rank ``p``-th percentile of already sorted samples.

    ``p`` is in [0, 100]; an empty sequence gives 0.0 (there is nothing to
    report, and a summary of no samples says so through its count).
    """
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    n = len(sorted_samples)
    if n == 0:
        return 0.0
    # Round p/100*n before ceil so that e.g. 0.29 * 100 = 28.999999999999996
    # still selects rank 29, as exact arithmetic would.
    rank = math.ceil(round(p / 100.0 * n, 9))
    return float(sorted_samples[max(rank, 1) - 1])


def summarize(samples: Sequence[float]) -> LatencySummary:
    """Summarize raw latency samples (seconds) exactly: count, p50–p99, max, mean."""
    if not samples:
        return LatencySummary.empty()
    ordered = sorted(samples)
    return LatencySummary(
        count=len(ordered),
        p50=percentile(ordered, 50.0),
        p90=percentile(ordered, 90.0),
        p95=percentile(ordered, 95.0),
        p99=percentile(ordered, 99.0),
        max=float(ordered[-1]),
        mean=math.fsum(ordered) / len(ordered),
    )
