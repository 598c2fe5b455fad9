"""Validity and speed of benchd's drift statistics, by simulation.

Run: ``.venv/bin/python bench/drift_sim.py [--cycles 1000] [--trials 1000]``

The simulated store answers each labeled query with a recall@10 that is a
fixed property of the query (it has 1-3 relevant ids, of which a fixed number
rank in the top 10), plus optional per-cycle noise: with probability
``flip`` a query gains or loses one relevant id at the cut-off (ANN
non-determinism, concurrent writes). An "embedding-model change" makes
queries lose relevant ids until the true mean recall@10 drops by the given
number of points. Printed, in one run:

1. false alarms: the share of 1,000 cycles with no change that
   :class:`benchd.drift.tracker.DriftTracker` (rolling window of 5, and a pinned
   baseline) flags as drift;
2. power: the share of trials in which a change is flagged on the first
   cycle after it;
3. coverage of bootstrap 95% CIs of the mean over 1,000 trials, benchd's
   expanded percentile interval beside the plain percentile one and
   ``scipy.stats.bootstrap`` (BCa) when scipy is installed;
4. speed: one cycle's CIs and drift tests (21 metric@k keys x 1,000 queries),
   and single calls beside scipy's ``bootstrap`` and ``permutation_test``.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import structlog

from benchd.drift.baseline import baseline_from_result
from benchd.drift.tracker import DriftSettings, DriftTracker, compare_runs
from benchd.result import CycleResult, QueryResult
from benchd.scoring.stats import bootstrap_ci, bootstrap_cis, paired_permutation_test

Array = np.ndarray


class Store:
    """Per-query relevant counts and how many of them a deterministic store finds."""

    def __init__(self, n: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.relevant = self.rng.choice([1, 2, 3], size=n, p=[0.5, 0.3, 0.2])
        share = self.rng.beta(3.0, 1.2, size=n)  # most queries find most of their ids
        self.found = np.rint(share * self.relevant).astype(int)

    def true_mean(self, found: Array | None = None) -> float:
        return float(np.mean((self.found if found is None else found) / self.relevant))

    def cycle(self, flip: float, found: Array | None = None) -> Array:
        """One cycle's recall@10 per query, with the per-cycle noise."""
        base = self.found if found is None else found
        moves = (self.rng.random(base.size) < flip) * self.rng.choice([-1, 1], size=base.size)
        return np.clip(base + moves, 0, self.relevant) / self.relevant

    def degrade(self, points: float) -> Array:
        """Found counts after a change that costs ``points`` of true mean recall@10."""
        found = self.found.copy()
        order = self.rng.permutation(found.size)
        for i in order:
            if self.true_mean(found) <= self.true_mean() - points + 1e-12:
                break
            if found[i] > 0:
                found[i] -= 1
        return found


def _result(values: Array, cycle: int) -> CycleResult:
    queries = tuple(
        QueryResult(f"q{i}", "", None, (f"d{i}",), (), {"recall@10": float(v)})
        for i, v in enumerate(values)
    )
    return CycleResult(
        probe="sim",
        target="sim",
        corpus="sim",
        cycle=cycle,
        started_at=0.0,
        finished_at=0.0,
        outcome="success",
        phases={},
        ks=(10,),
        queries=queries,
        fixture_hash="h",
    )


SETTINGS = DriftSettings(metrics=("recall",), n_permutations=2000, n_bootstrap=200)


def false_alarms(n: int, flip: float, cycles: int, pinned: bool) -> float:
    """Share of no-change cycles flagged, against a rolling window or a pinned baseline."""
    store = Store(n, seed=n + int(flip * 1000))
    baseline = baseline_from_result(_result(store.cycle(flip), 0)) if pinned else None
    tracker = DriftTracker("sim", replace(SETTINGS, rolling_window=0 if pinned else 5), baseline)
    flagged = sum(
        tracker.observe(_result(store.cycle(flip), c))["detected"] for c in range(1, cycles + 1)
    )
    return flagged / cycles


def power(n: int, flip: float, points: float, trials: int, min_delta: float = 0.05) -> float:
    """Share of trials whose first cycle after a change of ``points`` is flagged."""
    settings = replace(SETTINGS, min_delta=min_delta)
    hits = 0
    for trial in range(trials):
        store = Store(n, seed=10_000 + trial)
        tracker = DriftTracker("sim", settings)
        for c in range(5):
            tracker.observe(_result(store.cycle(flip), c))
        changed = store.degrade(points)
        hits += tracker.observe(_result(store.cycle(flip, changed), 5))["detected"]
    return hits / trials


def coverage(n: int, trials: int, ci: Callable[[Array, int], tuple[float, float]]) -> float:
    """Share of trials whose CI of the mean covers the store's true mean recall@10."""
    store = Store(5000, seed=7)
    population = store.found / store.relevant
    truth = float(population.mean())
    rng = np.random.default_rng(n)
    covered = 0
    for trial in range(trials):
        low, high = ci(rng.choice(population, size=n), trial)
        covered += low <= truth <= high
    return covered / trials


