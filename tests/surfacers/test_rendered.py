"""/metrics and /api/status bodies cached per change of state equal fresh renders, always."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry
from surfacers.cycles import make_result

from benchd import redact
from benchd.drift_outcome import DriftOutcome, MetricDrift
from benchd.scheduler import Schedule
from benchd.surfacers import rendered
from benchd.surfacers.prometheus import BookCollector
from benchd.surfacers.rendered import MetricsCache, StatusCache
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import status_document

FORMATS = ("", "application/openmetrics-text; version=1.0.0")
SECRET = "rendered-cache-secret-0123456789"


class Ticking:
    """A collector whose value moves at every read, like process_cpu_seconds_total."""

    def __init__(self) -> None:
        self.reads = 0

    def collect(self) -> Iterator[Metric]:
        self.reads += 1
        family = CounterMetricFamily("test_reads", "Reads of this collector.")
        family.add_metric([], self.reads)
        yield family


def fresh_book_part(book: ResultBook, accept: str) -> bytes:
    encoder, _ = choose_encoder(accept)
    registry = CollectorRegistry()
    registry.register(BookCollector(book))
    out = encoder(registry)
    return out.removesuffix(b"# EOF\n")


def fresh_status(
    book: ResultBook, schedules: dict[str, Schedule], names: list[str] | None, queries: bool
) -> bytes:
    document = status_document(book, schedules, probes=names, queries=queries)
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode()


def assert_all_fresh(
    book: ResultBook, metrics: MetricsCache, status: StatusCache, schedules: dict[str, Schedule]
) -> None:
    for accept in FORMATS:
        encoder, content_type = choose_encoder(accept)
        assert metrics.book_body(encoder, content_type) == fresh_book_part(book, accept)
    for names in (None, ["alpha"]):
        for queries in (True, False):
            body = status.render(schedules, names, queries=queries).body
            assert body == fresh_status(book, schedules, names, queries)


@pytest.fixture
def clean_secrets() -> Iterator[None]:
    redact.clear_secrets()
    yield
    redact.clear_secrets()


@pytest.mark.usefixtures("clean_secrets")
def test_cached_bodies_equal_fresh_renders_after_every_change_of_state() -> None:
    book = ResultBook()
    metrics = MetricsCache(book, CollectorRegistry())
    status = StatusCache(book)
    schedules = {"alpha": Schedule(False, 1e9), "beta": Schedule(True, None)}
    book.set_probes(["alpha", "beta"], {"alpha": 5.0, "beta": 60.0})
    assert_all_fresh(book, metrics, status, schedules)  # nothing measured yet
    book.record(make_result("alpha"))
    assert_all_fresh(book, metrics, status, schedules)
    book.record(make_result("beta", outcome="failed", error_kind="http", error_message=SECRET))
    assert_all_fresh(book, metrics, status, schedules)
    drift = DriftOutcome(
        baseline="pinned", metrics={"recall@10": MetricDrift(-0.2, 0.0, 0.01, True, -0.3, -0.1, 3)}
    )
    book.record(make_result("alpha", cycle=2, drift=drift))  # a cycle recorded
    assert_all_fresh(book, metrics, status, schedules)
    schedules["alpha"] = Schedule(True, 1e9 + 5)  # a cycle started: only the schedule moved
    assert_all_fresh(book, metrics, status, schedules)
    redact.register_secret(SECRET)  # a reload read a new secret: old text is masked now
    assert_all_fresh(book, metrics, status, schedules)
    assert SECRET.encode() not in status.render(schedules, None, queries=True).body
    book.config_reload(False, 1e9 + 10, error="bad toml")
    assert_all_fresh(book, metrics, status, schedules)
    book.set_probes(["alpha"], {"alpha": 10.0})  # reloaded: beta removed, alpha's interval
    book.config_reload(True, 1e9 + 20)
    assert_all_fresh(book, metrics, status, schedules)
    book.cleanup("beta", redact_report(), 1e9 + 30)
    assert_all_fresh(book, metrics, status, schedules)


def redact_report() -> object:
    class Report:
        namespace, deleted, leftover = "ns-beta", 3, 1

    return Report()


def test_a_scrape_after_a_cycle_shows_the_cycle_and_renders_only_that_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    book = ResultBook()
    book.set_probes(["alpha", "beta"])
    book.record(make_result("alpha"))
    book.record(make_result("beta"))
    metrics = MetricsCache(book, CollectorRegistry())
    encoder, content_type = choose_encoder("")
    before = metrics.render(encoder, content_type)
    rendered_for: list[list[str]] = []
    real = rendered.probe_families

    def counting(states: list) -> Iterator[Metric]:  # type: ignore[type-arg]
        rendered_for.append([s.name for s in states])
        return real(states)

    monkeypatch.setattr(rendered, "probe_families", counting)
    assert metrics.render(encoder, content_type) == before  # no change: nothing rendered
    assert rendered_for == []
    book.record(make_result("beta", cycle=2, outcome="timeout"))
    after = metrics.render(encoder, content_type)
    assert rendered_for == [["beta"]]  # alpha's samples came from the cache
    assert b'benchd_cycles_total{outcome="timeout",probe="beta"} 1.0' in after
    assert b'benchd_cycles_total{outcome="timeout",probe="beta"} 0.0' in before
    assert after == fresh_book_part(book, "")


def test_what_moves_between_cycles_is_read_at_every_scrape() -> None:
    book = ResultBook()
    book.record(make_result())
    ticking = Ticking()
    fresh = CollectorRegistry()
    fresh.register(ticking)
    metrics = MetricsCache(book, fresh)
    for accept in FORMATS:
        encoder, content_type = choose_encoder(accept)
        first = metrics.render(encoder, content_type)
        second = gzip.decompress(metrics.render(encoder, content_type, gzip=True))
        assert f"test_reads_total {ticking.reads - 1}.0".encode() in first
        assert f"test_reads_total {ticking.reads}.0".encode() in second
        assert first.startswith(fresh_book_part(book, accept))  # the book first, then the rest
        assert first.count(b"# EOF") == (1 if accept else 0) and first.endswith(
            b"# EOF\n" if accept else b"\n"
        )


def test_a_gzipped_status_body_is_the_plain_one() -> None:
    book = ResultBook()
    book.record(make_result())
    zipped = StatusCache(book).render({}, None, queries=True)
    assert gzip.decompress(zipped.gzip()) == zipped.body
    assert gzip.decompress(zipped.gzip()) == zipped.body  # the kept compressor is copied
