"""The zengram adapter against the reference store's ``zengram-4.3`` profile over loopback.

What the real server does to benchd's readings, and how the adapter copes:
a paced import slower than its request timeout (read back, no false
``skipped``), an export cursor that loses records dated below the
millisecond at a page boundary (benchd writes milliseconds; a kept corpus
an earlier version dated finer is found by a second listing, since the
server has no ``GET /memory/{id}``), and a kept corpus
whose date-word answers must not move when the store's clock does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from benchd.config.secrets import Secret
from benchd.kinds.zengram import EXPORT_PAGE, ZengramConfig, ZengramTarget
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import RunningRefStore, running_refstore
from benchd.store.owned import owned_id
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

KEY = "test-key-slow-0123456789"


def _config(**overrides: Any) -> RefStoreConfig:
    settings: dict[str, Any] = {
        "api_key": KEY,
        "retriever": "bm25",
        "read_limit_per_min": 0,
        "write_limit_per_min": 0,
        "profile": "zengram-4.3",
        "import_pacing": 0.0,
    }
    settings.update(overrides)
    return RefStoreConfig(**settings)


@pytest.fixture
async def real() -> AsyncIterator[RunningRefStore]:
    async with running_refstore(_config()) as running:
        yield running


def _target(url: str, **settings: Any) -> ZengramTarget:
    return ZengramTarget(ZengramConfig(url=url, **settings), Secret(KEY, "test"))


async def _raw(url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": KEY}) as client:
        return await client.request(method, path, **kwargs)


async def _exported(url: str) -> dict[str, dict[str, Any]]:
    """The namespace as the store exports it (pages of EXPORT_PAGE), by id: texts and dates,
    which benchd's own listing no longer keeps."""
    records: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        params = {"client_id": "benchd-eval", "limit": EXPORT_PAGE, "offset": offset}
        page = (await _raw(url, "GET", "/export", params=params)).json()
        records.update((str(r["id"]), r) for r in page["memories"])
        offset += len(page["memories"])
        if not page["has_more"] or not page["memories"]:
            return records


async def test_an_import_slower_than_its_timeout_is_read_back_not_reported_skipped() -> None:
    """60 records pause 5 × 200 ms server-side: a 0.3 s request deadline must run out."""
    memories = [
        {"id": f"slow-{i}", "type": "event", "content": f"slow import record {i} of sixty"}
        for i in range(60)
    ]
    async with running_refstore(_config(import_pacing=2.0)) as store:
        t = _target(
            store.url, timeout_s=0.3, import_timeout_per_record_s=0.0, seed_batch=60, max_retries=6
        )
        try:
            report = await t.seed(memories)
        finally:
            await t.aclose()
        assert (report.imported, report.skipped, report.errors) == (60, 0, 0)
        assert (report.verified, report.missing) == (60, ())
        listed = await _raw(store.url, "GET", "/export", params={"client_id": "benchd-eval"})
        assert listed.json()["total"] == 61  # the corpus and the sentinel, each once


async def test_a_changed_corpus_that_times_out_is_not_taken_for_its_old_version() -> None:
    """cleanup = never, every record rewritten: the old versions listed under the same ids
    must not pass for the new ones when the import times out."""
    old = [{"id": f"v-{i}", "type": "event", "content": f"old note {i}"} for i in range(40)]
    new = [{**m, "content": f"new note {i}"} for i, m in enumerate(old)]
    async with running_refstore(_config(import_pacing=2.0)) as store:
        t = _target(store.url, cleanup="never")
        try:
            await t.seed(old)
        finally:
            await t.aclose()
        slack = {"max_retries": 6}  # a starved box may need more read-back rounds
        t = _target(
            store.url, cleanup="never", timeout_s=0.2, import_timeout_per_record_s=0.0, **slack
        )
        try:
            report = await t.seed(new)
        finally:
            await t.aclose()
        listed = await _exported(store.url)
    assert (report.imported, report.skipped, report.errors) == (40, 0, 0)
    own = owned_id("benchd-eval", "v-")
    assert sorted(r["content"] for r in listed.values() if r["id"].startswith(own)) == sorted(
        m["content"] for m in new
    )


def test_import_deadline_grows_with_the_batch() -> None:
    config = ZengramConfig(url="http://127.0.0.1:9")
    assert config.timeout_s + config.import_timeout_per_record_s * 500 >= 5.0 + config.timeout_s


def _corpus(n: int, dated: bool = False) -> list[dict[str, Any]]:
    """``n`` events; ``dated``: a minute apart, but the ten around the page boundary (the
    listing is newest first) share one millisecond, dated to the microsecond."""
    out = []
    first = n - EXPORT_PAGE - 6
    for i in range(n):
        memory: dict[str, Any] = {"id": f"p-{i}", "type": "event", "content": f"paged note {i}"}
        if dated:
            moment = datetime(2026, 5, 1, tzinfo=UTC) + (
                timedelta(minutes=first, microseconds=100 * (i - first))
                if first <= i < first + 10
                else timedelta(minutes=i)
            )
            memory["created_at"] = moment.isoformat(timespec="microseconds")
        out.append(memory)
    return out


async def test_benchd_dated_records_never_share_a_millisecond_so_paging_loses_none(
    real: RunningRefStore,
) -> None:
    memories = _corpus(EXPORT_PAGE + 20)
    t = _target(real.url)
    try:
        report = await t.seed(memories)
        listed = await _exported(real.url)
    finally:
        await t.aclose()
    assert (report.verified, report.missing) == (len(memories), ())
    ours = {owned_id("benchd-eval", m["id"]) for m in memories}
    assert ours <= set(listed)  # the listing alone holds them all
    stamps = [r["created_at"] for r in listed.values()]
    assert len(set(stamps)) == len(stamps)


