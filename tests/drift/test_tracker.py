"""Drift decisions: pairing, thresholds, noise, staleness, model change, the tracker's state."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

import pytest
from structlog.testing import capture_logs

from benchd.drift.baseline import baseline_from_result, baseline_from_results
from benchd.drift.tracker import (
    DriftSettings,
    DriftTracker,
    Snapshot,
    compare_runs,
    metric_keys,
    rolling_reference,
)
from benchd.errors import ConfigError
from benchd.result import CycleResult, QueryResult
from benchd.store.target import RankedIds
from benchd.surfacers.log import drift_events, log_cycle

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
    with pytest.raises(ConfigError, match=r"^min_overlap_drop = 0\.0: expected"):
        DriftSettings(min_overlap_drop=0.0)


def test_identical_runs_show_no_drift_and_no_regressed_query() -> None:
    run = _per_query(_runs([1.0, 0.5, 0.0] * 10))
    report = compare_runs(run, run)
    assert set(report.metrics) == {"recall@10", "hit@10"}  # "rr" is not a drift metric by default
    assert all(
        m.delta == 0 and m.p_value == 1.0 and m.p_value_queries == 1.0 and not m.detected
        for m in report.metrics.values()
    )
    assert report.regressed == () and not report.detected


def test_runs_are_paired_on_the_query_ids_both_have() -> None:
    before = _per_query({"a": 1.0, "b": 1.0, "gone": 0.0})
    after = _per_query({"a": 0.5, "b": 1.0, "new": 1.0})
    report = compare_runs(before, after)
    assert report.metrics["recall@10"].n == 2
    assert report.metrics["recall@10"].delta == pytest.approx(-0.25)


def test_a_broad_drop_is_flagged_with_a_negative_ci_and_regressed_queries() -> None:
    before = _runs([1.0] * 40)
    after = _runs([0.5] * 10 + [1.0] * 30)
    report = compare_runs(_per_query(before), _per_query(after))
    recall = report.metrics["recall@10"]
    assert recall.detected and recall.delta == pytest.approx(-0.125)
    assert recall.p_value == 0.0  # nothing moved on the reference side: every lost id is real
    assert recall.p_value_queries == pytest.approx(2 / 2**10)  # the sign-flip test, reported
    assert recall.ci_low < recall.delta < recall.ci_high < 0
    assert [r.id for r in report.regressed] == [f"q{i:03d}" for i in range(10)]
    assert {(r.metric, r.before, r.after) for r in report.regressed} == {("recall@10", 1.0, 0.5)}


def test_one_lost_query_of_a_stable_12_query_store_is_drift_though_it_would_not_generalize() -> (
    None
):
    before = _per_query(_runs([1.0] * 12))
    after = _per_query(_runs([0.0] + [1.0] * 11))
    recall = compare_runs(before, after).metrics["recall@10"]
    assert recall.delta == pytest.approx(-1 / 12) and recall.detected
    assert recall.p_value_queries == 1.0  # one changed query: the sign-flip test cannot move


def test_a_drop_smaller_than_min_delta_is_not_drift() -> None:
    before = _per_query(_runs([1.0] * 200))
    after = _per_query(_runs([0.5] * 12 + [1.0] * 188))  # delta -0.03, p ~ 0.0005
    recall = compare_runs(before, after).metrics["recall@10"]
    assert recall.p_value_queries < 0.01 and recall.p_value == 0.0 and not recall.detected


def test_a_drop_of_exactly_min_delta_counts() -> None:
    before = _per_query(_runs([1.0] * 20))
    after = _per_query(_runs([0.5] * 2 + [1.0] * 18))
    assert compare_runs(before, after, DriftSettings(min_delta=0.05)).metrics["recall@10"].detected


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
    assert first.baseline == "none" and first.metrics == {}
    assert second.baseline == "rolling" and not second.detected
    assert second.metrics["recall@10"].n == 20 and second.noise == "none"
    third = tracker.observe(_cycle(_runs([1.0] * 20), cycle=3))
    assert third.noise == "stable" and third.samples == 2


def test_drift_episodes_open_once_and_close_once_and_the_log_surfacer_tells() -> None:
    tracker = DriftTracker("p", DriftSettings(rolling_window=3))
    healthy, broken = _runs([1.0] * 30), _runs([0.5] * 12 + [1.0] * 18)
    cycles = [_cycle(healthy, cycle=1)] + [_cycle(broken, cycle=c) for c in range(2, 7)]
    results = [dataclasses.replace(c, drift=tracker.observe(c)) for c in cycles]
    transitions = [r.drift.transition for r in results if r.drift is not None]
    assert transitions.count("onset") == 1 and transitions.count("recovered") == 1
    assert transitions.index("onset") == 1  # the first cycle after the change
    with capture_logs() as logs:
        for r in results:
            log_cycle(r)
    events = [e for e in logs if e["event"] != "cycle"]
    assert [e["event"] for e in events] == ["drift_onset", "drift_recovered"]
    onset = events[0]
    assert onset["probe"] == "p" and onset["worst_metric"] == "recall@10"
    assert onset["log_level"] == "warning" and onset["regressed_queries"] == 12
    assert onset["cycle"] == 2 and onset["baseline"] == "rolling"
    assert {"delta", "p_value", "p_value_queries", "metrics", "model", "baseline_model"} <= set(
        onset
    )


def test_tracker_reports_ranks_of_expected_ids_before_and_after() -> None:
    baseline = baseline_from_result(_cycle(_runs([1.0] * 10)))
    tracker = DriftTracker("p", baseline=baseline)
    outcome = tracker.observe(_cycle(_runs([0.5] * 6 + [1.0] * 4)))
    assert outcome.baseline == "pinned" and outcome.detected
    first = outcome.regressed[0]
    assert first.id == "q000" and first.metric == "recall@10"
    assert first.ranks_before == {"q000-m1": 2, "q000-m2": 4}
    assert first.ranks_after == {"q000-m1": 2, "q000-m2": None}


def test_tracker_marks_a_pinned_baseline_of_another_fixture_stale() -> None:
    baseline = baseline_from_result(_cycle(_runs([1.0] * 10), fixture_hash="b" * 64))
    tracker = DriftTracker("p", baseline=baseline)
    first = tracker.observe(_cycle(_runs([0.0] * 10)))
    second = tracker.observe(_cycle(_runs([0.0] * 10), cycle=2))
    assert first.stale and first.baseline == "none" and first.metrics == {}
    assert second.stale and second.baseline == "rolling"
    assert "re-pin" in (second.stale_reason or "")


def test_a_pinned_baseline_from_before_namespaced_keys_is_stale_never_a_page() -> None:
    """Facts' key and statuses' subject are namespaced now (#20): rankings on them moved."""
    pinned = baseline_from_result(_cycle(_runs([1.0] * 10)))
    old = dataclasses.replace(pinned, key_scheme="", source="pinned.toml")
    dropped = _cycle(_runs([0.0] * 10))  # what would page against either
    said = DriftTracker("p", baseline=old, owned_keys=True).observe(dropped)
    assert said.stale and not said.detected and said.metrics == {}
    assert "pinned.toml was pinned before benchd namespaced" in (said.stale_reason or "")
    assert "benchd baseline save" in (said.stale_reason or "")
    assert DriftTracker("p", baseline=pinned, owned_keys=True).observe(dropped).detected
    assert DriftTracker("p", baseline=old).observe(dropped).detected  # a store keying nothing


@pytest.mark.parametrize("outcome", ["failed", "timeout", "degraded"])
def test_only_successful_cycles_are_compared_or_remembered(outcome: str) -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 10)))
    bad = tracker.observe(_cycle(_runs([0.0] * 10), cycle=2, outcome=outcome))
    after = tracker.observe(_cycle(_runs([1.0] * 10), cycle=3))
    assert bad.baseline == "none" and not bad.detected and bad.transition is None
    assert after.metrics["recall@10"].delta == 0.0 and after.samples == 1


