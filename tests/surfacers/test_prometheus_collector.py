"""The Prometheus collector: names, labels and values straight from the book."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest
from cycles import make_result, promtool_path
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families

from benchd.drift_outcome import ChangeSignals, DriftOutcome, MetricDrift, RegressedQuery
from benchd.surfacers.prometheus import BookCollector, build_registry, split_metric_key
from benchd.surfacers.result_book import ResultBook

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(book: ResultBook) -> Series:
    text = generate_latest(build_registry(book)).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    """One sample's value; ``pass_`` stands for the ``pass`` label (a Python keyword)."""
    fixed = {("pass" if key == "pass_" else key): text for key, text in labels.items()}
    return series[(name, frozenset(fixed.items()))]


def names(series: Series) -> set[str]:
    return {name for name, _ in series}


def probes_of(series: Series, name: str) -> set[str]:
    return {dict(labels).get("probe", "") for n, labels in series if n == name}


def test_quality_gauges_mirror_serial_and_load_aggregates() -> None:
    book = ResultBook()
    result = make_result()
    book.record(result)
    series = scrape(book)
    head = {"probe": "alpha", "target": "zengram", "corpus": "smoke"}
    assert result.load is not None
    for pass_, means in (("serial", result.aggregate), ("load", result.load.aggregate)):
        for key, mean in means.items():
            metric, k = split_metric_key(key)
            got = value(series, "benchd_quality", **head, pass_=pass_, metric=metric, k=k)
            assert got == mean


def test_category_and_ci_gauges_mirror_the_result() -> None:
    book = ResultBook()
    result = make_result(categories=("fact", "temporal", "multi-hop"))
    book.record(result)
    series = scrape(book)
    head = {"probe": "alpha", "target": "zengram", "corpus": "smoke"}
    for category, means in result.by_category.items():
        for key, mean in means.items():
            metric, k = split_metric_key(key)
            labels = {**head, "category": category, "metric": metric, "k": k}
            assert value(series, "benchd_category_quality", **labels) == mean
    for key, (lo, hi) in result.ci.items():
        metric, k = split_metric_key(key)
        assert value(series, "benchd_quality_ci_lower", **head, metric=metric, k=k) == lo
        assert value(series, "benchd_quality_ci_upper", **head, metric=metric, k=k) == hi


def test_self_health_series_before_and_after_the_first_cycle() -> None:
    book = ResultBook()
    book.set_probes(["alpha"])
    series = scrape(book)
    assert value(series, "benchd_cycles_total", probe="alpha", outcome="success") == 0
    assert "benchd_up" not in names(series)
    result = make_result(model="minilm")
    book.record(result)
    series = scrape(book)
    assert value(series, "benchd_up", probe="alpha") == 1
    assert value(series, "benchd_cycles_total", probe="alpha", outcome="success") == 1
    assert value(series, "benchd_last_success_timestamp_seconds", probe="alpha") == (
        result.finished_at
    )
    info = {"probe": "alpha", "target": "zengram", "corpus": "smoke", "model": "minilm"}
    assert value(series, "benchd_probe_info", **info) == 1
    for phase, seconds in result.phases.items():
        assert value(series, "benchd_cycle_duration_seconds", probe="alpha", phase=phase) == seconds


def test_failed_cycle_sets_up_to_zero_and_counts_its_error_kind() -> None:
    book = ResultBook()
    book.record(make_result())
    book.record(make_result(cycle=2, outcome="failed", error_kind="http_5xx"))
    series = scrape(book)
    assert value(series, "benchd_up", probe="alpha") == 0
    assert value(series, "benchd_cycle_errors_total", probe="alpha", kind="http_5xx") == 1
    assert value(series, "benchd_cycles_total", probe="alpha", outcome="failed") == 1


def test_removed_probe_disappears_from_every_family() -> None:
    book = ResultBook()
    book.set_probes(["alpha", "beta"])
    book.record(make_result("alpha"))
    book.record(make_result("beta"))
    assert "beta" in probes_of(scrape(book), "benchd_quality")
    book.set_probes(["alpha"])
    series = scrape(book)
    assert all(dict(labels).get("probe") != "beta" for _, labels in series)
    assert "alpha" in probes_of(series, "benchd_quality")


