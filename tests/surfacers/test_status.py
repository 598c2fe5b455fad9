"""The status surfacer: a stable, JSON-safe, secret-free view of cycle results."""

from __future__ import annotations

import dataclasses
import json
import secrets

from cycles import make_result

from benchd.config.thresholds import parse_threshold
from benchd.drift_outcome import DriftOutcome, MetricDrift, RegressedQuery
from benchd.redact import public_url, register_secret
from benchd.scoring.thresholds import evaluate_all
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import result_to_json, status_document

TOP_LEVEL = {
    "name",
    "unranked",
    "outcome",
    "target",
    "corpus",
    "cycle",
    "started_at",
    "started_at_iso",
    "finished_at",
    "finished_at_iso",
    "duration_s",
    "phases",
    "phase_wait_s",
    "model",
    "target_info",
    "ks",
    "fixture_hash",
    "seed",
    "aggregate",
    "by_category",
    "ci",
    "relevant",
    "queries",
    "latency",
    "load",
    "errors",
    "retries",
    "retry_wait_s",
    "short_answers",
    "error",
    "drift",
    "degraded_reasons",
    "thresholds",
}
PERCENTILES = {"p50", "p90", "p95", "p99", "max", "mean", "count", "withheld"}


def test_result_json_has_the_documented_schema() -> None:
    result = make_result()
    doc = result_to_json(result)
    assert set(doc) == TOP_LEVEL
    assert set(doc["seed"]) >= {
        "requested", "imported", "skipped", "unchanged", "errors", "verified", "missing", "retries",
        "searchable_after_s",
    }  # fmt: skip
    assert set(doc["latency"]) == {"service", "corrected", "serial"}
    assert set(doc["latency"]["service"]) == PERCENTILES
    assert set(doc["load"]) >= {"mode", "achieved_rate", "target_rate", "late", "dropped"}
    assert set(doc["queries"][0]) == {
        "id", "q", "category", "expected_ids", "ranked_ids", "metrics", "latency_s", "error",
    }  # fmt: skip
    assert doc["error"] is None


def test_result_json_values_come_from_the_result() -> None:
    result = make_result()
    doc = result_to_json(result)
    assert result.load is not None and result.load.corrected is not None
    assert doc["latency"]["corrected"]["p50"] == result.load.corrected.p50
    assert doc["latency"]["corrected"]["p99"] is None  # 3 samples
    assert doc["latency"]["corrected"]["withheld"]["p99"] == (
        "needs >= 100 samples, the cycle had 3"
    )
    assert doc["latency"]["service"]["count"] == result.load.service.count
    assert doc["aggregate"] == dict(result.aggregate)
    assert doc["ci"] == {key: list(bounds) for key, bounds in result.ci.items()}
    assert doc["queries"][1]["ranked_ids"] == list(result.queries[1].ranked_ids)
    assert doc["model"] == (result.info.model if result.info else None)


def test_result_json_without_load_reports_serial_latency_and_null_corrected() -> None:
    result = make_result(load=False)
    doc = result_to_json(result)
    assert doc["load"] is None
    assert doc["latency"]["corrected"] is None
    assert doc["latency"]["service"]["p50"] == result.serial_latency.p50


def test_failed_cycle_carries_its_error() -> None:
    doc = result_to_json(make_result(outcome="failed", error_kind="auth", error_message="401"))
    assert doc["error"] == {"kind": "auth", "message": "401"}
    assert doc["outcome"] == "failed"


def test_non_finite_numbers_become_null_so_strict_json_works() -> None:
    result = dataclasses.replace(make_result(), aggregate={"recall@10": float("nan")})
    text = json.dumps(result_to_json(result), allow_nan=False)
    assert json.loads(text)["aggregate"] == {"recall@10": None}


def test_no_credentials_or_registered_secrets_leave_benchd() -> None:
    key = secrets.token_hex(16)
    register_secret(key)
    result = make_result(
        endpoint=f"https://bench:{key}@store.example:8443/api?api_key={key}",
        outcome="failed",
        error_kind="auth",
        error_message=f"GET https://bench:hunter2@store.example/x refused key {key}",
    )
    text = json.dumps(result_to_json(result))
    assert key not in text and "hunter2" not in text
    assert result_to_json(result)["target_info"]["endpoint"] == "https://store.example:8443/api"


