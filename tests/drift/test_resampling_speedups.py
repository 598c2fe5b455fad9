"""The drift stage's faster resampling gives the numbers the plain version gave, seed for seed.

The expected values below were computed by benchd before the speed-ups (gathering
per draw, bootstrap counts drawn every cycle) on the same synthetic cycles.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchd.config.drift import DriftSettings
from benchd.drift import stats as drift_stats
from benchd.drift.stats import Pool, noise_tests
from benchd.drift.tracker import Snapshot, compare, rolling_reference
from benchd.scoring import stats as scoring_stats
from benchd.scoring.stats import bootstrap_ci, bootstrap_cis

METRICS = ("recall", "ndcg", "mrr", "precision", "hit", "map", "recall_all")

# key: (p_value, p_value_queries, ci_low, ci_high), before the speed-ups
EXPECTED = {
    "recall@5": (
        0.7016491754122939,
        0.7141429285357321,
        -0.009015617003216868,
        0.005366993716881688,
    ),
    "recall@10": (
        0.2888555722138931,
        0.22788605697151423,
        -0.013180808825882002,
        0.0029198767500085076,
    ),
    "ndcg@5": (0.5712143928035982, 0.49075462268865566, -0.010305429248075947, 0.00522908699075514),
    "ndcg@10": (
        0.2928535732133933,
        0.2028985507246377,
        -0.01243797085597634,
        0.0024918047526764514,
    ),
    "mrr@5": (0.2223888055972014, 0.1504247876061969, -0.012856423353068693, 0.0014204657919604908),
    "mrr@10": (
        0.5572213893053474,
        0.43428285857071464,
        -0.008080392666836514,
        0.003976460963273659,
    ),
    "precision@5": (
        0.4197901049475262,
        0.3218390804597701,
        -0.011326246853592048,
        0.0028954162479549917,
    ),
    "precision@10": (
        0.4662668665667166,
        0.2868565717141429,
        -0.00892111852823717,
        0.0023842765199674613,
    ),
    "hit@5": (
        0.12893553223388307,
        0.10044977511244378,
        -0.01555738647893605,
        0.0015326477105875745,
    ),
    "hit@10": (
        0.1329335332333833,
        0.07246376811594203,
        -0.015663842141282375,
        0.0002787357301387671,
    ),
    "map@5": (
        0.45377311344327836,
        0.38580709645177413,
        -0.011486306535082742,
        0.0048739647860186345,
    ),
    "map@10": (
        0.24037981009495252,
        0.15592203898050974,
        -0.012334678377406831,
        0.0016391136206313855,
    ),
    "recall_all@5": (
        0.22488755622188905,
        0.1199400299850075,
        -0.012263982184193176,
        0.0020365583295173222,
    ),
    "recall_all@10": (
        0.13043478260869565,
        0.07096451774112944,
        -0.016354168357613972,
        0.0005268641871799091,
    ),
}
EXPECTED_OVERLAP_P = 0.09495252373813093
EXPECTED_SCORE_SHIFT = 1.427522353411249e-05
EXPECTED_PINNED = {  # key: (p_value, p_raw, delta)
    "k0": (0.9140286571142953, 0.9023658780406532, 0.075),
    "k1": (0.7574141952682439, 0.740753082305898, 0.04000000000000001),
    "k2": (0.5638120626457848, 0.5371542819060313, 0.0050000000000000044),
}
EXPECTED_BOOTSTRAP = (-0.15625, 0.0864998862169493)


def noisy_cycles(n_queries: int, count: int, seed: int) -> list[Snapshot]:
    """Consecutive cycles of an unchanged store: 30% of queries swap a pair, scores jitter."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:05d}" for i in range(n_queries)]
    base = rng.random((n_queries, len(METRICS) * 2))
    top = 10.0 + 5.0 * rng.random(n_queries)
    out = []
    for _ in range(count):
        swapped = rng.random(n_queries) < 0.3
        where = rng.integers(1, 10, n_queries)
        values = np.where(swapped[:, None], base * 0.9, base)
        scores = top * (1.0 + 0.001 * rng.standard_normal(n_queries))
        metrics, rankings = {}, {}
        for i, q in enumerate(ids):
            metrics[q] = {
                f"{m}@{k}": float(values[i, 2 * j + (k == 10)])
                for j, m in enumerate(METRICS)
                for k in (5, 10)
            }
            ranked = [f"{q}-r{j}" for j in range(10)]
            if swapped[i]:
                w = int(where[i])
                ranked[w - 1], ranked[w] = ranked[w], ranked[w - 1]
            rankings[q] = tuple(ranked)
        top_scores = {q: float(s) for q, s in zip(ids, scores, strict=True)}
        out.append(Snapshot("h", metrics, {}, rankings, top_scores=top_scores))
    return out


