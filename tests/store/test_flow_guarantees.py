"""The promises the flow keeps for every kind, over a store that keeps none of them itself.

The ``memory`` test kind shares one table across namespaces and upserts by
id (a write moves another tenant's record into benchd's namespace). The
flow reads benchd's ids across namespaces before writing, stops a listing
that brings nothing new, never counts beyond what it sent, confirms
deletes by listing, and asks searches for k plus its own records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pytest
from memory_kind import CALLS, TENANTS, MemorySettings, MemoryStore

from benchd.errors import OwnershipError, TargetProtocolError
from benchd.store.flow import NamespaceFlow
from benchd.store.owned import owned_id, sentinel_id
from benchd.store.protocol import Capabilities, Counts, Hits, Page, Record
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

NS = "benchd-eval"
CORPUS = [{"id": f"m{i}", "content": f"note {i} about topic{i}"} for i in range(6)]


@pytest.fixture(autouse=True)
def _empty_store() -> None:
    TENANTS.clear()
    CALLS.clear()


class Reading(MemoryStore):
    """Reads any id whatever its namespace (Capabilities.holders); counts the reads."""

    def __init__(self, settings: MemorySettings) -> None:
        super().__init__(settings)
        self.reads: list[list[str]] = []

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, holders=True)

    async def holders(self, store_ids: Sequence[str]) -> Mapping[str, bool]:
        self.reads.append(list(store_ids))
        return {
            i: TENANTS[i]["namespace"] == self.settings.namespace
            for i in store_ids
            if i in TENANTS
        }


def foreign(store_id: str) -> dict[str, object]:
    return {"id": store_id, "namespace": "tenant-a", "content": "the tenant's own words"}


async def test_an_id_another_tenant_holds_fails_the_seed_before_anything_is_written() -> None:
    taken = owned_id(NS, "m3")
    TENANTS[taken] = foreign(taken)
    before = dict(TENANTS[taken])
    store = Reading(MemorySettings(page=500))
    with pytest.raises(OwnershipError, match="never writes over") as caught:
        await NamespaceFlow(store).seed(CORPUS)
    assert caught.value.kind == "ownership"
    assert CALLS == []  # not the sentinel, not one record
    assert dict(TENANTS) == {taken: before}
    assert taken in str(caught.value)


async def test_a_steady_cycle_reads_no_id_and_a_held_sentinel_id_is_refused_too() -> None:
    store = Reading(MemorySettings(page=500))
    flow = NamespaceFlow(store)
    await flow.seed(CORPUS)
    assert sorted(store.reads[0]) == sorted(
        [owned_id(NS, str(m["id"])) for m in CORPUS] + [sentinel_id(NS)]
    )
    store.reads.clear()
    await flow.seed(CORPUS)  # everything listed as benchd's: nothing to read
    assert store.reads == []

    TENANTS.clear()
    TENANTS[sentinel_id(NS)] = foreign(sentinel_id(NS))
    with pytest.raises(OwnershipError):
        await NamespaceFlow(Reading(MemorySettings(page=500))).seed(CORPUS)
    assert list(TENANTS) == [sentinel_id(NS)]


class Repeating(MemoryStore):
    """Answers its first page for every cursor, always with a next one."""

    def __init__(self, settings: MemorySettings) -> None:
        super().__init__(settings)
        self.pages = 0

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        self.pages += 1
        if self.pages > 50:  # the old flow read 20,001 pages: stop the test, not the suite
            raise AssertionError("the flow kept paging")
        first = await super().list_page(None)
        return Page(first.records, "again")


async def test_a_page_that_brings_nothing_new_ends_the_listing_as_decode() -> None:
    for m in CORPUS:
        sid = owned_id(NS, str(m["id"]))
        TENANTS[sid] = {"id": sid, "namespace": NS, "content": m["content"]}
    store = Repeating(MemorySettings(page=3))
    with pytest.raises(TargetProtocolError, match="brings no record not listed before") as caught:
        await NamespaceFlow(store).seed(CORPUS)
    assert caught.value.kind == "decode"
    assert store.pages == 2


async def test_an_empty_page_with_a_next_cursor_ends_the_listing_too() -> None:
    class Empty(Repeating):
        async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
            self.pages += 1
            assert self.pages <= 50, "the flow kept paging"
            return Page([], "again")

    store = Empty(MemorySettings())
    with pytest.raises(TargetProtocolError):
        await NamespaceFlow(store).seed(CORPUS)
    assert store.pages == 1


class Lying(MemoryStore):
    """Deletes as asked, writes as asked, and reports absurd counts for both."""

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, bulk_deletes=4)

    async def write(self, batch: Sequence[Record]) -> Counts:
        await super().write(batch)
        return 10**9, -5, 3

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        for sid in store_ids:
            TENANTS.pop(sid, None)
        return -1_000_000


async def test_counts_are_clamped_and_purge_counts_what_a_listing_no_longer_shows() -> None:
    store = Lying(MemorySettings(page=500))
    flow = NamespaceFlow(store)
    report = await flow.seed(CORPUS)
    assert (report.imported, report.skipped, report.errors) == (len(CORPUS), 0, 0)
    assert await flow.cleanup([str(m["id"]) for m in CORPUS[:4]]) == 4  # listed: they went
    TENANTS["theirs"] = {"id": "theirs", "namespace": NS, "content": "not benchd's"}
    purged = await flow.purge(CORPUS, force=False)
    assert (purged.records, purged.sentinels, purged.foreign, purged.kept) == (2, 1, 1, 0)
    assert list(TENANTS) == ["theirs"]


async def test_purge_reports_benchds_records_a_delete_left_listed() -> None:
    class Stubborn(Lying):
        async def delete_many(self, store_ids: Sequence[str]) -> int:
            return len(store_ids)  # says every one went; none did

    flow = NamespaceFlow(Stubborn(MemorySettings(page=500)))
    await flow.seed(CORPUS)
    purged = await flow.purge(CORPUS, force=False)
    assert (purged.records, purged.sentinels, purged.kept) == (0, 0, len(CORPUS) + 1)


class Asked(MemoryStore):
    """Records the limit each search asked; ``leases`` lease records beside the sentinel."""

    def __init__(self, settings: MemorySettings, leases: int = 0) -> None:
        super().__init__(settings)
        self.leases = leases
        self.limits: list[int] = []

    @property
    def lease_records(self) -> int:
        return self.leases

    async def search(self, query: SearchQuery) -> Hits:
        self.limits.append(query.limit)
        # benchd's own records first (a store that ranks them high), then the corpus
        ids = [sentinel_id(NS), *(f"benchd-lease:{NS}:{n}" for n in range(self.leases))]
        ids += [owned_id(NS, str(m["id"])) for m in CORPUS]
        return Hits(ids[: query.limit])


async def test_a_search_asks_for_k_plus_the_records_benchd_keeps_beside_its_corpus() -> None:
    store = Asked(MemorySettings(page=500), leases=2)
    flow = NamespaceFlow(store)
    await flow.seed(CORPUS)
    leases = (f"benchd-lease:{NS}:{n}" for n in range(2))
    flow.namespace.sentinel_ids.update(leases)  # as mcp drops them
    got = await flow.search(SearchQuery(q="note", limit=3))
    assert store.limits[-1] == 3 + 1 + 2  # the sentinel and two lease records
    assert got == ("m0", "m1", "m2")  # k results of the corpus, none lost to benchd's own


async def test_an_unranked_store_is_asked_for_k() -> None:
    class Sets(Asked):
        @property
        def capabilities(self) -> Capabilities:
            return dataclasses.replace(super().capabilities, unranked=True)

    store = Sets(MemorySettings(page=500), leases=1)
    flow = NamespaceFlow(store)
    await flow.seed(CORPUS)
    await flow.search(SearchQuery(q="note", limit=4))
    assert store.limits[-1] == 4

