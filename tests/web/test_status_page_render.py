"""The status page's HTML, rendered from the /api/status document (no browser needed)."""

from __future__ import annotations

import re

from surfacers.cycles import make_result

from benchd.schedule import Schedule
from benchd.surfacers.result_book import ResultBook
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

    from benchd.drift_outcome import ChangeSignals, DriftOutcome, MetricDrift, RegressedQuery
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


def _drifting_book(cycles: int = 3) -> ResultBook:
    """alpha healthy at cycle 1, then drifted from cycle 2 on (onset at cycle 2's start)."""
    from benchd.drift_outcome import DriftOutcome, MetricDrift, RegressedQuery

    book = ResultBook()
    book.set_probes(["alpha"])
    book.record(make_result("alpha", cycle=1, started_at=1_699_999_000.0))
    metrics = {
        f"recall@{k}": MetricDrift(-0.4, 0.001, 0.01, True, -0.5, -0.3, 60, before=0.8, after=0.4)
        for k in (1, 5, 10)
    } | {"ndcg@10": MetricDrift(-0.5, 0.001, 0.01, True, -0.6, -0.4, 60, before=0.9, after=0.4)}
    regressed = tuple(RegressedQuery(f"q{i}", "recall@10", 1.0, 0.0) for i in range(58))
    for n in range(2, cycles + 2):
        drift = DriftOutcome(
            baseline="pinned", noise="measured", samples=4, metrics=metrics,
            regressed=regressed, transition="onset" if n == 2 else None,
        )  # fmt: skip
        started = 1_699_999_000.0 + 100 * n
        book.record(make_result("alpha", cycle=n, started_at=started, drift=drift))
    return book


def test_a_change_says_when_and_what_one_line_each() -> None:
    doc = status_document(_drifting_book(), queries=False)
    probe = doc["probes"]["alpha"]
    assert probe["drift_onset_at_iso"] == "2023-11-14T22:00:00.000Z"  # cycle 2's start
    assert probe["quality"] == "dropped" and probe["last"]["outcome"] == "success"
    assert [c["what"] for c in probe["changes"]] == [
        "ndcg@10", "recall@1", "recall@5", "recall@10"
    ]  # fmt: skip
    first = probe["changes"][0]
    assert (first["before"], first["now"], first["since_iso"]) == (
        0.9, 0.4, "2023-11-14T22:00:00.000Z"
    )  # fmt: skip
    assert first["verdict"] == "dropped beyond noise (p = 0.001)"
    assert probe["reason"] == (
        "quality dropped against the pinned baseline since 2023-11-14T22:00:00.000Z: "
        "ndcg@10 0.900 → 0.400 and 3 more metric@k"
    )
    html = render_page(doc, now=1_700_000_000.0)
    lines = re.findall(r'<li class="change" data-change="([^"]+)">(.*?)</li>', html)
    assert len(lines) == 4
    text = re.sub(r"<[^>]+>", "", lines[0][1])
    assert text == (
        "ndcg@10: 0.900 → 0.400 (-0.500), dropped beyond noise (p = 0.001), "
        "since 2023-11-14T22:00:00.000Z"
    )


def test_cycles_show_their_start_and_a_quality_verdict_beside_the_outcome() -> None:
    from benchd.web.page import render_probe_page

    book = _drifting_book()
    html = page(book)
    fact = re.search(r'data-fact="Last cycle">([^<]*)<', html)
    assert fact is not None
    assert fact.group(1) == (
        "#4 success, quality dropped; started 2023-11-14T22:03:20.000Z (3.50 s)"
    )
    assert "cycle #2: success, quality dropped; started 2023-11-14T22:00:00.000Z" in html
    assert "cycle #1: success, not compared (no baseline yet); started" in html
    full = render_probe_page(status_document(book), "alpha", now=1_700_000_000.0)
    qualities = re.findall(r'data-quality="([^"]+)"', full)
    assert qualities == ["dropped", "dropped", "dropped", "not-compared"]  # newest first


def test_more_regressed_queries_is_a_link_to_them_on_the_probes_page() -> None:
    from benchd.web.page import render_probe_page

    book = _drifting_book()
    html = page(book)
    assert (
        '48 more on <a class="more" href="probe/alpha#regressed">the probe\'s page</a>.' in html
    )
    full = render_probe_page(status_document(book), "alpha", now=1_700_000_000.0)
    assert '<h3 id="regressed">Regressed queries (58)</h3>' in full


