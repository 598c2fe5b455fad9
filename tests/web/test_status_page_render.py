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
    for fact in ("Model now", "Model at the baseline", "Baseline", "Latency", "Last error"):
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


def test_a_drifted_probe_shows_baseline_now_models_regressed_queries_and_markers() -> None:
    import dataclasses

    from benchd.drift.outcome import ChangeSignals, DriftOutcome, MetricDrift, RegressedQuery
    from benchd.web.page import render_probe_page

    book = ResultBook()
    book.set_probes(["alpha"])
    book.record(make_result("alpha", cycle=1, started_at=1_699_999_000.0, model="minilm"))
    book.config_reload(True, 1_699_999_020.0)
    recall = MetricDrift(-0.25, 0.0, 0.01, True, -0.4, -0.1, 3, before=0.75, after=0.5)
    regressed = RegressedQuery("q1", "recall@10", 1.0, 0.5, {"m1": 1, "m2": 2}, {"m1": 3})
    drift = DriftOutcome(
        baseline="pinned", noise="stable", samples=3, metrics={"recall@10": recall},
        regressed=(regressed,), change=ChangeSignals(10, 0.4, -0.6, 0.0, True),
        model="e5", baseline_model="minilm",
    )  # fmt: skip
    after = make_result("alpha", cycle=2, started_at=1_699_999_040.0, model="e5", drift=drift)
    hostile = '<img src=x onerror="alert(1)">'
    queries = (dataclasses.replace(after.queries[1], q=hostile), *after.queries[2:])
    book.record(dataclasses.replace(after, queries=(after.queries[0], *queries)))
    html = page(book)
    assert 'data-health="quality-dropped"' in html and ">quality dropped<" in html
    row = re.search(r'<tr class="drifted" data-metric="recall@10">(.*?)</tr>', html)
    assert row is not None and ">0.750<" in row.group(1) and ">0.500<" in row.group(1)
    assert ">-0.250<" in row.group(1)
    assert '<dd data-fact="Model now">e5</dd>' in html
    assert '<dd data-fact="Model at the baseline">minilm</dd>' in html
    assert hostile not in html and "&lt;img src=x" in html  # the query text, escaped
    assert "m1: 1, m2: 2" in html and "m1: 3, m2: not returned" in html
    assert 'data-marker="model change"' in html and "minilm → e5" in html
    assert 'data-marker="reload"' in html and 'class="baseline"' in html
    full = render_probe_page(status_document(book, probes=["alpha"]), "alpha", now=0.0)
    assert full.count("<tr data-cycle=") == 2 and hostile not in full
