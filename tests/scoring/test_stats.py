"""Resampling statistics: exact values on tiny inputs, validity properties on simulated ones."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist, fmean

import numpy as np
import pytest

from benchd.scoring import stats
from benchd.scoring.stats import (
    bootstrap_ci,
    bootstrap_cis,
    paired_bootstrap_delta_ci,
    paired_permutation_test,
    paired_tests,
    student_t_ppf,
    wilcoxon_signed_rank,
)

# A recall@10-like generating process: values a query with 1-3 relevant ids can take.
RECALL_VALUES = np.array([0.0, 1 / 3, 0.5, 2 / 3, 1.0])
RECALL_PROBS = np.array([0.15, 0.10, 0.15, 0.10, 0.50])
TRUE_MEAN = float(RECALL_VALUES @ RECALL_PROBS)


def _coverage(n: int, trials: int, method: str) -> float:
    rng = np.random.default_rng(20261129)
    covered = 0
    for trial in range(trials):
        sample = rng.choice(RECALL_VALUES, size=n, p=RECALL_PROBS)
        low, high = bootstrap_ci(sample, seed=trial, method=method)  # type: ignore[arg-type]
        covered += low <= TRUE_MEAN <= high
    return covered / trials


def test_bootstrap_ci_of_one_value_or_equal_values_is_degenerate() -> None:
    assert bootstrap_ci([0.25]) == (0.25, 0.25)
    assert bootstrap_ci([0.5] * 40) == (0.5, 0.5)


def test_bootstrap_ci_is_reproducible_for_a_seed_and_brackets_the_mean() -> None:
    values = np.random.default_rng(1).random(50)
    first = bootstrap_ci(values, seed=7)
    assert first == bootstrap_ci(values, seed=7)
    assert first != bootstrap_ci(values, seed=8)
    assert first[0] < fmean(values) < first[1]


def test_bootstrap_ci_narrows_as_queries_grow() -> None:
    rng = np.random.default_rng(2)
    small = bootstrap_ci(rng.choice(RECALL_VALUES, 25, p=RECALL_PROBS))
    large = bootstrap_ci(rng.choice(RECALL_VALUES, 400, p=RECALL_PROBS))
    assert (large[1] - large[0]) < (small[1] - small[0]) / 2


def test_bootstrap_ci_95_covers_the_true_mean_93_to_97_percent_of_trials() -> None:
    assert 0.93 <= _coverage(n=40, trials=600, method="expanded") <= 0.97


def test_expanded_interval_fixes_percentile_undercoverage_on_twelve_queries() -> None:
    expanded = _coverage(n=12, trials=600, method="expanded")
    plain = _coverage(n=12, trials=600, method="percentile")
    assert plain < expanded
    assert abs(expanded - 0.95) < abs(plain - 0.95)


def test_bootstrap_cis_of_many_columns_equal_single_column_calls() -> None:
    rng = np.random.default_rng(3)
    columns = {f"m{i}": rng.random(120) for i in range(5)}
    batch = bootstrap_cis(columns, seed=11)
    for name, values in columns.items():
        assert batch[name] == pytest.approx(bootstrap_ci(values, seed=11), abs=1e-12)


def test_bootstrap_cis_of_repeated_values_are_not_resampled_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    columns = {f"m{i}": rng.random(16) for i in range(4)}
    fresh = bootstrap_cis(columns, seed=23)
    calls = []
    real = stats._bootstrap_means
    monkeypatch.setattr(stats, "_bootstrap_means", lambda *a: calls.append(1) or real(*a))
    again = bootstrap_cis({k: list(v) for k, v in columns.items()}, seed=23)
    again["m0"] = (0.0, 0.0)  # a caller's copy: the next call still gets the intervals
    assert bootstrap_cis(columns, seed=23) == fresh
    assert calls == []
    assert bootstrap_cis(columns, seed=24) != fresh  # another seed: resampled
    changed = {**columns, "m1": columns["m1"] + 0.25}
    assert bootstrap_cis(changed, seed=23)["m1"] != fresh["m1"]
    assert len(calls) == 2


def test_the_kept_intervals_total_is_their_values_size_through_inserts_and_evictions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept: stats._SizedLRU[tuple[object, ...], dict[str, tuple[float, float]]]
    kept = stats._SizedLRU(3000)
    monkeypatch.setattr(stats, "_intervals", kept)
    rng = np.random.default_rng(7)
    sizes = [16, 40, 8, 64, 24, 16, 90, 8]  # rows; 2 columns of float64: 16 bytes a row
    columns = [{"a": rng.random(n), "b": rng.random(n)} for n in sizes]
    evicted = False
    for seed, column in enumerate(columns * 2):
        before = len(kept)
        bootstrap_cis(column, seed=seed % 3)
        evicted |= len(kept) <= before
        assert kept.total == sum(len(key[2]) for key in kept) <= kept.limit
    assert evicted
    newest = next(reversed(list(kept)))
    stats._keep_intervals(newest, {"a": (0.0, 1.0)})  # the same key again: counted once
    assert kept.total == sum(len(key[2]) for key in kept)
    oldest, second, *_ = kept
    assert kept.get(oldest) is not None  # used: now the newest, the next to go is another
    bootstrap_cis({"c": rng.random(250)}, seed=0)  # 2,000 bytes: evicts
    assert oldest in list(kept)
    assert second not in list(kept)
    assert kept.total == sum(len(key[2]) for key in kept) <= kept.limit
    kept.clear()
    assert (len(kept), kept.total) == (0, 0)


def test_the_kept_resample_counts_total_is_their_size_through_inserts_and_evictions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept: stats._SizedLRU[tuple[int, int, int], list[np.ndarray]] = stats._SizedLRU(100_000)
    monkeypatch.setattr(stats, "_cache", kept)
    rng = np.random.default_rng(9)
    for n in (10, 30, 10, 45, 20, 30):  # 2,000 resamples of n rows, a byte a count
        bootstrap_cis({"a": rng.random(n), "b": rng.random(n)}, seed=4)  # two: counted
        chunks = [kept.get(key) or [] for key in list(kept)]
        assert kept.total == sum(c.nbytes for each in chunks for c in each) <= kept.limit
    assert sorted(n for n, _, _ in kept) == [20, 30]  # 45 evicted 30 and 10, 20 evicted 45


def test_bootstrap_ci_rejects_empty_input_and_a_bad_level() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([0.1, 0.2], level=1.5)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([0.1, math.nan])


def test_paired_delta_ci_is_the_ci_of_the_differences() -> None:
    rng = np.random.default_rng(4)
    before = rng.random(60)
    after = before - 0.1 + rng.normal(0, 0.05, 60)
    low, high = paired_bootstrap_delta_ci(before, after)
    assert (low, high) == bootstrap_ci(after - before)
    assert low < fmean(after - before) < high < 0


def test_permutation_test_with_no_difference_gives_p_one() -> None:
    assert paired_permutation_test([0.2, 0.5, 1.0], [0.2, 0.5, 1.0]) == 1.0


def test_permutation_test_enumerates_every_sign_pattern_exactly() -> None:
    # differences (3, -1, 2): |sum| over the 8 sign patterns is 6,2,4,0 twice;
    # the observed |4| is reached or beaten by 6, 4, -6, -4 -> p = 4/8.
    assert paired_permutation_test([0, 1, 0], [3, 0, 2]) == 0.5


def test_permutation_test_smallest_p_is_two_over_two_to_the_changed_queries() -> None:
    before = [1.0] * 8 + [0.5] * 4  # four unchanged queries do not count
    after = [0.0] * 8 + [0.5] * 4
    assert paired_permutation_test(before, after) == 2 / 2**8


def test_permutation_test_monte_carlo_agrees_with_exact_enumeration() -> None:
    rng = np.random.default_rng(5)
    before = rng.random(18)
    after = before + rng.normal(0.08, 0.2, 18)
    exact = paired_permutation_test(before, after, exact_max=18)
    sampled = paired_permutation_test(before, after, exact_max=16, n_resamples=20000)
    assert sampled == pytest.approx(exact, abs=0.01)


def test_permutation_test_holds_its_size_under_the_null() -> None:
    rng = np.random.default_rng(6)
    rejections = 0
    trials = 300
    for trial in range(trials):
        before = rng.random(40)
        after = before + rng.normal(0, 0.1, 40)
        rejections += paired_permutation_test(before, after, n_resamples=2000, seed=trial) < 0.05
    assert rejections / trials <= 0.08


def test_permutation_test_detects_a_consistent_drop() -> None:
    rng = np.random.default_rng(7)
    before = rng.random(100)
    after = before - 0.05 + rng.normal(0, 0.05, 100)
    assert paired_permutation_test(before, after) < 0.001


def test_paired_tests_match_single_column_calls() -> None:
    rng = np.random.default_rng(8)
    before = {k: rng.random(50) for k in ("a", "b")}
    after = {k: v + rng.normal(0.02, 0.1, 50) for k, v in before.items()}
    batch = paired_tests(before, after, seed=3)
    for key in before:
        assert batch[key] == paired_permutation_test(before[key], after[key], seed=3)


def test_paired_tests_reject_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        paired_permutation_test([0.1, 0.2], [0.1])


def test_wilcoxon_matches_the_normal_approximation_by_hand() -> None:
    diffs = [float(i) for i in range(1, 11)]  # all positive, distinct: W+ = 55
    mean, sd = 10 * 11 / 4, math.sqrt(10 * 11 * 21 / 24)
    expected = 2 * (1 - NormalDist().cdf((55 - mean - 0.5) / sd))
    assert wilcoxon_signed_rank([0.0] * 10, diffs) == pytest.approx(expected)
    assert wilcoxon_signed_rank([1.0, 2.0], [1.0, 2.0]) == 1.0


def test_wilcoxon_is_symmetric_in_the_sign_of_the_change() -> None:
    rng = np.random.default_rng(9)
    before = rng.random(30)
    after = before + rng.normal(0.05, 0.1, 30)
    assert wilcoxon_signed_rank(before, after) == pytest.approx(wilcoxon_signed_rank(after, before))


@pytest.mark.parametrize(
    ("df", "p", "table"),
    [(1, 0.975, 12.706), (2, 0.975, 4.303), (3, 0.975, 3.182), (5, 0.975, 2.571),
     (11, 0.975, 2.201), (29, 0.995, 2.756), (120, 0.975, 1.980)],
)  # fmt: skip
def test_student_t_quantiles_match_the_printed_table(df: int, p: float, table: float) -> None:
    assert student_t_ppf(p, df) == pytest.approx(table, rel=2e-3)


def test_exact_enumeration_counts_all_patterns() -> None:
    diffs = [0.3, -0.1, 0.2, 0.4]
    observed = abs(sum(diffs))
    patterns = itertools.product((-1, 1), repeat=len(diffs))
    expected = fmean(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-12
        for signs in patterns
    )
    assert paired_permutation_test([0.0] * 4, diffs) == pytest.approx(expected)
