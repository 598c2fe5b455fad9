"""Listings a cycle does not need are not sent (#27), over loopback against the reference
store's ``zengram-4.3`` profile (the real server's listing).

The sentinel is a fact, so ``GET /export?type=fact`` shows it beside the corpus's facts
only, and ``since`` the time benchd wrote it, usually alone: at 10^5 records the lease
read at the end of ``once`` (and after each heartbeat) was 200 listing pages for one
record. What the read must still do: see a lease another holder took, even one written
by a clock behind benchd's, so a lease this process no longer holds is never handed
back. A kept corpus
found unchanged is verified by the listing that found it (nothing was written since);
after any write the namespace is listed again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fake_store import FakeStore
from listing_support import listed_in

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.kinds.zengram_wire import iso_ms
from benchd.refstore.server import RunningRefStore, running_refstore
from benchd.refstore.testing import make_config
from benchd.store.lease import LeaseHolder, holder_of
from benchd.store.owned import OWNER_KEY, sentinel_id

pytestmark = pytest.mark.anyio
KEY = "test-key-lease-read-0123456789"
NS = "benchd-lease-read"
JAN_2025_MS = 1_735_689_600_000
# 1,200 records dated in 2025, half of them facts: the whole namespace is 3 pages of 500,
# its facts 2, its facts created since benchd wrote its sentinel 1 (the sentinel).
MEMORIES = [
    {
        "id": f"r{i}",
        "content": f"lease read note {i}",
        "type": "fact" if i % 2 else "event",
        "created_at": iso_ms(JAN_2025_MS + i),
    }
    for i in range(1200)
]


@pytest.fixture
async def real() -> AsyncIterator[RunningRefStore]:
    config = make_config(api_key=KEY, retriever="bm25", profile="zengram-4.3", import_pacing=0.0)
    async with running_refstore(config) as running:
        yield running


class _Exports(FakeStore):
    """Passes every request to the store and notes the filters of each ``GET /export``:
    ``""`` (the whole namespace), ``"fact"``, ``"fact since"``."""

    def __init__(self) -> None:
        super().__init__()
        self.exports: list[str] = []

    async def answer(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/export":
            params = request.url.params
            since = " since" if "since" in params else ""
            self.exports.append(params.get("type", "") + since)
        return await self.forward(request)


def _target(url: str, lease: LeaseHolder, transport: FakeStore | None) -> ZengramTarget:
    settings = ZengramConfig(url=url, namespace=NS, cleanup="never", searchable_timeout_s=0.0)
    target = ZengramTarget(settings, Secret(KEY, "test"), connect=transport)
    target.lease = lease
    return target


async def _sentinel_mark(url: str) -> dict[str, Any]:
    """The sentinel's owner mark, from a whole listing of the namespace."""
    marks = []
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": KEY}) as client:
        offset = 0
        while True:
            params = {"client_id": NS, "limit": 500, "offset": offset}
            page = (await client.get("/export", params=params)).json()
            marks += [
                m["metadata"][OWNER_KEY] for m in page["memories"] if m["id"] == sentinel_id(NS)
            ]
            offset += len(page["memories"])
            if not page["has_more"]:
                break
    (mark,) = marks
    return dict(mark)


async def test_once_hands_its_lease_back_reading_only_the_namespaces_facts(
    real: RunningRefStore,
) -> None:
    exports = _Exports()
    me = LeaseHolder(instance="ci", ttl_s=600.0, role="once")
    target = _target(real.url, me, exports)
    try:
        report = await target.seed(MEMORIES)
        assert report.verified == len(MEMORIES)
        exports.exports.clear()
        assert await target.release_lease()
    finally:
        await target.aclose()
    assert exports.exports == ["fact since"]  # the sentinel alone
    holder = holder_of(await _sentinel_mark(real.url))
    assert holder is not None and holder.released and holder.token == me.token


async def test_a_lease_taken_over_meanwhile_is_seen_and_left_to_its_holder(
    real: RunningRefStore,
) -> None:
    exports = _Exports()
    first = _target(real.url, LeaseHolder(instance="ci", ttl_s=600.0, role="once"), exports)
    taker = LeaseHolder(instance="pod-0", ttl_s=600.0, role="run", force=True)
    second = _target(real.url, taker, None)
    try:
        await first.seed(MEMORIES)
        await second.seed(MEMORIES)  # a deliberate takeover (--force) while ``first`` runs
        exports.exports.clear()
        assert not await first.release_lease()
    finally:
        await first.aclose()
        await second.aclose()
    assert exports.exports == ["fact since"]
    holder = holder_of(await _sentinel_mark(real.url))
    assert holder is not None and holder.token == taker.token and holder.live()


