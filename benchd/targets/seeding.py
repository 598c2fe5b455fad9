"""The seeding flow the HTTP store adapters share; each adapter adds its store's details.

``zengram`` and ``http`` seed the same way: list the namespace, refuse one
benchd did not write (no sentinel record) unless it is adopted, mark it with
the sentinel, delete earlier copies of the corpus when ``cleanup =
"before"``, import in bounded concurrent batches with progress, verify through
the listing (mapping store-assigned ids back to fixture ids) and time how long
until the last record is found. :class:`SeededStore` runs that flow once; an
adapter supplies only the store-specific hooks: how a namespace is listed, how
a batch is written and its counts read, how one id is deleted, how the
sentinel is written and recognised, and which listed records are the corpus.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import anyio

from benchd.errors import OwnershipError
from benchd.progress import enter_phase
from benchd.result import SeedReport
from benchd.targets.base import Progress, SearchQuery
from benchd.targets.client import ClientSettings, open_clients, run_bounded

__all__ = ["Counts", "SeedPlan", "SeededStore", "content_of", "digest", "sentinel_id"]

R = TypeVar("R", bound=Mapping[str, Any])
"""One listed record, as the adapter's ``export_namespace`` keeps it."""

Counts = tuple[int, int, int]
"""A store's (imported, skipped, errors) for a batch."""

READ_BACK_LIMIT = 100
"""At most this many unlisted records are read back one by one per verify (read budget)."""