def test_errored_queries_are_left_out_of_the_pairing() -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 20)))
    outcome = tracker.observe(
        _cycle(_runs([0.0] * 8 + [1.0] * 12), cycle=2, errors=[f"q{i:03d}" for i in range(8)])
    )
    assert outcome.metrics["recall@10"].n == 12 and not outcome.detected


def test_a_new_fixture_restarts_the_rolling_window() -> None:
    tracker = DriftTracker("p")
    tracker.observe(_cycle(_runs([1.0] * 20)))
    outcome = tracker.observe(_cycle(_runs([0.0] * 20), cycle=2, fixture_hash="c" * 64))
    assert outcome.baseline == "none"


def test_a_pinned_baseline_with_repeats_flags_every_cycle_after_a_change() -> None:
    pins = [_cycle(_runs([1.0] * 12), cycle=c) for c in (1, 2, 3)]
    tracker = DriftTracker("p", baseline=baseline_from_results(pins))
    after = [tracker.observe(_cycle(_runs([0.5] * 2 + [1.0] * 10), cycle=c)) for c in range(4, 9)]
    assert all(o.detected and o.noise == "stable" and o.samples == 3 for o in after)
    assert [o.transition for o in after] == ["onset", None, None, None, None]


def _wobbly(cycle: int, n: int = 12, drop: int = 0) -> CycleResult:
    """Queries q000..: one of the two ids lost by query ``cycle % n`` (noise), and ``drop`` more."""
    values = [1.0] * n
    values[cycle % n] = 0.5
    for i in range(drop):
        values[(cycle + 1 + i) % n] = 0.5
    return _cycle(_runs(values), cycle=cycle)


