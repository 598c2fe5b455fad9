"""What one ``GET /export`` page becomes, record by record, for every shape a listed record
takes: benchd's own, its sentinel with and without a lease, another namespace's mark, a
forged or odd mark, a foreign record, an inactive one, an id twice on a page, ids and dates
that are not texts. The listing's fast paths must classify each exactly as spelled out here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fake_store import FakeStore

from benchd.config.secrets import Secret
from benchd.kinds import zengram_wire as wire
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.store.idtable import ListedTable
from benchd.store.lease import Holder
from benchd.store.listing import Listing
from benchd.store.owned import OWNER_KEY, OwnedIds, owned_id, owned_prefix, sentinel_id
from benchd.store.protocol import Listed

pytestmark = pytest.mark.anyio
NS = "benchd-listed"
SENTINEL = sentinel_id(NS)
LEASE = {
    "namespace": NS, "sentinel": "true", "instance": "host-a", "role": "run", "pid": 7,
    "token": "t0k", "heartbeat": 12.5, "ttl_s": 60.0, "fixture_hash": "abc", "released": False,
}  # fmt: skip


def _record(rid: Any, content: str, mark: Any = None, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"id": rid, "content": content, "type": "fact", **fields}
    if mark is not None:
        record["metadata"] = {"source": "x", OWNER_KEY: mark}
    return record


def _mark(fid: Any) -> dict[str, Any]:
    return {"namespace": NS, "fixture_id": fid}


MINE = owned_id(NS, "f1")
PAGE = [
    _record(SENTINEL, "sentinel text, leased", LEASE, created_at="2026-01-01T00:00:00.001Z"),
    _record(MINE, "first copy", _mark("f1"), created_at="2025-01-02T03:04:05Z"),
    _record("foreign-1", "someone else's", created_at="2025-01-02T03:04:05"),
    _record("other-ns", "marked for another namespace", {"namespace": "x", "fixture_id": "f2"}),
    _record("forged", "marked as f2 under a foreign id", _mark("f2")),
    _record(42, "an integer id, an integer fixture id", _mark(7), created_at="yesterday"),
    _record("no-fid", "a mark without a fixture id", {"namespace": NS}, created_at=5),
    _record("odd-mark", "a mark that is a text", "benchd", created_at=""),
    _record("gone", "inactive", _mark("f3"), active=False),
    _record("", "an empty id: not listed"),
    _record(SENTINEL, "sentinel text, later duplicate", LEASE),
    _record(MINE, "second copy", _mark("f1"), created_at="2025-01-03T00:00:00+02:00"),
]


def _at(text: str) -> float:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _expected() -> list[Listed]:
    """Each active record as the listing must show it: the first position of an id, its
    last record."""
    holder = Holder("host-a", 7, "t0k", 12.5, 60.0, "abc", "run", False)
    later_sentinel = wire.kept_of(PAGE[10])
    return [
        Listed(SENTINEL, owned_prefix(NS), None, holder, later_sentinel, None),
        Listed(MINE, MINE, None, None, wire.kept_of(PAGE[11]), _at("2025-01-03T00:00:00+02:00")),
        Listed("foreign-1", None, None, None, wire.kept_of(PAGE[2]), _at("2025-01-02T03:04:05")),
        Listed("other-ns", None, None, None, wire.kept_of(PAGE[3]), None),
        Listed("forged", owned_id(NS, "f2"), None, None, wire.kept_of(PAGE[4]), None),
        Listed("42", owned_id(NS, "7"), None, None, wire.kept_of(PAGE[5]), None),
        Listed("no-fid", owned_prefix(NS), None, None, wire.kept_of(PAGE[6]), None),
        Listed("odd-mark", None, None, None, wire.kept_of(PAGE[7]), None),
    ]


def _target(page: list[dict[str, Any]], more: bool = False) -> ZengramTarget:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/export"
        return httpx.Response(200, json={"memories": page, "has_more": more})

    settings = ZengramConfig(url="http://127.0.0.1:9", namespace=NS, cleanup="never")
    return ZengramTarget(settings, Secret("k" * 20, "test"), connect=FakeStore(answer))


async def test_a_page_lists_each_shape_of_record_as_it_is() -> None:
    target = _target(PAGE)
    try:
        page = await target.store.list_page(None)
    finally:
        await target.aclose()
    assert list(page.records) == _expected()
    assert page.next is None
    # the sentinel's text as the page's first active copy of it shows it
    assert target.store._sentinel_content == wire.content_digest("sentinel text, leased")


async def test_the_sentinel_inactive_first_is_read_from_its_active_copy() -> None:
    page = [{**PAGE[0], "active": False}, PAGE[10], PAGE[1]]
    target = _target(page)
    try:
        listed = await target.store.list_page(None)
    finally:
        await target.aclose()
    assert [r.id for r in listed.records] == [SENTINEL, MINE]
    assert target.store._sentinel_content == wire.content_digest(PAGE[10]["content"])


async def test_a_later_page_with_the_sentinel_only_inactive_keeps_the_earlier_copy() -> None:
    pages = {
        0: ([PAGE[0], PAGE[1]], True),
        2: ([{**PAGE[10], "active": False}, PAGE[2]], False),
    }

    def answer(request: httpx.Request) -> httpx.Response:
        page, more = pages[int(request.url.params["offset"])]
        return httpx.Response(200, json={"memories": page, "has_more": more})

    settings = ZengramConfig(url="http://127.0.0.1:9", namespace=NS, cleanup="never")
    target = ZengramTarget(settings, Secret("k" * 20, "test"), connect=FakeStore(answer))
    try:
        first = await target.store.list_page(None)
        last = await target.store.list_page(first.next)
    finally:
        await target.aclose()
    assert first.next == "2" and last.next is None
    assert [r.id for r in last.records] == ["foreign-1"]
    assert target.store._sentinel_content == wire.content_digest(PAGE[0]["content"])


async def test_a_listing_of_the_page_keeps_benchds_copy_by_position_and_the_rest_by_id() -> None:
    target = _target(PAGE)
    owned = OwnedIds(NS, ("f0", "f1", "f2", "7"))
    try:
        page = await target.store.list_page(None)
    finally:
        await target.aclose()
    table = ListedTable(owned)
    for record in page.records:
        table.add(record)
    listing = Listing(table, owned)
    assert table.by_position == 1 and table.position(MINE) == 1
    assert dict(table.items()) == {r.id: r for r in _expected()}
    claimed = {MINE: "f1", "forged": "f2", "42": "7", "no-fid": owned_prefix(NS)}
    assert dict(listing.claimed) == claimed
    assert listing.sentinels == {SENTINEL: "current"}
    assert listing.lease == _expected()[0].lease
