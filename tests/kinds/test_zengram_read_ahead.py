"""A listing asks for its next page before it works through the page it has (the store
answers the next one meanwhile), over loopback against the reference store.

The next page is asked for where the pages so far point (the last page's length on from
here) when the last answer's ``total`` says it exists, else once the page is decoded; a
guess that misses costs one request and changes nothing listed, and no page past the end
is asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fake_store import FakeStore

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramStore, ZengramTarget
from benchd.refstore.server import RunningRefStore, running_refstore
from benchd.refstore.testing import make_config
from benchd.store.owned import sentinel_id

pytestmark = pytest.mark.anyio
KEY = "test-key-read-ahead-0123456789"
NS = "benchd-read-ahead"
# 1,200 records and the sentinel: pages of 500 at offsets 0, 500 and 1,000 (201 records).
MEMORIES = [{"id": f"r{i}", "content": f"read ahead note {i}"} for i in range(1200)]


class _Offsets(FakeStore):
    """Passes every request to the store; notes each ``GET /export``'s offset, and cuts the
    pages past ``cut_from`` to ``cut`` records (a store whose page length changes)."""

    def __init__(self) -> None:
        super().__init__()
        self.offsets: list[int] = []
        self.cut_from: int | None = None
        self.cut = 250

    async def answer(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/export":
            offset = int(request.url.params.get("offset", "0"))
            self.offsets.append(offset)
            if self.cut_from is not None and offset >= self.cut_from:
                request = httpx.Request(
                    "GET", request.url.copy_set_param("limit", self.cut), headers=request.headers
                )
        return await self.forward(request)


@pytest.fixture
async def seeded() -> AsyncIterator[RunningRefStore]:
    config = make_config(api_key=KEY, retriever="bm25", import_pacing=0.0)
    async with running_refstore(config) as running:
        settings = ZengramConfig(
            url=running.url, namespace=NS, cleanup="never", searchable_timeout_s=0.0
        )
        target = ZengramTarget(settings, _key())
        try:
            await target.seed(MEMORIES)
        finally:
            await target.aclose()
        yield running


def _key() -> Secret:
    return Secret(KEY, "test")


async def _pages(store: ZengramStore, offsets: _Offsets) -> list[tuple[int, list[int], int]]:
    """Each page's offset, the offsets the store was asked for when it came back, and how
    many records it brought."""
    out = []
    cursor: str | None = None
    while True:
        page = await store.list_page(cursor, compare=False)
        out.append((int(cursor or 0), list(offsets.offsets), len(page.records)))
        if page.next is None:
            return out
        cursor = page.next


async def test_the_next_page_is_asked_for_before_a_page_is_worked_through(
    seeded: RunningRefStore,
) -> None:
    offsets = _Offsets()
    store = ZengramStore(ZengramConfig(url=seeded.url, namespace=NS), _key(), connect=offsets)
    try:
        pages = await _pages(store, offsets)
        again = await _pages(store, offsets)  # a second listing starts afresh
    finally:
        await store.aclose()
    assert pages == [
        (0, [0, 500], 500),
        (500, [0, 500, 1000], 500),
        (1000, [0, 500, 1000], 201),  # nothing asked past the end
    ]
    assert [offset for offset, _, _ in again] == [0, 500, 1000]
    assert offsets.offsets == [0, 500, 1000] * 2


async def test_a_guess_that_misses_costs_a_request_and_lists_the_same(
    seeded: RunningRefStore,
) -> None:
    offsets = _Offsets()
    offsets.cut_from = 500  # pages of 250 from offset 500 on: the guess at 1,000 misses
    store = ZengramStore(ZengramConfig(url=seeded.url, namespace=NS), _key(), connect=offsets)
    try:
        listed: list[str] = []
        cursor: str | None = None
        while True:
            page = await store.list_page(cursor, compare=False)
            listed += [record.id for record in page.records]
            if page.next is None:
                break
            cursor = page.next
    finally:
        await store.aclose()
    assert len(listed) == len(set(listed)) == len(MEMORIES) + 1
    assert sentinel_id(NS) in listed
    # 0; at 500 the guess 1,000 and then 750; at 750 the guess 1,000 again (right); 1,000
    assert offsets.offsets == [0, 500, 1000, 750, 1000]
