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
import functools
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from benchd.errors import OwnershipError, TargetProtocolError
from benchd.fixtures.stream import corpus_dates, memories_at, memory_ids
from benchd.logging import get_logger
from benchd.progress import enter_phase, report_poll
from benchd.result import RankedIds, SeedReport, TargetInfo
from benchd.store.concurrency import run_bounded
from benchd.store.idtable import IdSet, ListedTable
from benchd.store.lease import LeaseHolder
from benchd.store.listing import Listing, listing_limit, uncompared
from benchd.store.owned import (
    OwnedIds,
    legacy_sentinel_id,
    owner_mark,
    sentinel_id,
)
from benchd.store.ownership import Ownership, OwnershipHost
from benchd.store.pacing import Spacing
from benchd.store.protocol import (
    Capabilities,
    Counts,
    Hits,
    Listed,
    Purged,
    Record,
    Store,
)
from benchd.store.target import Fire, Progress, SearchQuery, WriteRate

__all__ = ["READ_BACK_LIMIT", "NamespaceFlow", "content_of"]

log = get_logger("benchd.targets")

T = TypeVar("T")

RELIST_AFTER_S = 15.0
"""A delete goes out at most this long after the listing that showed the record in benchd's
namespace; past it, the namespace is listed again first and a record no longer listed there
is left alone. A store's delete may carry no namespace: a record another tenant imported
under benchd's id since the listing would be deleted (docs/failure-modes.md)."""

DELETE_WINDOWS_KEPT = 10_000  # the latest listing-to-delete windows kept for the p99

