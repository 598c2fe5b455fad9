"""The result book: latest results, bounded history, cumulative counts, readiness."""

from __future__ import annotations

import dataclasses
import math
import threading

import pytest
from cycles import make_result

from benchd.surfacers.result_book import DEFAULT_BUCKETS, Histogram, ResultBook


def test_record_keeps_latest_result_and_bounded_history() -> None:
    book = ResultBook(history=3)
    results = [make_result(cycle=n) for n in range(1, 6)]
    for result in results:
        book.record(result)
    state = book.snapshot().states["alpha"]
    assert state.latest is results[-1]
    assert [s.cycle for s in state.history] == [3, 4, 5]
    assert book.latest("alpha") is results[-1]
    assert book.latest("nope") is None


def test_history_summary_carries_outcome_and_headline_latency() -> None:
    book = ResultBook()
    result = make_result(error_kind=None)
    book.record(result)
    (summary,) = book.snapshot().states["alpha"].history
    assert summary.outcome == "success"
    assert summary.duration_s == result.duration_s
    assert result.load is not None and result.load.corrected is not None
    assert summary.latency_p50_s == result.load.corrected.p50
    assert summary.latency_p99_s is None  # 3 samples: a "p99" would be their maximum
    assert summary.aggregate == dict(result.aggregate)


def test_history_keeps_a_p99_from_a_hundred_samples() -> None:
    book = ResultBook()
    result = make_result(latencies=[0.001 * (i + 1) for i in range(100)])
    book.record(result)
    (summary,) = book.snapshot().states["alpha"].history
    assert result.load is not None and result.load.corrected is not None
    assert summary.latency_p99_s == result.load.corrected.p99


def test_degraded_cycles_count_their_reasons_not_an_error_kind() -> None:
    book = ResultBook()
    book.record(make_result(cycle=1, outcome="degraded", reasons=("seed_incomplete",)))
    book.record(
        make_result(cycle=2, outcome="degraded", reasons=("seed_incomplete", "rate_limited"))
    )
    state = book.snapshot().states["alpha"]
    assert state.cycles["degraded"] == 2
    assert state.degraded == {
        "seed_incomplete": 2, "queries_failed": 0, "load_errors": 0, "rate_limited": 1,
    }  # fmt: skip
    assert state.cycle_errors == {}
    assert state.last_success_at is None


def test_counters_accumulate_across_cycles() -> None:
    book = ResultBook()
    first, second = make_result(cycle=1), make_result(cycle=2, outcome="failed", error_kind="auth")
    book.record(first)
    book.record(second)
    state = book.snapshot().states["alpha"]
    assert state.cycles == {"success": 1, "degraded": 0, "failed": 1, "timeout": 0}
    assert state.cycle_errors == {"auth": 1}
    assert first.seed is not None and second.seed is not None
    assert state.seed_records["imported"] == first.seed.imported + second.seed.imported
    assert state.seed_retries == first.seed.retries + second.seed.retries
    assert state.relevant_expected == first.relevant_expected + second.relevant_expected
    assert state.last_success_at == first.finished_at


def test_requests_are_counted_by_pass_and_outcome() -> None:
    book = ResultBook()
    result = make_result()
    book.record(result)
    book.record(result)
    state = book.snapshot().states["alpha"]
    assert result.load is not None
    assert state.requests[("serial", "ok")] == 2 * len(result.queries)
    for outcome, count in result.load.requests.items():
        assert state.requests[("load", outcome)] == 2 * count
    assert state.late == 2 * result.load.late
    assert state.dropped == 2 * result.load.dropped


def test_latency_histograms_are_cumulative_across_cycles() -> None:
    book = ResultBook()
    book.record(make_result(latencies=(0.004, 0.02)))
    book.record(make_result(cycle=2, latencies=(0.3,)))
    latency = book.snapshot().states["alpha"].latency
    serial = latency[("serial", "service")]
    assert serial.count == 3
    assert math.isclose(serial.sum, 0.004 + 0.02 + 0.3)
    assert latency[("load", "corrected")].count == 3


def test_timeout_cycle_without_error_kind_counts_as_timeout() -> None:
    book = ResultBook()
    book.record(make_result(outcome="timeout"))
    assert book.snapshot().states["alpha"].cycle_errors == {"timeout": 1}


def test_model_label_survives_a_cycle_without_target_info() -> None:
    book = ResultBook()
    book.record(make_result(model="text-embedding-3-small"))
    book.record(dataclasses.replace(make_result(cycle=2), info=None))
    assert book.snapshot().states["alpha"].model == "text-embedding-3-small"


def test_set_probes_drops_removed_probes_and_their_late_results() -> None:
    book = ResultBook()
    book.set_probes(["alpha", "beta"])
    book.record(make_result("alpha"))
    book.record(make_result("beta"))
    book.set_probes(["beta"])
    book.record(make_result("alpha", cycle=2))  # finished just after the reload
    snap = book.snapshot()
    assert snap.probes == ("beta",)
    assert set(snap.states) == {"beta"}


def test_ready_once_probes_are_declared_and_while_they_fail() -> None:
    book = ResultBook()
    assert not book.ready()  # the config is not loaded yet
    book.set_probes(["alpha", "beta"])
    assert book.ready() and book.snapshot().pending == ("alpha", "beta")
    book.record(make_result("beta", outcome="failed", error_kind="connect"))
    assert book.ready()  # readiness is about the process, not the store


def test_config_reload_outcomes_are_remembered() -> None:
    book = ResultBook(loaded_at=100.0)
    snap = book.snapshot()
    assert snap.reload_successful and snap.reload_success_at == 100.0
    book.config_reload(False, 200.0)
    snap = book.snapshot()
    assert not snap.reload_successful and snap.reload_success_at == 100.0
    book.config_reload(True, 300.0)
    snap = book.snapshot()
    assert snap.reload_successful and snap.reload_success_at == 300.0
    assert snap.reloads == {"failure": 1, "success": 1}


def test_histogram_bucket_bounds_are_inclusive_upper_limits() -> None:
    hist = Histogram.empty().add([DEFAULT_BUCKETS[0], math.nextafter(DEFAULT_BUCKETS[0], 1.0)])
    cumulative = hist.cumulative()
    assert cumulative[0] == (DEFAULT_BUCKETS[0], 1)
    assert cumulative[1] == (DEFAULT_BUCKETS[1], 2)


def test_histogram_ignores_nan_and_puts_huge_samples_in_inf_bucket() -> None:
    hist = Histogram.empty().add([math.nan, 1e6])
    assert hist.count == 1
    assert hist.cumulative()[-2][1] == 0
    assert hist.cumulative()[-1] == (math.inf, 1)


def test_history_must_keep_at_least_one_cycle() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ResultBook(history=0)


def test_snapshots_taken_while_another_thread_records_are_consistent() -> None:
    book = ResultBook(history=5)
    results = [make_result(cycle=n, latencies=(0.01, 0.02)) for n in range(1, 101)]
    done = threading.Event()

    def writer() -> None:
        for result in results:
            book.record(result)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = 0
    while not done.is_set() or seen == 0:
        state = book.snapshot().states.get("alpha")
        if state is None:
            continue
        seen += 1
        cycles = state.latest.cycle
        assert sum(state.cycles.values()) == cycles
        assert state.latency[("serial", "service")].count == 2 * cycles
        assert len(state.history) == min(cycles, 5)
    thread.join()
    assert book.snapshot().states["alpha"].latest is results[-1]
