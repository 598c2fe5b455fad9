"""The ``mcp`` kind as a store of the seam: tool calls behind :class:`~benchd.store.protocol.Store`.

Everything benchd promises about a namespace (owned ids, a seed verified by
listing, deletes only of listed records, the sentinel, purge) comes from the
shared flow (:class:`~benchd.store.flow.NamespaceFlow`, which
:meth:`McpStore.probe_target` builds over an :class:`McpStore`); this module only maps
the seam's operations onto the tool map
(:class:`~benchd.kinds.mcp.tools.ToolStore`), verifies deletes by listing
again (an MCP delete tool's "done" is no proof; the deletes in flight go as
one set and one listing verifies them all, :mod:`.deletes`), and keeps the
lease in records named by their holder, since a listing of names cannot
carry the sentinel's metadata (:mod:`.lease`; a tool map with write, list
and delete tools holds one).

How benchd's records are kept apart (``namespace_by``): ``argument`` —
every tool takes ``{namespace}`` (``user_id``, ``namespace``, ...), so the
listing shows only benchd's namespace; ``server`` — the server holds only
benchd's records (its own memory file), so everything it lists is in
benchd's namespace. With neither, benchd writes nothing unless
``adopt_namespace`` says the operator accepts sharing the server (config
refuses it otherwise, saying why); its records are still told apart by
their owned ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from benchd.config.secrets import Secret
from benchd.errors import ConfigError, OwnershipError, TargetProtocolError
from benchd.kinds.mcp.config import NO_NAMESPACE, McpConfig
from benchd.kinds.mcp.deletes import VerifiedDeletes
from benchd.kinds.mcp.lease import is_lease_name, lease_name, parse_lease, shown
from benchd.logging import get_logger
from benchd.result import TargetInfo
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import Holder, LeaseHolder
from benchd.store.owned import owned_prefix, sentinel_id
from benchd.store.protocol import (
    Capabilities,
    Counts,
    Hits,
    Listed,
    Page,
    Recheck,
    Record,
    SeedPlan,
    StoreDefaults,
)
from benchd.store.target import ProbeTarget, SearchQuery, WriteRate

__all__ = [
    "KIND",
    "McpMapError",
    "McpStore",
]

KIND = "mcp"

MAX_LIST_PAGES = 1000
"""Listing pages read at most (a server whose pages never end is cut there)."""

log = get_logger("benchd.targets")


class McpMapError(TargetProtocolError):
    """The tool map names a tool or argument the server does not offer (``.problems``)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        more = len(self.problems) - 1
        tail = f" (and {more} more: benchd validate --check-store lists them)" if more else ""
        super().__init__(self.problems[0] + tail)