def test_latency_histogram_is_cumulative_and_counters_never_decrease() -> None:
    book = ResultBook()
    first = make_result(latencies=(0.004, 0.02))
    second = make_result(cycle=2, latencies=(0.3, 7.0))
    book.record(first)
    before = scrape(book)
    book.record(second)
    after = scrape(book)
    labels = {"probe": "alpha", "pass": "serial", "latency": "service"}
    assert value(after, "benchd_request_duration_seconds_count", **labels) == 4
    assert value(after, "benchd_request_duration_seconds_sum", **labels) == pytest.approx(7.324)
    assert value(after, "benchd_request_duration_seconds_bucket", **labels, le="0.005") == 1
    assert value(after, "benchd_request_duration_seconds_bucket", **labels, le="+Inf") == 4
    for key, old in before.items():
        if key[0].endswith(("_total", "_bucket", "_count")):
            assert after[key] >= old, key


def test_percentile_gauges_show_last_cycle_service_and_corrected() -> None:
    book = ResultBook()
    result = make_result(latencies=[0.001 * (i + 1) for i in range(100)])
    book.record(result)
    series = scrape(book)
    assert result.load is not None and result.load.corrected is not None
    load = {"probe": "alpha", "pass": "load"}
    name = "benchd_request_duration_percentile_seconds"
    assert (
        value(series, name, **load, latency="service", percentile="99") == result.load.service.p99
    )
    assert value(series, name, **load, latency="corrected", percentile="100") == (
        result.load.corrected.max
    )
    serial = {"probe": "alpha", "pass": "serial", "latency": "service"}
    assert value(series, name, **serial, percentile="50") == result.serial_latency.p50
    assert value(series, "benchd_request_duration_samples", **serial) == 100


def test_percentiles_with_too_few_samples_are_omitted_and_the_count_says_why() -> None:
    book = ResultBook()
    book.record(make_result(latencies=(0.01, 0.02, 0.5)))  # 3 samples
    series = scrape(book)
    serial = {"probe": "alpha", "pass": "serial", "latency": "service"}
    name = "benchd_request_duration_percentile_seconds"
    assert value(series, "benchd_request_duration_samples", **serial) == 3
    assert value(series, name, **serial, percentile="50") == 0.02
    assert value(series, name, **serial, percentile="100") == 0.5
    for percentile in ("90", "95", "99"):
        key = (name, frozenset({**serial, "percentile": percentile}.items()))
        assert key not in series


def test_benchd_up_is_one_only_for_success_and_degraded_reasons_are_exported() -> None:
    book = ResultBook()
    book.record(make_result("alpha"))
    book.record(make_result("beta", outcome="degraded", reasons=("rate_limited",)))
    series = scrape(book)
    assert value(series, "benchd_up", probe="alpha") == 1.0
    assert value(series, "benchd_up", probe="beta") == 0.0
    degraded = "benchd_cycle_degraded_total"
    assert value(series, degraded, probe="beta", reason="rate_limited") == 1
    assert value(series, degraded, probe="beta", reason="seed_incomplete") == 0
    assert value(series, "benchd_last_cycle_degraded", probe="beta", reason="rate_limited") == 1
    assert value(series, "benchd_last_cycle_degraded", probe="alpha", reason="rate_limited") == 0
    assert value(series, "benchd_cycles_total", probe="beta", outcome="degraded") == 1


def test_closed_loop_has_no_corrected_latency_or_target_rate() -> None:
    book = ResultBook()
    book.record(make_result(open_loop=False))
    series = scrape(book)
    assert not any(dict(labels).get("latency") == "corrected" for _, labels in series)
    assert "benchd_target_rate_requests_per_second" not in names(series)
    assert "benchd_achieved_rate_requests_per_second" in names(series)


