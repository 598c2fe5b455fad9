"""The ``http`` kind's lease: a record named by its holder, through the seed, export and
delete templates.

An export template reads ids (and a digest of the text), not a record's
metadata, so the lease cannot ride in the sentinel's metadata. As on the
``mcp`` kind (:mod:`benchd.kinds.mcp.lease`, whose names it writes), it
lives in the id of a record of its own, written through the seed template
and listed by the export::

    benchd-lease:<namespace>:<instance>:<role>:<pid>:<heartbeat ms>:<ttl s>:<fixture>:<token>

A heartbeat writes a new lease record, lists the namespace, and deletes the
holder's older records (and those seen expired); a writer that then finds
another holder's live record beside its own deletes its own and backs off.
Handing the lease back deletes the holder's records. The templates can
keep a lease where they export, seed and delete, and the store keeps the
ids benchd writes (:func:`keeps_lease`); elsewhere ``validate`` says the
probe has no lease.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from benchd.errors import OwnershipError
from benchd.kinds.mcp.lease import is_lease_name, lease_name, parse_lease, shown
from benchd.store.lease import Holder
from benchd.store.owned import sentinel_id
from benchd.store.protocol import Listed, Record

__all__ = ["LeaseRecords", "is_lease_name", "lease_text"]


def lease_text(mark: Mapping[str, Any]) -> str:
    """A lease record's text: who writes the namespace (the id is what benchd reads), new
    with every heartbeat (a store that skips a text it holds must not skip the next one)."""
    return (
        f"benchd lease: namespace {mark['namespace']} is written by benchd instance "
        f"{mark['instance']} while it heartbeats (lease {float(mark['ttl_s']):g}s; "
        f"holder {mark['token']}, heartbeat {float(mark['heartbeat']):.3f})"
    )


Write = Callable[[Record], Awaitable[None]]
Delete = Callable[[Sequence[str]], Awaitable[None]]
ListAll = Callable[[], Awaitable[object]]


class LeaseRecords:
    """The lease records of one namespace as the latest listing showed them."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.sentinel = sentinel_id(namespace)
        self.token: str | None = None  # this process's, once it wrote one
        self.leases: dict[str, Holder] = {}  # store id -> lease, of the latest listing
        self.shown: Holder | None = None  # the lease that listing showed the flow
        self.sentinel_listed = False  # the latest listing held the sentinel record
        self.fresh = False  # the latest listing came after this process's heartbeat
        self._reading: dict[str, Holder] = {}
        self._sentinel_reading = False

    def page(self, records: Sequence[Listed], *, first: bool, last: bool) -> list[Listed]:
        """One listing page without its lease records; the last one ends with the sentinel
        carrying the lease shown (read by the flow as the sentinel's lease)."""
        if first:
            self._reading, self._sentinel_reading = {}, False
        out: list[Listed] = []
        for record in records:
            name = record.written_as or record.id
            holder = parse_lease(self.namespace, name)
            if holder is None:
                out.append(record)
                self._sentinel_reading |= name == self.sentinel
            else:
                self._reading[record.id] = holder
        if last:
            self.leases, self.sentinel_listed = self._reading, self._sentinel_reading
            self.shown = shown(self.leases.values(), self.token)
            if self.shown is not None:
                out.append(Listed(id=self.sentinel, lease=self.shown))
        return out

    async def heartbeat(
        self, record: Record, write: Write, delete: Delete, list_all: ListAll, where: str
    ) -> None:
        """Write this holder's lease (the sentinel too where it is not listed), list, delete
        the holder's older records and those seen expired; back off beside a rival."""
        token = str(record.mark["token"])
        self.token = token
        if record.mark.get("released") is True:  # handed back: its records go
            await delete([sid for sid, h in self.leases.items() if h.token == token])
            return
        taken = self.shown.token if self.shown is not None else None
        stale = [s for s, h in self.leases.items() if h.token in (token, taken) or not h.live()]
        if not self.sentinel_listed:
            await write(record)
        name = lease_name(self.namespace, record.mark)
        memory = {**record.memory, "id": name, "key": name, "content": lease_text(record.mark)}
        await write(Record(name, "", memory, record.mark))
        if stale:
            await delete(stale)
        await list_all()
        self.fresh = True
        rivals = [h for h in self.leases.values() if h.token != token and h.live()]
        if rivals:
            await delete([s for s, h in self.leases.items() if h.token == token])
            raise OwnershipError(
                f"{where}: {rivals[0].describe()} took the lease at the same time; "
                "backing off (one writer per namespace)"
            )

    def read_back(self) -> list[Listed] | None:
        """The sentinel as the heartbeat's own listing showed it (once); None: list again."""
        if not self.fresh:
            return None
        self.fresh = False
        return [Listed(id=self.sentinel, lease=self.shown)]