def test_public_url_strips_userinfo_query_and_fragment() -> None:
    assert public_url("http://u:p@[::1]:9/a/b?x=1#f") == "http://[::1]:9/a/b"
    assert public_url("http://host/") == "http://host/"


def test_status_document_lists_pending_and_finished_probes_with_history() -> None:
    book = ResultBook(history=2)
    book.set_probes(["alpha", "beta"])
    for n in (1, 2, 3):
        book.record(make_result("alpha", cycle=n))
    doc = status_document(book)
    assert doc["ready"] is False and doc["pending"] == ["beta"]
    beta = doc["probes"]["beta"]
    assert beta["state"] == "pending" and beta["reason"] == "waiting for the first cycle"
    assert (beta["last"], beta["history"], beta["cycles"]) == (None, [], {})
    alpha = doc["probes"]["alpha"]
    assert alpha["state"] == "up" and alpha["health"] == "healthy"
    assert beta["health"] == "waiting" and beta["cycles_total"] == 0
    assert [h["cycle"] for h in alpha["history"]] == [3, 2]  # newest first, bounded
    assert alpha["cycles_total"] == 3  # counted over every cycle, not only the kept history
    assert alpha["last"]["cycle"] == 3 and set(alpha["last"]) == TOP_LEVEL
    assert alpha["cycles"]["success"] == 3
    json.dumps(doc, allow_nan=False)


def test_status_document_reports_failing_probe_and_reload_state() -> None:
    book = ResultBook(loaded_at=10.0)
    book.set_probes(["alpha"])
    book.record(make_result(outcome="timeout", error_kind="timeout"))
    book.config_reload(False, 20.0, error="bench.toml: probe[0].k: must be 1..100")
    doc = status_document(book)
    assert doc["ready"] is True
    alpha = doc["probes"]["alpha"]
    assert alpha["state"] == "failing" and alpha["reason"].startswith("timeout: ")
    assert doc["config"] == {
        "last_reload_successful": False,
        "last_reload_success_at": 10.0,
        "last_reload_success_at_iso": "1970-01-01T00:00:10.000Z",
        "last_reload_error": "bench.toml: probe[0].k: must be 1..100",
        "reload_times": [],  # successful reloads only: the page marks them on its charts
    }
    assert alpha["health"] == "not-measuring" and alpha["cycles_total"] == 1
    book.config_reload(True, 30.0)
    assert status_document(book)["config"]["last_reload_error"] is None


def test_drift_appears_once_under_its_own_keys() -> None:
    metric = MetricDrift(-0.2, 0.0, 0.04, True, -0.3, -0.1, 12, before=0.9, after=0.7)
    drift = DriftOutcome(baseline="rolling", metrics={"recall@10": metric})
    doc = result_to_json(make_result(drift=drift))
    assert doc["drift"] == drift.as_json()  # no metric@k copies beside "metrics"
    assert doc["drift"]["metrics"]["recall@10"]["before"] == 0.9  # the baseline, for the page


def test_regressed_queries_carry_their_text_and_expected_ids() -> None:
    regressed = RegressedQuery("q1", "recall@10", 1.0, 0.0, {"m1": 1}, {"m1": None})
    drift = DriftOutcome(baseline="pinned", regressed=(regressed,), baseline_model="minilm")
    doc = result_to_json(make_result(drift=drift), queries=False)
    (query,) = doc["drift"]["regressed_queries"]
    assert query["q"] == "what about topic 1?" and query["expected_ids"] == ["m1", "m2"]
    assert doc["drift"]["baseline_model"] == "minilm" and doc["drift"]["model"] == ""


def test_times_come_as_epoch_and_iso_8601() -> None:
    doc = result_to_json(make_result(started_at=1_700_000_000.25))
    assert doc["started_at_iso"] == "2023-11-14T22:13:20.250Z"
    assert doc["finished_at_iso"] is not None and doc["finished_at_iso"].endswith("Z")