READ_BACK_LIMIT = 100
"""At most this many unlisted records are read back one by one per verify (read budget)."""


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
        self._owned = OwnedIds(store.plan.namespace, ())
        # Server id -> fixture id (listed, benchd's) and the inverse, only where the store's id
        # is not the one benchd derives (store-assigned ids): nothing per record otherwise.
        self._fixture_ids: dict[str, str] = {}
        self._server_ids: dict[str, str] = {}
        self._listing_limit = listing_limit(0)  # most records a listing may hold
        # Server ids benchd holds (or may hold: a batch sent) in its namespace and has not
        # deleted; replaced by each listing. What a cut-short cleanup reports as left over.
        self._held = IdSet(self._owned)
        ns = store.plan.namespace
        self._sentinel_ids = {sentinel_id(ns), legacy_sentinel_id(ns)}  # dropped from rankings
        # the sentinel, the lease, adoption, migration (benchd.store.ownership)
        host: OwnershipHost = _OwnershipHost(self)
        self._ownership = Ownership(store, host, lease)
        self._progress: Progress | None = None  # this seed's sink, for the searchable polls
        self._fresh: Listing | None = None  # the latest listing of the namespace ...
        self._listed_at = -math.inf  # ... and when it was answered (time.monotonic())
        self._relisting = anyio.Lock()
        self._checked: dict[str, float] = {}  # server id -> the listing its delete relies on
        # Seconds from the listing that showed each deleted record to the delete's answer.
        self.delete_windows: deque[float] = deque(maxlen=DELETE_WINDOWS_KEPT)
        self._write_rate = write_rate  # what each cleanup's deletes keep within (Spacing)
        self._changes = 0  # writes and deletes this flow sent (the sentinel's apart)

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
    def leftover_records(self) -> int:
        """Records benchd wrote (or may have: a batch was sent) and has not deleted."""
        return len(self._held)

    async def info(self) -> TargetInfo:
        """The store's own description, with the guarantees its capabilities leave out."""
        info = await self.store.info()
        return dataclasses.replace(info, lacks=self.store.capabilities.lacks())

    async def aclose(self) -> None:
        await self.store.aclose()

    def _where(self) -> str:
        plan = self.store.plan
        at = f" at {plan.endpoint}" if plan.endpoint else ""
        return f"{plan.namespace_label} {plan.namespace!r}{at}"

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
        sentinels = len(self._fresh.sentinels) if self._fresh is not None else 0
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
            (self._owned.label(i, self._fixture_ids), s)
            for i, s in zip(hits.ids, scores, strict=True)
            if i not in self._sentinel_ids
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

    # -- listing ----------------------------------------------------------------------

    async def _list(self) -> Listing:
        """The whole namespace, page by page; bounded in records and in pages."""
        records = ListedTable(self._owned)  # the corpus's copies by position, in arrays
        cursor: str | None = None
        most = self._listing_limit
        for _ in range(most + 2):  # a store's pages bring at least one record each
            page = await self.store.list_page(cursor)
            before = len(records)
            for record in page.records:
                records.add(record)
            if page.next is not None and not (page.new or len(records) > before):
                raise TargetProtocolError(
                    f"{self._where()}: a listing page after {before} record(s) brings no "
                    "record not listed before, yet says more follow; the store's paging is "
                    "broken (it repeats a page or ignores its cursor)"
                )
            if len(records) > most:
                raise TargetProtocolError(
                    f"{self._where()}: the namespace lists more than {most} records; benchd's "
                    "namespace holds only its corpus: check the store's paging or the namespace"
                )
            if page.next is None:
                listing = Listing(records, self._owned)
                self._sentinel_ids.update(listing.sentinels)
                self._fresh, self._listed_at = listing, time.monotonic()
                return listing
            cursor = page.next
        raise TargetProtocolError(f"{self._where()}: the listing pages without end")

    # -- seeding ----------------------------------------------------------------------

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace, verify it, time it to searchable."""
        plan, caps = self.store.plan, self.store.capabilities
        ids = memory_ids(memories)
        self._own(ids)
        started = time.monotonic()
        retries_before = self.store.retries
        self._listing_limit = listing_limit(len(memories))
        existing = await self._list() if caps.lists else Listing({}, self._owned)
        changes = self._changes
        self._held = existing.held
        if caps.writes:
            await self._ownership.check_holders(existing)
        adopted = await self._ownership.take(existing)
        if self._read_only is None:
            await self._ownership.migrate(existing)
        if plan.cleanup == "before" and self._read_only is None:
            await self._delete_seeded(existing)
        counts, unchanged = (0, 0, 0), 0
        if caps.writes and self._read_only is None:
            counts, unchanged = await self._write_all(existing, memories, progress)
        verified, missing = len(memories), tuple[str, ...]()
        if caps.lists and plan.verifies:
            enter_phase(progress, "verify")
            # Nothing written or deleted since ``existing`` (a kept corpus found unchanged):
            # that listing is the read-back, and a second one would be the same pages.
            unchanged_since = existing if self._changes == changes else None
            verified, missing = await self._verify(ids, progress, unchanged_since)
        self.store.seeded(CorpusRecords(self, memories, self._fresh))
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

    def _own(self, ids: Sequence[str]) -> None:
        """Take ``ids`` as the corpus; the same ids as before keep their maps (and every
        listing and set kept by their positions stays valid)."""
        ns = self.store.plan.namespace
        owned = self._owned
        if owned.namespace != ns or len(owned) != len(ids) or not owned.same_ids(ids):
            self._owned = OwnedIds(ns, ids)

    def _records(
        self, memories: Iterable[Mapping[str, Any]], listing: Listing | None = None
    ) -> Iterator[Record]:
        """The corpus's records, made as they are read (never a list of 10^5 beside it); with
        ``listing``, each with its record as listed there."""
        return (self._record(m, listing) for m in memories)

    def _record(self, memory: Mapping[str, Any], listing: Listing | None = None) -> Record:
        """What the flow writes for a fixture memory: benchd's id and mark."""
        fid = str(memory["id"])
        sid = self._owned.store_id(fid)
        listed = None if listing is None else listing.records.get(self._server_id(fid))
        return Record(sid, fid, memory, owner_mark(self._owned.namespace, fid), listed)

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
            return await self._write_batches(self._records(memories), len(memories), progress), 0
        keep = bytearray(len(memories))  # 1 at each corpus position found unchanged
        stale: list[str] = []
        held: list[Record] | None = []  # what to write, while few: no second pass for it
        for n, record in enumerate(self._records(memories)):
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
        if stale and self._can_delete():
            # the write would be skipped as a duplicate of the out-of-date copy
            await self._delete_ids(stale)
        kept = len(keep) - keep.count(0)
        if kept == len(memories):
            return (0, 0, 0), kept  # nothing to write: no second pass
        to_write: Iterable[Record] = (
            held
            if held is not None
            else (r for n, r in enumerate(self._records(memories)) if not keep[n])
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
        batches = _chunks(records, plan.batch_size)
        totals = [0, 0, 0]
        done = 0

        async def one(batch: Sequence[Record]) -> None:
            nonlocal done
            self._ownership.check_lease_held()
            self._changes += 1
            if self.store.capabilities.owned_ids:
                self._held.update(r.store_id for r in batch)
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
            listed = await uncompared(self.store, self._list)
        found = self._learn(listed)
        missing = [f for f in ids if not found(f)]
        if progress is not None:
            progress(len(ids) - len(missing), len(ids))
        if missing:
            wanted = [self._server_id(f) for f in missing[:READ_BACK_LIMIT]]
            extra = await self._read_back(wanted)
            if extra:
                found = self._learn(listed.merged(extra))
                missing = [f for f in missing if not found(f)]
                if progress is not None:
                    progress(len(ids) - len(missing), len(ids))
        return len(ids) - len(missing), tuple(missing)

    async def _read_back(self, server_ids: Sequence[str]) -> dict[str, Listed]:
        return {r.id: r for r in await self.store.read_back(server_ids)}

    def _server_id(self, fixture_id: str) -> str:
        """The id the store holds a fixture memory under: as listed, else benchd's own id."""
        if fixture_id in self._server_ids:
            return self._server_ids[fixture_id]
        return (
            self._owned.store_id(fixture_id)
            if fixture_id in self._owned.fixture_ids
            else fixture_id
        )

    def _learn(self, listing: Listing) -> Callable[[str], bool]:
        """Keep one server id per fixture id of the corpus where the store's id is not the one
        benchd derives; whether a fixture id was found (a test, not a set of 10^6 ids)."""
        # The listing's ids, and the sent ones it does not show.
        self._held = listing.held_beside(self._held)
        self._fixture_ids = {}
        self._server_ids = {}
        owned = self._owned
        for sid, fid in listing.assigned.items():  # a table's by-position records are derived
            derived = fid in owned.fixture_ids and sid == owned.store_id(fid)
            if fid in owned.fixture_ids and fid not in self._server_ids and not derived:
                self._server_ids[fid] = sid
                self._fixture_ids[sid] = fid

        def found(fid: str) -> bool:
            return fid in self._server_ids or listing.claims(fid)

        return found

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

    async def _delete_seeded(self, existing: Listing) -> None:
        """Delete benchd's earlier copies of the corpus so the write makes it afresh."""
        if self.store.capabilities.deletes:
            # From the latest listing (where one was taken since ``existing``; a delete
            # relists first when it is older than RELIST_AFTER_S): the shorter the time
            # between listing and delete, the less another tenant can import under
            # benchd's ids in between.
            await self._delete_ids(list((self._fresh or existing).claimed))
        self._fixture_ids.clear()
        self._server_ids.clear()

    # -- cleaning up ------------------------------------------------------------------

    def _can_delete(self) -> bool:
        caps = self.store.capabilities
        return caps.deletes and caps.lists and self._read_only is None

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete benchd's records for these fixture ids, as listed in its namespace now.

        The namespace is listed first: only a record that listing shows and
        that benchd wrote is deleted, whatever ``ids`` holds.
        """
        if not self._can_delete():
            return 0
        wanted = set(ids)
        seen = self._held  # benchd's server ids listed (or written) before this listing
        listed = await self._list()
        self._held = listed.held
        targets = [s for s, f in listed.claimed.items() if f in wanted]
        unlisted = [
            self._owned.store_id(f)
            for f in wanted
            if f in self._owned.fixture_ids
            and not listed.fixture_listed(f)
            and self._owned.store_id(f) in seen
        ]
        if unlisted:  # seen before but skipped by the listing's paging: read back, then delete
            extra = await self._read_back(unlisted[:READ_BACK_LIMIT])
            more = Listing(extra, self._owned).claimed
            targets += [s for s, f in more.items() if f in wanted and s not in listed.claimed]
        sent: list[str] = []
        return await self._confirmed(sent, await self._delete_ids(targets, sent))

    async def release(self) -> int:
        """Delete the sentinel once the namespace holds no other record benchd wrote.

        Run after a complete ``cleanup = "after"`` on shutdown, so a stopped
        probe leaves nothing behind; returns how many sentinel records went.
        """
        if not self._can_delete():
            return 0
        listed = await self._list()
        self._held = listed.held
        if listed.claimed:
            return 0
        return await self._delete_ids(list(listed.sentinels))

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        """Delete everything benchd owns in the namespace, the sentinel last (``benchd purge``).

        benchd's records are those listed under its ids or mark (any fixture,
        any version); with an earlier version's sentinel listed, also the bare
        fixture ids of ``memories``. Refused while another live instance holds
        the lease, unless ``force``.
        """
        caps = self.store.capabilities
        if not (caps.deletes and caps.lists):
            raise OwnershipError(
                f"{self._where()}: this target cannot list and delete records, "
                "so benchd cannot purge it"
            )
        self._own(memory_ids(memories))
        listed = await self._list()
        holder = listed.lease
        me = self.lease
        mine = me is not None and holder is not None and me.may_take(holder)
        if holder is not None and holder.live() and not force and not mine:
            raise OwnershipError(
                f"{self._where()} is leased by live {holder.describe()}; stop it first, "
                "or pass --force"
            )
        ours = list(listed.claimed)
        if "legacy" in listed.sentinels.values():
            ours += listed.legacy()
        sent: list[str] = []
        await self._delete_ids(ours, sent)
        marks = list(listed.sentinels)
        await self._delete_ids(marks, sent)
        # What went is what a listing no longer shows: a store's counts are no proof.
        after = await self._list()
        gone = [s for s in sent if s not in after.records]
        kept = len(sent) - len(gone)
        sentinels = sum(1 for s in gone if s in listed.sentinels)
        foreign = len(listed) - len(ours) - len(marks)
        return Purged(len(gone) - sentinels, sentinels, foreign, kept)

    async def _confirmed(self, server_ids: Sequence[str], reported: int) -> int:
        """How many of ``server_ids`` (deletes sent) went: the store's count where it says all
        of them went, else what a listing taken now no longer shows (a count is no proof)."""
        if reported == len(server_ids) or not self.store.capabilities.lists:
            return reported
        listed = await self._list()
        self._held = listed.held
        return sum(1 for s in server_ids if s not in listed.records)

    async def _still_listed(self, server_id: str) -> bool:
        """Whether a delete of ``server_id`` may go now: listed in the namespace recently.

        A listing older than :data:`RELIST_AFTER_S` (deletes under a write budget
        are slow) is taken again, once for all delete workers.
        """
        if time.monotonic() - self._listed_at > RELIST_AFTER_S:
            async with self._relisting:
                if time.monotonic() - self._listed_at > RELIST_AFTER_S:
                    await self._list()
            if self._fresh is None or server_id not in self._fresh.records:
                return False
        self._checked[server_id] = self._listed_at
        return True

    async def _delete_ids(self, server_ids: Sequence[str], sent: list[str] | None = None) -> int:
        """Delete these (already verified) server ids, ``delete_concurrency`` at a time, the
        requests kept within the write share (:class:`Spacing`); the ids a delete was sent
        for are added to ``sent``."""
        spacing = Spacing.for_budget(None if self._write_rate is None else self._write_rate())
        sent = [] if sent is None else sent
        if (size := self.store.capabilities.bulk_deletes) > 1:
            return await self._delete_sets(server_ids, size, spacing, sent)
        deleted = 0

        async def one(server_id: str) -> None:
            nonlocal deleted
            await spacing.turn()  # before the check: the wait never widens the window
            if not await self._still_listed(server_id):
                return  # gone from benchd's namespace since: no longer benchd's to delete
            self._ownership.check_lease_held()
            self._changes += 1
            sent.append(server_id)
            recheck = functools.partial(self._still_listed, server_id)
            if await self.store.delete(server_id, recheck):
                deleted += 1
            checked = self._checked.pop(server_id, self._listed_at)
            self.delete_windows.append(time.monotonic() - checked)  # until the answer
            self._fixture_ids.pop(server_id, None)
            self._held.discard(server_id)

        await run_bounded(list(server_ids), one, limit=self.store.plan.delete_concurrency)
        return deleted

    async def _delete_sets(
        self, server_ids: Sequence[str], size: int, spacing: Spacing, sent: list[str]
    ) -> int:
        """Delete these server ids in sets of ``size`` (a store's bulk delete), sets in flight
        ``delete_concurrency`` at a time.

        Each id of a set passes :meth:`_still_listed` first, as a single delete
        does; the store's bulk delete filters on benchd's namespace, so a record
        that left it since the listing is not touched.
        """
        deleted = 0

        async def one(chunk: list[str]) -> None:
            nonlocal deleted
            await spacing.turn()  # one request per set
            ids = [sid for sid in chunk if await self._still_listed(sid)]
            if not ids:
                return
            self._ownership.check_lease_held()
            self._changes += 1
            sent.extend(ids)
            deleted += min(max(0, await self.store.delete_many(ids)), len(ids))  # a count is
            # the store's word: never more than was sent, never negative
            answered = time.monotonic()
            for server_id in ids:
                checked = self._checked.pop(server_id, self._listed_at)
                self.delete_windows.append(answered - checked)
                self._fixture_ids.pop(server_id, None)
                self._held.discard(server_id)

        await run_bounded(_chunks(server_ids, size), one, limit=self.store.plan.delete_concurrency)
        return deleted


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
        return self._flow._records(self._memories, self._listing)

    @property
    def latest_created_s(self) -> float | None:
        """The latest ``created_at`` the corpus gives (epoch seconds); None: none gives one."""
        return self._dates.latest_s

    def undated(self) -> Iterator[Record]:
        """The records of the memories that give no ``created_at`` (read only for them)."""
        memories = memories_at(self._memories, self._dates.undated)
        return self._flow._records(memories, self._listing)


class _OwnershipHost:
    """What a flow's :class:`Ownership` asks of it (its :class:`OwnershipHost`)."""

    __slots__ = ("_flow",)

    def __init__(self, flow: NamespaceFlow) -> None:
        self._flow = flow

    @property
    def owned(self) -> OwnedIds:
        return self._flow._owned

    def where(self) -> str:
        return self._flow._where()

    async def list_namespace(self) -> Listing:
        return await self._flow._list()

    async def delete(self, server_ids: Sequence[str]) -> int:
        return await self._flow._delete_ids(server_ids)

    def hold(self, store_id: str) -> None:
        self._flow._held.add(store_id)

    def hold_nothing(self) -> None:
        self._flow._held = IdSet(self._flow._owned)


def _clamped(counts: Counts, sent: int) -> Counts:
    """A store's (written, skipped, errors) for a batch of ``sent``, each at least 0 and
    together at most ``sent``: what a store reports is never counted beyond what was sent."""
    left, out = sent, []
    for n in counts:
        kept = min(max(0, int(n)), left)
        out.append(kept)
        left -= kept
    return out[0], out[1], out[2]


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last shorter), cut as they are read."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