def _compare_once() -> tuple[dict[str, tuple[float, float, float, float]], float, float | None]:
    snaps = noisy_cycles(60, 6, seed=7)
    settings = DriftSettings(n_permutations=2000, n_bootstrap=500, seed=3)
    out = compare(rolling_reference(snaps[:5], 10), snaps[5], settings, kind="rolling", depth=10)
    got = {k: (m.p_value, m.p_value_queries, m.ci_low, m.ci_high) for k, m in out.metrics.items()}
    assert out.change is not None and out.change.score_shift is not None
    return got, out.change.overlap_p_value, out.change.score_shift


def test_a_rolling_comparison_gives_the_numbers_it_gave_before_the_speed_ups() -> None:
    got, overlap_p, shift = _compare_once()
    assert set(got) == set(EXPECTED)
    for key, (p, p_queries, low, high) in EXPECTED.items():
        assert got[key][:2] == pytest.approx((p, p_queries), abs=1e-12), key
        assert got[key][2:] == pytest.approx((low, high), rel=1e-9, abs=1e-15), key
    assert overlap_p == pytest.approx(EXPECTED_OVERLAP_P, abs=1e-12)
    assert shift == pytest.approx(EXPECTED_SCORE_SHIFT, rel=1e-9)


def test_cached_bootstrap_counts_give_the_cold_numbers() -> None:
    scoring_stats._cache.clear()
    scoring_stats._intervals.clear()  # else the intervals come back without any counts
    cold, _, _ = _compare_once()
    assert scoring_stats._cache  # the counts were kept for the next cycle
    warm, _, _ = _compare_once()
    assert warm == cold


def test_pinned_noise_tests_give_the_numbers_they_gave_before() -> None:
    rng = np.random.default_rng(1)
    vals = rng.integers(0, 4, size=(40, 4)) / 4
    pools = {
        f"k{j}": Pool(
            [list(vals[i, :3]) for i in range(40)],
            [float(vals[i, 3]) - 0.1 * j * (i % 3 == 0) for i in range(40)],
            pinned_first=True,
        )
        for j in range(3)
    }
    tests = noise_tests(pools, n_resamples=3000, seed=5)
    for key, expected in EXPECTED_PINNED.items():
        t = tests[key]
        assert (t.p_value, t.p_raw, t.delta) == pytest.approx(expected, abs=1e-12), key
    vals_diff = list(vals[:, 0] - vals[:, 1])
    assert bootstrap_ci(vals_diff, n_resamples=700, seed=2) == pytest.approx(EXPECTED_BOOTSTRAP)


def test_the_matrix_product_sums_what_gathering_sums() -> None:
    rng = np.random.default_rng(0)
    flat = rng.random((300 * 6, 14))
    picks = np.arange(300)[None, :] * 6 + rng.integers(0, 6, size=(50, 300))
    gathered = flat[picks].sum(axis=1)
    assert drift_stats._picked_sums(flat, picks) == pytest.approx(gathered, rel=1e-12)


def test_many_columns_share_resamples_with_one_column_at_a_time() -> None:
    rng = np.random.default_rng(4)
    columns = {f"c{j}": list(rng.random(80)) for j in range(3)}
    together = bootstrap_cis(columns, n_resamples=400, seed=9)
    for name, values in columns.items():
        alone = bootstrap_ci(values, n_resamples=400, seed=9)
        assert together[name] == pytest.approx(alone, rel=1e-9)


def test_a_top_score_jitter_below_min_score_shift_is_not_tested() -> None:
    _, _, shift = _compare_once()
    snaps = noisy_cycles(60, 6, seed=7)
    settings = DriftSettings(n_permutations=2000, n_bootstrap=500, seed=3)
    out = compare(rolling_reference(snaps[:5], 10), snaps[5], settings, kind="rolling", depth=10)
    assert out.change is not None and shift is not None and abs(shift) < settings.min_score_shift
    assert out.change.score_p_value is None and not out.change.model_changed
