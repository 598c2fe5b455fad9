"""The seeding flow the HTTP store adapters share; each adapter adds its store's details.

``zengram`` and ``http`` seed the same way: list the namespace, refuse one
benchd did not write (no sentinel record) unless it is adopted, mark it with
the sentinel, migrate what an earlier benchd version wrote there, delete
benchd's earlier copies of the corpus when ``cleanup = "before"``, import in
bounded concurrent batches with progress, verify through the listing and
time how long until the last record is found. :class:`SeededStore` runs that
flow once; an adapter supplies only the store-specific hooks: how a namespace
is listed, how a batch is written and its counts read, how one id is
deleted, how the sentinel is written and recognised, and which listed
record benchd wrote (and for which fixture id).

What benchd owns (DESIGN §2a): every id it writes is derived from the
namespace and the fixture id (:mod:`benchd.targets.owned`); a listed record
is benchd's only when its id (or, where the store assigns ids, benchd's mark
on it) says so, never because its content matches a fixture memory. No
``DELETE`` is sent for an id that was not listed in benchd's own namespace
by this process, in the listing taken just before the delete.
"""

from __future__ import annotations

import hashlib
import math
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import anyio
import httpx

from benchd.errors import OwnershipError
from benchd.hooks import Fire, enter_phase, report_poll
from benchd.logging import get_logger
from benchd.result import SeedReport
from benchd.targets.answers import listing_limit
from benchd.targets.base import Progress, RankedIds, SearchQuery
from benchd.targets.client import (
    NO_CONTEXT,
    Answer,
    ClientSettings,
    ErrorContext,
    open_clients,
    run_bounded,
)
from benchd.targets.lease import Holder, LeaseHolder
from benchd.targets.owned import OwnedIds, legacy_sentinel_id, sentinel_id
from benchd.targets.store import Capabilities, Purged
from benchd.targets.transport import search_fire

__all__ = ["Counts", "Purged", "SeedPlan", "SeededStore", "content_of", "digest", "sentinel_id"]

log = get_logger("benchd.targets")

R = TypeVar("R", bound=Mapping[str, Any])
"""One listed record, as the adapter's ``export_namespace`` keeps it."""

Counts = tuple[int, int, int]
"""A store's (imported, skipped, errors) for a batch."""

RELIST_AFTER_S = 15.0
"""A delete goes out at most this long after the listing that showed the record in benchd's
namespace; past it, the namespace is listed again first and a record no longer listed there
is left alone. The store's DELETE carries no namespace: a record another tenant imported
under benchd's id since the listing would be deleted (docs/failure-modes.md)."""

DELETE_WINDOWS_KEPT = 10_000  # the latest listing-to-delete windows kept for the p99

READ_BACK_LIMIT = 100
"""At most this many unlisted records are read back one by one per verify (read budget)."""


def content_of(record: Mapping[str, Any]) -> str:
    """A memory's text (``content``, or ``text`` as the import format allows)."""
    return str(record.get("content") or record.get("text") or "")


def digest(text: str) -> str:
    """The sha256 of a text, used to recognise a record by its content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class SeedPlan:
    """What the shared flow reads from an adapter's config."""

    namespace: str
    cleanup: Literal["before", "after", "never"]
    adopt_namespace: bool
    batch_size: int  # records per import request
    concurrency: int  # import requests in flight
    delete_concurrency: int  # delete requests in flight
    exports: bool = True  # the store can list the namespace
    writes: bool = True  # the store can import records
    deletes: bool = True  # the store can delete one record
    verifies: bool = True  # verify the seed through the listing
    namespace_label: str = "namespace"  # how the ownership error names the namespace


