"""The drift tests stop drawing once no key can be flagged, and give what the plain draw gives.

A sequential test stopped after ``l`` draws must give exactly the p-values of the
plain test of ``l`` draws (the same seed draws the same first relabelings), must
never stop while a key's p-value could still fall below ``alpha``, and must reach
the verdicts the full draw reaches.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from test_noise_classes import random_pools, reference_null

from benchd.drift import stats as drift_stats
from benchd.drift.stats import Pool, noise_tests
from benchd.scoring import stats as scoring_stats
from benchd.scoring.stats import STOP_RISK, decided_above, looks, paired_tests


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few draws, so the looks fall between blocks as at 10,000 queries."""
    monkeypatch.setattr(drift_stats, "_CELLS_PER_CHUNK", 1 << 12)
    monkeypatch.setattr(drift_stats, "_BLOCK_CELLS", 1 << 13)
    monkeypatch.setattr(scoring_stats, "_CELLS_PER_CHUNK", 1 << 13)


def binomial_tail(n: int, p: float, c: int) -> float:
    """P(Binomial(n, p) >= c), in exact rational arithmetic."""
    q = Fraction(p)
    below = sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(c))
    return float(1 - below)


@pytest.mark.parametrize(("draws", "alpha"), [(200, 0.01), (400, 0.05), (1600, 0.01), (205, 0.1)])
def test_the_stopping_count_is_the_smallest_with_the_risk_bounded(draws: int, alpha: float) -> None:
    risk = STOP_RISK / len(looks(10000))
    c = decided_above(draws, alpha, 10000)
    assert binomial_tail(draws, alpha, c) <= risk * (1 + 1e-9)
    assert binomial_tail(draws, alpha, c - 1) > risk
    assert c > draws * alpha  # more than the expected exceedances of a p-value at alpha


def test_looks_double_below_the_draws() -> None:
    assert looks(10000) == [200, 400, 800, 1600, 3200, 6400]
    assert looks(200) == []


def test_a_null_cycle_stops_early_and_gives_the_plain_p_values_of_its_draws(
    small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    pools = random_pools(rng, queries=300, keys=6, samples=5, pinned=False, tied=False,
                         ragged=False)  # fmt: skip
    pools = {k: Pool(p.values, [v[0] for v in p.values]) for k, p in pools.items()}  # no change
    got = noise_tests(pools, n_resamples=5000, seed=4, alpha=0.01)
    draws = {t.draws for t in got.values()}
    assert len(draws) == 1
    (done,) = draws
    assert 200 <= done < 5000
    assert all(t.p_value >= 0.01 for t in got.values())
    monkeypatch.setattr(drift_stats, "_null", reference_null)  # the plain gather, per draw
    want = noise_tests(pools, n_resamples=done, seed=4)
    assert got == want


@pytest.mark.parametrize("pinned", [False, True])
def test_a_real_drop_draws_to_the_end(small_blocks: None, pinned: bool) -> None:
    rng = np.random.default_rng(8)
    pools = random_pools(rng, queries=200, keys=4, samples=5, pinned=pinned, tied=True,
                         ragged=False)  # fmt: skip
    dropped = {k: Pool(p.values, [c - 0.1 for c in p.current], pinned) for k, p in pools.items()}
    got = noise_tests(dropped, n_resamples=3000, seed=2, alpha=0.01)
    assert all(t.draws == 3000 and t.p_value < 0.01 for t in got.values())
    assert got == noise_tests(dropped, n_resamples=3000, seed=2)


def exchangeable_pools(
    rng: np.random.Generator, shift: float, *, pinned: bool, tied: bool
) -> dict[str, Pool]:
    """120 queries, 3 correlated keys, 5 samples and a current value from one distribution
    (a query moves to 0.8x its level 30% of the time), the current one lowered by ``shift``."""
    base = rng.random((120, 1)) * np.array([1.0, 0.9, 0.7])
    moves = rng.random((120, 6)) < 0.3
    drawn = np.where(moves[:, :, None], 0.8 * base[:, None, :], base[:, None, :])
    if tied:
        drawn = np.round(drawn * 4) / 4
    return {
        f"k{k}": Pool([list(row[:-1, k]) for row in drawn],
                      [float(row[-1, k]) - shift for row in drawn], pinned)
        for k in range(3)
    }  # fmt: skip


def test_verdicts_match_the_full_draw_on_many_cycles(small_blocks: None) -> None:
    """On null and shifted cycles alike, stopping never changes who is below alpha."""
    stopped = 0
    for trial in range(40):
        rng = np.random.default_rng(100 + trial)
        shift = 0.004 * (trial % 8)  # from no change to a clear drop
        pools = exchangeable_pools(rng, shift, pinned=trial % 2 == 1, tied=trial % 3 == 0)
        for two_sided in (False, True):
            seq = noise_tests(pools, n_resamples=4000, seed=trial, two_sided=two_sided,
                              alpha=0.05)  # fmt: skip
            full = noise_tests(pools, n_resamples=4000, seed=trial, two_sided=two_sided)
            for key, test in seq.items():
                assert (test.p_value < 0.05) == (full[key].p_value < 0.05), (trial, key)
                width = 4 * math.sqrt(full[key].p_raw * (1 - full[key].p_raw) / test.draws)
                assert abs(test.p_raw - full[key].p_raw) <= width + 1 / test.draws
            stopped += any(t.draws < 4000 for t in seq.values())
    assert stopped >= 10  # the stop was exercised, not only the full draw


def test_the_sign_flip_test_stops_early_with_the_plain_p_values(small_blocks: None) -> None:
    rng = np.random.default_rng(3)
    before = {f"c{j}": list(rng.random(400)) for j in range(3)}
    after = {k: [v + rng.normal(0, 0.1) for v in col] for k, col in before.items()}
    got = paired_tests(before, after, n_resamples=5000, seed=6, alpha=0.01)
    assert all(p > 0.01 for p in got.values())
    # the draws made: the smallest chunk count whose plain p-values are these
    chunk = max(1, scoring_stats._CELLS_PER_CHUNK // 400)
    for done in range(chunk, 5000, chunk):
        if paired_tests(before, after, n_resamples=done, seed=6) == got:
            break
    else:
        pytest.fail("the stopped p-values are those of no shorter plain draw")
    assert paired_tests(before, after, n_resamples=5000, seed=6) != got


def test_the_sign_flip_test_of_a_real_drop_draws_to_the_end(small_blocks: None) -> None:
    rng = np.random.default_rng(4)
    before = {"c": list(rng.random(400))}
    after = {"c": [v - 0.05 + rng.normal(0, 0.1) for v in before["c"]]}
    full = paired_tests(before, after, n_resamples=3000, seed=1)
    assert full["c"] < 0.01
    assert paired_tests(before, after, n_resamples=3000, seed=1, alpha=0.01) == full