def test_request_and_seed_counters_mirror_the_results() -> None:
    book = ResultBook()
    result = make_result()
    book.record(result)
    book.record(result)
    series = scrape(book)
    assert result.load is not None and result.seed is not None
    for outcome, count in result.load.requests.items():
        got = value(series, "benchd_requests_total", probe="alpha", pass_="load", outcome=outcome)
        assert got == 2 * count
    assert value(series, "benchd_requests_late_total", probe="alpha") == 2 * result.load.late
    got = value(series, "benchd_seed_records_total", probe="alpha", status="skipped")
    assert got == 2 * result.seed.skipped
    got = value(series, "benchd_seed_records_total", probe="alpha", status="unchanged")
    assert got == 2 * result.seed.unchanged == 4  # apart from skipped: never sent
    got = value(series, "benchd_seed_last_records", probe="alpha", status="unchanged")
    assert got == result.seed.unchanged
    got = value(series, "benchd_seed_last_records", probe="alpha", status="missing")
    assert got == len(result.seed.missing)
    for k, found in result.relevant_found.items():
        assert value(series, "benchd_relevant_found_total", probe="alpha", k=str(k)) == 2 * found
    expected = value(series, "benchd_relevant_expected_total", probe="alpha")
    assert expected == 2 * result.relevant_expected


def _drift(delta: float = -0.1, detected: bool = True, **fields: object) -> DriftOutcome:
    metric = MetricDrift(delta, 0.001, 0.02, detected, delta - 0.05, delta + 0.05, 12)
    return DriftOutcome(
        baseline="pinned", noise="measured", samples=5, metrics={"recall@10": metric}, **fields
    )  # type: ignore[arg-type]


def test_drift_outcome_of_the_drift_tracker_becomes_drift_gauges() -> None:
    metric = MetricDrift(-0.25, 0.001, 0.03, True, -0.3, -0.2, 12)
    regressed = RegressedQuery("q1", "recall@10", 1.0, 0.0)
    change = ChangeSignals(10, 0.42, -0.55, 0.0001, True)
    outcome = DriftOutcome(
        baseline="pinned",
        noise="measured",
        samples=5,
        metrics={"recall@10": metric, "rr": dataclasses.replace(metric, detected=False)},
        regressed=(regressed, regressed),
        change=change,
    )
    book = ResultBook()
    book.record(make_result(drift=outcome))
    series = scrape(book)
    recall = {"probe": "alpha", "metric": "recall", "k": "10"}
    assert value(series, "benchd_drift_delta", **recall) == metric.delta
    assert value(series, "benchd_drift_delta_ci_upper", **recall) == metric.ci_high
    assert value(series, "benchd_drift_p_value", **recall) == metric.p_value
    assert value(series, "benchd_drift_p_value_queries", **recall) == metric.p_value_queries
    assert value(series, "benchd_drift_detected", **recall) == 1
    assert value(series, "benchd_drift_detected", probe="alpha", metric="rr", k="all") == 0
    assert value(series, "benchd_drift_regressed_queries", probe="alpha") == 2
    assert value(series, "benchd_drift_baseline_stale", probe="alpha") == 0
    assert value(series, "benchd_drift_reference_samples", probe="alpha") == 5
    assert value(series, "benchd_drift_noise_measured", probe="alpha") == 1
    assert value(series, "benchd_drift_ranking_overlap", probe="alpha") == 0.42
    assert value(series, "benchd_drift_ranking_overlap_delta", probe="alpha") == -0.55
    assert value(series, "benchd_drift_model_changed", probe="alpha") == 1


def test_a_cycle_compared_with_nothing_exports_no_drift_series() -> None:
    book = ResultBook()
    book.record(make_result(drift=DriftOutcome()))
    series = scrape(book)
    assert value(series, "benchd_drift_baseline_stale", probe="alpha") == 0
    assert not probes_of(series, "benchd_drift_delta")
    assert not probes_of(series, "benchd_drift_model_changed")


def test_config_reload_gauges_and_build_info() -> None:
    book = ResultBook(loaded_at=50.0)
    book.config_reload(False, 60.0)
    series = scrape(book)
    assert value(series, "benchd_config_last_reload_successful") == 0
    assert value(series, "benchd_config_last_reload_success_timestamp_seconds") == 50.0
    assert value(series, "benchd_config_reloads_total", outcome="failure") == 1
    assert "benchd_build_info" in names(series)
    assert "process_cpu_seconds_total" in names(series)