class McpStore(StoreDefaults):
    """One probe's MCP server, as the seam's store (see the module docstring)."""

    def __init__(self, config: McpConfig, secret: Secret | None) -> None:
        # the SDK is imported here, not when the registry is: config loads without it
        try:
            from benchd.kinds.mcp.connect import open_session
            from benchd.kinds.mcp.tools import ToolStore
        except ImportError as exc:
            raise ConfigError(
                f"kind = 'mcp' needs the MCP SDK ({exc.name} is missing): "
                "pip install 'benchd[mcp]'"
            ) from None

        self.config = config
        self._capabilities = self.capabilities_for(config)
        self.session = open_session(config, secret)
        self.tools = ToolStore(config, self.session)
        delete = config.tools.delete
        self.deletes = VerifiedDeletes(
            self._send_deletes,
            self._all_ids,
            self._still_listed,
            batch_size=delete.batch_size if delete is not None else 1,
        )
        self._sentinel = sentinel_id(config.namespace)
        self._owned_prefix = owned_prefix(config.namespace)
        self._token: str | None = None  # this process's lease token, once it wrote one
        self._leases: dict[str, Holder] = {}  # lease records of the latest listing, by name
        self._shown: Holder | None = None  # the lease that listing showed the flow
        self._ids: set[str] = set()  # every id of the latest listing, lease records included
        self._reading: dict[str, Holder] = {}  # lease records of the listing being read ...
        self._reading_ids: set[str] = set()  # ... and its ids

    @classmethod
    def capabilities_for(cls, settings: McpConfig) -> Capabilities:
        """What the tool map allows: listing, writing and deleting each need their tool."""
        tools = settings.tools
        lists, writes, deletes = (t is not None for t in (tools.list, tools.write, tools.delete))
        return Capabilities(
            lists=lists,
            writes=writes,
            deletes=deletes,
            # a lease record per heartbeat, named by its holder: written, listed, and the
            # holder's older ones deleted (see benchd.kinds.mcp.lease)
            lease=lists and writes and deletes,
            scores=tools.search.scores is not None,
            unranked=tools.search.returns == "set",
            # a ranking asked for k answers min(k, records) unless the map caps what it asks
            full_answers=tools.search.returns == "ranked" and tools.search.max_k is None,
            retries=settings.transport == "http",
        )

    @classmethod
    def probe_target(
        cls,
        settings: McpConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The kind's probe target: the shared namespace flow over a store of these settings."""
        return NamespaceFlow(cls(settings, secret), lease=lease, write_rate=write_rate)

    @property
    def plan(self) -> SeedPlan:
        tools, config = self.config.tools, self.config
        return SeedPlan(
            namespace=config.namespace,
            cleanup=config.cleanup,
            adopt_namespace=config.adopt_namespace,
            batch_size=tools.write.batch_size if tools.write is not None else 1,
            concurrency=tools.write.concurrency if tools.write is not None else 1,
            # the deletes offered at once: they go as one set, verified by one listing
            delete_concurrency=tools.delete.batch_size if tools.delete is not None else 1,
            verifies=config.verify,
            namespace_label="namespace",
            endpoint=config.endpoint,
            searchable_timeout_s=config.searchable_timeout_s,
        )

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    @property
    def retries(self) -> int:
        http = self.session.http
        return http.retries if http is not None else 0

    @property
    def retry_wait_s(self) -> float:
        http = self.session.http
        return http.retry_wait_s if http is not None else 0.0

    @property
    def lease_records(self) -> int:
        """The lease records the latest listing showed: each takes a search result's slot."""
        return len(self._leases)

    async def check(self) -> list[str]:
        """The tool map's mismatches with the server's ``tools/list``, one line each."""
        return await self.tools.check()

    async def info(self) -> TargetInfo:
        """Check the tool map against ``tools/list`` (a mismatch fails the cycle), read labels."""
        problems = await self.tools.check()
        for line in problems:
            log.warning("tool map mismatch", problem=line)
        if problems:
            raise McpMapError(problems)
        model, version = await self.tools.labels()
        server = self.session.server
        if not version and server is not None:
            version = f"{server.name} {server.version}".strip()
        return TargetInfo(kind=KIND, endpoint=self.config.endpoint, model=model, version=version)

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        """One page of the listing; lease records are read, not shown (the sentinel carries
        the lease shown, on the last page). ``compare`` changes nothing: no record is kept
        unchanged (none has a ``kept`` to skip)."""
        page = int(cursor or 0)
        ids, more = await self.tools.list_page(page)
        if page == 0:
            self._reading, self._reading_ids = {}, set()
        before = len(self._reading_ids)
        self._reading_ids.update(ids)
        if more and len(self._reading_ids) == before:
            raise TargetProtocolError(
                f"{self._where()}: the list tool's page {page} names nothing not listed "
                "before, yet is full: the server ignores the page's offset; check the list "
                "tool's arguments in the tool map"
            )
        records: list[Listed] = []
        for store_id in ids:
            holder = self._lease_of(store_id)
            if holder is None:
                records.append(Listed(id=store_id))
            else:
                self._reading[store_id] = holder
        if more:
            return Page(records, str(page + 1), new=True)  # lease records counted too
        self._leases, self._ids = self._reading, self._reading_ids
        self._check_unmarked(self._ids)
        lease = shown(self._leases.values(), self._token)
        self._shown = lease
        if lease is not None:  # read by the flow as the sentinel's lease
            records.append(Listed(id=self._sentinel, lease=lease))
        return Page(records, None)

    def _check_unmarked(self, ids: set[str]) -> None:
        """Refuse a shared server whose records use benchd's names before benchd marked it.

        benchd writes its sentinel before any record, and deletes it only once none
        of its records is left: names of benchd's form listed without the sentinel
        (or a lease record) were written by someone else. A server that keys on the
        name (server-memory) would skip benchd's write of that name, and the
        cleanup would delete the other's entity, identical to benchd's in every
        field. Only where the server is shared (``adopt_namespace``); a server or
        namespace of benchd's own holds only what benchd wrote.
        """
        if not self.config.adopt_namespace or self._sentinel in ids or self._reading:
            return
        taken = sorted(i for i in ids if i.startswith(self._owned_prefix))
        if taken:
            more = f" and {len(taken) - 3} more" if len(taken) > 3 else ""
            raise OwnershipError(
                f"{self._where()} lists {len(taken)} record(s) under benchd's own names "
                f"({', '.join(repr(i) for i in taken[:3])}{more}) but no benchd sentinel: "
                "someone else wrote them (benchd marks a namespace before writing to it), and "
                "benchd cannot tell them from its own, so it would skip its writes and delete "
                "them; rename them, or give benchd a server or namespace of its own "
                "(namespace_by)"
            )

    async def write(self, batch: Sequence[Record]) -> Counts:
        self._may_write()
        values = [_values(r, self.config.namespace) for r in batch]
        with anyio.CancelScope(shield=True):  # see _send_deletes
            sent = await self.tools.write(values)
        return sent, 0, 0

    async def write_sentinel(self, record: Record) -> None:
        """The sentinel, and with a lease the heartbeat: a new lease record, then the holder's
        older ones (and the lease the flow took over) deleted (see :mod:`.lease`)."""
        token = record.mark.get("token")
        if not self.capabilities.lease or token is None:
            await self.write([record])
            return
        self._token = str(token)
        if record.mark.get("released") is True:  # handed back: its records go
            await self.deletes.delete([n for n, h in self._leases.items() if h.token == token])
            return
        taken = self._shown.token if self._shown is not None else None
        stale = [n for n, h in self._leases.items() if h.token in (token, taken) or not h.live()]
        if self._sentinel not in self._ids:  # the sentinel itself is written once
            await self.write([record])
        name = lease_name(self.config.namespace, record.mark)
        memory = {**record.memory, "id": name, "key": name, "content": _lease_text(record.mark)}
        await self.write([Record(name, "", memory, record.mark)])
        if stale:
            await self.deletes.delete(stale)  # its listing reads the leases again
        else:
            await self._all_ids()
        rivals = [h for h in self._leases.values() if h.token != token and h.live()]
        if rivals:
            # Both may have written at once: each that sees the other deletes its own and
            # fails here (not at the flow's read-back, which may find neither by then).
            await self.deletes.delete([name])
            raise OwnershipError(
                f"{self._where()}: {rivals[0].describe()} took the lease at the same time; "
                "backing off (one writer per namespace)"
            )

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool:
        """Delete through the tool, verified by listing: the deletes in flight go as one set,
        and one listing after them verifies them all (a delete tool's "done" is no proof:
        server-memory says it for a name it never held). The sentinel takes the namespace's
        lease records with it."""
        del recheck  # deletes are not retried here: the listing is the proof
        self._may_write()
        ids = [store_id]
        if store_id == self._sentinel:
            ids += list(self._leases)
        await self.deletes.delete(ids)
        return True

    async def _send_deletes(self, store_ids: Sequence[str]) -> None:
        """The delete tool's call, awaited to its answer (or its timeout) even when the cycle
        is cancelled, as every write is: a call cancelled in flight is still carried out by
        the server, after the shutdown's listing (server-memory runs calls concurrently).
        Measured: a SIGTERM while a lease record's write was in flight left that record,
        live, beside a hand-back that found nothing to delete."""
        with anyio.CancelScope(shield=True):
            await self.tools.delete(store_ids)

    async def _all_ids(self) -> set[str]:
        """Every id a fresh listing shows (every page), lease records included."""
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            cursor = (await self.list_page(cursor)).next
            if cursor is None:
                return set(self._ids)
        raise TargetProtocolError(f"{self._where()}: the listing pages without end")

    def _still_listed(self, store_ids: Sequence[str]) -> str:
        tool = self.config.tools.delete
        shown = ", ".join(repr(i) for i in store_ids[:3])
        more = f" and {len(store_ids) - 3} more" if len(store_ids) > 3 else ""
        return (
            f"{self._where()}: the delete tool {tool.name if tool else ''!r} answered success "
            f"for {len(store_ids)} record(s) still listed ({shown}{more}); benchd verifies "
            "every delete by listing"
        )

    def _where(self) -> str:
        return f"namespace {self.config.namespace!r} at {self.config.endpoint}"

    def _lease_of(self, store_id: str) -> Holder | None:
        if not self._capabilities.lease:
            return None
        return parse_lease(self.config.namespace, store_id)

    async def search(self, query: SearchQuery) -> Hits:
        # query.limit already holds room for the sentinel and the lease records
        # (NamespaceFlow.asked); they are dropped, and the flow cuts to k
        ids, scores = await self.tools.search(query.q, query.limit, query.reference_date)
        ns = self.config.namespace
        if any(is_lease_name(ns, i) for i in ids):  # a lease record is never a result
            kept = [n for n, i in enumerate(ids) if not is_lease_name(ns, i)]
            ids = [ids[n] for n in kept]
            scores = [scores[n] for n in kept] if scores else scores
        return Hits(ids, scores)

    async def aclose(self) -> None:
        await self.session.aclose()

    def _may_write(self) -> None:
        config = self.config
        if config.namespace_by is None and not config.adopt_namespace:
            raise OwnershipError(NO_NAMESPACE)




def _values(record: Record, namespace: str) -> Mapping[str, Any]:
    """What a record template may name: ``{id}``, ``{content}``, ``{namespace}``, ``{memory.*}``."""
    memory = record.memory
    content = str(memory.get("content") or memory.get("text") or "")
    return {"id": record.store_id, "content": content, "namespace": namespace, "memory": memory}


def _lease_text(mark: Mapping[str, Any]) -> str:
    """A lease record's text: who writes the namespace (the name is what benchd reads)."""
    return (
        f"benchd lease: namespace {mark['namespace']} is written by benchd instance "
        f"{mark['instance']} (pid {mark['pid']}) while its heartbeat is under "
        f"{float(mark['ttl_s']):g}s old"
    )
