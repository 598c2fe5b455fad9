"""The namespace flow, written once over the store protocol (DESIGN §2a, §2b).

Every kind seeds the same way: list the namespace, refuse one benchd did not
write (no sentinel) unless it is adopted, mark it with the sentinel (and,
where the store keeps one, the lease: one writer per namespace), migrate
what an earlier benchd version wrote there, delete benchd's earlier copies
of the corpus when ``cleanup = "before"``, write in bounded concurrent
batches with progress, verify by reading the namespace back, and time how
long until the last record is found. :class:`NamespaceFlow` runs that flow,
the cleanups (after each cycle, on shutdown, ``purge``) and the search
mapping over any :class:`~benchd.store.protocol.Store`; it knows no transport.
It coordinates small collaborators, each holding only what it needs:
:class:`~benchd.store.namespace.Namespace` (the corpus's ids there, the
latest listing, the ids held), :class:`~benchd.store.ownership.Ownership`
(sentinel, lease, adoption, migration), :class:`~benchd.store.seeding.Seeder`
(writes, verify, searchable wait) and :class:`~benchd.store.deletion.Deleter`
(cleanups, ``purge``, every delete).

What benchd owns: every id it writes is derived from the namespace and the
fixture id (:mod:`benchd.store.owned`); a listed record is benchd's only
as :class:`~benchd.store.listing.Listing` says. No delete is sent for an
id that was not listed in benchd's own namespace by this process, in the
listing taken just before the delete. What a store cannot do (its
:class:`~benchd.store.protocol.Capabilities`) is skipped, never faked.

What the flow never trusts, whatever the store (DESIGN §2b): that an id it
is about to write is free (where the store can read ids in every namespace,
those its listing does not show as benchd's are read first, and one another
tenant holds fails the seed with ``ownership``, nothing written); that
paging ends (a page with a next cursor that brings nothing new is a
``decode`` error, and a listing holds at most max(20,000, 2 x corpus)
records); that a reported count is true (counts are clamped to what was
sent, ``purge`` counts what a listing after its deletes no longer shows, and
a cleanup whose counts disagree lists to confirm); and that the store gives
k results of the corpus when asked for k (it is asked for k plus the records
benchd keeps beside the corpus: sentinels, lease records).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from benchd.fixtures.stream import memory_ids
from benchd.progress import enter_phase
from benchd.result import RankedIds, SeedReport, TargetInfo
from benchd.store.deletion import Deleter
from benchd.store.lease import LeaseHolder
from benchd.store.listing import Listing, listing_limit
from benchd.store.namespace import Namespace
from benchd.store.owned import OwnedIds
from benchd.store.ownership import Ownership, OwnershipHost
from benchd.store.protocol import Capabilities, Hits, Purged, Store
from benchd.store.seeding import CorpusRecords, Seeder, content_of
from benchd.store.target import Fire, Progress, SearchQuery, WriteRate

__all__ = ["NamespaceFlow", "content_of"]


class NamespaceFlow:
    """Seed, verify, search and clean up one namespace of a store (a ``ProbeTarget``).

    ``lease`` is this process's lease on the namespace (None: it keeps none);
    ``write_rate`` the share of the write budget its deletes keep within (None: not
    spaced).
    """

    def __init__(
        self,
        store: Store,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> None:
        self.store = store
        self.namespace = Namespace(store)  # the corpus's ids there, listings, ids held
        # the sentinel, the lease, adoption, migration (benchd.store.ownership)
        host: OwnershipHost = _OwnershipHost(self)
        self._ownership = Ownership(store, host, lease)
        # cleanups, purge and the deletes the seed and the ownership steps send
        self.deleter = Deleter(self.namespace, self._ownership, write_rate)
        # the writes, the verify and the searchable wait
        self.seeder = Seeder(self.namespace, self._ownership, self.deleter, self.search)

    # -- what the probe reads -----------------------------------------------------

    @property
    def lease(self) -> LeaseHolder | None:
        """This process's lease on the namespace (None: it keeps none)."""
        return self._ownership.lease

    @lease.setter
    def lease(self, holder: LeaseHolder | None) -> None:
        self._ownership.lease = holder

    @property
    def _read_only(self) -> str | None:
        """The live holder beside which this seed measures (None: it writes)."""
        return self._ownership.read_only

    async def release_lease(self) -> bool:
        """Hand the lease back (see :meth:`Ownership.release_lease`)."""
        return await self._ownership.release_lease()

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
    def delete_windows(self) -> deque[float]:
        """Seconds from the listing that showed each deleted record to the delete's answer."""
        return self.deleter.delete_windows

    @property
    def leftover_records(self) -> int:
        """Records benchd wrote (or may have: a batch was sent) and has not deleted."""
        return len(self.namespace.held)

    async def info(self) -> TargetInfo:
        """The store's own description, with the guarantees its capabilities leave out."""
        info = await self.store.info()
        return dataclasses.replace(info, lacks=self.store.capabilities.lacks())

    async def aclose(self) -> None:
        await self.store.aclose()

    # -- searching ------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Fixture ids in the store's rank order (foreign results labelled, never relevant)."""
        return self.finish(await self.store.search(self.asked(query)), query)

    def asked(self, query: SearchQuery) -> SearchQuery:
        """``query`` as the store is asked it: k plus the records benchd keeps in the namespace
        beside its corpus (its sentinels as last listed, at least one, and the store's lease
        records), which take result slots and are dropped from the ranking. A store answering
        sets is asked for k: its answer is scored whole."""
        if self.store.capabilities.unranked:
            return query
        fresh = self.namespace.fresh
        sentinels = len(fresh.sentinels) if fresh is not None else 0
        beside = max(1, sentinels) + max(0, self.store.lease_records)
        return dataclasses.replace(query, limit=query.limit + beside)

    def finish(self, hits: Hits, query: SearchQuery) -> RankedIds:
        """A search's store ids (and scores) as scoring sees them.

        Labelled (fixture ids, or foreign labels), the sentinel dropped, then cut
        to ``query.limit``: the room asked for the sentinel is never scored. A
        store that answers sets (``capabilities.unranked``) is kept whole: it is
        scored as a set, and a cut would keep an arbitrary part of it.
        """
        ns = self.namespace
        scores = list(hits.scores) or [None] * len(hits.ids)
        kept = [
            (ns.owned.label(i, ns.fixture_ids), s)
            for i, s in zip(hits.ids, scores, strict=True)
            if i not in ns.sentinel_ids
        ]
        if not self.store.capabilities.unranked:
            kept = kept[: query.limit]
        return RankedIds([i for i, _ in kept], [s for _, s in kept])

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        """The store's own sender for the load pass: each query asked as :meth:`search` asks
        it (:meth:`asked`), its hits mapped and cut to the query's own k."""
        asked = [self.asked(q) for q in queries]
        own = {id(a): q for a, q in zip(asked, queries, strict=True)}

        def finish(hits: Hits, query: SearchQuery) -> RankedIds:
            return self.finish(hits, own.get(id(query), query))

        return self.store.load_sender(asked, finish, concurrency=concurrency, timeout_s=timeout_s)

    # -- seeding ----------------------------------------------------------------------

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace, verify it, time it to searchable."""
        plan, caps, ns = self.store.plan, self.store.capabilities, self.namespace
        ids = memory_ids(memories)
        ns.own(ids)
        started = time.monotonic()
        retries_before = self.store.retries
        ns.listing_limit = listing_limit(len(memories))
        existing = await ns.list_namespace() if caps.lists else Listing({}, ns.owned)
        changes = ns.changes
        ns.held = existing.held
        if caps.writes:
            await self._ownership.check_holders(existing)
        adopted = await self._ownership.take(existing)
        if self._read_only is None:
            await self._ownership.migrate(existing)
        if plan.cleanup == "before" and self._read_only is None:
            await self.deleter.delete_seeded(existing)
        counts, unchanged = (0, 0, 0), 0
        if caps.writes and self._read_only is None:
            counts, unchanged = await self.seeder.write_all(existing, memories, progress)
        verified, missing = len(memories), tuple[str, ...]()
        if caps.lists and plan.verifies:
            enter_phase(progress, "verify")
            # Nothing written or deleted since ``existing`` (a kept corpus found unchanged):
            # that listing is the read-back, and a second one would be the same pages.
            unchanged_since = existing if ns.changes == changes else None
            verified, missing = await self.seeder.verify(ids, progress, unchanged_since)
        self.store.seeded(CorpusRecords(ns, memories, ns.fresh))
        enter_phase(progress, "searchable")
        searchable = await self.seeder.searchable_after(memories, ids, missing, progress)
        return SeedReport(
            requested=len(memories),
            imported=counts[0],
            skipped=counts[1],
            errors=counts[2],
            verified=verified,
            missing=missing,
            retries=self.store.retries - retries_before,
            duration_s=time.monotonic() - started,
            searchable_after_s=searchable,
            adopted=adopted,
            read_only_beside=self._read_only,
            unchanged=unchanged,
        )

    # -- cleaning up ------------------------------------------------------------------

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete benchd's records for these fixture ids, as listed in its namespace now
        (see :meth:`Deleter.cleanup`)."""
        return await self.deleter.cleanup(ids)

    async def release(self) -> int:
        """Delete the sentinel once the namespace holds no other record benchd wrote
        (see :meth:`Deleter.release`)."""
        return await self.deleter.release()

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        """Delete everything benchd owns in the namespace, the sentinel last (``benchd purge``,
        see :meth:`Deleter.purge`)."""
        return await self.deleter.purge(memories, force=force)


class _OwnershipHost:
    """What a flow's :class:`Ownership` asks of it (its :class:`OwnershipHost`)."""

    __slots__ = ("_flow",)

    def __init__(self, flow: NamespaceFlow) -> None:
        self._flow = flow

    @property
    def owned(self) -> OwnedIds:
        return self._flow.namespace.owned

    def where(self) -> str:
        return self._flow.namespace.where()

    async def list_namespace(self) -> Listing:
        return await self._flow.namespace.list_namespace()

    async def delete(self, server_ids: Sequence[str]) -> int:
        return await self._flow.deleter.delete(server_ids)

    def hold(self, store_id: str) -> None:
        self._flow.namespace.hold(store_id)

    def hold_nothing(self) -> None:
        self._flow.namespace.hold_nothing()
