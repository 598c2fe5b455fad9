"""Drift decisions: pairing, thresholds, staleness, the tracker's state and its log events."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from structlog.testing import capture_logs

from benchd.drift.baseline import baseline_from_result
from benchd.drift.tracker import DriftSettings, DriftTracker, compare_runs, metric_keys
from benchd.errors import ConfigError
from benchd.result import CycleResult, QueryResult

HASH = "a" * 64


def _query(
    qid: str, recall: float, ranked: Sequence[str] = (), error: str | None = None
) -> QueryResult:
    return QueryResult(
        id=qid,
        q=f"question {qid}",
        category=None,
        expected_ids=(f"{qid}-m1", f"{qid}-m2"),
        ranked_ids=tuple(ranked),
        metrics={"recall@10": recall, "hit@10": float(recall > 0), "rr": recall},
        error=error,
    )


def _cycle(
    recalls: Mapping[str, float],
    *,
    cycle: int = 1,
    fixture_hash: str = HASH,
    outcome: str = "success",
    errors: Sequence[str] = (),
) -> CycleResult:
    queries = tuple(
        _query(qid, value, ranked=_ranking(qid, value), error="http_5xx" if qid in errors else None)
        for qid, value in recalls.items()
    )
    return CycleResult(
        probe="p",
        target="zengram",
        corpus="smoke",
        cycle=cycle,
        started_at=0.0,
        finished_at=1.0,
        outcome=outcome,  # type: ignore[arg-type]
        phases={},
        ks=(10,),
        queries=queries,
        fixture_hash=fixture_hash,
    )


def _ranking(qid: str, recall: float) -> tuple[str, ...]:
    """A ranked list in which ``recall`` of the two expected ids appear (m1 at 2, m2 at 4)."""
    found = {0.0: (), 0.5: (f"{qid}-m1",), 1.0: (f"{qid}-m1", f"{qid}-m2")}[recall]
    ranked = ["x1", "x2", "x3", "x4", "x5"]
    for doc, slot in zip(found, (1, 3), strict=False):
        ranked[slot] = doc
    return tuple(ranked)


def _runs(values: Sequence[float]) -> dict[str, float]:
    return {f"q{i:03d}": v for i, v in enumerate(values)}


def _per_query(recalls: Mapping[str, float]) -> dict[str, dict[str, float]]:
    return {q: {"recall@10": v, "hit@10": float(v > 0), "rr": v} for q, v in recalls.items()}


def test_settings_reject_a_bad_value_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"^alpha = 0\.0: expected a p-value threshold"):
        DriftSettings(alpha=0.0)
    with pytest.raises(ConfigError, match=r"^rolling_window = -1"):
        DriftSettings(rolling_window=-1)
    with pytest.raises(ConfigError, match=r"^metrics = \('recal',\): expected .*recall"):
        DriftSettings(metrics=("recal",))


def test_identical_runs_show_no_drift_and_no_regressed_query() -> None:
    run = _per_query(_runs([1.0, 0.5, 0.0] * 10))
    report = compare_runs(run, run)
    assert set(report.metrics) == {"recall@10", "hit@10"}  # "rr" is not a drift metric by default
    assert all(
        m.delta == 0 and m.p_value == 1.0 and not m.detected for m in report.metrics.values()
    )
    assert report.regressed == () and not report.detected


def test_runs_are_paired_on_the_query_ids_both_have() -> None:
    before = _per_query({"a": 1.0, "b": 1.0, "gone": 0.0})
    after = _per_query({"a": 0.5, "b": 1.0, "new": 1.0})
    report = compare_runs(before, after)
    assert report.n == 2
    assert report.metrics["recall@10"].delta == pytest.approx(-0.25)


def test_a_broad_drop_is_flagged_with_a_negative_ci_and_regressed_queries() -> None:
    before = _runs([1.0] * 40)
    after = _runs([0.5] * 10 + [1.0] * 30)
    report = compare_runs(_per_query(before), _per_query(after))
    recall = report.metrics["recall@10"]
    assert recall.detected and recall.delta == pytest.approx(-0.125)
    assert recall.p_value == pytest.approx(2 / 2**10)
    assert recall.ci_low < recall.delta < recall.ci_high < 0
    assert [r.id for r in report.regressed] == [f"q{i:03d}" for i in range(10)]
    assert {(r.metric, r.before, r.after) for r in report.regressed} == {("recall@10", 1.0, 0.5)}


def test_one_query_wobbling_in_a_small_corpus_is_not_drift() -> None:
    before = _per_query(_runs([1.0] * 12))
    after = _per_query(_runs([0.0] + [1.0] * 11))
    recall = compare_runs(before, after).metrics["recall@10"]
    assert recall.delta < -0.05 and recall.p_value == 1.0 and not recall.detected


def test_a_significant_drop_smaller_than_min_delta_is_not_drift() -> None:
    before = _per_query(_runs([1.0] * 200))
    after = _per_query(_runs([0.5] * 12 + [1.0] * 188))  # delta -0.03, p ~ 0.0005
    recall = compare_runs(before, after).metrics["recall@10"]
    assert recall.p_value < 0.01 and not recall.detected


def test_a_drop_of_exactly_min_delta_counts() -> None:
    before = _per_query(_runs([1.0] * 20))
    after = _per_query(_runs([0.5] * 2 + [1.0] * 18))
    settings = DriftSettings(min_delta=0.05, alpha=0.6)  # two changed queries: p = 0.5
    assert compare_runs(before, after, settings).metrics["recall@10"].detected


def test_a_different_fixture_hash_makes_the_comparison_stale() -> None:
    run = _per_query(_runs([1.0] * 5))
    report = compare_runs(run, run, before_hash="b" * 64, after_hash=HASH)
    assert report.stale and report.metrics == {}
    assert "fixture content hash" in (report.stale_reason or "")


def test_metric_keys_follow_the_configured_order_then_k() -> None:
    rows = [{"ndcg@10": 1.0, "recall@5": 1.0, "recall@10": 1.0, "ap": 1.0, "hit@1": 1.0}]
    assert metric_keys(rows, ("recall", "ndcg", "hit")) == [
        "recall@5",
        "recall@10",
        "ndcg@10",
        "hit@1",
    ]


def test_tracker_has_no_baseline_on_its_first_cycle_then_rolls() -> None:
    tracker = DriftTracker("p")
    first = tracker.observe(_cycle(_runs([1.0] * 20)))
    second = tracker.observe(_cycle(_runs([1.0] * 20), cycle=2))
    assert first["baseline"] == "none" and first["metrics"] == {}
    assert second["baseline"] == "rolling" and not second["detected"]
    assert second["metrics"]["recall@10"]["n"] == 20


def test_tracker_logs_one_onset_and_one_recovery() -> None:
    tracker = DriftTracker("p", DriftSettings(rolling_window=3))
    healthy, broken = _runs([1.0] * 30), _runs([0.5] * 12 + [1.0] * 18)
    with capture_logs() as logs:
        tracker.observe(_cycle(healthy, cycle=1))
        outcomes = [tracker.observe(_cycle(broken, cycle=c)) for c in (2, 3)]
        tracker.observe(_cycle(broken, cycle=4))
        tracker.observe(_cycle(broken, cycle=5))  # the window is all "broken" now
    events = [e["event"] for e in logs]
    assert events == ["drift_onset", "drift_recovered"]
    assert all(o["detected"] for o in outcomes)
    assert logs[0]["probe"] == "p" and logs[0]["worst_metric"] == "recall@10"
    assert logs[0]["log_level"] == "warning" and logs[1]["cycle"] == 5


def test_tracker_reports_ranks_of_expected_ids_before_and_after() -> None:
    baseline = baseline_from_result(_cycle(_runs([1.0] * 10)))
    tracker = DriftTracker("p", DriftSettings(alpha=0.05), baseline=baseline)
    outcome = tracker.observe(_cycle(_runs([0.5] * 6 + [1.0] * 4)))
    assert outcome["baseline"] == "pinned" and outcome["detected"]
    first = outcome["regressed_queries"][0]
    assert first["id"] == "q000" and first["metric"] == "recall@10"
    assert first["ranks_before"] == {"q000-m1": 2, "q000-m2": 4}
    assert first["ranks_after"] == {"q000-m1": 2, "q000-m2": None}


def test_tracker_marks_a_pinned_baseline_of_another_fixture_stale() -> None:
    baseline = baseline_from_result(_cycle(_runs([1.0] * 10), fixture_hash="b" * 64))
    tracker = DriftTracker("p", baseline=baseline)
    first = tracker.observe(_cycle(_runs([0.0] * 10)))
    second = tracker.observe(_cycle(_runs([0.0] * 10), cycle=2))
    assert first["stale"] and first["baseline"] == "none" and first["metrics"] == {}
    assert second["stale"] and second["baseline"] == "rolling"
    assert "re-pin" in (second["stale_reason"] or "")


def test_a_failed_cycle_is_not_compared_and_not_remembered() -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 10)))
    failed = tracker.observe(_cycle(_runs([0.0] * 10), cycle=2, outcome="failed"))
    after = tracker.observe(_cycle(_runs([1.0] * 10), cycle=3))
    assert failed["baseline"] == "none" and not failed["detected"]
    assert after["metrics"]["recall@10"]["delta"] == 0.0


def test_errored_queries_are_left_out_of_the_pairing() -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 20)))
    outcome = tracker.observe(
        _cycle(_runs([0.0] * 8 + [1.0] * 12), cycle=2, errors=[f"q{i:03d}" for i in range(8)])
    )
    assert outcome["metrics"]["recall@10"]["n"] == 12 and not outcome["detected"]


def test_a_new_fixture_restarts_the_rolling_window() -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 20)))
    outcome = tracker.observe(_cycle(_runs([0.0] * 20), cycle=2, fixture_hash="c" * 64))
    assert outcome["baseline"] == "none"


def test_outcome_has_exactly_the_documented_json_shape() -> None:
    tracker = DriftTracker("p", baseline=baseline_from_result(_cycle(_runs([1.0] * 12))))
    outcome = tracker.observe(_cycle(_runs([0.5] * 12)))
    decoded = json.loads(json.dumps(outcome))
    assert set(decoded) == {
        "baseline",
        "stale",
        "stale_reason",
        "metrics",
        "regressed_queries",
        "detected",
    }
    assert set(decoded["metrics"]["recall@10"]) == {
        "delta",
        "p_value",
        "detected",
        "ci_low",
        "ci_high",
        "n",
    }
    assert set(decoded["regressed_queries"][0]) == {
        "id", "metric", "before", "after", "ranks_before", "ranks_after"
    }  # fmt: skip


def _simulated_store(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-query recall@10 a deterministic store gives: 0, 1/3, 1/2, 2/3 or 1."""
    return rng.choice([0.0, 1 / 3, 0.5, 2 / 3, 1.0], size=n, p=[0.1, 0.1, 0.15, 0.15, 0.5])


