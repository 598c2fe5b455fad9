"""Writing the corpus into benchd's namespace, and checking it is there (DESIGN §2a).

:class:`Seeder` is held by :class:`~benchd.store.flow.NamespaceFlow`: it
writes in bounded concurrent batches with progress (sending nothing the
store would skip as an unchanged duplicate), verifies by reading the
namespace back (a record the listing does not show is read back by its id
before it is called missing), and times how long until the last record is
found by its own text. What a store reports is never counted beyond what
was sent. :class:`CorpusRecords` is the corpus as a store is told it once
seeded.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from benchd.fixtures.stream import corpus_dates, memories_at, memory_ids
from benchd.progress import report_poll
from benchd.store.concurrency import chunks, run_bounded
from benchd.store.deletion import Deleter
from benchd.store.idtable import ListedTable, zero_positions
from benchd.store.listing import Listing
from benchd.store.namespace import (
    READ_BACK_LIMIT,
    Namespace,
    RecordRow,
    RecordRows,
    row_record,
)
from benchd.store.ownership import Ownership
from benchd.store.protocol import Counts, Record
from benchd.store.target import Progress, SearchQuery

__all__ = ["CHECKPOINT_EVERY", "HELD_WRITES", "CorpusRecords", "Search", "Seeder", "content_of"]

CHECKPOINT_EVERY = 1000
"""A pass over the corpus that sends nothing yields to the event loop this often (records)."""

HELD_WRITES = 2000
"""A pass that finds at most this many records to write holds them for the writes; more
are made again from the corpus by a second pass (a changed corpus of 10^6 is not held)."""

Search = Callable[[SearchQuery], Awaitable[tuple[str, ...]]]
"""The flow's search: fixture ids in the store's rank order."""


def content_of(record: Mapping[str, Any]) -> str:
    """A memory's text (``content``, or ``text`` as the import format allows)."""
    return str(record.get("content") or record.get("text") or "")


