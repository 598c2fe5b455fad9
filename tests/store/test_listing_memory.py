"""What a listing keeps per record is small and fixed: never the record's text or metadata.

A namespace of 10^5 records is listed whole (verify, cleanup, the lease's
read-back), and the flow and the store keep the latest listing between
cycles; held as decoded records it cost ~1.8 KiB a record (598 MiB peak at
10^5, docs/load.md). These tests bound what stays allocated after a
listing, measured with tracemalloc, by a count of bytes per record.
"""

from __future__ import annotations

import gc
import json
import math
import tracemalloc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest
from fake_store import FakeStore
from memory_kind import TENANTS, MemorySettings, MemoryStore

from benchd.config.secrets import Secret
from benchd.fixtures.stream import memory_ids
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.store.flow import NamespaceFlow
from benchd.store.listing import fingerprint
from benchd.store.owned import OWNER_KEY, owned_id, sentinel_id
from benchd.store.protocol import Counts, Hits, Listed, Record
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

KEY = "test-key-listing-0123456789"
NS = "benchd-eval"
RECORDS = 3_000
PAGE = 100  # records per answer: each page decodes inline (no decode worker)
TEXT = 1_000  # characters of text per record, as in a real corpus (synth's are ~300)
KEPT_PER_RECORD = 700  # bytes a listed record may keep (flow and store together)