def _noisy(rng: np.random.Generator, base: np.ndarray, flip: float) -> np.ndarray:
    """A cycle's answers: each query's value moves by one third either way with prob ``flip``."""
    moves = rng.random(base.size) < flip
    step = rng.choice([-1 / 3, 1 / 3], size=base.size)
    return np.clip(base + moves * step, 0.0, 1.0)


def test_without_a_change_at_most_one_percent_of_noisy_cycles_flag_drift() -> None:
    rng = np.random.default_rng(42)
    base = _simulated_store(rng, 200)
    flagged = _compare_many(base, [_noisy(rng, base, flip=0.1) for _ in range(200)])
    assert sum(flagged) <= 2


def _drop(rng: np.random.Generator, base: np.ndarray, points: float) -> np.ndarray:
    """Make queries lose one of two relevant ids (0.5 recall each) until ``points`` are lost."""
    hit = np.flatnonzero(base >= 0.5)
    lost = rng.choice(hit, size=int(np.ceil(points * base.size / 0.5)), replace=False)
    changed = base.copy()
    changed[lost] -= 0.5
    return changed


def test_a_five_point_recall_drop_is_flagged_on_the_first_cycle() -> None:
    for seed in range(10):
        rng = np.random.default_rng(seed)
        base = _simulated_store(rng, 200)
        assert _compare_many(base, [_drop(rng, base, 0.05)]) == [True], f"seed {seed}"


