"""What a fixture of a given size can see at a given noise level: benchd's drift rule by simulation.

Run: ``.venv/bin/python bench/drift_sim.py [--cycles 10000] [--permutations 1000]
[--sizes 12 50 200] [--noise 0 0.1 0.3]``

The simulated store answers each labeled query with a fixed top 10 (1-3
relevant ids placed in the top 14 of a 30-document ranking, so some fall
below the cut-off, as on a real store). Noise is the reference store's
``rank_swap`` fault: in each cycle, with probability ``p`` per query, one
random adjacent pair of the returned ten is swapped (about what other
tenants' writes did on the real server: 7 of 16 queries moved). Scores are
benchd's own (``query_metrics``, recall/ndcg/mrr/precision/hit/map/recall_all
at 5 and 10: 14 keys). A change of D points makes queries, in random order,
lose every relevant id from their top 10 until mean recall@10 has fallen by
D points.

For each cell (fixture size x noise level), seeded, it prints:

- false alarms: the share of ``--cycles`` unchanged cycles flagged anywhere
  (any metric@k), each compared with the rolling window of the 5 cycles
  before it, as the daemon does;
- power: the share of ``--cycles`` trials (5 unchanged cycles, then the
  change) in which the first cycle after the change is flagged;

for benchd's rule (``drop >= min_delta`` and beyond the measured noise:
:func:`benchd.drift.tracker.compare`) beside the previous sign-flip rule
(``drop >= min_delta`` and sign-flip ``p < alpha`` per key), both computed
on the same cycles in the same run.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from benchd.config.drift import DriftSettings
from benchd.drift.tracker import Snapshot, compare, rolling_reference
from benchd.scoring.ranking import query_metrics

KS = (5, 10)
SIZES = (12, 50, 200)
NOISE = (0.0, 0.1, 0.3)
DROPS = (0.05, 0.10, 0.20)
WINDOW = 5
Array = np.ndarray


@dataclass
class Store:
    """Per query: the metric values of its ten-id answer, unswapped and with each swap."""

    keys: list[str]
    table: Array  # (n, 10, keys): state 0 = as ranked, state j = pair (j-1, j) swapped
    recall10: Array  # (n,) recall@10 as ranked
    lost: Array  # (n, 10, keys): the same after losing every relevant id of the top 10

    @classmethod
    def make(cls, n: int, rng: np.random.Generator) -> Store:
        tables, lost, recall = [], [], []
        keys: list[str] = []
        for i in range(n):
            docs = [f"d{i}-{j}" for j in range(30)]
            rel = rng.choice(14, size=int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2])), replace=False)
            relevance = {docs[p]: 1 for p in rel}
            top = docs[:10]
            gone = [d for d in docs if d not in relevance][:10]
            rows, rows_lost = [], []
            for state in range(10):
                for ranked, out in ((top, rows), (gone, rows_lost)):
                    answer = list(ranked)
                    if state:
                        answer[state - 1], answer[state] = answer[state], answer[state - 1]
                    metrics = query_metrics(answer, relevance, KS)
                    keys = keys or [k for k in metrics if "@" in k]
                    out.append([metrics[k] for k in keys])
            tables.append(rows)
            lost.append(rows_lost)
            recall.append(query_metrics(top, relevance, KS)["recall@10"])
        return cls(keys, np.array(tables), np.array(recall), np.array(lost))

    def cycle(self, p: float, rng: np.random.Generator, changed: Array | None = None) -> Array:
        """(n, keys) values of one cycle, and which swap each query suffered (0 = none)."""
        n = self.table.shape[0]
        swap = np.where(rng.random(n) < p, rng.integers(1, 10, size=n), 0)
        rows = np.arange(n)
        values = self.table[rows, swap]
        if changed is not None:
            values = np.where(changed[:, None], self.lost[rows, swap], values)
        return np.concatenate([values, swap[:, None].astype(float)], axis=1)

    def degrade(self, points: float, rng: np.random.Generator) -> Array:
        """Which queries lose their relevant ids so that mean recall@10 falls by ``points``."""
        n = self.recall10.size
        changed = np.zeros(n, dtype=bool)
        lost = 0.0
        for i in rng.permutation(n):
            if lost >= points * n - 1e-9:
                break
            if self.recall10[i] > 0:
                changed[i] = True
                lost += self.recall10[i]
        return changed


def _snapshot(store: Store, values: Array) -> Snapshot:
    """A cycle as the drift stage keeps it; the ranking is the swap state (same ids, new order)."""
    ids = [f"q{i}" for i in range(values.shape[0])]
    metrics = {
        q: dict(zip(store.keys, row[:-1].tolist(), strict=True))
        for q, row in zip(ids, values, strict=True)
    }
    rankings = {q: _ranking(int(row[-1])) for q, row in zip(ids, values, strict=True)}
    return Snapshot("h", metrics, {}, rankings)


def _ranking(swap: int) -> tuple[str, ...]:
    ranked = [f"r{j}" for j in range(10)]
    if swap:
        ranked[swap - 1], ranked[swap] = ranked[swap], ranked[swap - 1]
    return tuple(ranked)


def decide(
    store: Store, window: list[Array], current: Array, settings: DriftSettings
) -> tuple[bool, bool]:
    """(benchd's rule, the sign-flip rule): flagged anywhere this cycle?"""
    ref_mean = np.mean(window, axis=0)[:, :-1]
    drops = (current[:, :-1] - ref_mean).mean(axis=0)
    if not (drops <= -settings.min_delta + 1e-9).any():
        return False, False  # neither rule flags a key that did not drop by min_delta
    outcome = compare(
        rolling_reference([_snapshot(store, w) for w in window], 10),
        _snapshot(store, current),
        settings,
        kind="rolling",
    )
    old = any(
        m.delta <= -settings.min_delta + 1e-9 and m.p_value_queries < settings.alpha
        for m in outcome.metrics.values()
    )
    return outcome.detected, old


def false_alarms(
    n: int, p: float, cycles: int, settings: DriftSettings, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    store = Store.make(n, rng)
    window = [store.cycle(p, rng) for _ in range(WINDOW)]
    new = old = 0
    for _ in range(cycles):
        current = store.cycle(p, rng)
        a, b = decide(store, window, current, settings)
        new, old = new + a, old + b
        window = [*window[1:], current]
    return new / cycles, old / cycles


def power(
    n: int, p: float, points: float, trials: int, settings: DriftSettings, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    stores = [Store.make(n, rng) for _ in range(20)]  # 20 fixtures, trials spread over them
    new = old = 0
    for trial in range(trials):
        store = stores[trial % len(stores)]
        window = [store.cycle(p, rng) for _ in range(WINDOW)]
        current = store.cycle(p, rng, store.degrade(points, rng))
        a, b = decide(store, window, current, settings)
        new, old = new + a, old + b
    return new / trials, old / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=10_000, help="cycles (and trials) per cell")
    parser.add_argument("--permutations", type=int, default=1000, help="noise-test resamples")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="fixture sizes (rows)"
    )
    parser.add_argument(
        "--noise", type=float, nargs="+", default=list(NOISE), help="swap probabilities"
    )
    args = parser.parse_args()
    settings = DriftSettings(
        metrics=("recall", "ndcg", "mrr", "precision", "hit", "map", "recall_all"),
        n_permutations=args.permutations,
        n_bootstrap=100,
    )
    print(
        f"# {args.cycles} cycles per cell, rolling window {WINDOW}, 14 metric@k keys, "
        f"min_delta {settings.min_delta}, alpha {settings.alpha}, "
        f"{args.permutations} noise-test resamples, seed {args.seed}"
    )
    print("| queries | swap p | false alarms | power @5 pts | power @10 pts | power @20 pts |")
    print("|---:|---:|---|---|---|---|")
    # each cell is seeded from its own (size, noise): a cell run alone (--sizes,
    # --noise, e.g. in parallel processes) prints the same row as in a full run
    for n in args.sizes:
        for p in args.noise:
            start = time.perf_counter()
            seed = args.seed * 1000 + n + int(p * 100)
            fa = false_alarms(n, p, args.cycles, settings, seed)
            cells = [power(n, p, d, args.cycles, settings, seed + int(d * 100)) for d in DROPS]
            row = [f"{fa[0]:.2%} (sign-flip {fa[1]:.2%})"]
            row += [f"{new:.1%} (sign-flip {old:.1%})" for new, old in cells]
            print(
                f"| {n} | {p} | "
                + " | ".join(row)
                + f" |  <!-- {time.perf_counter() - start:.0f} s -->",
                flush=True,
            )


if __name__ == "__main__":
    main()
