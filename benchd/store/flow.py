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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from benchd.fixtures.stream import corpus_dates, memories_at, memory_ids
from benchd.logging import get_logger
from benchd.progress import enter_phase, report_poll
from benchd.result import RankedIds, SeedReport, TargetInfo
from benchd.store.concurrency import chunks, run_bounded
from benchd.store.deletion import Deleter
from benchd.store.lease import LeaseHolder
from benchd.store.listing import Listing, listing_limit
from benchd.store.namespace import READ_BACK_LIMIT, Namespace
from benchd.store.owned import (
    OwnedIds,
)
from benchd.store.ownership import Ownership, OwnershipHost
from benchd.store.protocol import (
    Capabilities,
    Counts,
    Hits,
    Purged,
    Record,
    Store,
)
from benchd.store.target import Fire, Progress, SearchQuery, WriteRate

__all__ = ["READ_BACK_LIMIT", "NamespaceFlow", "content_of"]

log = get_logger("benchd.targets")

T = TypeVar("T")

CHECKPOINT_EVERY = 1000
"""A pass over the corpus that sends nothing yields to the event loop this often (records)."""

HELD_WRITES = 2000
"""A pass that finds at most this many records to write holds them for the writes; more
are made again from the corpus by a second pass (a changed corpus of 10^6 is not held)."""


