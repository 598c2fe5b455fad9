"""The window between benchd's listing and its delete (#20 item 7), against the real
server's profile over loopback.

The store's ``DELETE /memory/{id}`` carries no namespace: a record another
tenant imports under one of benchd's ids after benchd listed it would be
deleted. That is the store's limit; benchd narrows the window: deletes use the
latest listing, and a listing older than ``RELIST_AFTER_S`` is taken again
before the next delete, which leaves a record no longer listed alone. The
heartbeat's own delete-then-import of the sentinel is one step that a
cancellation (SIGTERM) cannot cut in half.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from fake_store import FakeStore

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.server import RunningRefStore, running_refstore
from benchd.refstore.testing import make_config
from benchd.store import deletion
from benchd.store.lease import LeaseHolder
from benchd.store.owned import owned_id, sentinel_id

pytestmark = pytest.mark.anyio
KEY = "test-key-window-0123456789"
NS = "benchd-window"
MEMORIES = [{"id": f"w{i}", "content": f"window note number {i}"} for i in range(6)]


@pytest.fixture
async def real() -> AsyncIterator[RunningRefStore]:
    config = make_config(api_key=KEY, retriever="bm25", profile="zengram-4.3", import_pacing=0.0)
    async with running_refstore(config) as running:
        yield running


class _TakenMidway(FakeStore):
    """Before benchd's first DELETE reaches the store, another tenant imports a record under
    another of benchd's ids into its own namespace (the store's upsert moves it there)."""

    def __init__(self, candidates: list[str]) -> None:
        super().__init__()
        self._candidates = candidates
        self.victim = ""
        self.deleted: list[str] = []

    async def answer(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            now = request.url.path.rsplit("/", 1)[-1]
            if not self.deleted:
                self.victim = next(c for c in reversed(self._candidates) if c != now)
                await self._take(request, self.victim)
            self.deleted.append(now)
        return await self.forward(request)

    async def _take(self, request: httpx.Request, record_id: str) -> None:
        record = {"id": record_id, "content": "tenant x's own", "client_id": "tenant-x"}
        base = f"{request.url.scheme}://{request.url.netloc.decode()}"
        async with httpx.AsyncClient(base_url=base, headers={"x-api-key": KEY}) as other:
            body = {"data": [record], "operator_approved": True}
            reply = await other.post("/export/import", json=body)
            assert reply.json()["imported"] == 1


async def _tenant_record(url: str, record_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": KEY}) as client:
        body = (await client.get("/export", params={"client_id": "tenant-x"})).json()
    (found,) = [m for m in body["memories"] if m["id"] == record_id]
    return dict(found)


async def test_a_record_moved_out_of_the_namespace_after_a_stale_listing_is_not_deleted(
    real: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ZengramConfig(url=real.url, namespace=NS, seed_concurrency=1, cleanup="never")
    first = ZengramTarget(settings, Secret(KEY, "test"))
    try:
        await first.seed(MEMORIES)
    finally:
        await first.aclose()
    transport = _TakenMidway([owned_id(NS, str(m["id"])) for m in MEMORIES])
    monkeypatch.setattr(deletion, "RELIST_AFTER_S", 0.0)  # every delete re-checks the listing
    purger = ZengramTarget(settings, Secret(KEY, "test"), connect=transport)
    try:
        purged = await purger.purge(MEMORIES, force=False)
        windows = list(purger.delete_windows)
    finally:
        await purger.aclose()
    assert transport.victim and transport.victim not in transport.deleted
    kept = await _tenant_record(real.url, transport.victim)
    assert (kept["active"], kept["content"]) == (True, "tenant x's own")
    assert (purged.records, purged.sentinels) == (len(MEMORIES) - 1, 1)
    assert len(windows) == len(MEMORIES)  # one window per delete sent (the sentinel's too)


class _CancelAtSentinelDelete(FakeStore):
    """Once armed, cancels the seeding task the moment the heartbeat's DELETE of the sentinel
    goes out, as a SIGTERM landing between the heartbeat's delete and its import would."""

    def __init__(self) -> None:
        super().__init__()
        self.scope: anyio.CancelScope | None = None
        self.cancelled = False

    async def answer(self, request: httpx.Request) -> httpx.Response:
        reply = await self.forward(request)  # the store deleted it
        armed = self.scope is not None and request.method == "DELETE"
        if armed and "benchd-sentinel" in request.url.path and self.scope is not None:
            self.scope.cancel()
            self.cancelled = True
        return reply


async def test_the_heartbeat_is_never_cut_between_its_delete_and_its_import(
    real: RunningRefStore,
) -> None:
    transport = _CancelAtSentinelDelete()
    settings = ZengramConfig(url=real.url, namespace=NS, cleanup="never")
    target = ZengramTarget(settings, Secret(KEY, "test"), connect=transport)
    target.lease = LeaseHolder(instance="pod-0", ttl_s=600.0)
    try:
        await target.seed(MEMORIES)
        with anyio.CancelScope() as scope:
            transport.scope = scope
            await target.seed(MEMORIES)  # the heartbeat: delete, then import the sentinel
        assert scope.cancelled_caught and transport.cancelled
    finally:
        await target.aclose()
    async with httpx.AsyncClient(base_url=real.url, headers={"x-api-key": KEY}) as client:
        body = (await client.get("/export", params={"client_id": NS})).json()
    assert sentinel_id(NS) in {m["id"] for m in body["memories"]}  # imported again
