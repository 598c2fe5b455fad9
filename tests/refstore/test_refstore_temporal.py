"""Date words become a created_at filter, and the zero-hit retry keeps it (as the real server)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from benchd.refstore.retrievers import rrf_fuse
from benchd.refstore.temporal import resolve_temporal
from benchd.refstore.testing import import_ok, search_ids

REF = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "since", "until"),
    [
        ("what happened yesterday", "2026-06-14T00:00", "2026-06-14T23:59:59.999999"),
        ("notes from today", "2026-06-15T00:00", "2026-06-15T12:00"),
        ("the outage 3 days ago", "2026-06-10T12:00", "2026-06-14T12:00"),
        ("what did we decide this month", "2026-06-01T00:00", "2026-06-15T12:00"),
        ("incidents last week", "2026-06-01T12:00", "2026-06-15T12:00"),
        ("anything recently", "2026-06-01T12:00", "2026-06-15T12:00"),
        ("the payments outage in May", "2026-05-01T00:00", "2026-05-31T23:59:59.999999"),
        ("the launch in December", "2025-12-01T00:00", "2025-12-31T23:59:59.999999"),
    ],
)
def test_date_words_resolve_to_windows(query: str, since: str, until: str) -> None:
    window = resolve_temporal(query, REF)
    assert window is not None
    assert (window.since, window.until) == (_day(since), _day(until))


@pytest.mark.parametrize("query", ["database port", "maybe later", "in market terms"])
def test_queries_without_date_words_have_no_window(query: str) -> None:
    assert resolve_temporal(query, REF) is None


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    fused = rrf_fuse([[(1, 0.9), (2, 0.8)], [(2, 5.0), (3, 4.0)]], depth=10)
    assert [rid for rid, _score in fused] == [2, 1, 3]
    assert fused[0][1] == 1.0
    assert fused[1][1] == pytest.approx((1 / 61) / (1 / 62 + 1 / 61))


def _dated(client: httpx.Client) -> None:
    import_ok(
        client,
        [
            {"id": "may", "content": "payments outage from an expired certificate",
             "created_at": "2026-05-03T10:00:00Z"},
            {"id": "april", "content": "staging outage from an invalid certificate chain",
             "created_at": "2026-04-19T10:00:00Z"},
        ],
    )  # fmt: skip


def test_month_words_filter_on_created_at_against_reference_date(client: httpx.Client) -> None:
    _dated(client)
    params = {"reference_date": "2026-06-15"}
    assert search_ids(client, "certificate outage in May", **params) == ["may"]
    assert search_ids(client, "certificate outage in April", **params) == ["april"]
    assert set(search_ids(client, "certificate outage", **params)) == {"may", "april"}


def test_relative_words_use_now_without_reference_date(client: httpx.Client) -> None:
    _dated(client)
    import_ok(client, [{"id": "fresh", "content": "certificate outage again, no dates given"}])
    assert search_ids(client, "certificate outage today") == ["fresh"]


def test_zero_hits_under_a_date_filter_stay_zero_the_retry_keeps_the_filter(
    client: httpx.Client,
) -> None:
    """As the real server: the zero-hit retry keeps the date filter, so nothing comes back."""
    _dated(client)
    reply = client.get(
        "/memory/search",
        params={
            "q": "certificate outage in March",
            "format": "index",
            "reference_date": "2026-06-15",
        },
    )
    body = reply.json()
    assert reply.status_code == 200
    assert body["results"] == [] and body["count"] == 0
    assert "retry" not in body


def test_explicit_date_bounds_filter_created_at(client: httpx.Client) -> None:
    _dated(client)
    ids = search_ids(client, "certificate outage", date_from="2026-05-01", date_to="2026-05-31")
    assert ids == ["may"]
