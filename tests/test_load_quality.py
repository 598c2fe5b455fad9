"""Quality under load is the mean over distinct queries, each query's answers averaged first."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from benchd import cycle
from benchd.cycle import load_quality
from benchd.fixtures.model import LabeledQuery
from benchd.result import RankedIds
from benchd.scoring.aggregate import mean_metrics
from benchd.scoring.ranking import query_metrics

QUERIES = [
    LabeledQuery(id="a", q="alpha", relevance={"m1": 1}),
    LabeledQuery(id="b", q="beta", relevance={"m2": 1}),
]


def test_a_query_asked_often_weighs_as_much_as_one_asked_once() -> None:
    # query a answered perfectly three times, query b missed once
    answers = [(0, ("m1",)), (0, ("m1",)), (0, ("m1",)), (1, ("x",))]
    quality = load_quality(QUERIES, answers, (5,))
    assert quality["recall@5"] == pytest.approx(0.5)  # not 0.75, the mean over answers


def test_identical_rankings_score_as_the_serial_pass_does_whatever_the_counts() -> None:
    # the case: the same rankings, asked unevenly, read 0.825 instead of 0.8333
    serial = load_quality(QUERIES, [(0, ("m1",)), (1, ("x", "m2"))], (1, 5))
    skewed = load_quality(
        QUERIES, [(0, ("m1",)), (1, ("x", "m2")), (1, ("x", "m2")), (3, ("x", "m2"))], (1, 5)
    )
    assert skewed == pytest.approx(serial)


def test_a_query_index_past_the_fixture_wraps_to_its_query() -> None:
    assert load_quality(QUERIES, [(2, ("m1",))], (5,)) == load_quality(
        QUERIES, [(0, ("m1",))], (5,)
    )


def _plain(
    queries: list[LabeledQuery], answers: list[tuple[int, tuple[str, ...]]], ks: tuple[int, ...]
) -> dict[str, float]:
    """Every answer scored on its own, each query's answers averaged, then the queries."""
    by_query: dict[int, list[dict[str, float]]] = {}
    for index, ranked in answers:
        at = index % len(queries)
        by_query.setdefault(at, []).append(query_metrics(ranked, queries[at].relevance, ks))
    return mean_metrics([mean_metrics(by_query[i]) for i in sorted(by_query)])


def test_each_distinct_ranking_of_a_query_is_scored_once_and_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(3)
    queries = [
        LabeledQuery(id=f"q{i}", q=f"text {i}", relevance={f"d{i}": 2, f"d{i + 1}": 1})
        for i in range(6)
    ]
    rankings = [tuple(rng.sample([f"d{j}" for j in range(9)], 5)) for _ in range(4)]
    answers = [(rng.randrange(12), rng.choice(rankings)) for _ in range(400)]
    # the same ids under another query: scored against that query's labels, not reused
    answers += [(0, rankings[0]), (1, rankings[0]), (7, RankedIds(rankings[1], [0.5] * 5))]
    calls: list[tuple[int, tuple[str, ...]]] = []

    def counted(
        ranked: Sequence[str], relevance: Mapping[str, int], ks: Sequence[int]
    ) -> dict[str, float]:
        calls.append((id(relevance), tuple(ranked)))
        return query_metrics(ranked, relevance, ks)

    monkeypatch.setattr(cycle, "query_metrics", counted)
    got = load_quality(queries, answers, (1, 3, 5))
    distinct = {(i % len(queries), tuple(r)) for i, r in answers}
    assert len(calls) == len(distinct) < len(answers)
    assert got == _plain(queries, answers, (1, 3, 5))  # exactly: the same sums in order
