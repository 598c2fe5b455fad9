"""The flow's ownership steps: the sentinel, the lease, adoption, migration (DESIGN §2a).

:class:`Ownership` is held by :class:`~benchd.store.flow.NamespaceFlow`: a
namespace is written only when it is empty, marked by benchd's sentinel,
or adopted; with a lease, only by the one process that holds it (``once``
measures read-only beside a live daemon); an earlier version's records are
migrated only where that version's sentinel proves the namespace was
benchd's. What it needs of the flow (the corpus's ids, a listing, a delete,
the ids benchd holds) it asks through :class:`OwnershipHost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from benchd.errors import OwnershipError
from benchd.logging import get_logger
from benchd.store.concurrency import run_bounded
from benchd.store.lease import Holder, LeaseHolder
from benchd.store.listing import Listing
from benchd.store.owned import OWNER_KEY, OwnedIds, sentinel_id, sentinel_text
from benchd.store.protocol import Record, Store

__all__ = ["UNLEASED", "Ownership", "OwnershipHost"]

UNLEASED = (
    "benchd instance unknown (this store keeps no lease beside benchd's sentinel: "
    "see benchd validate)"
)
"""Who a one-shot command beside benchd's sentinel on a store without a lease measures beside."""

log = get_logger("benchd.targets")

HOLDERS_BATCH = 500
"""Ids read in one :meth:`~benchd.store.protocol.Store.holders` call before a write."""


class OwnershipHost(Protocol):
    """What the ownership steps need of the flow that holds them."""

    @property
    def owned(self) -> OwnedIds:
        """The corpus's ids in the namespace, as the flow now holds them."""
        ...

    def where(self) -> str:
        """The namespace as errors name it."""
        ...

    async def list_namespace(self) -> Listing:
        """The whole namespace, listed now (the flow's latest listing)."""
        ...

    async def delete(self, server_ids: Sequence[str]) -> int:
        """Delete these listed server ids as the flow deletes; how many went."""
        ...

    def hold(self, store_id: str) -> None:
        """Count ``store_id`` among the records this process holds (written, or may be)."""
        ...

    def hold_nothing(self) -> None:
        """This process holds nothing in the namespace (it measures beside another's)."""
        ...