def _scipy_bca(sample: Array, seed: int) -> tuple[float, float]:
    from scipy import stats

    res = stats.bootstrap((sample,), np.mean, n_resamples=2000, method="BCa", random_state=seed)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _timed(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _speed() -> None:
    rng = np.random.default_rng(0)
    names = DriftSettings().metrics
    columns = {f"{m}@{k}": rng.random(1000) for m in names for k in (1, 5, 10)}
    after = {k: v - rng.random(1000) * 0.02 for k, v in columns.items()}
    qids = [f"q{i}" for i in range(1000)]
    before_q = {q: {k: float(v[i]) for k, v in columns.items()} for i, q in enumerate(qids)}
    after_q = {q: {k: float(v[i]) for k, v in after.items()} for i, q in enumerate(qids)}
    settings = DriftSettings()
    print("\n4. speed (best of 5, 1,000 queries)")
    t_cis = _timed(lambda: bootstrap_cis(columns))
    t_loop = _timed(lambda: [bootstrap_ci(v) for v in columns.values()])
    t_cmp = _timed(lambda: compare_runs(before_q, after_q, settings), repeat=3)
    print(f"   bootstrap CIs, 21 keys batched        {t_cis * 1e3:8.1f} ms")
    print(f"   bootstrap CIs, 21 single calls        {t_loop * 1e3:8.1f} ms")
    print(f"   compare_runs, 21 keys (test + CI)     {t_cmp * 1e3:8.1f} ms")
    one, two = columns["recall@10"], after["recall@10"]
    t_boot = _timed(lambda: bootstrap_ci(one))
    t_perm = _timed(lambda: paired_permutation_test(one, two))
    try:
        from scipy import stats
    except ImportError:
        print("   (scipy not installed: no peer figures)")
        return
    t_sboot = _timed(
        lambda: stats.bootstrap((one,), np.mean, n_resamples=2000, method="percentile")
    )
    t_sperm = _timed(
        lambda: stats.permutation_test(
            (two - one,), np.mean, permutation_type="samples", n_resamples=10000
        )
    )
    print(
        f"   bootstrap_ci, 2,000 resamples         {t_boot * 1e3:8.1f} ms   "
        f"scipy.stats.bootstrap {t_sboot * 1e3:8.1f} ms   ratio {t_sboot / t_boot:5.1f}x"
    )
    print(
        f"   permutation test, 10,000 resamples    {t_perm * 1e3:8.1f} ms   "
        f"scipy.stats.permutation_test {t_sperm * 1e3:8.1f} ms   ratio {t_sperm / t_perm:5.1f}x"
    )


def _report(sizes: Sequence[int], cycles: int, trials: int) -> None:
    print(f"1. false alarms over {cycles} cycles with no change (want <= 1%)")
    print("   queries  noise   rolling(5)  pinned")
    for n in sizes:
        for flip in (0.0, 0.05, 0.2):
            rolling = false_alarms(n, flip, cycles, pinned=False)
            pinned = false_alarms(n, flip, cycles, pinned=True)
            print(f"   {n:7d}  {flip:5.2f}   {rolling:9.1%}  {pinned:6.1%}")
    power_trials = max(trials // 5, 20)
    print(f"\n2. flagged on the first cycle after a change ({power_trials} trials each)")
    print("   queries  noise   -5 pts  -8 pts  -10 pts   -5 pts with min_delta=0.03")
    for n in sizes:
        for flip in (0.0, 0.05, 0.2):
            cells = [power(n, flip, pts, power_trials) for pts in (0.05, 0.08, 0.10)]
            low = power(n, flip, 0.05, power_trials, min_delta=0.03)
            print(
                f"   {n:7d}  {flip:5.2f}  "
                + "  ".join(f"{c:6.0%}" for c in cells)
                + f"   {low:6.0%}"
            )
    print(f"\n3. bootstrap 95% CI coverage of the true mean over {trials} trials (want 93-97%)")
    print("   queries  expanded(benchd)  percentile  scipy BCa")
    for n in (12, 30, 100, 1000):
        expanded = coverage(n, trials, lambda s, t: bootstrap_ci(s, seed=t))
        plain = coverage(n, trials, lambda s, t: bootstrap_ci(s, seed=t, method="percentile"))
        try:
            bca = f"{coverage(n, trials, _scipy_bca):9.1%}"
        except ImportError:
            bca = "      n/a"
        print(f"   {n:7d}  {expanded:15.1%}  {plain:10.1%}  {bca}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 50, 200, 1000])
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args()
    # Onset/recovery events would flood the output: keep errors only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    warnings.simplefilter("ignore")  # scipy's BCa warns on degenerate resamples at n=12
    _report(args.sizes, args.cycles, args.trials)
    if not args.no_speed:
        _speed()


if __name__ == "__main__":
    main()
