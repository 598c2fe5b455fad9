"""The configured probe interval is exported so alerts can count intervals."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from benchd.surfacers.prometheus import build_registry
from benchd.surfacers.result_book import ResultBook


def interval_samples(book: ResultBook) -> dict[str, float]:
    text = generate_latest(build_registry(book)).decode()
    return {
        s.labels["probe"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "benchd_probe_interval_seconds"
    }


def test_interval_is_exported_from_startup_and_follows_reloads() -> None:
    book = ResultBook()
    book.set_probes(["a", "b"], {"a": 300.0, "b": 60.0})
    assert interval_samples(book) == {"a": 300.0, "b": 60.0}
    book.set_probes(["b"], {"b": 30.0})
    assert interval_samples(book) == {"b": 30.0}


def test_request_retries_accumulate_across_cycles() -> None:
    import dataclasses

    from cycles import make_result

    book = ResultBook()
    book.set_probes(["p"])
    first = dataclasses.replace(make_result(probe="p"), retries=3)
    book.record(first)
    book.record(dataclasses.replace(first, cycle=2, retries=4))
    text = generate_latest(build_registry(book)).decode()
    values = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "benchd_request_retries_total"
    ]
    assert values == [7.0]
