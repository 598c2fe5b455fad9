"""What a flow knows of its namespace in a store, and how it lists it (DESIGN §2a).

:class:`Namespace` is held by :class:`~benchd.store.flow.NamespaceFlow` and
shared with its seeder and deleter: the corpus's ids there
(:class:`~benchd.store.owned.OwnedIds`), the latest listing and when it was
answered, the server id <-> fixture id maps where the store assigns its own
ids, the server ids benchd holds there, and how many writes and deletes the
flow sent. A listing is bounded in records and in pages: a page with a next
cursor that brings nothing new is a ``decode`` error, and a listing holds at
most max(20,000, 2 x corpus) records.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from benchd.errors import TargetProtocolError
from benchd.store.concurrency import chunks
from benchd.store.idtable import IdSet, ListedTable
from benchd.store.listing import Listing, listing_limit
from benchd.store.owned import (
    MAX_ID_CHARS,
    OwnedIds,
    legacy_sentinel_id,
    owner_mark,
    sentinel_id,
)
from benchd.store.protocol import CorpusRow, Listed, Record, Store

__all__ = ["READ_BACK_LIMIT", "Namespace", "RecordRow", "RecordRows", "row_record"]

READ_BACK_LIMIT = 100
"""At most this many unlisted records are read back one by one per verify (read budget)."""


RecordRow = CorpusRow
"""A corpus record as a row: benchd's id, the fixture id, the fixture memory."""


def row_record(namespace: str, row: RecordRow) -> Record:
    """The :class:`Record` a corpus row in ``namespace`` stands for: benchd's mark made from
    the namespace and the fixture id, nothing listed."""
    store_id, fixture_id, memory = row
    return Record(store_id, fixture_id, memory, owner_mark(namespace, fixture_id))


class RecordRows(Sequence[Record]):
    """A batch of the corpus's records as rows (:data:`RecordRow`), read as the
    :class:`Record` each stands for (benchd's mark made from the namespace and the fixture
    id; nothing listed): a kind that reads ``rows`` writes the batch without those objects;
    any other reading makes them once for the batch."""

    __slots__ = ("_records", "namespace", "rows")

    def __init__(self, namespace: str, rows: list[RecordRow]) -> None:
        self.namespace = namespace
        self.rows = rows
        self._records: list[Record] | None = None

    def records(self) -> list[Record]:
        """The batch's records (made on the first call)."""
        if self._records is None:
            ns = self.namespace
            self._records = [row_record(ns, row) for row in self.rows]
        return self._records

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        return self.records()[index]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


