"""The log surfacer: exactly one structured ``cycle`` event per cycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from cycles import make_result
from structlog.testing import capture_logs

from benchd.result import CycleResult
from benchd.surfacers.log import LogSurfacer, log_cycle


@pytest.fixture(autouse=True)
def default_structlog() -> Iterator[None]:
    """Other tests run cli.main(), which filters below warning; start from the defaults."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


def test_successful_cycle_logs_one_info_event_with_key_metrics() -> None:
    result = make_result(ks=(5, 10))
    with capture_logs() as events:
        log_cycle(result)
    (event,) = events
    assert event["event"] == "cycle" and event["log_level"] == "info"
    assert event["probe"] == "alpha" and event["outcome"] == "success"
    assert event["duration_s"] == round(result.duration_s, 4)
    assert event["recall@10"] == round(result.aggregate["recall@10"], 4)
    assert event["ndcg@5"] == round(result.aggregate["ndcg@5"], 4)
    assert result.load is not None and result.load.corrected is not None
    assert event["corrected_p50_s"] == round(result.load.corrected.p50, 6)
    assert event["corrected_samples"] == 3
    assert "corrected_p99_s" not in event  # 3 samples are too few for a p99
    assert "error_kind" not in event and "degraded_reasons" not in event


def test_degraded_cycle_logs_a_warning_with_its_reasons() -> None:
    result = make_result(outcome="degraded", reasons=("seed_incomplete", "queries_failed"))
    with capture_logs() as events:
        log_cycle(result)
    (event,) = events
    assert event["log_level"] == "warning" and event["outcome"] == "degraded"
    assert event["degraded_reasons"] == ["seed_incomplete", "queries_failed"]
    assert "error_kind" not in event


def test_failed_cycle_logs_a_warning_with_error_kind() -> None:
    result = make_result(outcome="failed", error_kind="connect", error_message="refused")
    with capture_logs() as events:
        log_cycle(result)
    (event,) = events
    assert event["log_level"] == "warning"
    assert event["error_kind"] == "connect" and event["error"] == "refused"
    assert "recall@10" not in event


def test_the_daemon_records_into_the_book_then_hands_each_result_to_every_surfacer(
    tmp_path: Path,
) -> None:
    """The push surfacers see results in order, after the book (pull surfacers) has them."""
    from benchd.config.load import Config, ServerConfig
    from benchd.daemon import Daemon
    from benchd.surfacers.base import Surfacer

    seen: list[tuple[str, int, bool]] = []
    daemon = Daemon(Config(path=str(tmp_path / "benchd.toml"), server=ServerConfig(), probes=()))

    class Recorder:
        def write(self, result: CycleResult) -> None:
            in_book = daemon.book.latest(result.probe) is result
            seen.append((result.probe, result.cycle, in_book))

    recorder = Recorder()
    assert isinstance(recorder, Surfacer)
    assert isinstance(LogSurfacer(), Surfacer)
    daemon.surfacers = [recorder, recorder]
    daemon.book.set_probes(["alpha"], {"alpha": 30.0})
    for cycle in (1, 2):
        daemon._sink(make_result("alpha", cycle=cycle))
    assert seen == [("alpha", 1, True), ("alpha", 1, True), ("alpha", 2, True), ("alpha", 2, True)]
