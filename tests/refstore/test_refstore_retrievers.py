"""The reference store's candidate retrievers: ties broken the same way on every search."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.refstore.retrievers import _top

# few distinct values, so most draws tie, and NaN (a zero vector's cosine)
_SCORES = st.sampled_from([0.0, 0.0, 1e-4, 0.5, 0.5, 1.0, -0.2, float("nan")]) | st.floats(-1, 1)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_SCORES, max_size=60), st.integers(0, 70))
def test_the_dense_top_is_a_stable_sorts_first_depth(scores: list[float], depth: int) -> None:
    array = np.array(scores, dtype=np.float64)
    assert _top(array, depth) == [int(i) for i in np.argsort(-array, kind="stable")[:depth]]


def test_equal_scores_at_the_cut_are_taken_in_row_order() -> None:
    # one match, then rows that share no word with the query (cosine 0), more than asked
    scores = np.zeros(40)
    scores[17] = 0.9
    assert _top(scores, 10) == [17, 0, 1, 2, 3, 4, 5, 6, 7, 8]