class Namespace:
    """One namespace of a store as the flow knows it; what the seeder and deleter share."""

    def __init__(self, store: Store) -> None:
        self.store = store
        ns = store.plan.namespace
        self.owned = OwnedIds(ns, ())
        # Server id -> fixture id (listed, benchd's) and the inverse, only where the store's id
        # is not the one benchd derives (store-assigned ids): nothing per record otherwise.
        self.fixture_ids: dict[str, str] = {}
        self.server_ids: dict[str, str] = {}
        self.listing_limit = listing_limit(0)  # most records a listing may hold
        # Server ids benchd holds (or may hold: a batch sent) in its namespace and has not
        # deleted; replaced by each listing. What a cut-short cleanup reports as left over.
        self.held = IdSet(self.owned)
        self.sentinel_ids = {sentinel_id(ns), legacy_sentinel_id(ns)}  # dropped from rankings
        self.fresh: Listing | None = None  # the latest listing of the namespace ...
        self.listed_at = -math.inf  # ... and when it was answered (time.monotonic())
        self.changes = 0  # writes and deletes the flow sent (the sentinel's apart)

    def where(self) -> str:
        """The namespace as errors name it."""
        plan = self.store.plan
        at = f" at {plan.endpoint}" if plan.endpoint else ""
        return f"{plan.namespace_label} {plan.namespace!r}{at}"

    async def list_namespace(self, *, compare: bool = True) -> Listing:
        """The whole namespace, page by page; bounded in records and in pages.

        ``compare``: whether the listing needs what the kind's ``unchanged``
        compares (``Listed.kept``); False where nothing will compare it (the
        read-back that verifies a write), which spares the kind reducing each
        record to it."""
        records = ListedTable(self.owned)  # the corpus's copies by position, in arrays
        cursor: str | None = None
        most = self.listing_limit
        for _ in range(most + 2):  # a store's pages bring at least one record each
            page = await self.store.list_page(cursor, compare=compare)
            before = len(records)
            records.add_all(page.records)
            if page.next is not None and not (page.new or len(records) > before):
                raise TargetProtocolError(
                    f"{self.where()}: a listing page after {before} record(s) brings no "
                    "record not listed before, yet says more follow; the store's paging is "
                    "broken (it repeats a page or ignores its cursor)"
                )
            if len(records) > most:
                raise TargetProtocolError(
                    f"{self.where()}: the namespace lists more than {most} records; benchd's "
                    "namespace holds only its corpus: check the store's paging or the namespace"
                )
            if page.next is None:
                listing = Listing(records, self.owned)
                self.sentinel_ids.update(listing.sentinels)
                self.fresh, self.listed_at = listing, time.monotonic()
                return listing
            cursor = page.next
        raise TargetProtocolError(f"{self.where()}: the listing pages without end")

    async def read_back(self, server_ids: Sequence[str]) -> dict[str, Listed]:
        """These records read back by their ids (those the store holds)."""
        return {r.id: r for r in await self.store.read_back(server_ids)}

    def own(self, ids: Sequence[str]) -> None:
        """Take ``ids`` as the corpus; the same ids as before keep their maps (and every
        listing and set kept by their positions stays valid)."""
        ns = self.store.plan.namespace
        owned = self.owned
        if owned.namespace != ns or len(owned) != len(ids) or not owned.same_ids(ids):
            self.owned = OwnedIds(ns, ids)

    def hold(self, store_id: str) -> None:
        """Count ``store_id`` among the records this process holds (written, or may be)."""
        self.held.add(store_id)

    def hold_nothing(self) -> None:
        """This process holds nothing in the namespace (it measures beside another's)."""
        self.held = IdSet(self.owned)

    def forget(self, server_id: str) -> None:
        """``server_id`` was deleted: neither mapped nor held any longer."""
        self.fixture_ids.pop(server_id, None)
        self.held.discard(server_id)

    def forget_maps(self) -> None:
        """The corpus is written afresh: no server id is mapped to a fixture id."""
        self.fixture_ids.clear()
        self.server_ids.clear()

    def records(
        self, memories: Iterable[Mapping[str, Any]], listing: Listing | None = None
    ) -> Iterator[Record]:
        """The corpus's records, made as they are read (never a list of 10^5 beside it); with
        ``listing``, each with its record as listed there."""
        return (self.record(m, listing) for m in memories)

    def rows(self, memories: Iterable[Mapping[str, Any]]) -> Iterator[RecordRow]:
        """:meth:`records` without a listing, as rows: ``(benchd's id, fixture id, memory)``."""
        owned = self.owned
        prefix, room, store_id = owned.prefix, MAX_ID_CHARS - len(owned.prefix), owned.store_id
        for memory in memories:
            fid = str(memory["id"])
            plain = len(fid) <= room and fid[:1] != "#"  # as owned_id writes it
            yield (prefix + fid if plain else store_id(fid)), fid, memory

    def batches(self, rows: Iterable[RecordRow], size: int) -> Iterator[RecordRows]:
        """``rows`` in batches of ``size`` (the last shorter), cut as they are read."""
        ns = self.owned.namespace
        return (RecordRows(ns, batch) for batch in chunks(rows, size))

    def record(self, memory: Mapping[str, Any], listing: Listing | None = None) -> Record:
        """What the flow writes for a fixture memory: benchd's id and mark."""
        fid = str(memory["id"])
        sid = self.owned.store_id(fid)
        listed = None if listing is None else self._listed_copy(fid, sid, listing)
        return Record(sid, fid, memory, owner_mark(self.owned.namespace, fid), listed)

    def _listed_copy(self, fid: str, sid: str, listing: Listing) -> Listed | None:
        """``listing``'s record of fixture memory ``fid`` (benchd's id for it: ``sid``), under
        its :meth:`server_id`; from the table by the corpus position where it is benchd's id."""
        records = listing.records
        if fid not in self.server_ids and isinstance(records, ListedTable):
            at = self.owned.position(fid) if records.owned is self.owned else None
            if at is not None:
                return records.listed(sid, at)
        return records.get(self.server_id(fid))

    def server_id(self, fixture_id: str) -> str:
        """The id the store holds a fixture memory under: as listed, else benchd's own id."""
        if fixture_id in self.server_ids:
            return self.server_ids[fixture_id]
        return (
            self.owned.store_id(fixture_id) if fixture_id in self.owned.fixture_ids else fixture_id
        )

    def learn(self, listing: Listing) -> Callable[[str], bool]:
        """Keep one server id per fixture id of the corpus where the store's id is not the one
        benchd derives; whether a fixture id was found (a test, not a set of 10^6 ids)."""
        # The listing's ids, and the sent ones it does not show.
        self.held = listing.held_beside(self.held)
        self.fixture_ids = {}
        self.server_ids = {}
        owned = self.owned
        for sid, fid in listing.assigned.items():  # a table's by-position records are derived
            derived = fid in owned.fixture_ids and sid == owned.store_id(fid)
            if fid in owned.fixture_ids and fid not in self.server_ids and not derived:
                self.server_ids[fid] = sid
                self.fixture_ids[sid] = fid

        def found(fid: str) -> bool:
            return fid in self.server_ids or listing.claims(fid)

        return found

    def not_found(
        self, ids: Sequence[str], found: Callable[[str], bool], listing: Listing
    ) -> list[str]:
        """``[f for f in ids if not found(f)]`` (``found``: :meth:`learn`'s for ``listing``).

        Where ``ids`` are the corpus's, none twice, and the listing keeps its table over
        them, every position it lists is found: only the others are asked."""
        owned = self.owned
        unlisted = listing.unlisted() if listing.owned is owned else None
        if unlisted is None or len(owned.fixture_ids) != len(ids) or not owned.same_ids(ids):
            return [f for f in ids if not found(f)]
        return [ids[at] for at in unlisted if not found(ids[at])]