class Ownership:
    """The ownership steps of one flow, and what they found: whether this process
    measures read-only beside another holder (``read_only``: who), and whether it wrote
    its lease (``leased``: handed back on shutdown)."""

    def __init__(self, store: Store, host: OwnershipHost, lease: LeaseHolder | None) -> None:
        self.store = store
        self.lease = lease
        self._host = host
        self.read_only: str | None = None  # the live holder beside which this seed measures
        self.leased = False  # this process wrote its lease (handed back on shutdown)

    def _where(self) -> str:
        return self._host.where()

    def sentinel_record(self, *, released: bool = False) -> Record:
        """The sentinel, with this process's lease (or its release) where the store keeps one."""
        ns = self._host.owned.namespace
        lease = self.lease if self.store.capabilities.lease else None
        mark = (
            lease.mark(ns, released=released)
            if lease is not None
            else {"namespace": ns, "sentinel": "true"}
        )
        words = (
            ""
            if lease is None  # fixed for the process: the sentinel's embedding never changes
            else f" Leased by benchd instance {lease.instance}, pid {lease.pid}, {lease.token}."
        )
        memory = {
            "id": sentinel_id(ns),
            "type": "fact",
            "key": sentinel_id(ns),  # a fact's key is global: one per namespace
            "importance": "low",
            "content": sentinel_text(ns) + words,
            "metadata": {OWNER_KEY: mark},
        }
        return Record(sentinel_id(ns), "", memory, mark)

    async def take(self, existing: Listing) -> bool:
        """Check the namespace is benchd's (or adopted) and mark it; whether it was adopted."""
        caps = self.store.capabilities
        if not (caps.lists and caps.writes):
            return False  # a store benchd cannot list and write is never marked
        adopted = self._check_ownership(existing)
        self.read_only = None
        me = self.lease
        holder = existing.lease
        if me is not None and holder is not None and not me.may_take(holder):
            if not me.read_only_beside_live:
                raise OwnershipError(
                    f"{self._where()} is leased by {holder.describe()}; one writer per "
                    "namespace: give this probe its own namespace, stop the other instance, "
                    "or wait until its lease expires"
                )
            self._check_read_only(existing, holder, me)
            self.read_only = holder.describe()
            self._host.hold_nothing()  # the holder's records, not this process's
            return adopted
        keep = me is not None and caps.lease
        if not keep and existing.has_current_sentinel():
            if me is not None and me.read_only_beside_live:
                self._beside_unleased(existing)
            return adopted  # no lease to keep: the sentinel is enough
        self._host.hold(sentinel_id(self._host.owned.namespace))
        # set before the write: a SIGTERM inside it may leave the lease written (release_lease
        # hands back only a lease listed with this process's token)
        self.leased = keep
        sent = me.beat() if me is not None else 0.0  # before it is sent: no reader saw it sooner
        await self.store.write_sentinel(self.sentinel_record())  # with a lease: the heartbeat
        if me is not None and keep:
            back = await self.read_lease()
            if back is not None and back.token != me.token:
                raise OwnershipError(
                    f"{self._where()}: {back.describe()} took the lease at the same time; "
                    "backing off (one writer per namespace)"
                )
            me.renewed(sent)
        return adopted

    def check_lease_held(self) -> None:
        """Before a write or delete: refuse once this process's last heartbeat is older than
        its lease less the margin (a stalled holder whose lease others may have seen expire)."""
        me = self.lease
        if me is not None and self.leased and me.expiring():
            raise OwnershipError(
                f"{self._where()}: this process's last heartbeat is older than its lease "
                f"({me.ttl_s:g} s) less a margin; it writes nothing more until its next "
                "cycle heartbeats again (one writer per namespace)"
            )

    async def read_lease(self) -> Holder | None:
        """The lease as the store holds it now (read back after writing it, and before it is
        handed back): the sentinel read on its own where the store can
        (:meth:`~benchd.store.protocol.Store.read_sentinel`), else the namespace's listing,
        which at 10^5 records is 200 requests for one record."""
        owned = self._host.owned
        found = await self.store.read_sentinel(sentinel_id(owned.namespace))
        if found is None:
            return (await self._host.list_namespace()).lease
        return Listing({r.id: r for r in found}, owned).lease

    async def release_lease(self) -> bool:
        """Hand the lease back on shutdown (SIGTERM): the sentinel stays, its lease expired.

        Only a lease this process holds now (listed with its own token) is
        released, so another instance can take the namespace over at once
        instead of waiting out ``ttl_s``. Whether a lease was released.
        """
        me = self.lease
        if me is None or self.read_only is not None or not self.leased:
            return False
        holder = await self.read_lease()
        if holder is None or holder.token != me.token:
            return False
        await self.store.write_sentinel(self.sentinel_record(released=True))
        self.leased = False
        return True

    def _beside_unleased(self, existing: Listing) -> None:
        """``once`` or ``baseline`` on a store that keeps no lease, beside benchd's sentinel:
        a daemon may be writing the namespace and nothing says so, so measure its complete
        corpus read-only, or refuse (``--force`` writes)."""
        owned = self._host.owned
        found = sum(1 for f in owned.fixture_ids if existing.fixture_listed(f))
        total = len(owned.fixture_ids)
        if found < total:
            raise OwnershipError(
                f"{self._where()} holds benchd's sentinel and this store keeps no lease, so "
                f"another benchd may be writing it; its corpus is incomplete ({found} of "
                f"{total} records), so it cannot be measured read-only: pass --force if no "
                "daemon writes it, or use another namespace"
            )
        self.read_only = UNLEASED
        self._host.hold_nothing()

    def _check_read_only(self, existing: Listing, holder: Holder, me: LeaseHolder) -> None:
        """Beside a live holder, measure only its complete corpus of the same fixture."""
        owned = self._host.owned
        found = sum(1 for f in owned.fixture_ids if existing.fixture_listed(f))
        total = len(owned.fixture_ids)
        same = holder.same_fixture(me.fixture_hash)
        if not same or found < total:
            why = (
                f"it seeds another corpus (fixture hash {holder.fixture_hash[:12] or 'unknown'}, "
                f"this one {me.fixture_hash[:12]})"
                if not same
                else f"its corpus is incomplete ({found} of {total} records)"
            )
            raise OwnershipError(
                f"{self._where()} is leased by {holder.describe()} and {why}; measuring beside "
                "it read-only needs its complete corpus of the same fixture: wait for its "
                "cycle, or use another namespace"
            )

    def _check_ownership(self, existing: Listing) -> bool:
        """False for an empty or benchd-marked namespace, True if adopted, else an error.

        A namespace holding only records under benchd's own ids is benchd's too
        (a heartbeat whose re-import failed after its delete leaves it so).
        """
        if not len(existing) or existing.sentinels or not existing.foreign:
            return False
        plan = self.store.plan
        if plan.adopt_namespace:
            log.warning(
                "namespace adopted",
                namespace=plan.namespace,
                foreign_records=existing.foreign,
                note="benchd writes beside these records and never deletes them",
            )
            return True
        raise OwnershipError(
            f"{self._where()} already holds {len(existing)} record(s) benchd did not write "
            "(no benchd sentinel); choose an unused namespace, or set adopt_namespace = true "
            "on this probe (benchd once/run --adopt-namespace NAME) if it is yours"
        )

    async def migrate(self, existing: Listing) -> None:
        """Delete what an earlier benchd version wrote here: bare fixture ids, old sentinel.

        Only where that version's sentinel is listed in this namespace (so the
        namespace was benchd's), and only records listed there now; the old
        sentinel goes last.
        """
        legacy = [s for s, w in existing.sentinels.items() if w == "legacy"]
        if not legacy or not self.store.capabilities.deletes:
            return
        deleted = await self._host.delete(existing.legacy())
        await self._host.delete(legacy)
        log.info(
            "migrated records of an earlier benchd version",
            namespace=self._host.owned.namespace,
            deleted=deleted,
            sentinel=legacy[0],
        )

    async def check_holders(self, existing: Listing) -> None:
        """Refuse to write over a record someone else holds under one of benchd's ids.

        The ids this seed may write that ``existing`` does not list as benchd's
        (the corpus's, the sentinel) are read without the namespace filter
        (:meth:`~benchd.store.protocol.Store.holders`), before anything is
        written: a store that replaces on an existing id would otherwise take
        another tenant's record into benchd's namespace, and a cleanup would
        delete it. A steady cycle lists every id and reads nothing. On a store
        without compare-and-swap a write landing between this read and benchd's
        write is not seen (docs/ownership.md).
        """
        caps = self.store.capabilities
        if not (caps.holders and caps.owned_ids):
            return
        owned = self._host.owned
        ids = [owned.store_id(f) for f in owned.fixture_ids if not existing.claims(f)]
        sentinel = sentinel_id(owned.namespace)
        if sentinel not in existing.records:
            ids.append(sentinel)
        foreign: list[str] = []

        async def one(chunk: Sequence[str]) -> None:
            found = await self.store.holders(chunk)
            wanted = set(chunk)
            foreign.extend(i for i, mine in (found or {}).items() if not mine and i in wanted)

        chunks = [ids[n : n + HOLDERS_BATCH] for n in range(0, len(ids), HOLDERS_BATCH)]
        await run_bounded(chunks, one, limit=self.store.plan.concurrency)
        if foreign:
            foreign.sort()
            raise OwnershipError(
                f"{self._where()}: {len(foreign)} record(s) under ids benchd writes are held "
                f"outside its namespace by someone else (e.g. {foreign[0]!r}); benchd never "
                "writes over another tenant's record, and wrote nothing: remove or rename "
                "them, or choose another namespace"
            )
