"""Per-query measures: the definitions of DESIGN.md §3 on hand-checked rankings."""

from __future__ import annotations

import math

import pytest

from benchd.scoring.ranking import query_metrics, relevant_in_top


def test_precision_divides_by_k_even_when_the_list_is_shorter() -> None:
    got = query_metrics(["a"], {"a": 1}, [1, 5])
    assert got["precision@1"] == 1.0
    assert got["precision@5"] == pytest.approx(1 / 5)


def test_recall_hit_and_recall_all_count_relevant_in_top_k() -> None:
    got = query_metrics(["x", "a", "y", "b"], {"a": 1, "b": 1, "c": 1}, [1, 2, 4])
    assert (got["hit@1"], got["hit@2"]) == (0.0, 1.0)
    assert got["recall@2"] == pytest.approx(1 / 3)
    assert got["recall@4"] == pytest.approx(2 / 3)
    assert got["recall_all@4"] == 0.0  # c was never retrieved
    full = query_metrics(["a", "b"], {"a": 1, "b": 1}, [1, 2])
    assert (full["recall_all@1"], full["recall_all@2"]) == (0.0, 1.0)


def test_mrr_is_cut_at_k_but_rr_is_not() -> None:
    got = query_metrics(["x", "y", "a"], {"a": 1}, [2, 3])
    assert got["mrr@2"] == 0.0
    assert got["mrr@3"] == pytest.approx(1 / 3)
    assert got["rr"] == pytest.approx(1 / 3)


def test_average_precision_divides_by_all_relevant() -> None:
    # relevant at ranks 1 and 3, a third relevant never retrieved
    got = query_metrics(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, [1, 3])
    assert got["ap"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert got["map@1"] == pytest.approx((1 / 1) / 3)
    assert got["map@3"] == got["ap"]
    assert got["r_precision"] == pytest.approx(2 / 3)


def test_ndcg_uses_linear_grades_and_the_ideal_order_of_all_judgments() -> None:
    got = query_metrics(["b", "a", "z"], {"a": 2, "b": 1, "c": 3, "n": 0}, [2, 3])
    dcg2 = 1 / math.log2(2) + 2 / math.log2(3)
    ideal2 = 3 / math.log2(2) + 2 / math.log2(3)
    ideal3 = ideal2 + 1 / math.log2(4)
    assert got["ndcg@2"] == pytest.approx(dcg2 / ideal2)
    assert got["ndcg@3"] == pytest.approx(dcg2 / ideal3)


def test_rel_level_decides_relevance_but_lower_grades_still_add_gain() -> None:
    got = query_metrics(["low", "high"], {"low": 1, "high": 2}, [1], rel_level=2)
    assert got["precision@1"] == 0.0
    assert got["rr"] == pytest.approx(1 / 2)
    assert got["ndcg@1"] == pytest.approx(1 / 2)  # gain 1 where the ideal has 2


def test_negative_grades_are_neither_relevant_nor_gain() -> None:
    got = query_metrics(["bad", "a"], {"bad": -1, "a": 1}, [1])
    assert got["ndcg@1"] == 0.0
    assert got["precision@1"] == 0.0


def test_a_repeated_id_scores_only_at_its_first_rank() -> None:
    got = query_metrics(["a", "a", "b"], {"a": 1, "b": 1}, [2, 3])
    assert got["precision@2"] == pytest.approx(1 / 2)  # the repeat wastes its slot
    assert got["precision@3"] == pytest.approx(2 / 3)
    assert got["recall@3"] == 1.0
    assert relevant_in_top(["a", "a", "b"], {"a": 1, "b": 1}, 2) == 1


def test_a_query_without_relevant_ids_is_an_error() -> None:
    with pytest.raises(ValueError, match="no relevant ids"):
        query_metrics(["a"], {"a": 0}, [1])
    with pytest.raises(ValueError, match="no relevant ids"):
        query_metrics(["a"], {"a": 1}, [1], rel_level=2)


def test_cut_offs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        query_metrics(["a"], {"a": 1}, [0])


def test_an_empty_ranking_scores_zero() -> None:
    got = query_metrics([], {"a": 1}, [5])
    assert all(value == 0.0 for value in got.values())


def test_relevant_in_top_counts_grades_at_or_above_the_level() -> None:
    ranked = ["a", "b", "c", "d"]
    relevance = {"a": 1, "b": 2, "d": 2}
    assert relevant_in_top(ranked, relevance, 2) == 2
    assert relevant_in_top(ranked, relevance, 4, rel_level=2) == 2
    assert relevant_in_top(ranked, relevance, 1, rel_level=2) == 0
