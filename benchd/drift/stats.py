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

import functools
import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from benchd.scoring.stats import decided_above, looks

__all__ = ["RBO_PERSISTENCE", "NoiseTest", "Pool", "noise_tests", "rbo"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
RBO_PERSISTENCE = 0.9  # weight of rank d+1 relative to rank d; the top 10 carry ~86 %
_TOLERANCE = 1e-9  # float rounding of means of ratios
_CELLS_PER_CHUNK = 1 << 20  # draws x queries per chunk: bounds memory at ~8 MiB a matrix


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
    known: Sequence[float] | None = None  # what :meth:`references` gives, if computed already

    def references(self) -> list[float]:
        """Each query's reference: its first sample when pinned, else its samples' mean."""
        if self.known is not None:
            return list(self.known)
        if self.pinned_first:
            return [v[0] for v in self.values]
        sums, counts = map(math.fsum, self.values), map(len, self.values)
        return [t / c for t, c in zip(sums, counts, strict=True)]

    def delta(self) -> float:
        """Mean over queries of current minus reference."""
        refs = self.references()
        n = len(refs)
        if len(self.current) != n:
            raise ValueError(f"{len(self.current)} current values for {n} queries")
        return math.fsum(map(operator.sub, self.current, refs)) / n if n else 0.0

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
    draws: int = 0  # relabelings drawn (fewer than asked when stopped early)


def _lengths(pool: Pool) -> IntArray:
    """Each query's number of reference samples."""
    return np.fromiter(map(len, pool.values), dtype=np.int64, count=len(pool.values))


def _matrix(pool: Pool, lengths: IntArray) -> FloatArray:
    """Every query's samples padded to one matrix, current value after them."""
    n = lengths.size
    width = int(lengths.max(initial=1)) + 1
    if n and bool(np.all(lengths == lengths[0])):  # the usual case: one numpy conversion
        out = np.empty((n, width), dtype=np.float64)
        flat = itertools.chain.from_iterable(pool.values)
        out[:, :-1] = np.fromiter(flat, np.float64, n * (width - 1)).reshape(n, width - 1)
        out[:, -1] = pool.current
        return out
    out = np.zeros((n, width), dtype=np.float64)
    for row, samples in enumerate(pool.values):
        out[row, : len(samples)] = samples
        out[row, len(samples)] = pool.current[row]
    return out


def _spread(matrix: FloatArray, lengths: IntArray) -> npt.NDArray[np.bool_]:
    """Per query, whether its values (samples and current) differ by more than rounding."""
    drawn = np.arange(matrix.shape[1])[None, :] <= lengths[:, None]
    high = np.where(drawn, matrix, -np.inf).max(axis=1)
    low = np.where(drawn, matrix, np.inf).min(axis=1)
    return np.asarray(high - low > _TOLERANCE)


def _stacked(pools: Sequence[Pool]) -> tuple[FloatArray, IntArray, IntArray] | None:
    """The moving queries (whose values differ in some key; the rest add 0 always): every
    key's values as one (queries, samples + 1, keys) array, each one's size, and which
    queries they are; None when keys differ in samples per moving query."""
    lengths = [_lengths(p) for p in pools]
    matrices = [_matrix(p, n) for p, n in zip(pools, lengths, strict=True)]
    moving = np.zeros(lengths[0].size, dtype=np.bool_)
    for matrix, n in zip(matrices, lengths, strict=True):
        moving |= _spread(matrix, n)
    rows = np.flatnonzero(moving)
    if any(not np.array_equal(n[rows], lengths[0][rows]) for n in lengths[1:]):
        return None
    width = max(m.shape[1] for m in matrices)
    stacked = np.zeros((rows.size, width, len(pools)), dtype=np.float64)
    for k, matrix in enumerate(matrices):
        stacked[:, : matrix.shape[1], k] = matrix[rows]
    return stacked, lengths[0][rows] + 1, rows


def _null(pools: Sequence[Pool], n: int, n_resamples: int, seed: int) -> list[FloatArray]:
    """Each pool's statistic under ``n_resamples`` relabelings shared by all pools."""
    table = np.concatenate(list(_null_blocks(pools, n, n_resamples, seed)))
    return [np.ascontiguousarray(table[:, k]) for k in range(len(pools))]


def _null_blocks(
    pools: Sequence[Pool], n: int, n_resamples: int, seed: int
) -> Iterator[FloatArray]:
    """The pools' statistics under ``n_resamples`` relabelings shared by all pools, a
    (draws, pools) block at a time, in the order of the draws.

    Per query, the values of every key sit side by side, so one draw of
    "which sample is current" picks all keys at once; with ``pinned_first``
    the reference is one other sample, drawn among the rest.
    """
    stacked = _stacked(pools) if len({p.pinned_first for p in pools}) == 1 else None
    if stacked is None:
        # keys with different samples per query cannot share a draw: test them apart
        yield np.column_stack([_null([p], n, n_resamples, seed)[0] for p in pools])
        return
    values, sizes, rows = stacked
    if rows.size == 0:
        yield np.zeros((n_resamples, len(pools)))
        return
    pinned = pools[0].pinned_first
    if not pinned:  # current minus the mean of the others, for each choice of current
        totals = values.sum(axis=1, keepdims=True)
        others = np.maximum(sizes - 1, 1)[:, None, None]
        values = values - (totals - values) / others
    classes = _Classes.of(values, sizes)
    for _, cur, other in _draws(sizes, n_resamples, values.shape[2], seed, pinned=pinned):
        stat = classes.sums(cur)
        if other is not None:
            stat -= classes.sums(other)
        yield stat / n


_BLOCK_CELLS = 1 << 18  # draws x queries summed at once: arrays of 1-2 MiB, near the CPU


def _draws(
    sizes: IntArray, n_resamples: int, keys: int, seed: int, *, pinned: bool
) -> Iterator[tuple[int, Int32Array, Int32Array | None]]:
    """Blocks of draws: the first draw's number, each query's current sample, and with
    ``pinned`` its reference sample (another one).

    The random stream is read exactly as it always was (per chunk of
    ``_CELLS_PER_CHUNK // (queries x keys)`` draws, the current samples' numbers, then
    the references'), so the same seed draws the same relabelings; without ``pinned``
    the references' numbers are skipped over, not drawn.
    """
    rows = sizes.size
    top = (sizes - 1).astype(np.int32)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // (rows * keys))
    block = max(chunk, _BLOCK_CELLS // rows // chunk * chunk)
    for first in range(0, n_resamples, block):
        count = min(block, n_resamples - first)
        u = np.empty((count, rows), dtype=np.float64)
        v = np.empty((count, rows), dtype=np.float64) if pinned else None
        for at in range(0, count, chunk):
            size = min(chunk, count - at)
            rng.random(out=u[at : at + size])
            if v is not None:
                rng.random(out=v[at : at + size])
            else:
                rng.bit_generator.advance(size * rows)  # type: ignore[attr-defined]
        np.multiply(u, sizes, out=u)
        cur = u.astype(np.int32)
        np.minimum(cur, top, out=cur)
        if v is None:
            yield first, cur, None
            continue
        np.multiply(v, sizes - 1, out=v)
        other = v.astype(np.int32)
        np.minimum(other, top - 1, out=other)
        other += other >= cur
        yield first, cur, other


@dataclass(frozen=True, slots=True)
class _Classes:
    """Each query's samples grouped into classes of equal values (all keys equal).

    A store's noise moves a query between few distinct readings (a pair of
    results swapped or not), so summing the picked values over queries is the
    sum of class 0's values plus, per other class ``c``, a 0/1 matrix (the
    draws that picked it) times the class's difference from class 0.
    """

    base: FloatArray  # (keys,): every query's class-0 values summed
    index: npt.NDArray[np.int16]  # (queries x samples,): the class of each sample
    offsets: npt.NDArray[np.int32]  # (queries,): where each query's samples start in ``index``
    steps: tuple[FloatArray, ...]  # per class c >= 1: (queries, keys) its values - class 0's
    flags: FloatArray  # ``index`` as floats (with two classes, the 0/1 matrix's entries)

    @classmethod
    def of(cls, values: FloatArray, sizes: IntArray) -> _Classes:
        rows, width, keys = values.shape
        reps = np.zeros((width, rows, keys), dtype=np.float64)
        reps[0] = values[:, 0, :]
        count = np.ones(rows, dtype=np.int64)
        index = np.zeros((rows, width), dtype=np.int16)
        every = np.arange(rows)
        for j in range(1, width):
            drawn = j < sizes
            sample = values[:, j, :]
            found = np.full(rows, -1, dtype=np.int64)
            for c in range(int(count.max())):
                same = drawn & (found < 0) & (c < count) & np.all(sample == reps[c], axis=1)
                found[same] = c
            new = drawn & (found < 0)
            found[new] = count[new]
            reps[count[new], every[new]] = sample[new]
            count[new] += 1
            index[:, j] = np.where(drawn, found, 0)
        steps = []
        for c in range(1, int(count.max())):
            step = reps[c] - reps[0]
            step[count <= c] = 0.0
            steps.append(step)
        offsets = (every * width).astype(np.int32)
        flat = index.ravel()
        return cls(reps[0].sum(axis=0), flat, offsets, tuple(steps), flat.astype(np.float64))

    def sums(self, picks: Int32Array) -> FloatArray:
        """Per draw (row of ``picks``: each query's sample), the picked values summed."""
        out = np.broadcast_to(self.base, (picks.shape[0], self.base.size)).copy()
        if not self.steps:
            return out
        at = self.offsets + picks
        if len(self.steps) == 1:  # classes 0 and 1: the class is the 0/1 flag
            out += self.flags[at] @ self.steps[0]
            return out
        picked = self.index[at]
        for c, step in enumerate(self.steps, start=1):
            out += _picked_sums(step, picked == c)
        return out


def _picked_sums(flat: FloatArray, picks: IntArray | npt.NDArray[np.bool_]) -> FloatArray:
    """Per draw, the sum over queries of the picked rows of ``flat``.

    ``picks`` holds either each query's row of ``flat`` (one per query) or
    0/1 flags over the rows (a draw's queries that picked a class); the
    former is turned into the latter. Their product with ``flat`` is one BLAS
    call, 5-20x faster than gathering draws x queries x keys values.
    """
    chosen = picks
    if picks.dtype != np.bool_:
        chosen = np.zeros((picks.shape[0], flat.shape[0]), dtype=np.bool_)
        np.put_along_axis(chosen, picks.astype(np.int64), True, axis=1)
    return np.asarray(chosen.astype(np.float64) @ flat, dtype=np.float64)


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
    pools: Mapping[str, Pool],
    *,
    n_resamples: int,
    seed: int,
    two_sided: bool = False,
    alpha: float | None = None,
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

    With ``alpha``, the draws stop at the first look (see
    :func:`benchd.scoring.stats.looks`) where every key's raw p-value is
    decided above ``alpha`` (:func:`benchd.scoring.stats.decided_above`); the
    adjusted p-value is never below the raw one, so no key would be flagged
    had the draws gone on, except with probability ``STOP_RISK``. The p-values
    are then those of the draws made: what ``n_resamples`` equal to that
    number gives, the same seed drawing the same first relabelings.
    """
    keys = [k for k, p in pools.items() if p.values]
    if not keys:
        return {}
    n = len(pools[keys[0]].values)
    deltas = {key: pools[key].delta() for key in keys}
    chosen = [pools[k] for k in keys]
    if alpha is None:
        nulls = _null(chosen, n, n_resamples, seed)
    else:
        edges = np.array([deltas[k] for k in keys])
        nulls = _sequential(_null_blocks(chosen, n, n_resamples, seed), edges,
                            n_resamples, alpha, two_sided)  # fmt: skip
    return _adjusted(keys, nulls, deltas, two_sided, n)


def _exceed(table: FloatArray, edges: FloatArray, two_sided: bool) -> IntArray:
    """Per key (column), the draws at least as extreme as its observed change."""
    if two_sided:
        return np.asarray(np.count_nonzero(np.abs(table) >= np.abs(edges) - _TOLERANCE, axis=0))
    beyond = table <= edges + _TOLERANCE
    return np.asarray(np.count_nonzero(beyond, axis=0), dtype=np.int64)


def _sequential(
    blocks: Iterator[FloatArray], edges: FloatArray, n_resamples: int, alpha: float,
    two_sided: bool,
) -> list[FloatArray]:  # fmt: skip
    """The null tables of the draws made until every key is decided above ``alpha``."""
    table = np.empty((n_resamples, edges.size), dtype=np.float64)
    pending = iter(looks(n_resamples))
    look = next(pending, n_resamples)
    hits = np.zeros(edges.size, dtype=np.int64)
    done = 0
    for block in blocks:
        table[done : done + block.shape[0]] = block
        hits += _exceed(block, edges, two_sided)
        done += block.shape[0]
        if done < look or done >= n_resamples:
            continue
        if bool(np.all(hits >= decided_above(done, alpha, n_resamples))):
            break
        while look <= done:
            look = next(pending, n_resamples)
    return [np.ascontiguousarray(table[:done, k]) for k in range(edges.size)]


def _adjusted(
    keys: Sequence[str], nulls: Sequence[FloatArray], deltas: Mapping[str, float],
    two_sided: bool, n: int,
) -> dict[str, NoiseTest]:  # fmt: skip
    """Each key's raw and min-P adjusted p-value over the draws in ``nulls``."""
    draws = nulls[0].size
    raw: dict[str, float] = {}
    min_p = np.ones(draws)
    for key, null in zip(keys, nulls, strict=True):
        raw[key], each = _tail(null, deltas[key], two_sided)
        np.minimum(min_p, each, out=min_p)
    sorted_min = np.sort(min_p)
    out: dict[str, NoiseTest] = {}
    for key in keys:
        below = np.searchsorted(sorted_min, raw[key] + _TOLERANCE, side="right")
        adjusted = max(raw[key], (1.0 + float(below)) / (draws + 1.0))
        out[key] = NoiseTest(deltas[key], min(adjusted, 1.0), raw[key], n, draws)
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
    head_a, head_b = first[:depth], second[:depth]
    if head_a == head_b and head_a:  # the usual case between two cycles (tuples, cheaply)
        return _rbo_equal(len(head_a), p)
    a, b = list(head_a), list(head_b)
    k = max(len(a), len(b))
    if k == 0:
        return 1.0
    if not a or not b:
        return 0.0
    if a == b:  # what the loop gives any k equal ids
        return _rbo_equal(k, p)
    return _rbo(a, b, k, p)


@functools.lru_cache(maxsize=64)
def _rbo_equal(k: int, p: float) -> float:
    same = [str(i) for i in range(k)]
    return _rbo(same, same, k, p)


@functools.lru_cache(maxsize=64)
def _agreeing(k: int, p: float) -> tuple[tuple[float, float], ...]:
    """After ``d`` ranks on which two rankings agree: the loop's weight and running total."""
    out = [(1.0, 0.0)]
    weight, total = 1.0, 0.0
    for d in range(1, k + 1):
        weight *= p
        total += d / d * weight
        out.append((weight, total))
    return tuple(out)


def _rbo(a: list[str], b: list[str], k: int, p: float) -> float:
    same = 0  # the ranks where both agree come first: the loop's state after them is known
    for first, second in zip(a, b, strict=False):
        if first != second:
            break
        same += 1
    seen_a: set[str] = set(a[:same])
    seen_b: set[str] = set(b[:same])
    overlap = same
    weight, total = _agreeing(k, p)[same]
    for d in range(same + 1, k + 1):
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