def test_the_noise_reads_as_the_log_names_it() -> None:
    html = page(_drifting_book())
    assert "noise measured over 4 samples (drops are tested against it)" in html
    assert "noise none, 1 samples" not in html


def test_short_answers_are_shown_beside_the_recall_they_lowered() -> None:
    import dataclasses

    book = ResultBook()
    book.set_probes(["alpha"])
    result = make_result("alpha", ks=(5, 10))
    book.record(dataclasses.replace(result, short_answers={"serial": 10, "load": 0}))
    doc = status_document(book, queries=False)
    assert doc["probes"]["alpha"]["short_answers"] == {"serial": 10, "load": 0}
    assert doc["probes"]["alpha"]["history"][0]["short_answers"] == 10
    fact = re.search(r'data-fact="Short answers">([^<]*)<', page(book))
    assert fact is not None
    assert fact.group(1) == (
        "10 in the serial pass answered fewer results than asked; "
        "recall@10 0.520 counts them as misses"
    )
    book.record(make_result("alpha", cycle=2))
    assert 'data-fact="Short answers"' not in page(book)


def test_an_episode_ends_with_its_recovery() -> None:
    import dataclasses

    from benchd.drift_outcome import DriftOutcome

    book = _drifting_book(1)
    recovered = DriftOutcome(baseline="pinned", noise="stable", samples=3, transition="recovered")
    book.record(dataclasses.replace(make_result("alpha", cycle=3), drift=recovered))
    probe = status_document(book, queries=False)["probes"]["alpha"]
    assert probe["drift_onset_at"] is None and probe["changes"] == []
    assert probe["quality"] == "held"


def test_a_rankings_change_comes_first_with_its_own_onset() -> None:
    import dataclasses

    from benchd.drift_outcome import ChangeSignals, DriftOutcome, MetricDrift

    book = ResultBook()
    book.set_probes(["alpha"])
    recall = MetricDrift(-0.3, 0.0, 0.01, True, -0.4, -0.2, 16, before=0.9, after=0.6)
    change = ChangeSignals(10, 0.4, -0.6, 0.0, True)
    drift = DriftOutcome(
        baseline="pinned", noise="stable", samples=3, metrics={"recall@10": recall},
        change=change, transition="onset", model_transition="onset",
        model="e5", baseline_model="minilm",
    )  # fmt: skip
    result = make_result("alpha", cycle=5, started_at=1_699_999_500.0, drift=drift)
    book.record(result)
    later = dataclasses.replace(drift, transition=None, model_transition=None)
    book.record(make_result("alpha", cycle=6, started_at=1_699_999_600.0, drift=later))
    probe = status_document(book, queries=False)["probes"]["alpha"]
    rankings, recall_line = probe["changes"]
    assert rankings["what"] == "rankings (overlap of the top 10)"
    assert (rankings["before"], rankings["now"]) == (1.0, 0.4)
    assert rankings["verdict"] == (
        "rankings changed: a model or index change?; model label minilm → e5"
    )
    assert rankings["since_iso"] == probe["model_change_onset_at_iso"] == (
        "2023-11-14T22:05:00.000Z"
    )  # cycle 5's start, not cycle 6's
    assert recall_line["what"] == "recall@10" and recall_line["since_iso"] == (
        "2023-11-14T22:05:00.000Z"
    )


def test_a_set_scored_probe_shows_its_set_measures() -> None:
    import dataclasses

    from benchd.scoring.ranking import RANK_ONLY_REASON, rank_only_keys

    whole = {"hit": 1.0, "recall": 0.964, "recall_all": 0.75, "precision": 0.889}
    result = dataclasses.replace(
        make_result("alpha", ks=(5, 10)), aggregate=whole, unranked=RANK_ONLY_REASON,
        omitted=rank_only_keys((5, 10)),
    )  # fmt: skip
    book = ResultBook()
    book.set_probes(["alpha"])
    book.record(result)
    html = page(book)
    assert "No quality readings" not in html
    assert "<tr><td>recall</td><td>0.964</td></tr>" in html
    assert "<tr><td>precision</td><td>0.889</td></tr>" in html
    assert "answers an unordered set" in html
    assert 'data-legend="recall"' in html and 'data-legend="precision"' in html  # charted
