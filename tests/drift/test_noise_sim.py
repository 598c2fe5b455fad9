"""Seeded simulations through the real DriftTracker: false alarms and detection under noise.

The simulated store answers each labeled query with a fixed top 10 (1-3
relevant ids among the top 14 of a 30-document ranking). Noise is the
reference store's ``rank_swap`` fault: per cycle, with probability ``p`` per
query, one random adjacent pair of the ten is swapped. Every cycle goes
through :class:`~benchd.drift.tracker.DriftTracker` with its rolling window,
scored by benchd's own ``query_metrics`` (7 metrics at k = 5 and 10), so
"flagged" means what the daemon would page on. Seeded: the same run every
time. ``bench/drift_sim.py`` prints the full table.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchd.drift.baseline import baseline_from_results
from benchd.drift.tracker import DriftSettings, DriftTracker
from benchd.result import CycleResult, QueryResult
from benchd.scoring.ranking import query_metrics

KS = (5, 10)
# the defaults, with fewer resamples so 1,000 cycles stay quick; alpha and min_delta unchanged
SETTINGS = DriftSettings(n_permutations=1000, n_bootstrap=100)


@dataclasses.dataclass
class SimStore:
    rankings: list[list[str]]
    relevance: list[dict[str, int]]
    rng: np.random.Generator

    @classmethod
    def make(cls, n: int, seed: int) -> SimStore:
        rng = np.random.default_rng(seed)
        rankings, relevance = [], []
        for i in range(n):
            docs = [f"d{i}-{j}" for j in range(30)]
            rel = rng.choice(14, size=int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2])), replace=False)
            rankings.append(docs)
            relevance.append({docs[p]: 1 for p in rel})
        return cls(rankings, relevance, rng)

    def recall10(self, i: int) -> float:
        top = set(self.rankings[i][:10])
        return len(top & set(self.relevance[i])) / len(self.relevance[i])

    def cycle(self, number: int, p: float, lost: frozenset[int] = frozenset()) -> CycleResult:
        queries = []
        for i, (docs, rel) in enumerate(zip(self.rankings, self.relevance, strict=True)):
            ranked = [d for d in docs if d not in rel][:10] if i in lost else list(docs[:10])
            if self.rng.random() < p:
                j = int(self.rng.integers(9))
                ranked[j], ranked[j + 1] = ranked[j + 1], ranked[j]
            queries.append(
                QueryResult(
                    f"q{i:03d}", "", None, tuple(rel), tuple(ranked), query_metrics(ranked, rel, KS)
                )
            )
        return CycleResult(
            probe="sim", target="sim", corpus="sim", cycle=number, started_at=0.0,
            finished_at=0.0, outcome="success", phases={}, ks=KS, queries=tuple(queries),
            fixture_hash="h",
        )  # fmt: skip

    def drop(self, points: float) -> frozenset[int]:
        """Queries that, losing every relevant id of their top 10, cost ``points`` of recall@10."""
        n, lost, chosen = len(self.rankings), 0.0, set()
        for i in self.rng.permutation(n):
            if lost >= points * n - 1e-9:
                break
            if self.recall10(int(i)) > 0:
                chosen.add(int(i))
                lost += self.recall10(int(i))
        return frozenset(chosen)


def _false_alarms(n: int, p: float, cycles: int, seed: int) -> int:
    store = SimStore.make(n, seed)
    tracker = DriftTracker("sim", SETTINGS)
    return sum(tracker.observe(store.cycle(c, p)).detected for c in range(cycles + 1))


def test_d_an_unchanged_deterministic_store_never_pages_in_1000_cycles() -> None:
    assert _false_alarms(50, 0.0, 1000, seed=1) == 0


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_e_a_noisy_unchanged_store_pages_in_at_most_1_percent_of_1000_cycles(p: float) -> None:
    flagged = _false_alarms(50, p, 1000, seed=2)
    assert flagged <= 10, f"{flagged} of 1000 unchanged cycles flagged at swap p={p}"


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_e_a_10_point_recall_drop_on_50_noisy_queries_is_flagged_within_2_cycles(p: float) -> None:
    for seed in range(10):
        store = SimStore.make(50, seed=100 + seed)
        tracker = DriftTracker("sim", SETTINGS)
        for c in range(6):
            tracker.observe(store.cycle(c, p))
        lost = store.drop(0.10)
        after = [tracker.observe(store.cycle(c, p, lost)) for c in (6, 7)]
        assert after[0].metrics["recall@10"].delta <= -0.095
        assert any(o.detected for o in after), f"seed {seed}: not flagged within 2 cycles"


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_e_a_baseline_pinned_with_repeats_keeps_paging_on_a_noisy_store(p: float) -> None:
    store = SimStore.make(50, seed=7)
    baseline = baseline_from_results([store.cycle(c, p) for c in range(5)])
    tracker = DriftTracker("sim", SETTINGS, baseline)
    quiet = [tracker.observe(store.cycle(c, p)) for c in range(5, 25)]
    assert not any(o.detected for o in quiet) and {o.noise for o in quiet} == {"measured"}
    lost = store.drop(0.10)
    after = [tracker.observe(store.cycle(c, p, lost)) for c in range(25, 30)]
    assert all(o.detected for o in after)
    assert [o.transition for o in after] == ["onset", None, None, None, None]