class Seeder:
    """The writes, the verify and the searchable wait of one flow's seed.

    ``search`` is the flow's search, polled until the last record kept is found.
    """

    def __init__(
        self, namespace: Namespace, ownership: Ownership, deleter: Deleter, search: Search
    ) -> None:
        self.store = namespace.store
        self._ns = namespace
        self._ownership = ownership  # the lease each batch checks
        self._deleter = deleter  # out-of-date copies a write would skip as duplicates
        self._search = search

    async def write_all(
        self, existing: Listing, memories: Sequence[Mapping[str, Any]], progress: Progress | None
    ) -> tuple[Counts, int]:
        """Write what the store would not skip as a duplicate; its counts, and how many were
        unchanged (not sent).

        What the store would skip is not sent at all: against a per-key write
        budget a steady-state cycle then costs no writes.
        """
        if self.store.plan.cleanup == "before" or not existing.claimed:
            # nothing listed to keep: the one pass is the writes'
            rows = self._ns.rows(memories)
            return await self._write_batches(rows, len(memories), progress), 0
        keep = bytearray(len(memories))  # 1 at each corpus position found unchanged
        stale: list[str] = []
        held: list[RecordRow] | None = []  # what to write, while few: no second pass for it
        table = self._table_over(existing, memories)
        start = 0
        for chunk in chunks(self._ns.rows(memories), CHECKPOINT_EVERY):
            if start:
                await anyio.lowlevel.checkpoint()  # a pass of 10^6 records: let others run
            same = self._same_as_listed(table, start, chunk)
            keep[start : start + len(chunk)] = same
            for at in zero_positions(same):
                row = chunk[at]
                if self._kept_unchanged(existing, row, stale):
                    keep[start + at] = 1
                elif held is not None:
                    held.append(row)
                    held = held if len(held) <= HELD_WRITES else None
            start += len(chunk)
        if stale and self._deleter.may_delete():
            # the write would be skipped as a duplicate of the out-of-date copy
            await self._deleter.delete(stale)
        kept = len(keep) - keep.count(0)
        if kept == len(memories):
            return (0, 0, 0), kept  # nothing to write: no second pass
        to_write: Iterable[RecordRow] = (
            held
            if held is not None
            else (r for n, r in enumerate(self._ns.rows(memories)) if not keep[n])
        )
        counts = await self._write_batches(to_write, len(memories) - kept, progress)
        return counts, kept

    def _table_over(
        self, existing: Listing, memories: Sequence[Mapping[str, Any]]
    ) -> ListedTable | None:
        """``existing``'s table where it keeps the corpus's copies by the positions of
        ``memories`` (the corpus the namespace owns, in its order), else None."""
        records, owned = existing.records, self._ns.owned
        if not isinstance(records, ListedTable) or records.owned is not owned:
            return None
        return records if owned.same_ids(memory_ids(memories)) else None

    def _same_as_listed(
        self, table: ListedTable | None, start: int, rows: Sequence[RecordRow]
    ) -> bytes:
        """One byte per row (corpus positions from ``start``): 1 where ``table`` lists its
        copy with what the store's ``unchanged`` compares equal to the record as benchd
        writes it (:meth:`Store.kept_as_written`), so it is unchanged; 0: asked one by one."""
        wanted = None if table is None else self.store.kept_as_written(rows)
        if table is None or wanted is None or len(wanted) != len(rows):
            return bytes(len(rows))  # no shortcut (or not one a row): each row is asked
        return table.kept_equal(start, wanted)

    def _kept_unchanged(self, existing: Listing, row: RecordRow, stale: list[str]) -> bool:
        """Whether the store would skip ``row``'s record as unchanged beside its listed copy;
        where it would skip it as a duplicate of an out-of-date copy, that copy's id is added
        to ``stale`` (only what the listing shows as benchd's)."""
        store_id = row[0]
        listed = existing.records.get(store_id)
        if listed is None:
            return False
        record = row_record(self._ns.owned.namespace, row)
        if self.store.unchanged(listed, record):
            return True
        if store_id in existing.claimed and self.store.stale(listed, record):
            stale.append(store_id)
        return False

    async def _write_batches(
        self, rows: Iterable[RecordRow], total: int, progress: Progress | None
    ) -> Counts:
        """Write ``total`` records (as rows) in batches, ``plan.concurrency`` at a time;
        summed counts.

        Batches are cut as the workers take them: only those in flight are held.
        """
        plan = self.store.plan
        batches = self._ns.batches(rows, plan.batch_size)
        totals = [0, 0, 0]
        done = 0

        async def one(batch: RecordRows) -> None:
            nonlocal done
            self._ownership.check_lease_held()
            self._ns.changes += 1
            if self.store.capabilities.owned_ids:
                self._ns.held.update([row[0] for row in batch.rows])
            for i, n in enumerate(_clamped(await self.store.write(batch), len(batch))):
                totals[i] += n
            done += len(batch)
            if progress is not None:
                progress(done, total)

        await run_bounded(batches, one, limit=plan.concurrency)
        return totals[0], totals[1], totals[2]

    async def verify(
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
            listed = await self._ns.list_namespace(compare=False)  # nothing compares it
        found = self._ns.learn(listed)
        missing = self._ns.not_found(ids, found, listed)
        if progress is not None:
            progress(len(ids) - len(missing), len(ids))
        if missing:
            wanted = [self._ns.server_id(f) for f in missing[:READ_BACK_LIMIT]]
            extra = await self._ns.read_back(wanted)
            if extra:
                found = self._ns.learn(listed.merged(extra))
                missing = [f for f in missing if not found(f)]
                if progress is not None:
                    progress(len(ids) - len(missing), len(ids))
        return len(ids) - len(missing), tuple(missing)

    async def searchable_after(
        self,
        memories: Sequence[Mapping[str, Any]],
        ids: Sequence[str],
        missing: tuple[str, ...],
        progress: Progress | None = None,
    ) -> float | None:
        """Seconds until the last memory kept is found by its own text; None if never.

        A memory the store did not keep never shows: polling for it would
        spend the whole timeout to learn nothing. ``progress`` hears each poll.
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
                found = str(probe["id"]) in await self._search(query)
                polls += 1
                report_poll(progress, polls, time.monotonic() - started, timeout_s)
                if found:
                    return time.monotonic() - started
                await anyio.sleep(delay)  # polling an external system, not synchronising
                delay = min(delay * 2, 0.5)
        return None


class CorpusRecords:
    """The corpus as a store is told it once seeded (:meth:`Store.seeded`): its size and
    dates known without reading it, its records (each with its copy in ``listing``) made
    as they are read."""

    __slots__ = ("_dates", "_listing", "_memories", "_namespace")

    def __init__(
        self,
        namespace: Namespace,
        memories: Sequence[Mapping[str, Any]],
        listing: Listing | None,
    ) -> None:
        self._namespace = namespace
        self._memories = memories
        self._listing = listing
        self._dates = corpus_dates(memories)

    def __len__(self) -> int:
        return len(self._memories)

    def __iter__(self) -> Iterator[Record]:
        return self._namespace.records(self._memories, self._listing)

    @property
    def latest_created_s(self) -> float | None:
        """The latest ``created_at`` the corpus gives (epoch seconds); None: none gives one."""
        return self._dates.latest_s

    def undated(self) -> Iterator[Record]:
        """The records of the memories that give no ``created_at`` (read only for them)."""
        memories = memories_at(self._memories, self._dates.undated)
        return self._namespace.records(memories, self._listing)


def _clamped(counts: Counts, sent: int) -> Counts:
    """A store's (written, skipped, errors) for a batch of ``sent``, each at least 0 and
    together at most ``sent``: what a store reports is never counted beyond what was sent."""
    left, out = sent, []
    for n in counts:
        kept = min(max(0, int(n)), left)
        out.append(kept)
        left -= kept
    return out[0], out[1], out[2]
