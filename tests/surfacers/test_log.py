"""The log surfacer: exactly one structured ``cycle`` event per cycle."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from cycles import make_result
from structlog.testing import capture_logs

from benchd.surfacers.log import log_cycle


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
    assert event["corrected_p99_s"] == round(result.load.corrected.p99, 6)
    assert "error_kind" not in event


def test_failed_cycle_logs_a_warning_with_error_kind() -> None:
    result = make_result(outcome="failed", error_kind="connect", error_message="refused")
    with capture_logs() as events:
        log_cycle(result)
    (event,) = events
    assert event["log_level"] == "warning"
    assert event["error_kind"] == "connect" and event["error"] == "refused"
    assert "recall@10" not in event
