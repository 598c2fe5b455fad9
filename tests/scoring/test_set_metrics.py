"""Scoring a search that answers an unordered set (an MCP server's substring filter)."""

from __future__ import annotations

import pytest

from benchd.scoring.ranking import SET_METRIC_NAMES, query_metrics, set_metrics


def test_a_set_is_scored_whole_with_recall_precision_and_hit_and_no_rank_measure() -> None:
    relevance = {"a": 1, "b": 1, "c": 1}
    got = set_metrics(["x", "b", "y", "a"], relevance, (1, 5))
    assert got == {"hit": 1.0, "recall": 2 / 3, "recall_all": 0.0, "precision": 0.5}
    assert tuple(got) == SET_METRIC_NAMES


def test_the_order_of_a_set_changes_nothing_where_it_changes_rank_measures() -> None:
    relevance = {"a": 1}
    first, last = ["a", "x", "y"], ["x", "y", "a"]
    assert set_metrics(first, relevance) == set_metrics(last, relevance)
    assert query_metrics(first, relevance, (3,))["mrr@3"] != query_metrics(
        last, relevance, (3,)
    )["mrr@3"]


def test_a_repeated_id_counts_once_and_an_empty_set_has_precision_zero() -> None:
    assert set_metrics(["a", "a", "x"], {"a": 1})["precision"] == 0.5
    assert set_metrics([], {"a": 1}) == {
        "hit": 0.0,
        "recall": 0.0,
        "recall_all": 0.0,
        "precision": 0.0,
    }


def test_a_query_without_a_relevant_id_is_an_input_error() -> None:
    with pytest.raises(ValueError, match="no relevant ids"):
        set_metrics(["a"], {"a": 0})