def test_an_eight_point_drop_is_flagged_on_the_first_cycle_of_a_noisy_store() -> None:
    for seed in range(10):
        rng = np.random.default_rng(seed)
        base = _simulated_store(rng, 200)
        before = _noisy(rng, base, flip=0.05)
        after = _noisy(rng, _drop(rng, base, 0.08), flip=0.05)
        assert _compare_many(before, [after]) == [True], f"seed {seed}"


def _compare_many(before: np.ndarray, cycles: Sequence[np.ndarray]) -> list[bool]:
    settings = DriftSettings(n_permutations=2000, n_bootstrap=200)
    ids = [f"q{i}" for i in range(before.size)]
    base = {q: {"recall@10": float(v)} for q, v in zip(ids, before, strict=True)}
    return [
        compare_runs(
            base, {q: {"recall@10": float(v)} for q, v in zip(ids, c, strict=True)}, settings
        ).detected
        for c in cycles
    ]


@pytest.mark.anyio
async def test_aobserve_gives_the_same_outcome_as_observe() -> None:
    cycles = [_cycle(_runs([1.0] * 20)), _cycle(_runs([0.5] * 10 + [1.0] * 10), cycle=2)]
    sync, threaded = DriftTracker("p"), DriftTracker("p")
    expected = [sync.observe(c) for c in cycles]
    assert [await threaded.aobserve(c) for c in cycles] == expected
    assert threaded.drifting and expected[1]["detected"]
