"""Means over queries, overall and per category."""

from __future__ import annotations

import pytest

from benchd.scoring.aggregate import by_category, mean_metrics


def test_mean_is_arithmetic_over_queries() -> None:
    rows = [
        {"recall@5": 1.0, "rr": 0.5},
        {"recall@5": 0.0, "rr": 1.0},
        {"recall@5": 0.5, "rr": 0.0},
    ]
    assert mean_metrics(rows) == pytest.approx({"recall@5": 0.5, "rr": 0.5})
    assert mean_metrics([]) == {}


def test_categories_group_and_uncategorised_are_left_out() -> None:
    pairs = [
        ("a", {"hit@5": 1.0}),
        ("a", {"hit@5": 0.0}),
        ("b", {"hit@5": 1.0}),
        (None, {"hit@5": 0.0}),
    ]
    assert by_category(pairs) == {"a": {"hit@5": 0.5}, "b": {"hit@5": 1.0}}
