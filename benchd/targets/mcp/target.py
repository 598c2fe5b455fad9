"""The ``mcp`` kind's probe target: benchd's namespace guarantees over :class:`McpStore`.

Interim: the shared flow (``benchd.targets.flow``) does not run on the store
protocol yet, so this module holds the part of it an ``mcp`` store needs,
written over the seam's types only (:class:`~benchd.targets.store.Store`
operations, :class:`Record`, :class:`Hits`), never over tool calls: when
the flow lands, the registry builds the flow over :class:`McpStore` and
this module goes. What it guarantees (DESIGN §2a):

- ids are benchd's own (``benchd:<namespace>:<fixture id>``), mapped back to
  fixture ids before scoring; anything else a search answers is a foreign
  label that scores as non-relevant; the sentinel never appears;
- a namespace that lists records benchd did not write and no sentinel is
  refused (``ownership``) unless adopted; the first seed writes the sentinel;
- a seed is verified by listing; a delete only ever targets an id the
  listing just showed as benchd's, and is verified by listing again (a
  delete tool's "done" proves nothing: server-memory says it for a missing
  name);
- ``cleanup = "before"`` deletes benchd's earlier copies so every cycle
  writes afresh; ``after`` deletes them after the cycle and on shutdown, the
  sentinel last; ``purge`` deletes everything benchd owns there.

No lease: an MCP listing carries no metadata (``capabilities.lease`` is
false, and benchd says so).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from benchd.config.secrets import Secret
from benchd.errors import OwnershipError
from benchd.hooks import Fire
from benchd.logging import get_logger
from benchd.result import RankedIds, SeedReport, TargetInfo
from benchd.targets.base import Progress, SearchQuery
from benchd.targets.client import run_bounded
from benchd.targets.lease import LeaseHolder
from benchd.targets.mcp.config import McpConfig
from benchd.targets.mcp.store import MAX_LIST_PAGES, McpStore
from benchd.targets.owned import OwnedIds, owned_id, owner_mark, sentinel_id, sentinel_text
from benchd.targets.store import Capabilities, Purged, Record

__all__ = ["McpTarget"]

log = get_logger("benchd.targets")



class McpTarget:
    """A probe's ``mcp`` target (see the module docstring)."""

    lease: LeaseHolder | None = None  # never set: no lease (capabilities.lease is false)

    def __init__(self, config: McpConfig, secret: Secret | None) -> None:
        self.store = McpStore(config, secret)
        self._plan = self.store.plan
        self._owned = OwnedIds(self._plan.namespace, ())
        self._sentinel = sentinel_id(self._plan.namespace)
        self._held: set[str] = set()  # benchd's ids the namespace may hold (last listing)

    # -- what the probe reads -----------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self.store.capabilities

    @property
    def retries(self) -> int:
        return self.store.retries

    @property
    def retry_wait_s(self) -> float:
        return self.store.retry_wait_s

    @property
    def leftover_records(self) -> int:
        return len(self._held)

    async def info(self) -> TargetInfo:
        return await self.store.info()

    # -- the listing ------------------------------------------------------------------

    async def _listing(self) -> list[str]:
        """Every id the namespace lists, all pages."""
        ids: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await self.store.list_page(cursor)
            ids.extend(record.id for record in page.records)
            cursor = page.next
            if cursor is None:
                break
        self._held = {i for i in ids if self._owned.is_owned(i)}
        return ids

    def _where(self) -> str:
        return f"namespace {self._plan.namespace!r} at {self._plan.endpoint}"

    # -- seed --------------------------------------------------------------------------

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Own the namespace, write the corpus afresh where asked, verify it by listing."""
        started = time.perf_counter()
        retries = self.store.retries
        self._owned = OwnedIds.of(self._plan.namespace, memories)
        caps = self.capabilities
        listed = await self._listing() if caps.lists else []
        adopted = False
        written = 0
        if caps.writes:
            adopted = await self._own(listed)
            if self._plan.cleanup == "before":
                await self._delete_listed([i for i in listed if i in self._held])
            written = await self._write_all(memories, progress)
        missing: tuple[str, ...] = ()
        verified = len(memories)
        if caps.lists and self._plan.verifies:
            present = set(await self._listing())
            missing = tuple(f for f, s in sorted(self._owned.store_of.items()) if s not in present)
            verified = len(memories) - len(missing)
        return SeedReport(
            requested=len(memories),
            imported=written,
            skipped=0,
            errors=0,
            verified=verified,
            missing=missing,
            retries=self.store.retries - retries,
            duration_s=time.perf_counter() - started,
            adopted=adopted,
        )

    async def _own(self, listed: Sequence[str]) -> bool:
        """Write the sentinel on first contact; refuse a namespace holding others' records."""
        if self._sentinel in listed:
            return False
        foreign = [i for i in listed if not self._owned.is_owned(i) and i != self._sentinel]
        if foreign and not self._plan.adopt_namespace:
            raise OwnershipError(
                f"{self._where()} already holds {len(foreign)} record(s) benchd did not write "
                "and no benchd sentinel; set adopt_namespace = true to write beside them "
                "(benchd only ever deletes its own ids), or point the probe elsewhere"
            )
        text = sentinel_text(self._plan.namespace)
        await self.store.write_sentinel(Record(self._sentinel, "", {"content": text}, {}))
        return bool(foreign)

    async def _write_all(
        self, memories: Sequence[Mapping[str, Any]], progress: Progress | None
    ) -> int:
        namespace, owned = self._plan.namespace, self._owned
        records = [
            Record(owned.store_of[fid], fid, m, owner_mark(namespace, fid))
            for m in memories
            for fid in (str(m["id"]),)
        ]
        size = max(1, self._plan.batch_size)
        batches = [records[i : i + size] for i in range(0, len(records), size)]
        done = 0

        async def one(batch: list[Record]) -> None:
            nonlocal done
            self._held.update(r.store_id for r in batch)  # sent: it may be there now
            written, _, _ = await self.store.write(batch)
            done += written
            if progress is not None:
                progress(done, len(records))

        await run_bounded(batches, one, limit=self._plan.concurrency)
        return done

    # -- search ------------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Fixture ids (foreign ones labelled), the sentinel dropped, a ranking cut to k."""
        hits = await self.store.search(query)
        scores = list(hits.scores) if hits.scores else [None] * len(hits.ids)
        pairs = [(i, s) for i, s in zip(hits.ids, scores, strict=True) if i != self._sentinel]
        if not self.capabilities.unranked:
            pairs = pairs[: query.limit]
        labels = [self._owned.label(i) for i, _ in pairs]
        return RankedIds(labels, [s for _, s in pairs] if hits.scores else ())

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        raise NotImplementedError("the mcp kind declares no load sender: the engine calls search")

    # -- deletes -----------------------------------------------------------------------

    async def _delete_listed(self, store_ids: Sequence[str]) -> int:
        """Delete ids a listing just showed (the store verifies each by listing again)."""
        deleted = 0

        async def one(store_id: str) -> None:
            nonlocal deleted
            await self.store.delete(store_id)
            deleted += 1
            self._held.discard(store_id)

        await run_bounded(list(store_ids), one, limit=self._plan.delete_concurrency)
        return deleted

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete these fixture ids where the listing shows them as benchd's."""
        if not (self.capabilities.lists and self.capabilities.deletes):
            return 0
        listed = set(await self._listing())
        wanted = {owned_id(self._plan.namespace, f) for f in ids}
        return await self._delete_listed(sorted(wanted & listed))

    async def release(self) -> int:
        """Delete the sentinel once nothing else of benchd's is listed."""
        if not (self.capabilities.lists and self.capabilities.deletes):
            return 0
        listed = await self._listing()
        if self._held or self._sentinel not in listed:
            return 0
        return await self._delete_listed([self._sentinel])

    async def release_lease(self) -> bool:
        """No lease is kept (capabilities.lease is false): nothing to hand back."""
        return False

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        """Delete every record benchd owns in the namespace, then its sentinel."""
        del memories, force  # ownership is read from the ids; no lease to override
        listed = await self._listing()
        mine = [i for i in listed if self._owned.is_owned(i)]
        records = await self._delete_listed(mine)
        sentinels = await self._delete_listed([self._sentinel] if self._sentinel in listed else [])
        foreign = len(listed) - len(mine) - sentinels
        return Purged(records, sentinels, foreign)

    async def aclose(self) -> None:
        await self.store.aclose()