def test_noise_measured_in_the_repeats_keeps_a_wobble_from_paging() -> None:
    baseline = baseline_from_results([_wobbly(c) for c in range(5)])
    assert baseline.repeats == 5 and baseline.queries["q000"].samples["recall@10"][0] == 0.5
    tracker = DriftTracker("p", baseline=baseline)
    outcomes = [tracker.observe(_wobbly(c)) for c in range(5, 40)]
    assert all(o.noise == "measured" and not o.detected for o in outcomes)
    # recall@10 moves by 1/24 with one wobbling query, under min_delta; two more lost ids exceed it
    assert max(abs(o.metrics["recall@10"].delta) for o in outcomes) < 0.05


def test_a_one_cycle_baseline_borrows_the_noise_of_the_cycles_since() -> None:
    tracker = DriftTracker("p", DriftSettings(rolling_window=5), baseline_from_result(_wobbly(0)))
    outcomes = [tracker.observe(_wobbly(c)) for c in range(1, 8)]
    assert outcomes[0].noise == "none" and outcomes[0].samples == 1
    assert outcomes[-1].noise == "measured" and outcomes[-1].samples == 6


def test_reordered_rankings_with_the_same_recall_are_a_model_change_not_drift() -> None:
    before = _cycle(_runs([1.0] * 12))
    tracker = DriftTracker("p", baseline=baseline_from_results([before, before]))
    shuffled = tuple(
        dataclasses.replace(q, ranked_ids=tuple(reversed(q.ranked_ids))) for q in before.queries
    )
    outcome = tracker.observe(dataclasses.replace(before, queries=shuffled, cycle=2))
    assert not outcome.detected and outcome.model_changed
    assert outcome.change is not None and outcome.change.overlap < 0.9
    assert outcome.model_transition == "onset"
    (event,) = [e for e in drift_events(dataclasses.replace(before, drift=outcome))]
    assert event[:2] == ("warning", "model_change_onset")
    same = tracker.observe(dataclasses.replace(before, cycle=3))
    assert not same.model_changed and same.change is not None and same.change.overlap == 1.0


def _scored(result: CycleResult, top: float) -> CycleResult:
    """``result`` with every ranking carrying the store's scores (top score ``top``)."""
    queries = tuple(
        dataclasses.replace(q, ranked_ids=RankedIds(q.ranked_ids, [top] * len(q.ranked_ids)))
        for q in result.queries
    )
    return dataclasses.replace(result, queries=queries)


def test_a_shift_of_the_stores_own_scores_is_a_model_change_with_the_same_rankings() -> None:
    before = _scored(_cycle(_runs([1.0] * 12)), 0.62)
    baseline = baseline_from_results([before, before])
    assert baseline.queries["q000"].top_scores == (0.62, 0.62)
    tracker = DriftTracker("p", baseline=baseline)
    same = tracker.observe(_scored(_cycle(_runs([1.0] * 12), cycle=2), 0.62))
    assert same.change is not None and same.change.score_shift == 0.0 and not same.model_changed
    rescaled = tracker.observe(_scored(_cycle(_runs([1.0] * 12), cycle=3), 0.93))
    assert rescaled.change is not None and rescaled.change.overlap == 1.0
    assert rescaled.change.score_shift == pytest.approx(0.5) and rescaled.model_changed
    assert not rescaled.detected
    unscored = DriftTracker("p", baseline=baseline_from_result(_cycle(_runs([1.0] * 12))))
    change = unscored.observe(_cycle(_runs([1.0] * 12))).change
    assert change is not None and change.score_shift is None  # a store that gives no scores


