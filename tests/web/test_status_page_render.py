"""The status page's HTML, rendered from the /api/status document (no browser needed)."""

from __future__ import annotations

import re

from surfacers.cycles import make_result

from benchd.scheduler import Schedule
from benchd.surfacers.book import ResultBook
from benchd.surfacers.status import status_document
from benchd.web.page import render_page


def page(book: ResultBook, schedules: dict[str, Schedule] | None = None) -> str:
    return render_page(status_document(book, schedules, queries=False), now=1_700_000_000.0)


def test_each_probe_has_a_card_with_state_facts_and_three_charts() -> None:
    book = ResultBook()
    book.set_probes(["alpha", "beta", "gamma"])
    for n in (1, 2, 3):
        book.record(make_result("alpha", cycle=n, started_at=1_699_999_000.0 + n))
    book.record(make_result("beta", outcome="failed", error_kind="auth", error_message="401"))
    due = {"alpha": Schedule(running=False, next_due_at=1_700_000_042.0)}
    html = page(book, due)
    states = dict(re.findall(r'data-probe="([^"]+)" data-state="([^"]+)"', html))
    assert states == {"alpha": "up", "beta": "failing", "gamma": "pending"}
    assert html.count('data-chart="quality"') == 3
    assert html.count('data-chart="latency"') == 3 and html.count('data-chart="outcome"') == 3
    assert "(in 42 s)" in html  # next cycle due
    assert "auth: 401" in html  # the failing probe's reason and last error
    assert html.count('class="outcome"') == 4  # one bar per kept cycle: 3 + 1
    for fact in ("Model", "Baseline", "Latency p99", "Last error", "Next cycle"):
        assert f"<dt>{fact}</dt>" in html
    assert "<script" not in html and "src=" not in html  # nothing loaded from anywhere


def test_store_text_is_escaped_and_a_failed_reload_is_shown() -> None:
    book = ResultBook()
    book.set_probes(["alpha"])
    hostile = '<script>alert("x")</script>'
    book.record(make_result(outcome="failed", error_kind="http_5xx", error_message=hostile))
    book.config_reload(False, 1.0, error="bench.toml: probe[0].k: <must be 1..100>")
    html = page(book)
    assert hostile not in html and "&lt;script&gt;" in html
    assert 'data-reload="failed"' in html and "&lt;must be 1..100&gt;" in html


def test_no_probes_and_no_history_still_render() -> None:
    book = ResultBook()
    book.set_probes([])
    assert "No probes configured." in page(book)
    book.set_probes(["alpha"])
    html = page(book, {"alpha": Schedule(running=True, next_due_at=None)})
    assert "first cycle running" in html and "running now" in html