class SeededStore(ABC, Generic[R]):
    """Seed, verify and clean up an HTTP store; subclasses fill in the hooks.

    Holds the connection (``_base``, ``_client``, ``_http``), the corpus's
    owned ids (:class:`~benchd.targets.owned.OwnedIds`) and, where the store
    assigns ids, the server id -> fixture id map learned from the listing.
    """

    keeps_lease = False  # the store's listing carries the sentinel's metadata (the lease)

    def __init__(
        self,
        settings: ClientSettings,
        auth: dict[str, str],
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        context: ErrorContext = NO_CONTEXT,
    ) -> None:
        self._base, self._client, self._http = open_clients(
            settings, auth, transport, context=context
        )
        self._owned = OwnedIds(self._plan().namespace, ())
        self._fixture_ids: dict[str, str] = {}  # server id -> fixture id (listed, benchd's)
        self._server_ids: dict[str, str] = {}  # fixture id -> server id, the inverse
        self._listing_limit = listing_limit(0)  # most records a listing may hold
        # Server ids benchd holds (or may hold: a batch sent) in its namespace and has not
        # deleted; replaced by each listing. What a cut-short cleanup reports as left over.
        self._held: set[str] = set()
        self.lease: LeaseHolder | None = None  # set by the probe runner: this process's lease
        self._fresh: Mapping[str, R] = {}  # the latest listing of the namespace ...
        self._listed_at = -math.inf  # ... and when it was answered (time.monotonic())
        self._relisting = anyio.Lock()
        self._checked: dict[str, float] = {}  # server id -> the listing its delete relies on
        # Seconds from the listing that showed each deleted record to the delete's answer.
        self.delete_windows: deque[float] = deque(maxlen=DELETE_WINDOWS_KEPT)
        self._read_only: str | None = None  # the live holder beside which this seed measures
        self._progress: Progress | None = None  # this seed's sink, for the searchable polls

    # -- hooks: the store-specific parts -------------------------------------------

    @abstractmethod
    def _plan(self) -> SeedPlan:
        """The flow's settings, from the adapter's config."""

    @abstractmethod
    async def export_namespace(self) -> Mapping[str, R]:
        """Every record listed in the namespace, by server id."""

    @abstractmethod
    def _sentinel_of(self, server_id: str, record: R) -> str | None:
        """``"current"`` or ``"legacy"`` if this listed record is benchd's sentinel, else None."""

    @abstractmethod
    async def _write_sentinel(self) -> None:
        """Write the sentinel record; an error if the store rejects it."""

    @abstractmethod
    def _written_for(self, server_id: str, record: R) -> str | None:
        """The fixture id benchd wrote this listed record for; None if it is not benchd's.

        A record benchd wrote for a fixture id not in the current corpus (an
        earlier version of the fixture) answers its own server id.
        """

    def _lease_of(self, existing: Mapping[str, R]) -> Holder | None:
        """The lease in the listed sentinel; None where the store keeps none (the default)."""
        return None

    async def _read_lease(self) -> Holder | None:
        """The lease as the store holds it now (read back after writing it)."""
        return None

    def _legacy_for(self, server_id: str, record: R) -> str | None:
        """The fixture id an earlier benchd version wrote this record under (its bare id)."""
        return server_id if server_id in self._owned.fixture_ids else None

    def _prepare(self, memory: Mapping[str, Any]) -> Any:
        """What a batch carries for one memory (by default the memory itself)."""
        return memory

    @abstractmethod
    async def _import_batch(self, batch: Sequence[Any]) -> Counts:
        """Write one batch of prepared records; the store's counts."""

    @abstractmethod
    async def _delete_one(self, server_id: str) -> bool:
        """Delete one record; False if the store says it was already gone."""

    def _unchanged(
        self, existing: Mapping[str, R], memories: Sequence[Mapping[str, Any]]
    ) -> frozenset[str]:
        """Fixture ids already stored exactly as the store would dedup them (no write needed).

        The default is none: every record is sent and the store decides.
        """
        return frozenset()

    def _server_id(self, fixture_id: str) -> str:
        """The id the store holds a fixture memory under: as listed, else benchd's own id."""
        return self._server_ids.get(fixture_id) or self._owned.store_of.get(fixture_id, fixture_id)

    async def _read_back(self, server_ids: Sequence[str]) -> Mapping[str, R]:
        """Read records the listing did not show, one by one; those stored, by server id.

        The default reads nothing (a store without a read-by-id route).
        """
        return {}

    @abstractmethod
    async def _searchable_after(
        self, memories: Sequence[Mapping[str, Any]], missing: tuple[str, ...]
    ) -> float | None:
        """Time-to-searchable for this seed (see :meth:`_time_to_searchable`)."""

    @abstractmethod
    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Fixture ids in the store's rank order."""

    @abstractmethod
    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        """The search request for ``query`` (sans-I/O: the load pass sends it)."""

    @abstractmethod
    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ""
    ) -> tuple[str, ...]:
        """Fixture ids from a 2xx search answer, at most ``query.limit``."""

    # -- ownership, shared by the hooks ----------------------------------------------

    def _label(self, server_id: str) -> str:
        """A ranked server id as scoring sees it: its fixture id, or a foreign label."""
        return self._owned.label(server_id, self._fixture_ids)

    def _is_sentinel_id(self, server_id: str) -> bool:
        ns = self._plan().namespace
        return server_id in (sentinel_id(ns), legacy_sentinel_id(ns))

    def _ranked(self, ids: Sequence[str], scores: Sequence[float | None], limit: int) -> RankedIds:
        """A search's server ids (and scores) as scoring sees them.

        Labelled (fixture ids, or foreign labels), the sentinel dropped, then cut
        to ``limit``: the room asked for the sentinel is never scored.
        """
        hits = zip(ids, scores, strict=True)
        kept = [(self._label(i), s) for i, s in hits if not self._is_sentinel_id(i)][:limit]
        return RankedIds([i for i, _ in kept], [s for _, s in kept])

    def _claimed(self, existing: Mapping[str, R]) -> dict[str, str]:
        """Server id -> fixture id of every listed record benchd wrote (no sentinel)."""
        claimed: dict[str, str] = {}
        for sid, rec in existing.items():
            if self._sentinel_of(sid, rec) is None:
                fid = self._written_for(sid, rec)
                if fid is not None:
                    claimed[sid] = fid
        return claimed

    def _sentinels(self, existing: Mapping[str, R]) -> dict[str, str]:
        """Listed sentinel records: server id -> ``"current"`` or ``"legacy"``."""
        found: dict[str, str] = {}
        for sid, rec in existing.items():
            which = self._sentinel_of(sid, rec)
            if which is not None:
                found[sid] = which
        return found

    # -- the flow ----------------------------------------------------------------

    @property
    def retries(self) -> int:
        """Requests retried so far (429 with Retry-After, 5xx, connection errors)."""
        return self._http.retries

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this store can do, as its kind declares it for these settings."""

    @property
    def retry_wait_s(self) -> float:
        """Seconds waited before those retries (backoff and ``Retry-After``)."""
        return self._http.retry_wait_s

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        """The load pass's sender: the engine's own pool, this adapter's requests and parsing."""
        return search_fire(
            self,
            queries,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_response_bytes=self._http.max_bytes,
            errors=self._http.context,
        )

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace, verify it, time it to searchable."""
        plan = self._plan()
        self._owned = OwnedIds.of(plan.namespace, memories)
        started = time.monotonic()
        retries_before = self._http.retries
        self._listing_limit = listing_limit(len(memories))
        existing: Mapping[str, R] = await self._list() if plan.exports else {}
        self._held = set(self._claimed(existing)) | set(self._sentinels(existing))
        adopted = await self._take_ownership(plan, existing)
        if self._read_only is None:
            await self._migrate(plan, existing)
        if plan.cleanup == "before" and self._read_only is None:
            await self._delete_seeded(plan, existing)
        counts, unchanged = (0, 0, 0), 0
        if plan.writes and self._read_only is None:
            # What the store would skip as a duplicate is not sent at all: against a
            # per-key write budget a steady-state cycle then costs no writes.
            keep = frozenset() if plan.cleanup == "before" else self._unchanged(existing, memories)
            to_write = [m for m in memories if str(m["id"]) not in keep]
            counts = await self._import_all(plan, to_write, progress)
            unchanged = len(keep)
        verified, missing = len(memories), tuple[str, ...]()
        if plan.exports and plan.verifies:
            enter_phase(progress, "verify")
            verified, missing = await self._verify(memories, progress)
        enter_phase(progress, "searchable")
        self._progress = progress
        searchable = await self._searchable_after(memories, missing)
        return SeedReport(
            requested=len(memories),
            imported=counts[0],
            skipped=counts[1],
            errors=counts[2],
            verified=verified,
            missing=missing,
            retries=self._http.retries - retries_before,
            duration_s=time.monotonic() - started,
            searchable_after_s=searchable,
            adopted=adopted,
            read_only_beside=self._read_only,
            unchanged=unchanged,
        )

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete benchd's records for these fixture ids, as listed in its namespace now.

        The namespace is listed first: only a record that listing shows and
        that benchd wrote is deleted, whatever ``ids`` holds.
        """
        plan = self._plan()
        if not (plan.deletes and plan.exports) or self._read_only is not None:
            return 0
        wanted = set(ids)
        listed = await self._list()
        claimed = self._claimed(listed)
        self._held = set(claimed) | set(self._sentinels(listed))
        unlisted = [
            self._owned.store_of[f]
            for f in wanted - set(claimed.values())
            if f in self._owned.store_of and self._owned.store_of[f] in self._fixture_ids
        ]
        if unlisted:  # seen before but skipped by the listing's paging: read back, then delete
            claimed.update(self._claimed(await self._read_back(unlisted[:READ_BACK_LIMIT])))
        return await self._delete_ids(plan, [s for s, f in claimed.items() if f in wanted])

    async def release(self) -> int:
        """Delete the sentinel once the namespace holds no other record benchd wrote.

        Run after a complete ``cleanup = "after"`` on shutdown, so a stopped
        probe leaves nothing behind; returns how many sentinel records went.
        """
        plan = self._plan()
        if not (plan.deletes and plan.exports) or self._read_only is not None:
            return 0
        listed = await self._list()
        self._held = set(self._claimed(listed)) | set(self._sentinels(listed))
        if self._claimed(listed):
            return 0
        return await self._delete_ids(plan, list(self._sentinels(listed)))

    async def release_lease(self) -> bool:
        """Hand back this process's lease; a store that keeps none has none to hand back."""
        return False

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        """Delete everything benchd owns in the namespace, the sentinel last (``benchd purge``).

        benchd's records are those listed under its ids or mark (any fixture,
        any version); with an earlier version's sentinel listed, also the bare
        fixture ids of ``memories``. Refused while another live instance holds
        the lease, unless ``force``.
        """
        plan = self._plan()
        if not (plan.deletes and plan.exports):
            raise OwnershipError(
                f"{plan.namespace_label} {plan.namespace!r} at {self._base}: this target "
                "cannot list and delete records, so benchd cannot purge it"
            )
        self._owned = OwnedIds.of(plan.namespace, memories)
        listed = await self._list()
        holder = self._lease_of(listed)
        me = self.lease
        mine = me is not None and holder is not None and me.may_take(holder)
        if holder is not None and holder.live() and not force and not mine:
            raise OwnershipError(
                f"{plan.namespace_label} {plan.namespace!r} at {self._base} is leased by "
                f"live {holder.describe()}; stop it first, or pass --force"
            )
        sentinels = self._sentinels(listed)
        ours = list(self._claimed(listed))
        if "legacy" in sentinels.values():
            ours += [s for s, r in listed.items() if s not in sentinels and self._legacy_for(s, r)]
        deleted = await self._delete_ids(plan, ours)
        marks = await self._delete_ids(plan, list(sentinels))
        return Purged(deleted, marks, len(listed) - len(ours) - len(sentinels))

    @property
    def leftover_records(self) -> int:
        """Records benchd wrote (or may have: a batch was sent) and has not deleted."""
        return len(self._held)

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._client.aclose()

    # -- steps of the flow -------------------------------------------------------

    async def _list(self) -> Mapping[str, R]:
        """List the namespace, and remember the listing and when it was answered."""
        listed = await self.export_namespace()
        self._fresh, self._listed_at = listed, time.monotonic()
        return listed

    async def _still_listed(self, server_id: str) -> bool:
        """Whether a delete of ``server_id`` may go now: listed in the namespace recently.

        A listing older than :data:`RELIST_AFTER_S` (deletes under a write budget
        are slow) is taken again, once for all delete workers.
        """
        if time.monotonic() - self._listed_at > RELIST_AFTER_S:
            async with self._relisting:
                if time.monotonic() - self._listed_at > RELIST_AFTER_S:
                    await self._list()
            if server_id not in self._fresh:
                return False
        self._checked[server_id] = self._listed_at
        return True

    async def _delete_ids(self, plan: SeedPlan, server_ids: Sequence[str]) -> int:
        """Delete these (already verified) server ids, ``delete_concurrency`` at a time."""
        deleted = 0

        async def one(server_id: str) -> None:
            nonlocal deleted
            if not await self._still_listed(server_id):
                return  # gone from benchd's namespace since: no longer benchd's to delete
            if await self._delete_one(server_id):
                deleted += 1
            checked = self._checked.pop(server_id, self._listed_at)
            self.delete_windows.append(time.monotonic() - checked)  # until the answer
            self._fixture_ids.pop(server_id, None)
            self._held.discard(server_id)

        await run_bounded(list(server_ids), one, limit=plan.delete_concurrency)
        return deleted

    async def _take_ownership(self, plan: SeedPlan, existing: Mapping[str, R]) -> bool:
        """Check the namespace is benchd's (or adopted) and mark it; whether it was adopted."""
        if not (plan.exports and plan.writes):
            return False  # a store benchd cannot list and write is never marked
        adopted = self._check_ownership(plan, existing)
        self._read_only = None
        me = self.lease
        holder = self._lease_of(existing)
        if me is not None and holder is not None and self._another_live(holder, me):
            if not me.read_only_beside_live:
                raise OwnershipError(
                    f"{plan.namespace_label} {plan.namespace!r} at {self._base} is leased by "
                    f"{holder.describe()}; one writer per namespace: give this probe its own "
                    "namespace, stop the other instance, or wait until its lease expires"
                )
            self._check_read_only(plan, existing, holder, me)
            self._read_only = holder.describe()
            self._held = set()  # the holder's records, not this process's
            return adopted
        keep = me is not None and self.keeps_lease
        if not keep and "current" in self._sentinels(existing).values():
            return adopted  # no lease to keep: the sentinel is enough
        self._held.add(sentinel_id(plan.namespace))
        await self._write_sentinel()  # with a lease: the heartbeat, every writing cycle
        if me is not None and keep:
            back = await self._read_lease()
            if back is not None and back.token != me.token:
                raise OwnershipError(
                    f"{plan.namespace_label} {plan.namespace!r} at {self._base}: "
                    f"{back.describe()} took the lease at the same time; backing off "
                    "(one writer per namespace)"
                )
        return adopted

    @staticmethod
    def _another_live(holder: Holder, me: LeaseHolder) -> bool:
        """A live lease this process may not take over (see ``LeaseHolder.may_take``)."""
        return not me.may_take(holder)

    def _check_read_only(
        self, plan: SeedPlan, existing: Mapping[str, R], holder: Holder, me: LeaseHolder
    ) -> None:
        """Beside a live holder, measure only its complete corpus of the same fixture."""
        claimed = set(self._claimed(existing).values())
        found = len(self._owned.fixture_ids & claimed)
        total = len(self._owned.fixture_ids)
        if holder.fixture_hash != me.fixture_hash or found < total:
            why = (
                f"it seeds another corpus (fixture hash {holder.fixture_hash[:12] or 'unknown'}, "
                f"this one {me.fixture_hash[:12]})"
                if holder.fixture_hash != me.fixture_hash
                else f"its corpus is incomplete ({found} of {total} records)"
            )
            raise OwnershipError(
                f"{plan.namespace_label} {plan.namespace!r} at {self._base} is leased by "
                f"{holder.describe()} and {why}; measuring beside it read-only needs its "
                "complete corpus of the same fixture: wait for its cycle, or use another namespace"
            )

    def _check_ownership(self, plan: SeedPlan, existing: Mapping[str, R]) -> bool:
        """False for an empty or benchd-marked namespace, True if adopted, else an error.

        A namespace holding only records under benchd's own ids is benchd's too
        (a heartbeat whose re-import failed after its delete leaves it so).
        """
        if not existing or self._sentinels(existing):
            return False
        if len(self._claimed(existing)) == len(existing):
            return False
        if plan.adopt_namespace:
            log.warning(
                "namespace adopted",
                namespace=plan.namespace,
                foreign_records=len(existing) - len(self._claimed(existing)),
                note="benchd writes beside these records and never deletes them",
            )
            return True
        raise OwnershipError(
            f"{plan.namespace_label} {plan.namespace!r} at {self._base} already holds "
            f"{len(existing)} record(s) benchd did not write (no benchd sentinel); choose an "
            "unused namespace, or set adopt_namespace = true on this probe (benchd once/run "
            "--adopt-namespace NAME) if it is yours"
        )

    async def _migrate(self, plan: SeedPlan, existing: Mapping[str, R]) -> None:
        """Delete what an earlier benchd version wrote here: bare fixture ids, old sentinel.

        Only where that version's sentinel is listed in this namespace (so the
        namespace was benchd's), and only records listed there now; the old
        sentinel goes last.
        """
        legacy = [s for s, w in self._sentinels(existing).items() if w == "legacy"]
        if not legacy or not plan.deletes:
            return
        old = [
            sid
            for sid, rec in existing.items()
            if sid not in legacy and self._legacy_for(sid, rec) is not None
        ]
        deleted = await self._delete_ids(plan, old)
        await self._delete_ids(plan, legacy)
        log.info(
            "migrated records of an earlier benchd version",
            namespace=plan.namespace,
            deleted=deleted,
            sentinel=legacy[0],
        )

    async def _delete_seeded(self, plan: SeedPlan, existing: Mapping[str, R]) -> None:
        """Delete benchd's earlier copies of the corpus so the import writes it afresh.

        From the latest listing (the lease's read-back, where one was taken since
        ``existing``): the shorter the time between listing and delete, the less
        another tenant can import under benchd's ids in between.
        """
        if plan.deletes:
            await self._delete_ids(plan, list(self._claimed(self._fresh or existing)))
        self._fixture_ids.clear()
        self._server_ids.clear()

    async def _import_all(
        self, plan: SeedPlan, memories: Sequence[Mapping[str, Any]], progress: Progress | None
    ) -> Counts:
        """Import every memory in batches, ``plan.concurrency`` at a time; summed counts."""
        records = [self._prepare(m) for m in memories]
        size = plan.batch_size
        batches = [records[i : i + size] for i in range(0, len(records), size)]
        totals = [0, 0, 0]
        done = 0

        async def one(batch: list[Any]) -> None:
            nonlocal done
            self._held.update(str(r["id"]) for r in batch if isinstance(r, Mapping) and "id" in r)
            for i, n in enumerate(await self._import_batch(batch)):
                totals[i] += n
            done += len(batch)
            if progress is not None:
                progress(done, len(records))

        await run_bounded(batches, one, limit=plan.concurrency)
        return totals[0], totals[1], totals[2]

    async def _verify(
        self, memories: Sequence[Mapping[str, Any]], progress: Progress | None = None
    ) -> tuple[int, tuple[str, ...]]:
        """Check every fixture id is listed as benchd's; learn the server id <-> fixture id maps.

        A record the listing does not show is read back by its id before it is
        called missing: a store's paging can skip records it holds. ``progress``
        hears ``(verified, records)`` after the listing and after a read-back.
        """
        listed = await self._list()
        found = self._learn(self._claimed(listed))
        missing = [str(m["id"]) for m in memories if str(m["id"]) not in found]
        if progress is not None:
            progress(len(memories) - len(missing), len(memories))
        if missing:
            wanted = [self._server_id(f) for f in missing[:READ_BACK_LIMIT]]
            extra = await self._read_back(wanted)
            if extra:
                found = self._learn(self._claimed({**listed, **extra}))
                missing = [f for f in missing if f not in found]
                if progress is not None:
                    progress(len(memories) - len(missing), len(memories))
        return len(memories) - len(missing), tuple(missing)

    def _learn(self, claimed: Mapping[str, str]) -> set[str]:
        """Keep one server id per fixture id of the corpus; the fixture ids found."""
        self._held.update(claimed)
        self._fixture_ids = {}
        self._server_ids = {}
        for sid, fid in claimed.items():
            if fid in self._owned.fixture_ids and fid not in self._server_ids:
                self._server_ids[fid] = sid
                self._fixture_ids[sid] = fid
        return set(self._server_ids)

    async def _time_to_searchable(
        self, probe: Mapping[str, Any], *, limit: int, timeout_s: float
    ) -> float | None:
        """Seconds until ``probe`` is found by its own text (bounded polling), else None."""
        query = SearchQuery(q=content_of(probe)[:200], limit=limit)
        started = time.monotonic()
        delay = 0.02
        polls = 0
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