def _record(i: int) -> dict[str, Any]:
    fid = f"doc-{i:06d}"
    return {
        "id": owned_id(NS, fid),
        "client_id": NS,
        "type": "event",
        "content": f"record {i} " + "lorem ipsum dolor sit amet " * (TEXT // 27),
        "content_hash": f"{i:064x}",
        "created_at": f"2026-05-01T00:00:{i % 60:02d}.{i % 1000:03d}Z",
        "metadata": {OWNER_KEY: {"namespace": NS, "fixture_id": fid}, "source": "bench", "n": i},
        "tags": ["a", "b", f"t{i}"],
        "active": True,
    } | _keyed(i)


def _keyed(i: int) -> dict[str, str]:
    """Records 7 and 9 are facts: 7 keyed as benchd keys them, 9 as an earlier version did."""
    if i == 7:
        return {"type": "fact", "key": owned_id(NS, "k7")}
    if i == 9:
        return {"type": "fact", "key": "k9"}
    return {}


def _export(request: httpx.Request) -> httpx.Response:
    """``GET /export``: PAGE records a page, generated, so the store holds nothing here."""
    offset = int(request.url.params.get("offset", 0))
    page = [_record(i) for i in range(offset, min(offset + PAGE, RECORDS))]
    body = {"memories": page, "total": RECORDS, "has_more": offset + len(page) < RECORDS}
    return httpx.Response(200, content=json.dumps(body).encode())


def _target() -> ZengramTarget:
    config = ZengramConfig(url="http://store.test", cleanup="never")
    return ZengramTarget(config, Secret(KEY, "test"), connect=FakeStore(_export))


@contextmanager
def _held() -> Iterator[list[int]]:
    """Bytes still allocated after the block (collected first), in ``out[0]``."""
    out = [0]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        yield out
        gc.collect()
        out[0] = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


async def test_a_listing_keeps_a_few_hundred_bytes_per_record_not_its_text() -> None:
    t = _target()
    try:
        await t.namespace.list_namespace()  # warm: connections, caches, first-use imports
        with _held() as held:
            listed = (await t.namespace.list_namespace()).records
            assert len(listed) == RECORDS
            del listed
    finally:
        await t.aclose()
    # the old listing kept every decoded record (~2.2 KiB each here): ~6.6 MB
    assert held[0] < RECORDS * KEPT_PER_RECORD, f"{held[0] / RECORDS:.0f} bytes per record"


async def test_the_listing_still_tells_what_a_rewrite_would_change() -> None:
    """Kept small, the listing still decides 'unchanged' exactly: text and type."""
    t = _target()
    try:
        listed = (await t.namespace.list_namespace()).records
    finally:
        await t.aclose()
    store = t.store

    def record(i: int, **changes: Any) -> tuple[Listed, Record]:
        fid = f"doc-{i:06d}"
        memory = {k: v for k, v in _record(i).items() if k in ("content", "type", "created_at")}
        memory |= {"id": fid, "key": f"k{i}"} if i in (7, 9) else {"id": fid}
        return listed[owned_id(NS, fid)], Record(owned_id(NS, fid), fid, memory | changes, {})

    assert store.unchanged(*record(3))
    assert store.unchanged(*record(3, created_at="2030-01-01T00:00:00Z"))  # not deduped
    assert not store.unchanged(*record(3, content=_record(3)["content"] + "!"))
    assert not store.unchanged(*record(3, type="fact"))
    assert not store.unchanged(Listed(owned_id(NS, "doc-000003")), record(3)[1])  # nothing kept
    assert store.unchanged(*record(7)) and not store.stale(*record(7))  # keyed as benchd keys
    assert store.stale(*record(9)) and not store.unchanged(*record(9))  # keyed the old way
    assert not store.unchanged(*record(7, key="k8"))


def test_a_fingerprint_is_equal_exactly_when_the_json_values_are() -> None:
    assert fingerprint({"a": 1, "b": [1, "x"]}) == fingerprint({"b": [1, "x"], "a": 1})
    assert fingerprint("text", "event") != fingerprint("text", "fact")
    assert fingerprint("text", None) != fingerprint("text", "None")
    assert fingerprint(1) != fingerprint(1.0) != fingerprint(True)  # written again: safe side
    assert fingerprint(["ab", "c"]) != fingerprint(["a", "bc"])
    assert fingerprint("ab", "c") != fingerprint("a", "bc") != fingerprint("a", "b", "c")
    assert fingerprint("s1:a") != fingerprint("a", "a") and fingerprint("x") != fingerprint(["x"])
    for unsayable in (math.nan, object(), {1: "a", "b": 2}):
        assert fingerprint({"v": unsayable}) is None  # never taken for unchanged


async def test_a_seed_holds_the_records_of_the_batches_in_flight_not_of_the_corpus() -> None:
    """The flow makes each record (benchd's id and mark) as a writer takes its batch."""
    alive: list[int] = []

    class Counting(MemoryStore):
        async def write(self, batch: Sequence[Record]) -> Counts:
            alive.append(sum(isinstance(o, Record) for o in gc.get_objects()))
            return await super().write(batch)

    corpus = [{"id": f"m{i}", "content": f"note {i}"} for i in range(300)]
    TENANTS.clear()
    flow = NamespaceFlow(Counting(MemorySettings(page=500)))
    try:
        report = await flow.seed(corpus)
    finally:
        TENANTS.clear()
    assert report.imported == 300 and report.verified == 300
    plan = flow.store.plan
    assert max(alive) <= (plan.concurrency + 2) * plan.batch_size  # was 300: every record


def test_owned_ids_keep_the_fixture_ids_only_and_map_both_ways() -> None:
    """benchd's ids are computed from the fixture ids, not held in two maps per record."""
    from benchd.store.owned import MAX_ID_CHARS, OwnedIds

    ids = [f"doc-{i:06d}" for i in range(20_000)]
    odd = ["#starts-with-hash", "x" * MAX_ID_CHARS]  # the ids owned_id hashes
    with _held() as held:
        owned = OwnedIds(NS, [*ids, *odd])
    # a frozenset slot per id: ~105 bytes (the old two dicts with their owned ids: 224)
    assert held[0] < 20_000 * 160, f"{held[0] / 20_000:.0f} bytes per record"
    for fid in (ids[0], ids[-1], *odd):
        sid = owned_id(NS, fid)
        assert owned.store_of[fid] == owned.store_id(fid) == sid
        assert owned.fixture_of[sid] == owned.fixture_id(sid) == owned.label(sid) == fid
        assert fid in owned.store_of and sid in owned.fixture_of
    assert owned.fixture_id(owned_id(NS, ids[5])) is ids[5]  # one string per fixture id
    assert owned.fixture_id(owned_id(NS, "not-in-corpus")) is None
    assert owned.fixture_id(ids[0]) is None  # a bare fixture id is nobody's owned id
    assert owned.fixture_id(owned.prefix + "#" + "0" * 32) is None
    assert owned.label(owned_id("other-ns", ids[0])).startswith("!")
    assert len(owned.store_of) == len(owned.fixture_of) == 20_002
    assert set(owned.fixture_of) == {owned_id(NS, f) for f in [*ids, *odd]}


async def test_a_store_that_keeps_benchds_ids_costs_the_flow_no_id_map_per_record() -> None:
    """Where the listed id is the one benchd derives, the flow maps nothing per record and
    holds its ids by corpus position; it still finds, labels and cleans up every one."""
    corpus = [{"id": f"m{i}", "content": f"note {i}"} for i in range(300)]
    TENANTS.clear()
    flow = NamespaceFlow(MemoryStore(MemorySettings(page=500)))
    try:
        report = await flow.seed(corpus)
        known = flow.namespace
        maps = len(known.fixture_ids) + len(known.server_ids)  # was 600: both ways, each
        assert known.fresh is not None and len(known.held) == 301  # and the sentinel
        assert list(known.held.others()) == [sentinel_id(NS)]  # the corpus's: by position
        assert set(known.held) == {owned_id(NS, f"m{i}") for i in range(300)} | {
            sentinel_id(NS)
        }
        assert known.fresh.records.extras.keys() == {sentinel_id(NS)}  # type: ignore[attr-defined]
        assert list(flow.finish(Hits([owned_id(NS, "m7")]), SearchQuery("q", 5))) == ["m7"]
        deleted = await flow.cleanup([f"m{i}" for i in range(300)])
        assert len(known.held) == 1  # the sentinel
    finally:
        TENANTS.clear()
    assert report.verified == 300 and report.missing == ()
    assert maps == 0
    assert deleted == 300


async def test_a_daemon_holding_a_listing_while_it_lists_again_keeps_bytes_not_objects() -> None:
    """A daemon lists its namespace every cycle while it holds the last listing: each
    listing of the corpus is a few arrays by corpus position, not an object per record."""
    t = _target()
    memories = [{"id": f"doc-{i:06d}", "content": "x"} for i in range(RECORDS)]
    t.namespace.own(memory_ids(memories))
    try:
        first = (await t.namespace.list_namespace()).records
        with _held() as held:
            second = (await t.namespace.list_namespace()).records
            await anyio.sleep(0)  # the loop lets go of the last page's answer at its next step
        assert second.keys() == first.keys() and len(second) == RECORDS
        assert all(second[sid] == first[sid] for sid in first)
        assert len(second.extras) == 0  # type: ignore[attr-defined]
    finally:
        await t.aclose()
    # a flag, 48 bytes of fingerprints and a float per record (~57); objects cost ~500 more
    assert held[0] < RECORDS * 80, f"{held[0] / RECORDS:.0f} bytes per record"


def test_a_listed_record_is_reduced_to_as_few_and_as_narrow_digests_as_the_check_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One 8-byte digest of an event's content and type (the fields it does not hold are a
    constant), one more for the key a fact holds; the two-text path agrees with the
    general one."""
    from benchd.kinds import zengram_wire as wire
    from benchd.store import listing

    taken: list[str] = []
    real = listing._blake

    def counted(text: str) -> bytes:
        taken.append(text)
        return real(text)

    monkeypatch.setattr(listing, "_blake", counted)
    event = {"id": "e", "content": "an event", "type": "event"}
    kept = wire.kept_of(event)
    assert kept is not None and len(kept) == 3 * listing.FINGERPRINT_BYTES and len(taken) == 1
    taken.clear()
    assert wire.kept_of({**event, "type": "fact", "key": "benchd:ns:k"}) is not None
    assert len(taken) == 2
    assert len(fingerprint("a", "b") or b"") == listing.FINGERPRINT_BYTES == 8
    assert listing.text_pair_fingerprint("ab", "c") == fingerprint("ab", "c")
    assert wire.same_dedup(kept, event) and wire.same_field(kept, "key", None)
    assert not wire.same_field(kept, "key", "benchd:ns:k")
