"""Means of per-query measures, overall and per category.

Averages are arithmetic means over queries (DESIGN.md §3), summed in input
order like trec_eval's accumulators. Every query must report the same
measures: a query that could not be scored has to be dealt with by the
caller (counted as zeros, or left out) rather than silently shrinking the
denominator of one measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["by_category", "mean_metrics"]


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each measure over ``per_query`` (keys in the first query's order).

    Returns ``{}`` for no queries; raises ``ValueError`` if the queries do not
    all report the same measures.
    """
    if not per_query:
        return {}
    names = list(per_query[0])
    expected = set(names)
    totals = dict.fromkeys(names, 0.0)
    for index, metrics in enumerate(per_query):
        if metrics.keys() != expected:
            missing = sorted(expected - metrics.keys())
            extra = sorted(metrics.keys() - expected)
            raise ValueError(
                f"query #{index} reports different measures than query #0 "
                f"(missing {missing}, extra {extra})"
            )
        for name in names:
            totals[name] += metrics[name]
    count = len(per_query)
    return {name: total / count for name, total in totals.items()}


def by_category(
    pairs: Sequence[tuple[str | None, Mapping[str, float]]],
) -> dict[str, dict[str, float]]:
    """Per-category means, categories in sorted order.

    Queries without a category (``None``) are left out here: they still count
    in the overall :func:`mean_metrics`, but inventing a ``"none"`` category
    would collide with a real category of that name.
    """
    groups: dict[str, list[Mapping[str, float]]] = {}
    for category, metrics in pairs:
        if category is not None:
            groups.setdefault(category, []).append(metrics)
    return {category: mean_metrics(groups[category]) for category in sorted(groups)}
