"""Quality under load is the mean over distinct queries, each query's answers averaged first."""

from __future__ import annotations

import pytest

from benchd.cycle import load_quality
from benchd.fixtures.model import LabeledQuery

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
