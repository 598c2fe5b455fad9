"""Latency summaries: nearest-rank percentiles over raw samples, as wrk2/HdrHistogram."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchd.result import LatencySummary
from benchd.scoring.latency import percentile, summarize


def test_nearest_rank_on_one_to_hundred_picks_the_pth_value() -> None:
    samples = [float(v) for v in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 100) == 100.0
    assert percentile(samples, 29) == 29.0  # 0.29 * 100 is 28.999... in floats


def test_percentile_is_an_observed_sample_never_an_interpolation() -> None:
    samples = [0.010, 0.020, 0.030, 0.040]
    assert percentile(samples, 50) == 0.020  # rank ceil(2.0) = 2
    assert percentile(samples, 51) == 0.030  # rank ceil(2.04) = 3
    assert percentile(samples, 0) == 0.010


def test_p99_of_ten_samples_is_the_maximum() -> None:
    samples = sorted(float(v) for v in range(10))
    assert percentile(samples, 99) == 9.0
    assert percentile(samples, 90) == 8.0


def test_percentile_outside_zero_to_hundred_is_rejected() -> None:
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def test_summarize_of_no_samples_is_the_empty_summary() -> None:
    assert summarize([]) == LatencySummary.empty()


def test_summarize_sorts_and_reports_count_max_and_mean() -> None:
    summary = summarize([0.3, 0.1, 0.2])
    assert summary.count == 3
    assert summary.p50 == 0.2
    assert summary.p99 == 0.3
    assert summary.max == 0.3
    assert math.isclose(summary.mean, 0.2)


@given(
    st.lists(st.floats(min_value=0.0, max_value=60.0), min_size=1, max_size=300),
    st.sampled_from([50.0, 90.0, 95.0, 99.0, 99.9]),
)
def test_percentile_agrees_with_numpy_inverted_cdf(samples: list[float], p: float) -> None:
    expected = float(np.percentile(samples, p, method="inverted_cdf"))
    assert percentile(sorted(samples), p) == expected