async def _import_raw(url: str, records: list[dict[str, Any]]) -> None:
    for i in range(0, len(records), EXPORT_PAGE):  # at most 500 records a request
        body = {"data": records[i : i + EXPORT_PAGE], "operator_approved": True}
        assert (await _raw(url, "POST", "/export/import", json=body)).status_code == 200


async def _listed_raw(url: str, namespace: str, page: int = EXPORT_PAGE) -> set[str]:
    ids: set[str] = set()
    offset = 0
    while True:
        params = {"client_id": namespace, "limit": page, "offset": offset}
        body = (await _raw(url, "GET", "/export", params=params)).json()
        ids.update(str(m["id"]) for m in body["memories"])
        offset += len(body["memories"])
        if not body["memories"] or not body["has_more"]:
            return ids


async def test_a_fixture_dated_to_the_microsecond_reports_nothing_missing(
    real: RunningRefStore,
) -> None:
    memories = _corpus(EXPORT_PAGE + 20, dated=True)
    raw = [{**m, "client_id": "someone-else"} for m in memories]
    await _import_raw(real.url, raw)
    lost = {m["id"] for m in memories} - await _listed_raw(real.url, "someone-else")
    assert len(lost) == 5  # written as dated, the store's own paging loses p-15 .. p-19
    t = _target(real.url)
    try:
        report = await t.seed(memories)
        listed = await _exported(real.url)
    finally:
        await t.aclose()
    assert (report.verified, report.missing) == (len(memories), ())
    assert {owned_id("benchd-eval", m["id"]) for m in memories} <= set(listed)  # one listing
    stored = {listed[owned_id("benchd-eval", m["id"])]["created_at"] for m in memories[14:24]}
    assert stored == {"2026-05-01T00:14:00.000Z"}  # cut to the millisecond


async def test_records_a_listing_skips_are_found_by_a_second_listing_not_called_missing(
    real: RunningRefStore,
) -> None:
    """A kept corpus an earlier benchd dated to the microsecond: no GET /memory/{id} exists."""
    memories = _corpus(EXPORT_PAGE + 20, dated=True)
    ns = "benchd-eval"
    earlier = [{**m, "id": owned_id(ns, m["id"]), "client_id": ns} for m in memories]
    await _import_raw(real.url, earlier)
    assert len(await _listed_raw(real.url, ns)) == len(memories) - 5  # the cursor loses five
    t = _target(real.url, cleanup="never")
    try:
        report = await t.seed(memories)
    finally:
        await t.aclose()
    assert (report.verified, report.missing) == (len(memories), ())
    assert (await _raw(real.url, "GET", f"/memory/{earlier[0]['id']}")).status_code == 404


async def test_a_kept_corpus_answers_date_words_the_same_when_the_clock_moves_a_month(
    real: RunningRefStore,
) -> None:
    memories = [
        {"id": "deploy", "type": "event", "content": "deployed the ledger service with pgbouncer"},
        {"id": "rollback", "type": "event", "content": "rolled back the search indexer release"},
        {"id": "drill", "type": "event", "content": "ran the ledger restore drill"},
    ]
    queries = [
        SearchQuery(q="what did we deploy recently for the ledger", limit=10),
        SearchQuery(q="ledger work this week", limit=10),
        SearchQuery(q="which release was rolled back today", limit=10),
    ]

    async def cycle() -> list[tuple[str, ...]]:
        t = _target(real.url, cleanup="never")  # a new process each time: nothing remembered
        try:
            await t.seed(memories)
            return [await t.search(q) for q in queries]
        finally:
            await t.aclose()

    before = await cycle()
    assert all(before) and "deploy" in before[0] and before[2][0] == "rollback"
    month_on = (datetime.now(UTC) + timedelta(days=31)).isoformat()
    await _raw(real.url, "POST", "/admin/config", json={"clock": month_on})
    unanchored = await _raw(
        real.url,
        "GET",
        "/memory/search",
        params={"q": queries[0].q, "client_id": "benchd-eval", "read_only": "true"},
    )
    assert unanchored.json()["results"] == []  # what the store alone says a month on
    assert await cycle() == before


async def test_a_dated_corpus_without_reference_date_answers_against_its_own_time(
    real: RunningRefStore,
) -> None:
    """No reference_date: "in March" means the March before the corpus's latest record."""
    memories = [
        {"id": "lock", "type": "event", "content": "ledger outage from a table lock",
         "created_at": "2025-03-18T08:30:00Z"},
        {"id": "dns", "type": "event", "content": "checkout outage from a DNS change",
         "created_at": "2025-04-02"},
    ]  # fmt: skip
    t = _target(real.url)
    try:
        await t.seed(memories)
        assert await t.search(SearchQuery(q="which outage happened in March", limit=10)) == (
            "lock",
        )
        sent = t.build_search_request(SearchQuery(q="outage in March", limit=10))
        assert sent.url.params["reference_date"] == "2025-04-02T00:00:00.000Z"
        given = SearchQuery(q="outage in March", limit=10, reference_date="2026-06-30")
        assert t.build_search_request(given).url.params["reference_date"] == "2026-06-30"
    finally:
        await t.aclose()
