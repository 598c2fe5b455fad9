"""Deleting benchd's records from its namespace, and only those (DESIGN §2a, §2b).

:class:`Deleter` is held by :class:`~benchd.store.flow.NamespaceFlow`: the
cleanups (after each cycle, on shutdown, ``purge``) and the deletes the
seed and the ownership steps send. No delete is sent for an id that was not
listed in benchd's own namespace by this process, in the listing taken just
before the delete (relisted when older than :data:`RELIST_AFTER_S`); the
deletes keep within the probe's write share (:class:`Spacing`), one writer
per namespace (the lease). A store's count is no proof: counts are clamped
to what was sent, ``purge`` counts what a listing after its deletes no
longer shows, and a cleanup whose counts disagree lists to confirm.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from benchd.errors import OwnershipError
from benchd.fixtures.stream import memory_ids
from benchd.store.concurrency import chunks, run_bounded
from benchd.store.listing import Listing
from benchd.store.namespace import READ_BACK_LIMIT, Namespace
from benchd.store.ownership import Ownership
from benchd.store.pacing import Spacing
from benchd.store.protocol import Purged
from benchd.store.target import WriteRate

__all__ = ["DELETE_WINDOWS_KEPT", "RELIST_AFTER_S", "Deleter"]

RELIST_AFTER_S = 15.0
"""A delete goes out at most this long after the listing that showed the record in benchd's
namespace; past it, the namespace is listed again first and a record no longer listed there
is left alone. A store's delete may carry no namespace: a record another tenant imported
under benchd's id since the listing would be deleted (docs/failure-modes.md)."""

DELETE_WINDOWS_KEPT = 10_000  # the latest listing-to-delete windows kept for the p99


class Deleter:
    """The deletes of one flow's namespace.

    ``write_rate`` is the share of the write budget its deletes keep within
    (None: not spaced), read as each set of deletes begins.
    """

    def __init__(
        self, namespace: Namespace, ownership: Ownership, write_rate: WriteRate | None
    ) -> None:
        self.store = namespace.store
        self.write_rate = write_rate  # what each cleanup's deletes keep within (Spacing)
        self._ns = namespace
        self._ownership = ownership  # the lease each delete checks, and read-only measuring
        self._relisting = anyio.Lock()
        self._checked: dict[str, float] = {}  # server id -> the listing its delete relies on
        # Seconds from the listing that showed each deleted record to the delete's answer.
        self.delete_windows: deque[float] = deque(maxlen=DELETE_WINDOWS_KEPT)

    def may_delete(self) -> bool:
        """Whether this process deletes: the store lists and deletes, and it writes."""
        caps = self.store.capabilities
        return caps.deletes and caps.lists and self._ownership.read_only is None

    async def delete_seeded(self, existing: Listing) -> None:
        """Delete benchd's earlier copies of the corpus so the write makes it afresh."""
        if self.store.capabilities.deletes:
            # From the latest listing (where one was taken since ``existing``; a delete
            # relists first when it is older than RELIST_AFTER_S): the shorter the time
            # between listing and delete, the less another tenant can import under
            # benchd's ids in between.
            await self.delete(list((self._ns.fresh or existing).claimed))
        self._ns.forget_maps()

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete benchd's records for these fixture ids, as listed in its namespace now.

        The namespace is listed first: only a record that listing shows and
        that benchd wrote is deleted, whatever ``ids`` holds.
        """
        if not self.may_delete():
            return 0
        wanted = set(ids)
        seen = self._ns.held  # benchd's server ids listed (or written) before this listing
        listed = await self._ns.list_namespace()
        self._ns.held = listed.held
        targets = [s for s, f in listed.claimed.items() if f in wanted]
        unlisted = [
            self._ns.owned.store_id(f)
            for f in wanted
            if f in self._ns.owned.fixture_ids
            and not listed.fixture_listed(f)
            and self._ns.owned.store_id(f) in seen
        ]
        if unlisted:  # seen before but skipped by the listing's paging: read back, then delete
            extra = await self._ns.read_back(unlisted[:READ_BACK_LIMIT])
            more = Listing(extra, self._ns.owned).claimed
            targets += [s for s, f in more.items() if f in wanted and s not in listed.claimed]
        sent: list[str] = []
        return await self._confirmed(sent, await self.delete(targets, sent))

    async def release(self) -> int:
        """Delete the sentinel once the namespace holds no other record benchd wrote.

        Run after a complete ``cleanup = "after"`` on shutdown, so a stopped
        probe leaves nothing behind; returns how many sentinel records went.
        """
        if not self.may_delete():
            return 0
        listed = await self._ns.list_namespace()
        self._ns.held = listed.held
        if listed.claimed:
            return 0
        return await self.delete(list(listed.sentinels))

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
                f"{self._ns.where()}: this target cannot list and delete records, "
                "so benchd cannot purge it"
            )
        self._ns.own(memory_ids(memories))
        listed = await self._ns.list_namespace()
        holder = listed.lease
        me = self._ownership.lease
        mine = me is not None and holder is not None and me.may_take(holder)
        if holder is not None and holder.live() and not force and not mine:
            raise OwnershipError(
                f"{self._ns.where()} is leased by live {holder.describe()}; stop it first, "
                "or pass --force"
            )
        ours = list(listed.claimed)
        if "legacy" in listed.sentinels.values():
            ours += listed.legacy()
        sent: list[str] = []
        await self.delete(ours, sent)
        marks = list(listed.sentinels)
        await self.delete(marks, sent)
        # What went is what a listing no longer shows: a store's counts are no proof.
        after = await self._ns.list_namespace()
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
        listed = await self._ns.list_namespace()
        self._ns.held = listed.held
        return sum(1 for s in server_ids if s not in listed.records)

    async def _still_listed(self, server_id: str) -> bool:
        """Whether a delete of ``server_id`` may go now: listed in the namespace recently.

        A listing older than :data:`RELIST_AFTER_S` (deletes under a write budget
        are slow) is taken again, once for all delete workers.
        """
        if time.monotonic() - self._ns.listed_at > RELIST_AFTER_S:
            async with self._relisting:
                if time.monotonic() - self._ns.listed_at > RELIST_AFTER_S:
                    await self._ns.list_namespace()
            if self._ns.fresh is None or server_id not in self._ns.fresh.records:
                return False
        self._checked[server_id] = self._ns.listed_at
        return True

    async def delete(self, server_ids: Sequence[str], sent: list[str] | None = None) -> int:
        """Delete these (already verified) server ids, ``delete_concurrency`` at a time, the
        requests kept within the write share (:class:`Spacing`); the ids a delete was sent
        for are added to ``sent``."""
        spacing = Spacing.for_budget(None if self.write_rate is None else self.write_rate())
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
            self._ns.changes += 1
            sent.append(server_id)
            recheck = functools.partial(self._still_listed, server_id)
            if await self.store.delete(server_id, recheck):
                deleted += 1
            checked = self._checked.pop(server_id, self._ns.listed_at)
            self.delete_windows.append(time.monotonic() - checked)  # until the answer
            self._ns.forget(server_id)

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
            self._ns.changes += 1
            sent.extend(ids)
            deleted += min(max(0, await self.store.delete_many(ids)), len(ids))  # a count is
            # the store's word: never more than was sent, never negative
            answered = time.monotonic()
            for server_id in ids:
                checked = self._checked.pop(server_id, self._ns.listed_at)
                self.delete_windows.append(answered - checked)
                self._ns.forget(server_id)

        await run_bounded(chunks(server_ids, size), one, limit=self.store.plan.delete_concurrency)
        return deleted