def test_outcome_has_exactly_the_documented_json_shape() -> None:
    tracker = DriftTracker("p", baseline=baseline_from_result(_cycle(_runs([1.0] * 12))))
    outcome = tracker.observe(_cycle(_runs([0.5] * 12)))
    decoded = json.loads(json.dumps(outcome.as_json()))
    assert set(decoded) == {
        "baseline", "stale", "stale_reason", "noise", "samples", "detected", "model_changed",
        "metrics", "regressed_queries", "change", "model", "baseline_model",
    }  # fmt: skip
    assert set(decoded["metrics"]["recall@10"]) == {
        "before", "after", "delta", "p_value", "p_value_queries", "detected", "ci_low",
        "ci_high", "n",
    }  # fmt: skip
    recall = decoded["metrics"]["recall@10"]  # the baseline's mean, this cycle's, and their gap
    assert recall["after"] - recall["before"] == pytest.approx(recall["delta"])
    assert set(decoded["regressed_queries"][0]) == {
        "id", "metric", "before", "after", "ranks_before", "ranks_after"
    }  # fmt: skip
    assert set(decoded["change"]) == {
        "depth", "overlap", "overlap_delta", "overlap_p_value", "model_changed", "label_changed",
        "score_shift", "score_p_value",
    }  # fmt: skip


@pytest.mark.anyio
async def test_aobserve_gives_the_same_outcome_as_observe() -> None:
    cycles = [_cycle(_runs([1.0] * 20)), _cycle(_runs([0.5] * 10 + [1.0] * 10), cycle=2)]
    sync, threaded = DriftTracker("p"), DriftTracker("p")
    expected = [sync.observe(c) for c in cycles]
    assert [await threaded.aobserve(c) for c in cycles] == expected
    assert expected[1].detected and expected[1].transition == "onset"


def test_a_long_drift_keeps_the_noise_its_onset_was_judged_against() -> None:
    """A one-cycle pinned baseline borrows the quiet cycles' noise; flagged cycles filling
    the window must not evict it (the page said "noise none, 1 samples" where the onset's
    log said "measured")."""
    healthy = _runs([1.0] * 30)
    tracker = DriftTracker("p", DriftSettings(rolling_window=3), baseline=baseline_from_result(
        _cycle(healthy)))  # fmt: skip
    wobbly = [{**healthy, "q001": 0.5}, {**healthy, "q002": 0.5}]  # quiet, but they move
    for n, quiet in enumerate(wobbly, start=1):
        assert not tracker.observe(_cycle(quiet, cycle=n)).detected
    broken = _runs([0.0] * 12 + [1.0] * 18)
    outcomes = [tracker.observe(_cycle(broken, cycle=c)) for c in range(3, 10)]
    assert outcomes[0].transition == "onset" and outcomes[0].noise == "measured"
    assert all(o.detected for o in outcomes)
    assert {(o.noise, o.samples) for o in outcomes} == {("measured", 3)}


def test_the_rolling_samples_follow_each_key_when_cycles_carry_different_keys() -> None:
    def snap(metrics: dict[str, dict[str, float]]) -> Snapshot:
        return Snapshot("h", metrics, {}, {q: ("a", "b") for q in metrics})

    window = [
        snap({"q1": {"recall@5": 0.1, "ndcg@5": 0.2}, "q2": {"recall@5": 1.0, "ndcg@5": 0.5}}),
        snap({"q1": {"recall@5": 0.3, "mrr@5": 0.4}, "q2": {"ndcg@5": 0.6, "recall@5": 0.9}}),
        snap({"q1": {"recall@5": 0.5, "ndcg@5": 0.6, "mrr@5": 0.7}, "q2": {"recall@5": 0.8}}),
    ]
    samples = rolling_reference(window, 2).samples
    assert {k: list(v) for k, v in samples["q1"].items()} == {
        "recall@5": [0.1, 0.3, 0.5], "ndcg@5": [0.2, 0.6], "mrr@5": [0.4, 0.7]
    }  # fmt: skip
    assert {k: list(v) for k, v in samples["q2"].items()} == {
        "recall@5": [1.0, 0.9, 0.8], "ndcg@5": [0.5, 0.6]
    }  # fmt: skip
    same = rolling_reference(window[:1] * 2, 2).samples  # same keys: one column per key
    assert {k: list(v) for k, v in same["q2"].items()} == {"recall@5": [1.0, 1.0],
                                                           "ndcg@5": [0.5, 0.5]}  # fmt: skip
