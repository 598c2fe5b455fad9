"""Means of per-query metrics, overall and per category: pure functions.

Averages are arithmetic means over queries (DESIGN §3). Queries without a
category are left out of :func:`by_category` but count in the overall mean.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

__all__ = ["by_category", "mean_metrics"]


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Arithmetic mean of every metric key over the queries (keys of the first query)."""
    if not per_query:
        return {}
    n = len(per_query)
    return {key: math.fsum(m[key] for m in per_query) / n for key in per_query[0]}


def by_category(
    pairs: Sequence[tuple[str | None, Mapping[str, float]]],
) -> dict[str, dict[str, float]]:
    """Means per category; queries with no category are not in any group."""
    groups: dict[str, list[Mapping[str, float]]] = defaultdict(list)
    for category, metrics in pairs:
        if category is not None:
            groups[category].append(metrics)
    return {category: mean_metrics(rows) for category, rows in sorted(groups.items())}
