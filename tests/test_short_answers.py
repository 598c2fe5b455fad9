"""Short answers: searches answering fewer than min(k, records seeded), on kinds that promise."""

from __future__ import annotations

from benchd.cycle import short_answers


def test_answers_shorter_than_full_are_counted_and_failed_searches_are_not() -> None:
    ranked = [("a", "b", "c"), ("a",), None, (), ("a", "b", "c", "d")]
    assert short_answers(ranked, 3) == 2  # ("a",) and (): None is an error, counted apart


def test_no_promise_no_count() -> None:
    assert short_answers([(), ("a",)], 0) == 0