async def test_a_lease_written_by_a_clock_behind_benchds_is_still_seen(
    real: RunningRefStore,
) -> None:
    exports = _Exports()
    first = _target(real.url, LeaseHolder(instance="ci", ttl_s=600.0, role="once"), exports)
    other = LeaseHolder(instance="pod-1", ttl_s=600.0, role="run", force=True)
    sentinel = {
        "id": sentinel_id(NS),
        "type": "fact",
        "key": sentinel_id(NS),
        "content": f"benchd sentinel taken over by {other.token}",
        "client_id": NS,
        "created_at": iso_ms(JAN_2025_MS + 5000),  # before benchd's, by the other's clock
        "metadata": {OWNER_KEY: other.mark(NS)},
    }
    try:
        await first.seed(MEMORIES)
        async with httpx.AsyncClient(base_url=real.url, headers={"x-api-key": KEY}) as client:
            body = {"data": [sentinel], "operator_approved": True}
            assert (await client.post("/export/import", json=body)).json()["imported"] == 1
        exports.exports.clear()
        assert not await first.release_lease()
    finally:
        await first.aclose()
    assert exports.exports == ["fact since", "fact", "fact"]  # not since: all the facts
    holder = holder_of(await _sentinel_mark(real.url))
    assert holder is not None and holder.token == other.token and holder.live()


async def test_a_kept_corpus_found_unchanged_is_verified_by_the_listing_that_found_it(
    real: RunningRefStore,
) -> None:
    exports = _Exports()
    target = _target(real.url, LeaseHolder(instance="pod-0", ttl_s=600.0), exports)
    try:
        await target.seed(MEMORIES)
        exports.exports.clear()
        report = await target.seed(MEMORIES)  # the next cycle: nothing changed
    finally:
        await target.aclose()
    assert (report.imported, report.unchanged, report.verified) == (0, 1200, 1200)
    assert exports.exports == ["", "", "", "fact since"]  # one listing, then the lease


async def test_after_a_write_the_seed_is_verified_by_a_new_listing(real: RunningRefStore) -> None:
    exports = _Exports()
    target = _target(real.url, LeaseHolder(instance="pod-0", ttl_s=600.0), exports)
    try:
        await target.seed(MEMORIES)
        async with httpx.AsyncClient(base_url=real.url, headers={"x-api-key": KEY}) as client:
            gone = (await listed_in(target)).keys() - {sentinel_id(NS)}
            (await client.delete(f"/memory/{sorted(gone)[0]}")).raise_for_status()
        exports.exports.clear()
        report = await target.seed(MEMORIES)  # written again, then read back
    finally:
        await target.aclose()
    assert (report.imported, report.unchanged, report.verified) == (1, 1199, 1200)
    assert exports.exports == ["", "", "", "fact since", "", "", ""]


async def test_the_read_back_after_a_write_fingerprints_no_record(
    real: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verify listing after a write compares nothing: no record is fingerprinted for a
    keep decision there, and the next cycle's listing still finds the corpus unchanged."""
    import benchd.kinds.zengram_wire as wire

    fingerprinted: list[str] = []
    kept_of = wire.kept_of

    def counting(record: Any, own_id: str | None = None) -> bytes | None:
        fingerprinted.append(str(record["id"]))
        return kept_of(record, own_id)

    monkeypatch.setattr(wire, "kept_of", counting)
    target = _target(real.url, LeaseHolder(instance="pod-0", ttl_s=600.0), None)
    try:
        first = await target.seed(MEMORIES)  # a fresh namespace: written, then read back
        corpus_fingerprints = [i for i in fingerprinted if i != sentinel_id(NS)]
        fingerprinted.clear()
        again = await target.seed(MEMORIES)  # the next cycle: its listing compares
    finally:
        await target.aclose()
    assert (first.imported, first.verified) == (1200, 1200)
    assert corpus_fingerprints == []
    assert (again.imported, again.unchanged, again.verified) == (0, 1200, 1200)
    assert len(set(fingerprinted) - {sentinel_id(NS)}) == 1200