def test_no_label_value_carries_a_query_text_an_id_or_a_url() -> None:
    book = ResultBook()
    result = make_result(endpoint="https://user:secret@store.example/api?key=abc")
    book.record(result)
    forbidden = {result.info.endpoint} if result.info else set()
    for q in result.queries:
        forbidden |= {q.id, q.q, *q.expected_ids, *q.ranked_ids}
    for _, labels in scrape(book):
        for label, text in labels:
            assert text not in forbidden and "://" not in text, (label, text)


def test_openmetrics_exposition_parses() -> None:
    book = ResultBook()
    book.record(make_result(drift=_drift()))
    text = generate_openmetrics(build_registry(book)).decode()
    families = {f.name for f in parse_openmetrics(text)}
    assert {"benchd_quality", "benchd_cycles", "benchd_build", "benchd_probe"} <= families


@pytest.mark.promtool
def test_promtool_check_metrics_is_clean() -> None:
    tool = promtool_path()
    book = ResultBook()
    book.set_probes(["alpha", "beta", "gamma"])
    book.record(make_result("alpha", drift=_drift(change=ChangeSignals(10, 0.5, -0.5, 0.0, True))))
    book.record(make_result("beta", outcome="failed", error_kind="auth"))
    text = generate_latest(build_registry(book))
    proc = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()


def test_collect_covers_ten_probes_with_ten_categories() -> None:
    """Every probe x category x k sample is exported (speed: bench/scrape_bench.py)."""
    book = ResultBook()
    categories = [f"cat{i}" for i in range(10)]
    for p in range(10):
        book.record(make_result(f"probe{p}", ks=(1, 5, 10), categories=categories))
    collector = BookCollector(book)
    samples = sum(len(m.samples) for m in collector.collect())
    assert samples > 10 * 10 * 3 * 7  # the category families alone


def test_every_exported_family_is_in_the_metrics_catalogue_and_back() -> None:
    catalogue = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
    documented = set(re.findall(r"^\| `(benchd_[a-z_]+)` \|", catalogue.read_text(), re.M))
    book = ResultBook()
    book.record(make_result(drift=_drift(change=ChangeSignals(10, 0.5, -0.5, 0.0, True))))
    suffix = {"counter": "_total", "info": "_info"}
    exported = {m.name + suffix.get(m.type, "") for m in BookCollector(book).collect()}
    assert exported == documented


def test_model_label_from_the_store_never_carries_credentials() -> None:
    book = ResultBook()
    book.record(make_result(model="ollama:http://admin:hunter2@gpu:11434/nomic-embed-text"))
    (labels,) = [dict(lbl) for name, lbl in scrape(book) if name == "benchd_probe_info"]
    assert labels["model"] == "ollama:http://***@gpu:11434/nomic-embed-text"


def test_a_drifted_metric_exports_its_baseline_and_current_values() -> None:
    """What a page shows as "before → now"; a comparison without them exports neither."""
    metric = MetricDrift(-0.323, 0.001, 0.03, True, -0.4, -0.2, 16, before=0.917, after=0.594)
    unvalued = MetricDrift(-0.1, 0.001, 0.03, True, -0.2, -0.05, 16)  # before/after: NaN
    outcome = DriftOutcome(
        baseline="pinned", noise="stable", samples=3,
        metrics={"recall@10": metric, "ndcg@10": unvalued},
    )  # fmt: skip
    book = ResultBook()
    book.record(make_result(drift=outcome))
    series = scrape(book)
    recall = {"probe": "alpha", "metric": "recall", "k": "10"}
    assert value(series, "benchd_drift_baseline_value", **recall) == 0.917
    assert value(series, "benchd_drift_current_value", **recall) == 0.594
    ndcg = {"probe": "alpha", "metric": "ndcg", "k": "10"}
    assert value(series, "benchd_drift_delta", **ndcg) == -0.1
    assert ("benchd_drift_baseline_value", frozenset(ndcg.items())) not in series