def sentinel_id(namespace: str) -> str:
    """The id of the record that marks a namespace as benchd's."""
    return f"benchd-sentinel-{namespace}"


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

    Holds the connection (``_base``, ``_client``, ``_http``) and the maps
    between fixture ids and store-assigned ids that ``search`` and
    ``cleanup`` translate through.
    """

    def __init__(self, settings: ClientSettings, auth: dict[str, str]) -> None:
        self._base, self._client, self._http = open_clients(settings, auth)
        self._server_ids: dict[str, str] = {}  # fixture id -> server id
        self._fixture_ids: dict[str, str] = {}  # server id -> fixture id

    # -- hooks: the store-specific parts -------------------------------------------

    @abstractmethod
    def _plan(self) -> SeedPlan:
        """The flow's settings, from the adapter's config."""

    @abstractmethod
    async def export_namespace(self) -> Mapping[str, R]:
        """Every record listed in the namespace, by server id."""

    @abstractmethod
    def _has_sentinel(self, existing: Mapping[str, R]) -> bool:
        """Whether the listing holds benchd's sentinel record."""

    @abstractmethod
    async def _write_sentinel(self) -> None:
        """Write the sentinel record; an error if the store rejects it."""

    def _prepare(self, memory: Mapping[str, Any]) -> Any:
        """What a batch carries for one memory (by default the memory itself)."""
        return memory

    @abstractmethod
    async def _import_batch(self, batch: Sequence[Any]) -> Counts:
        """Write one batch of prepared records; the store's counts."""

    @abstractmethod
    async def _delete_one(self, server_id: str) -> bool:
        """Delete one record; False if the store says it was already gone."""

    @abstractmethod
    def _earlier_copies(
        self, existing: Mapping[str, R], memories: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """The server ids of listed records that are earlier copies of the corpus."""

    def _unchanged(
        self, existing: Mapping[str, R], memories: Sequence[Mapping[str, Any]]
    ) -> frozenset[str]:
        """Fixture ids already stored exactly as the store would dedup them (no write needed).

        The default is none: every record is sent and the store decides.
        """
        return frozenset()

    def _server_id(self, fixture_id: str) -> str:
        """The id the store holds a fixture memory under (the fixture id unless mapped)."""
        return self._server_ids.get(fixture_id, fixture_id)

    async def _read_back(self, server_ids: Sequence[str]) -> Mapping[str, R]:
        """Read records the listing did not show, one by one; those stored, by server id.

        The default reads nothing (a store without a read-by-id route).
        """
        return {}

    @abstractmethod
    def _map_ids(
        self, existing: Mapping[str, R], memories: Sequence[Mapping[str, Any]]
    ) -> tuple[dict[str, str], list[str]]:
        """``({fixture id: server id} where they differ, missing fixture ids)``."""

    @abstractmethod
    async def _searchable_after(
        self, memories: Sequence[Mapping[str, Any]], missing: tuple[str, ...]
    ) -> float | None:
        """Time-to-searchable for this seed (see :meth:`_time_to_searchable`)."""

    @abstractmethod
    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Fixture ids in the store's rank order."""

    # -- the flow ----------------------------------------------------------------

    @property
    def retries(self) -> int:
        """Requests retried so far (429 with Retry-After, 5xx, connection errors)."""
        return self._http.retries

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace, verify it, time it to searchable."""
        plan = self._plan()
        started = time.monotonic()
        retries_before = self._http.retries
        existing: Mapping[str, R] = await self.export_namespace() if plan.exports else {}
        adopted = await self._take_ownership(plan, existing)
        if plan.cleanup == "before":
            await self._delete_seeded(existing, memories)
        counts = (0, 0, 0)
        if plan.writes:
            # What the store would skip as a duplicate is not sent at all: against a
            # per-key write budget a steady-state cycle then costs no writes.
            keep = frozenset() if plan.cleanup == "before" else self._unchanged(existing, memories)
            to_write = [m for m in memories if str(m["id"]) not in keep]
            imported, skipped, errors = await self._import_all(plan, to_write, progress)
            counts = (imported, skipped + len(keep), errors)
        verified, missing = len(memories), tuple[str, ...]()
        if plan.exports and plan.verifies:
            enter_phase(progress, "verify")
            verified, missing = await self._verify(memories)
        enter_phase(progress, "searchable")
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
        )

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete these fixture ids (mapped to server ids); only ids benchd seeded."""
        plan = self._plan()
        if not plan.deletes:
            return 0
        targets = [self._server_ids.get(i, i) for i in ids]
        deleted = 0

        async def one(server_id: str) -> None:
            nonlocal deleted
            if await self._delete_one(server_id):
                deleted += 1

        await run_bounded(targets, one, limit=plan.delete_concurrency)
        return deleted

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._client.aclose()

    # -- steps of the flow -------------------------------------------------------

    async def _take_ownership(self, plan: SeedPlan, existing: Mapping[str, R]) -> bool:
        """Check the namespace is benchd's (or adopted) and mark it; whether it was adopted."""
        if not (plan.exports and plan.writes):
            return False  # a store benchd cannot list and write is never marked
        adopted = self._check_ownership(plan, existing)
        if not self._has_sentinel(existing):
            await self._write_sentinel()
        return adopted

    def _check_ownership(self, plan: SeedPlan, existing: Mapping[str, R]) -> bool:
        """False for an empty or benchd-marked namespace, True if adopted, else an error."""
        if not existing or self._has_sentinel(existing):
            return False
        if plan.adopt_namespace:
            return True
        raise OwnershipError(
            f"{plan.namespace_label} {plan.namespace!r} at {self._base} already holds "
            f"{len(existing)} record(s) benchd did not write (no benchd sentinel); choose an "
            "unused namespace, or set adopt_namespace = true (benchd once/run "
            "--adopt-namespace) if it is yours"
        )

    async def _delete_seeded(
        self, existing: Mapping[str, R], memories: Sequence[Mapping[str, Any]]
    ) -> None:
        """Delete earlier copies of the corpus so the import writes it afresh."""
        ours = self._earlier_copies(existing, memories)
        self._server_ids.clear()
        self._fixture_ids.clear()
        await self.cleanup(ours)

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
            for i, n in enumerate(await self._import_batch(batch)):
                totals[i] += n
            done += len(batch)
            if progress is not None:
                progress(done, len(records))

        await run_bounded(batches, one, limit=plan.concurrency)
        return totals[0], totals[1], totals[2]

    async def _verify(self, memories: Sequence[Mapping[str, Any]]) -> tuple[int, tuple[str, ...]]:
        """Check every fixture id is listed; learn the fixture id ↔ server id maps.

        A record the listing does not show is read back by id before it is
        called missing: a store's paging can skip records it holds.
        """
        listed = await self.export_namespace()
        mapping, missing = self._map_ids(listed, memories)
        if missing:
            unlisted = [self._server_id(fid) for fid in missing[:READ_BACK_LIMIT]]
            found = await self._read_back(unlisted)
            if found:
                mapping, missing = self._map_ids({**listed, **found}, memories)
        self._server_ids = mapping
        self._fixture_ids = {sid: fid for fid, sid in mapping.items()}
        return len(memories) - len(missing), tuple(missing)

    async def _time_to_searchable(
        self, probe: Mapping[str, Any], *, limit: int, timeout_s: float
    ) -> float | None:
        """Seconds until ``probe`` is found by its own text (bounded polling), else None."""
        query = SearchQuery(q=content_of(probe)[:200], limit=limit)
        started = time.monotonic()
        delay = 0.02
        with anyio.move_on_after(timeout_s):
            while True:
                if str(probe["id"]) in await self.search(query):
                    return time.monotonic() - started
                await anyio.sleep(delay)  # polling an external system, not synchronising
                delay = min(delay * 2, 0.5)
        return None
