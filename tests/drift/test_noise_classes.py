"""The noise tests' class sums give what picking every query's sample one by one gives.

``reference_null`` is the plain computation: per draw, gather each query's picked
sample and sum (the random stream read as it always was, references drawn even when
unused). The tests compare every p-value on random pools, continuous and tied,
rolling and pinned, with queries of different sample counts and unmoving ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from benchd.drift import stats as drift_stats
from benchd.drift.stats import FloatArray, Pool, noise_tests, rbo


def reference_null(
    pools: Sequence[Pool], n: int, n_resamples: int, seed: int
) -> list[FloatArray]:
    count = len(pools[0].values)
    rows = [
        i
        for i in range(count)
        if any(max(*p.values[i], p.current[i]) - min(*p.values[i], p.current[i]) > 1e-9
               for p in pools)
    ]  # fmt: skip
    if not rows:
        return [np.zeros(n_resamples) for _ in pools]
    shapes = {tuple(len(p.values[i]) for i in rows) for p in pools}
    if len(shapes) > 1 or len({p.pinned_first for p in pools}) > 1:
        return [reference_null([p], n, n_resamples, seed)[0] for p in pools]
    sizes = np.array([len(pools[0].values[i]) + 1 for i in rows])
    values = np.zeros((len(rows), int(sizes.max()), len(pools)))
    for k, pool in enumerate(pools):
        for r, i in enumerate(rows):
            samples = pool.values[i]
            values[r, : len(samples), k] = samples
            values[r, len(samples), k] = pool.current[i]
    pinned = pools[0].pinned_first
    if not pinned:
        totals = values.sum(axis=1, keepdims=True)
        values = values - (totals - values) / np.maximum(sizes - 1, 1)[:, None, None]
    rng = np.random.default_rng(seed)
    chunk = max(1, drift_stats._CELLS_PER_CHUNK // (len(rows) * len(pools)))
    every = np.arange(len(rows))
    out = []
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        u, v = rng.random((size, len(rows))), rng.random((size, len(rows)))
        cur = np.minimum((u * sizes).astype(np.int64), sizes - 1)
        stat = values[every, cur].sum(axis=1)
        if pinned:
            other = np.minimum((v * (sizes - 1)).astype(np.int64), sizes - 2)
            stat = stat - values[every, other + (other >= cur)].sum(axis=1)
        out.append(stat / n)
    table = np.concatenate(out)
    return [table[:, k] for k in range(len(pools))]


def random_pools(
    rng: np.random.Generator, *, queries: int, keys: int, samples: int, pinned: bool,
    tied: bool, ragged: bool,
) -> dict[str, Pool]:  # fmt: skip
    lengths = rng.integers(2, samples + 1, queries) if ragged else np.full(queries, samples)
    base = rng.random((queries, keys))
    pools = {}
    for k in range(keys):
        values, current = [], []
        for i in range(queries):
            moves = rng.random(lengths[i] + 1) < 0.3
            drawn = np.where(moves, base[i, k] * 0.8, base[i, k])
            if tied:
                drawn = np.round(drawn * 4) / 4
            if i % 7 == 0:  # a query that never moves
                drawn[:] = drawn[0]
            values.append([float(x) for x in drawn[:-1]])
            current.append(float(drawn[-1]) - 0.05 * (k % 2))
        pools[f"k{k}"] = Pool(values, current, pinned_first=pinned)
    return pools


CASES = [
    # queries, keys, samples, pinned, tied, ragged
    (200, 14, 5, False, False, False),
    (150, 3, 5, False, True, False),
    (120, 6, 4, True, True, False),
    (90, 2, 6, True, False, False),
    (100, 5, 5, False, False, True),
    (80, 1, 3, False, True, False),
]


@pytest.mark.parametrize(("queries", "keys", "samples", "pinned", "tied", "ragged"), CASES)
def test_class_sums_give_the_plain_p_values(
    monkeypatch: pytest.MonkeyPatch,
    queries: int, keys: int, samples: int, pinned: bool, tied: bool, ragged: bool,
) -> None:  # fmt: skip
    monkeypatch.setattr(drift_stats, "_CELLS_PER_CHUNK", 1 << 12)  # many chunks and blocks
    monkeypatch.setattr(drift_stats, "_BLOCK_CELLS", 1 << 14)
    rng = np.random.default_rng(queries * 31 + keys)
    pools = random_pools(rng, queries=queries, keys=keys, samples=samples, pinned=pinned,
                         tied=tied, ragged=ragged)  # fmt: skip
    for two_sided in (False, True):
        got = noise_tests(pools, n_resamples=1500, seed=11, two_sided=two_sided)
        with monkeypatch.context() as patch:
            patch.setattr(drift_stats, "_null", reference_null)
            want = noise_tests(pools, n_resamples=1500, seed=11, two_sided=two_sided)
        assert got == want
        assert any(t.p_raw < 1.0 for t in got.values())  # the draws did move something


def test_keys_with_different_sample_counts_are_drawn_apart_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    pools = random_pools(rng, queries=60, keys=2, samples=4, pinned=False, tied=False,
                         ragged=False)  # fmt: skip
    short = pools["k1"]
    pools["k1"] = Pool([v[:2] for v in short.values], short.current)
    got = noise_tests(pools, n_resamples=800, seed=2)
    monkeypatch.setattr(drift_stats, "_null", reference_null)
    assert got == noise_tests(pools, n_resamples=800, seed=2)


def test_equal_rankings_overlap_exactly_as_the_loop_gives() -> None:
    for k in range(1, 25):
        ids = [f"d{i}" for i in range(k)]
        assert rbo(ids, list(ids), 30) == drift_stats._rbo(ids, list(ids), k, 0.9)
    assert rbo(["a", "a", "b"], ["a", "a", "b"], 10) == drift_stats._rbo(
        ["a", "a", "b"], ["a", "a", "b"], 3, 0.9
    )


def plain_rbo(a: list[str], b: list[str], k: int, p: float) -> float:
    """The loop over every rank, without skipping the ranks where both agree."""
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    overlap, total, weight = 0, 0.0, 1.0
    for d in range(1, k + 1):
        x = a[d - 1] if d <= len(a) else None
        y = b[d - 1] if d <= len(b) else None
        if x is not None:
            overlap += x in seen_b or x == y
            seen_a.add(x)
        if y is not None and y != x:
            overlap += y in seen_a
            seen_b.add(y)
        elif y is not None:
            seen_b.add(y)
        weight *= p
        total += overlap / d * weight
    return min(1.0, overlap / k * p**k + (1.0 - p) / p * total)


def test_overlap_of_rankings_sharing_a_head_is_what_the_plain_loop_gives() -> None:
    rng = np.random.default_rng(12)
    checked = 0
    for trial in range(3000):
        pool = [f"d{i}" for i in range(int(rng.integers(2, 14)))]
        a = [str(x) for x in rng.permutation(pool)]
        b = list(a)
        w = int(rng.integers(1, len(b)))
        b[w - 1], b[w] = b[w], b[w - 1]  # a swap after a shared head
        if trial % 3 == 1:
            b = b[: int(rng.integers(1, len(b) + 1))]
        if trial % 3 == 2:  # repeated ids
            a = [str(x) for x in rng.choice(pool, len(pool))]
        depth = int(rng.integers(1, 16))
        p = float(rng.choice([0.5, 0.9, 0.95]))
        head_a, head_b = a[:depth], b[:depth]
        if head_a == head_b:
            continue
        k = max(len(head_a), len(head_b))
        assert rbo(tuple(a), tuple(b), depth, p) == plain_rbo(head_a, head_b, k, p)
        checked += 1
    assert checked > 2000