def content_of(record: Mapping[str, Any]) -> str:
    """A memory's text (``content``, or ``text`` as the import format allows)."""
    return str(record.get("content") or record.get("text") or "")


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
        self._progress: Progress | None = None  # this seed's sink, for the searchable polls
        # cleanups, purge and the deletes the seed and the ownership steps send
        self.deleter = Deleter(self.namespace, self._ownership, write_rate)

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
        sentinels = len(self.namespace.fresh.sentinels) if self.namespace.fresh is not None else 0
        beside = max(1, sentinels) + max(0, self.store.lease_records)
        return dataclasses.replace(query, limit=query.limit + beside)

    def finish(self, hits: Hits, query: SearchQuery) -> RankedIds:
        """A search's store ids (and scores) as scoring sees them.

        Labelled (fixture ids, or foreign labels), the sentinel dropped, then cut
        to ``query.limit``: the room asked for the sentinel is never scored. A
        store that answers sets (``capabilities.unranked``) is kept whole: it is
        scored as a set, and a cut would keep an arbitrary part of it.
        """
        scores = list(hits.scores) or [None] * len(hits.ids)
        kept = [
            (self.namespace.owned.label(i, self.namespace.fixture_ids), s)
            for i, s in zip(hits.ids, scores, strict=True)
            if i not in self.namespace.sentinel_ids
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
        plan, caps = self.store.plan, self.store.capabilities
        ids = memory_ids(memories)
        self.namespace.own(ids)
        started = time.monotonic()
        retries_before = self.store.retries
        self.namespace.listing_limit = listing_limit(len(memories))
        ns = self.namespace
        existing = await ns.list_namespace() if caps.lists else Listing({}, ns.owned)
        changes = self.namespace.changes
        self.namespace.held = existing.held
        if caps.writes:
            await self._ownership.check_holders(existing)
        adopted = await self._ownership.take(existing)
        if self._read_only is None:
            await self._ownership.migrate(existing)
        if plan.cleanup == "before" and self._read_only is None:
            await self.deleter.delete_seeded(existing)
        counts, unchanged = (0, 0, 0), 0
        if caps.writes and self._read_only is None:
            counts, unchanged = await self._write_all(existing, memories, progress)
        verified, missing = len(memories), tuple[str, ...]()
        if caps.lists and plan.verifies:
            enter_phase(progress, "verify")
            # Nothing written or deleted since ``existing`` (a kept corpus found unchanged):
            # that listing is the read-back, and a second one would be the same pages.
            unchanged_since = existing if self.namespace.changes == changes else None
            verified, missing = await self._verify(ids, progress, unchanged_since)
        self.store.seeded(CorpusRecords(self, memories, self.namespace.fresh))
        enter_phase(progress, "searchable")
        self._progress = progress
        searchable = await self._searchable_after(memories, ids, missing)
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

    async def _write_all(
        self, existing: Listing, memories: Sequence[Mapping[str, Any]], progress: Progress | None
    ) -> tuple[Counts, int]:
        """Write what the store would not skip as a duplicate; its counts, and how many were
        unchanged (not sent).

        What the store would skip is not sent at all: against a per-key write
        budget a steady-state cycle then costs no writes.
        """
        if self.store.plan.cleanup == "before" or not existing.claimed:
            # nothing listed to keep: the one pass is the writes'
            records = self.namespace.records(memories)
            return await self._write_batches(records, len(memories), progress), 0
        keep = bytearray(len(memories))  # 1 at each corpus position found unchanged
        stale: list[str] = []
        held: list[Record] | None = []  # what to write, while few: no second pass for it
        for n, record in enumerate(self.namespace.records(memories)):
            if n % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
                await anyio.lowlevel.checkpoint()  # a pass of 10^6 records: let others run
            listed = existing.records.get(record.store_id)
            if listed is not None and self.store.unchanged(listed, record):
                keep[n] = 1
                continue
            if (
                listed is not None
                and record.store_id in existing.claimed
                and self.store.stale(listed, record)
            ):
                stale.append(record.store_id)  # only what the listing shows as benchd's
            if held is not None:
                held.append(record)
                held = held if len(held) <= HELD_WRITES else None
        if stale and self.deleter.may_delete():
            # the write would be skipped as a duplicate of the out-of-date copy
            await self.deleter.delete(stale)
        kept = len(keep) - keep.count(0)
        if kept == len(memories):
            return (0, 0, 0), kept  # nothing to write: no second pass
        to_write: Iterable[Record] = (
            held
            if held is not None
            else (r for n, r in enumerate(self.namespace.records(memories)) if not keep[n])
        )
        counts = await self._write_batches(to_write, len(memories) - kept, progress)
        return counts, kept

    async def _write_batches(
        self, records: Iterable[Record], total: int, progress: Progress | None
    ) -> Counts:
        """Write ``total`` records in batches, ``plan.concurrency`` at a time; summed counts.

        Batches are cut as the workers take them: only those in flight are held.
        """
        plan = self.store.plan
        batches = chunks(records, plan.batch_size)
        totals = [0, 0, 0]
        done = 0

        async def one(batch: Sequence[Record]) -> None:
            nonlocal done
            self._ownership.check_lease_held()
            self.namespace.changes += 1
            if self.store.capabilities.owned_ids:
                self.namespace.held.update(r.store_id for r in batch)
            for i, n in enumerate(_clamped(await self.store.write(batch), len(batch))):
                totals[i] += n
            done += len(batch)
            if progress is not None:
                progress(done, total)

        await run_bounded(batches, one, limit=plan.concurrency)
        return totals[0], totals[1], totals[2]

    async def _verify(
        self,
        ids: Sequence[str],
        progress: Progress | None = None,
        listed: Listing | None = None,
    ) -> tuple[int, tuple[str, ...]]:
        """Check every fixture id is listed as benchd's; learn the server id <-> fixture id maps.

        ``listed`` is a listing taken since the last write or delete, if any;
        else the namespace is listed now. A record the listing does not show is
        read back by its id before it is called missing: a store's paging can
        skip records it holds. ``progress`` hears ``(verified, records)`` after
        the listing and after a read-back.
        """
        if listed is None:
            listed = await self.namespace.list_namespace()
        found = self.namespace.learn(listed)
        missing = [f for f in ids if not found(f)]
        if progress is not None:
            progress(len(ids) - len(missing), len(ids))
        if missing:
            wanted = [self.namespace.server_id(f) for f in missing[:READ_BACK_LIMIT]]
            extra = await self.namespace.read_back(wanted)
            if extra:
                found = self.namespace.learn(listed.merged(extra))
                missing = [f for f in missing if not found(f)]
                if progress is not None:
                    progress(len(ids) - len(missing), len(ids))
        return len(ids) - len(missing), tuple(missing)

    async def _searchable_after(
        self, memories: Sequence[Mapping[str, Any]], ids: Sequence[str], missing: tuple[str, ...]
    ) -> float | None:
        """Seconds until the last memory kept is found by its own text; None if never.

        A memory the store did not keep never shows: polling for it would
        spend the whole timeout to learn nothing.
        """
        plan = self.store.plan
        if not ids:
            return 0.0
        gone = set(missing)
        last = next((i for i in range(len(ids) - 1, -1, -1) if ids[i] not in gone), None)
        if last is None or plan.searchable_timeout_s <= 0:
            return None
        probe = memories[last]  # a streamed corpus reads it from a line start noted at load
        query = SearchQuery(q=content_of(probe)[:200], limit=plan.searchable_limit)
        started = time.monotonic()
        delay = 0.02
        polls = 0
        timeout_s = plan.searchable_timeout_s
        with anyio.move_on_after(timeout_s):
            while True:
                found = str(probe["id"]) in await self.search(query)
                polls += 1
                report_poll(self._progress, polls, time.monotonic() - started, timeout_s)
                if found:
                    return time.monotonic() - started
                await anyio.sleep(delay)  # polling an external system, not synchronising
                delay = min(delay * 2, 0.5)
        return None

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


class CorpusRecords:
    """The corpus as a store is told it once seeded (:meth:`Store.seeded`): its size and
    dates known without reading it, its records (each with its copy in ``listing``) made
    as they are read."""

    __slots__ = ("_dates", "_flow", "_listing", "_memories")

    def __init__(
        self,
        flow: NamespaceFlow,
        memories: Sequence[Mapping[str, Any]],
        listing: Listing | None,
    ) -> None:
        self._flow = flow
        self._memories = memories
        self._listing = listing
        self._dates = corpus_dates(memories)

    def __len__(self) -> int:
        return len(self._memories)

    def __iter__(self) -> Iterator[Record]:
        return self._flow.namespace.records(self._memories, self._listing)

    @property
    def latest_created_s(self) -> float | None:
        """The latest ``created_at`` the corpus gives (epoch seconds); None: none gives one."""
        return self._dates.latest_s

    def undated(self) -> Iterator[Record]:
        """The records of the memories that give no ``created_at`` (read only for them)."""
        memories = memories_at(self._memories, self._dates.undated)
        return self._flow.namespace.records(memories, self._listing)


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


def _clamped(counts: Counts, sent: int) -> Counts:
    """A store's (written, skipped, errors) for a batch of ``sent``, each at least 0 and
    together at most ``sent``: what a store reports is never counted beyond what was sent."""
    left, out = sent, []
    for n in counts:
        kept = min(max(0, int(n)), left)
        out.append(kept)
        left -= kept
    return out[0], out[1], out[2]
