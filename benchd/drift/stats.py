"""Noise math for drift: is a change beyond what an unchanged system does by itself?

Pure functions over plain numbers; no I/O, no clocks; seeded, so the same
inputs give the same answer. docs/drift.md derives all of it; in short, for
one metric@k over ``n`` queries:

- query ``i`` has reference samples (the rolling window's cycles, a pinned
  baseline's repeats, or a pinned value followed by later unflagged cycles)
  and the current cycle's value ``y_i``; the statistic is the mean paired
  change ``delta = mean_i(y_i - ref_i)``;
- with no change, ``y_i`` is exchangeable with query ``i``'s samples: any
  of them could have been "the current one". :func:`noise_tests` redraws
  that choice per query, independently, many times, which gives the
  distribution of ``delta`` that the system's own noise produces, whatever
  its shape (a few big rank flips are not a bell curve);
- all keys are tested on the same draws, and the p-values are adjusted
  over keys by Westfall & Young's min-P, so "any metric@k flagged" happens
  in at most ``alpha`` of unchanged cycles (one false page per cycle).

:func:`rbo` is rank-biased overlap (Webber, Moffat & Zobel 2010), the
extrapolated form for two top-k prefixes: the label-free "did the rankings
change" signal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["RBO_PERSISTENCE", "NoiseTest", "Pool", "noise_tests", "rbo"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
RBO_PERSISTENCE = 0.9  # weight of rank d+1 relative to rank d; the top 10 carry ~86 %
_TOLERANCE = 1e-9  # float rounding of means of ratios
_CELLS_PER_CHUNK = 1 << 20  # draws x queries per chunk: bounds memory at ~8 MiB a matrix
_MATMUL_KEYS = 4  # from this many keys a 0/1 matrix product beats gathering (_picked_sums)


@dataclass(frozen=True, slots=True)
class Pool:
    """One metric@k's reference samples, per query, for :func:`noise_tests`.

    ``values[i]`` holds query ``i``'s reference samples (the rolling window,
    a baseline's repeats, or a pinned value followed by later unflagged
    cycles) and ``current[i]`` this cycle's value. With ``pinned_first``
    the reference is ``values[i][0]`` alone and the other samples only
    measure noise; otherwise the reference is the mean of all samples.
    """

    values: Sequence[Sequence[float]]
    current: Sequence[float]
    pinned_first: bool = False

    def delta(self) -> float:
        """Mean over queries of current minus reference."""
        refs = [v[0] if self.pinned_first else math.fsum(v) / len(v) for v in self.values]
        n = len(refs)
        return math.fsum(c - r for c, r in zip(self.current, refs, strict=True)) / n if n else 0.0

    def moved(self) -> bool:
        """Whether any query's reference samples disagree (the system showed noise)."""
        return any(max(v) - min(v) > _TOLERANCE for v in self.values if v)


@dataclass(frozen=True, slots=True)
class NoiseTest:
    """One metric's change against its reference, and how unusual it is for noise."""

    delta: float  # mean over queries of (current - reference)
    p_value: float  # P(a change this low | no change), adjusted over every key tested at once
    p_raw: float  # the same for this key alone
    n: int


def _matrix(pool: Pool, rows: IntArray) -> tuple[FloatArray, IntArray]:
    """The chosen rows' values padded to one matrix, current value last; and each row's size."""
    sizes = np.array([len(pool.values[i]) + 1 for i in rows], dtype=np.int64)
    out = np.zeros((len(rows), int(sizes.max(initial=2))), dtype=np.float64)
    for row, i in enumerate(rows):
        samples = pool.values[i]
        out[row, : len(samples)] = samples
        out[row, len(samples)] = pool.current[i]
    return out, sizes


def _moving_rows(pools: Sequence[Pool]) -> IntArray:
    """Queries whose values (samples and current) differ in some key; the rest add 0 always."""
    n = len(pools[0].values)
    moving = [
        i
        for i in range(n)
        if any(
            max(*p.values[i], p.current[i]) - min(*p.values[i], p.current[i]) > _TOLERANCE
            for p in pools
        )
    ]
    return np.array(moving, dtype=np.int64)


def _stacked(pools: Sequence[Pool], rows: IntArray) -> tuple[FloatArray, IntArray]:
    """All keys' values as one (queries, samples + 1, keys) array, and each query's size."""
    parts = [_matrix(p, rows) for p in pools]
    sizes = parts[0][1]
    width = max(m.shape[1] for m, _ in parts)
    stacked = np.zeros((rows.size, width, len(pools)), dtype=np.float64)
    for k, (matrix, _) in enumerate(parts):
        stacked[:, : matrix.shape[1], k] = matrix
    return stacked, sizes