def test_status_can_be_trimmed_to_one_probe_and_without_queries() -> None:
    book = ResultBook()
    book.set_probes(["alpha", "beta"])
    book.record(make_result("alpha"))
    book.record(make_result("beta"))
    doc = status_document(book, probes={"beta"}, queries=False)
    assert list(doc["probes"]) == ["beta"]
    assert "queries" not in doc["probes"]["beta"]["last"]
    assert "queries" in status_document(book)["probes"]["alpha"]["last"]


def test_state_names_the_reason_and_the_next_cycle() -> None:
    from benchd.schedule import Schedule

    book = ResultBook()
    book.set_probes(["alpha", "beta", "gamma"])
    for n in (1, 2):
        book.record(make_result("alpha", cycle=n, outcome="failed", error_kind="connect",
                                error_message="connection refused"))  # fmt: skip
    flagged = MetricDrift(-0.2, 0.0, 0.04, True, -0.3, -0.1, 12)
    quiet = dataclasses.replace(flagged, detected=False)
    drift = DriftOutcome(baseline="pinned", metrics={"ndcg@10": flagged, "hit@5": quiet})
    book.record(make_result("beta", drift=drift))
    schedules = {"alpha": Schedule(running=False, next_due_at=1_800_000_000.0),
                 "gamma": Schedule(running=True, next_due_at=None)}  # fmt: skip
    probes = status_document(book, schedules)["probes"]
    assert probes["alpha"]["state"] == "failing"
    assert probes["alpha"]["reason"] == "connect: connection refused (2 cycles in a row)"
    assert probes["alpha"]["next_cycle_at_iso"] == "2027-01-15T08:00:00.000Z"
    assert probes["beta"]["state"] == "degraded"
    assert probes["beta"]["reason"] == (
        "quality dropped against the pinned baseline since 2023-11-14T22:13:20.000Z: "
        "ndcg@10 -0.200"
    )
    assert probes["gamma"]["state"] == "pending" and probes["gamma"]["running"] is True
    assert probes["gamma"]["reason"] == "first cycle running"


def test_numpy_numbers_from_the_statistics_become_plain_json_numbers() -> None:
    import numpy as np

    delta, n = np.float64(-0.1), np.int64(12)
    metric = MetricDrift(delta, np.float64(0.0), 0.5, True, -0.2, -0.05, n)  # type: ignore[arg-type]
    drift = DriftOutcome(baseline="pinned", noise="stable", samples=3, metrics={"recall": metric})
    doc = json.loads(json.dumps(result_to_json(make_result(drift=drift))))
    assert doc["drift"]["metrics"]["recall"]["delta"] == -0.1
    assert doc["drift"]["metrics"]["recall"]["n"] == 12
    assert doc["drift"]["detected"] is True and doc["drift"]["noise"] == "stable"


def test_drift_appears_once_per_probe_under_drift() -> None:
    metric = MetricDrift(-0.1, 0.0, 0.5, True, -0.2, -0.05, 12)
    drift = DriftOutcome(baseline="pinned", metrics={"recall@10": metric})
    doc = result_to_json(make_result(drift=drift))
    assert "recall@10" not in doc["drift"]  # no flattened copy beside drift.metrics
    assert set(doc["drift"]) == {
        "baseline", "stale", "stale_reason", "noise", "samples", "detected", "model_changed",
        "metrics", "regressed_queries", "change", "model", "baseline_model",
    }  # fmt: skip


def test_result_json_carries_the_verdicts_the_runner_judged() -> None:
    result = make_result()
    verdicts = evaluate_all(
        [parse_threshold("recall@10>=0.0"), parse_threshold("load:p99<1")], result
    )
    doc = result_to_json(dataclasses.replace(result, thresholds=verdicts))
    met, withheld = doc["thresholds"]
    assert met == {
        "name": "serial:recall@10>=0", "value": result.aggregate["recall@10"], "breached": False,
    }  # fmt: skip
    assert withheld["name"] == "load:p99<1" and withheld["note"].startswith("p99 needs >= 100")
    assert result_to_json(result)["thresholds"] == []