def _null(pools: Sequence[Pool], n: int, n_resamples: int, seed: int) -> list[FloatArray]:
    """Each pool's statistic under ``n_resamples`` relabelings shared by all pools.

    Per query, the values of every key sit side by side, so one draw of
    "which sample is current" gathers all keys at once; with ``pinned_first``
    the reference is one other sample, drawn among the rest.
    """
    rows = _moving_rows(pools)
    if rows.size == 0:
        return [np.zeros(n_resamples) for _ in pools]
    shapes = {tuple(len(p.values[i]) for i in rows) for p in pools}
    if len(shapes) > 1 or len({p.pinned_first for p in pools}) > 1:
        # keys with different samples per query cannot share a draw: test them apart
        return [_null([p], n, n_resamples, seed)[0] for p in pools]
    values, sizes = _stacked(pools, rows)
    width, keys = values.shape[1], values.shape[2]
    pinned = pools[0].pinned_first
    if not pinned:  # current minus the mean of the others, for each choice of current
        totals = values.sum(axis=1, keepdims=True)
        others = np.maximum(sizes - 1, 1)[:, None, None]
        values = values - (totals - values) / others
    flat = values.reshape(rows.size * width, keys)
    base = (np.arange(rows.size) * width)[None, :]
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // (rows.size * keys))
    out: list[FloatArray] = []
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        u, v = rng.random((size, rows.size)), rng.random((size, rows.size))
        cur = np.minimum((u * sizes).astype(np.int64), sizes - 1)
        stat = _picked_sums(flat, base + cur)
        if pinned:
            other = np.minimum((v * (sizes - 1)).astype(np.int64), sizes - 2)
            stat = stat - _picked_sums(flat, base + other + (other >= cur))
        out.append(stat / n)
    table = np.concatenate(out)  # (n_resamples, keys)
    return [np.ascontiguousarray(table[:, k]) for k in range(keys)]


def _picked_sums(flat: FloatArray, picks: IntArray) -> FloatArray:
    """``flat[picks].sum(axis=1)``: per draw, the sum over queries of the picked rows.

    With several keys the gather copies draws x queries x keys values; as a
    product of a 0/1 matrix (one 1 per query in each draw's row) with
    ``flat`` it is one BLAS call, far faster, in pieces of bounded size.
    """
    keys = flat.shape[1]
    if keys < _MATMUL_KEYS:
        return np.asarray(flat[picks].sum(axis=1), dtype=np.float64)
    draws = picks.shape[0]
    out = np.empty((draws, keys), dtype=np.float64)
    step = max(1, _CELLS_PER_CHUNK // flat.shape[0])
    for start in range(0, draws, step):
        part = picks[start : start + step]
        chosen = np.zeros((part.shape[0], flat.shape[0]), dtype=np.float64)
        np.put_along_axis(chosen, part, 1.0, axis=1)
        out[start : start + part.shape[0]] = chosen @ flat
    return out


def _tail(null: FloatArray, edge: float, two_sided: bool) -> tuple[float, FloatArray]:
    """This key's p-value at ``edge``, and the p-value of every draw (for min-P)."""
    b = null.size
    if two_sided:
        mags = np.sort(np.abs(null))
        count = b - np.searchsorted(mags, abs(edge) - _TOLERANCE, side="left")
        each = (b - np.searchsorted(mags, np.abs(null) - _TOLERANCE, side="left")) / b
    else:  # a drop: the lower tail; ties count against the change
        ordered = np.sort(null)
        count = np.searchsorted(ordered, edge + _TOLERANCE, side="right")
        each = np.searchsorted(ordered, null + _TOLERANCE, side="right") / b
    return (1.0 + float(count)) / (b + 1.0), each


def noise_tests(
    pools: Mapping[str, Pool], *, n_resamples: int, seed: int, two_sided: bool = False
) -> dict[str, NoiseTest]:
    """Per-query relabeling tests of every key at once, family-wise adjusted (min-P).

    Under no change, each query's current value is exchangeable with its
    reference samples: the test draws, for every query independently, which
    of its values plays "current", ``n_resamples`` times (one set of draws
    shared by all keys, so the keys' correlation is kept). A key's raw
    p-value is the share of draws whose statistic is at most the observed
    one; the adjusted p-value is the share of draws whose *smallest* raw
    p-value over all keys is at most this key's (Westfall & Young's single-
    step min-P), so flagging keys with adjusted p < alpha pages falsely in
    at most alpha of unchanged cycles, whatever the number of keys.
    ``two_sided`` tests the absolute change instead. All pools must hold
    the same queries in the same order.
    """
    keys = [k for k, p in pools.items() if p.values]
    if not keys:
        return {}
    n = len(pools[keys[0]].values)
    nulls = _null([pools[k] for k in keys], n, n_resamples, seed)
    raw: dict[str, float] = {}
    min_p = np.ones(n_resamples)
    for key, null in zip(keys, nulls, strict=True):
        raw[key], each = _tail(null, pools[key].delta(), two_sided)
        np.minimum(min_p, each, out=min_p)
    sorted_min = np.sort(min_p)
    out: dict[str, NoiseTest] = {}
    for key in keys:
        below = np.searchsorted(sorted_min, raw[key] + _TOLERANCE, side="right")
        adjusted = max(raw[key], (1.0 + float(below)) / (n_resamples + 1.0))
        out[key] = NoiseTest(pools[key].delta(), min(adjusted, 1.0), raw[key], n)
    return out


def rbo(
    first: Sequence[str], second: Sequence[str], depth: int, p: float = RBO_PERSISTENCE
) -> float:
    """Extrapolated rank-biased overlap of two rankings' top ``depth`` (1 = same order).

    RBO_ext = X_k/k * p^k + (1-p)/p * sum_{d<=k} X_d/d * p^d, where X_d is
    the size of the intersection of the two top-d prefixes (Webber et al.
    2010, eq. 32, with both lists cut at ``k = depth``). Two empty lists
    agree (1.0); an empty list against a non-empty one shares nothing (0.0).
    """
    a, b = list(first[:depth]), list(second[:depth])
    k = max(len(a), len(b))
    if k == 0:
        return 1.0
    if not a or not b:
        return 0.0
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    overlap = 0
    total = 0.0
    weight = 1.0
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
