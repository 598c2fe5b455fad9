"""The store seam: what a store kind implements, and what it declares it can do.

benchd's promises about a namespace (DESIGN §2a) — ids derived from the
namespace, a seed verified by reading it back, deletes only of records a
listing shows as benchd's, a sentinel that marks the namespace, a lease for
one writer per namespace, adoption, migration, cleanup, ``purge``,
leftovers — are written once, in :mod:`benchd.store.flow`, over the small
protocol below. A store kind (``zengram``, ``http``, ``python``; ``pgvector``,
``chroma``, ``milvus``, ``mcp``, ...) is one module that implements
:class:`Store` plus one registry entry in :mod:`benchd.kinds`. The store
knows its transport (HTTP, a client library, a subprocess); the flow knows
none.

What a kind implements (:class:`Store`)
---------------------------------------
``plan``
    The flow's settings from the kind's config (:class:`SeedPlan`): the
    namespace, the cleanup mode, batch sizes, concurrency.
``capabilities``
    What the store can do (:class:`Capabilities`). The flow skips what a
    store cannot do, and benchd says which guarantee the probe lacks
    (:meth:`Capabilities.lacks`) in ``validate``, ``/api/status`` and the docs.
``list_page(cursor, *, compare=True)``
    One page of the records in benchd's namespace, each as a :class:`Listed`:
    the store's id, the id benchd wrote it under where the store keeps one
    beside its own (a column, a metadata mark), a digest of its text, the
    lease where the record is benchd's sentinel, and, where ``compare`` is
    True, a fingerprint of what ``unchanged`` compares (``Listed.kept``). The
    flow passes ``compare=False`` where nothing will compare the listing (the
    read-back that verifies a write): the kind leaves ``kept`` None then and
    skips reducing each record to it. A listing of 10^5 records is held whole, so a
    Listed is small and fixed: reduce each record as its page arrives and
    keep nothing of the page. ``cursor`` is None for
    the first page and the page's ``next`` after; ``next = None`` ends the
    listing. The flow bounds the listing (records, pages without anything
    new), so a store need not.
``write(batch)``
    Write a batch of :class:`Record` (each carries the id benchd writes,
    the fixture memory and benchd's mark); return the store's counts
    ``(written, skipped, errors)``. An upsert by id is fine: benchd's ids
    are its own.
``write_sentinel(record)``
    Write the sentinel (the record marking the namespace as benchd's; its
    ``mark`` carries the lease where the store keeps one); an error if the
    store refuses it.
``delete(store_id, recheck)``
    Delete one record; False if the store says it was already gone. Only
    ever called for an id a listing taken just before showed as benchd's;
    a store that waits before retrying a delete (a 429's ``Retry-After``)
    awaits ``recheck()`` first and does not send it again if that is False
    (the record left benchd's namespace meanwhile).
``search(query)``
    The store's ids in rank order (or as a set, see
    :attr:`Capabilities.unranked`) with the store's scores where it gives
    them, as :class:`Hits`, asked for ``query.limit`` results as given: the
    flow has raised it by the records benchd keeps beside its corpus (the
    sentinel, lease records), maps the ids to fixture ids, drops those
    records and cuts to the k it was asked.
``info()``, ``aclose()``
    Describe the store (cheap, no side effects); release connections.

Optional parts, with defaults in :class:`StoreDefaults` (inherit it):
``retries`` and ``retry_wait_s`` (requests the store's client retried, and
the seconds it waited before them), ``read_back(ids)`` (records a listing
may have skipped, read by id), ``delete_many(ids)`` (declared by
:attr:`Capabilities.bulk_deletes`: delete a set of records in one call, each
only while it is in benchd's namespace — the store's delete filters on the
namespace — and answer how many went),
``holders(ids)`` (declared by :attr:`Capabilities.holders`: which of these
ids the store holds in *any* namespace, each True where the record is
benchd's in its namespace and False where it is someone else's; ids it does
not hold are left out — read without the namespace filter, so that the flow
refuses to write over another tenant's record; None where it cannot),
``lease_records`` (records the store keeps for the lease beside the
sentinel, as its latest listing showed them: each takes a result slot;
0 where the lease rides on the sentinel), ``read_sentinel(store_id)`` (the
sentinel, read without listing the whole namespace: the lease is read back
after every heartbeat and before it is handed back; None where the store
cannot, and the flow lists the namespace),
``unchanged(listed, record)`` (the store would skip this write as a
duplicate: not sent, costs no write budget), ``kept_as_written(rows)``
(what a listing would keep, ``Listed.kept``, of each of these corpus
records stored as benchd writes it: a listed copy keeping the same bytes is
unchanged without a ``Record`` or ``Listed`` made for it; None where the
kind has no such shortcut and ``unchanged`` decides each), ``seeded(corpus)`` (told the
corpus before the first search, :class:`SeededCorpus`: its size and latest
date known without reading it, each record with its latest listing's
:class:`Listed` where it was listed, e.g. to anchor date words) and
``load_sender(...)`` (the store's own sender for the load pass, declared by
:attr:`Capabilities.load_sender`).

A kind's handles on its store (pooled connections, a collection's id, its
loaded state) do not outlive the store's restart: the kind forgets them where
it translates a connect or not-found error and runs that call once more
(:mod:`benchd.store.handles`); the flow never sees a stale one.

A store without a listing (:attr:`Capabilities.lists` false) cannot have
its seed verified nor its namespace's ownership checked; without delete, no
cleanup and no ``purge``; without a lease, two writers on one namespace are
not detected. benchd runs such a probe and reports what it lacks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from benchd.result import TargetInfo
from benchd.store.capabilities import Capabilities, Purged
from benchd.store.lease import Holder
from benchd.store.target import SearchQuery

if TYPE_CHECKING:
    from benchd.store.target import Fire

__all__ = [
    "Capabilities",
    "CorpusRow",
    "Counts",
    "Hits",
    "Listed",
    "LoadFinish",
    "Page",
    "Purged",
    "Recheck",
    "Record",
    "SeedPlan",
    "SeededCorpus",
    "Store",
    "StoreDefaults",
]

Counts = tuple[int, int, int]
"""A store's (written, skipped, errors) for a batch."""

CorpusRow = tuple[str, str, Mapping[str, Any]]
"""A corpus record as a row: benchd's id for it, the fixture id, the fixture memory (the
:class:`Record` it stands for carries benchd's mark made of the namespace and fixture id)."""


@dataclass(frozen=True, slots=True)
class SeedPlan:
    """The flow's settings, read from a kind's config."""

    namespace: str
    cleanup: Literal["before", "after", "never"]
    adopt_namespace: bool
    batch_size: int  # records per write
    concurrency: int  # writes in flight
    delete_concurrency: int  # deletes in flight
    verifies: bool = True  # verify the seed through the listing
    namespace_label: str = "namespace"  # how errors name the namespace
    endpoint: str = ""  # where the store is, for errors ("at http://...")
    searchable_timeout_s: float = 0.0  # poll until the last record is found; 0: do not
    searchable_limit: int = 100  # how many results a searchability poll asks for


@dataclass(frozen=True, slots=True)
class Record:
    """One record the flow writes: benchd's id, the fixture memory, benchd's mark."""

    store_id: str  # benchd's own id (see benchd.store.owned), or the sentinel's
    fixture_id: str  # "" for the sentinel
    memory: Mapping[str, Any]  # the fixture memory (the sentinel's text for the sentinel)
    mark: Mapping[str, Any]  # benchd's owner mark (namespace, fixture id; the lease)
    # As the latest listing shows it, where one does: given to ``seeded`` (None elsewhere)
    listed: Listed | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    """One record as a listing shows it."""

    id: str  # the store's id
    written_as: str | None = None  # the id benchd wrote it under, where kept beside the store's
    # sha256 of its text, where the store assigns its own ids: how benchd's sentinel is
    # recognised then (None where the store keeps benchd's ids)
    digest: str | None = None
    lease: Holder | None = None  # the lease, on benchd's sentinel where the store keeps one
    # What the kind's ``unchanged`` compares, reduced as the page arrives
    # (:func:`benchd.store.listing.fingerprint`): a listing keeps a few small fields per
    # record, never its text or metadata. None: not comparable (the record is rewritten),
    # or not asked for (a listing paged with ``compare=False``).
    kept: bytes | None = None
    # When the store says the record was created (epoch seconds), where the kind needs it:
    # zengram sends the corpus's latest as date words' reference (the corpus's "now").
    created_s: float | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing; ``next`` is the cursor of the next page, None after the last."""

    records: Sequence[Listed]
    next: str | None = None
    # Whether the page brought a record not listed before, where the store judged it itself
    # (it reads records it does not show: inactive ones, lease records); None: the flow
    # judges by ``records``, and a page with a ``next`` that brings nothing new ends the
    # listing as a ``decode`` error.
    new: bool | None = None


@dataclass(frozen=True, slots=True)
class Hits:
    """A search's store ids, best first, with the store's score of each where it gave one."""

    ids: Sequence[str]
    scores: Sequence[float | None] = ()


Recheck = Callable[[], Awaitable[bool]]
"""Whether a record is still listed in benchd's namespace (asked before a delete is retried)."""

LoadFinish = Callable[[Hits, SearchQuery], tuple[str, ...]]
"""How the flow turns a store's hits into fixture ids (labelled, sentinel dropped, cut)."""


class SeededCorpus(Protocol):
    """The corpus as a store is told it once seeded: iterating reads it (every record, with
    its latest listed copy); its size, latest date and undated records need no such pass."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Record]: ...

    @property
    def latest_created_s(self) -> float | None:
        """The latest ``created_at`` the corpus's memories give (epoch seconds), if any."""
        ...

    def undated(self) -> Iterator[Record]:
        """The records of the memories that give no ``created_at``."""
        ...


class Store(Protocol):
    """One store kind, transport-free as the flow sees it (see the module docstring)."""

    @property
    def plan(self) -> SeedPlan: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def retries(self) -> int: ...

    @property
    def retry_wait_s(self) -> float: ...

    @property
    def lease_records(self) -> int: ...

    async def info(self) -> TargetInfo: ...

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page: ...

    async def read_back(self, store_ids: Sequence[str]) -> Sequence[Listed]: ...

    async def write(self, batch: Sequence[Record]) -> Counts: ...

    async def write_sentinel(self, record: Record) -> None: ...

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool: ...

    async def delete_many(self, store_ids: Sequence[str]) -> int: ...

    async def read_sentinel(self, store_id: str) -> Sequence[Listed] | None: ...

    async def holders(self, store_ids: Sequence[str]) -> Mapping[str, bool] | None: ...

    def unchanged(self, listed: Listed, record: Record) -> bool: ...

    def stale(self, listed: Listed, record: Record) -> bool: ...

    def kept_as_written(self, rows: Sequence[CorpusRow]) -> Sequence[bytes | None] | None: ...

    def seeded(self, corpus: SeededCorpus) -> None: ...

    async def search(self, query: SearchQuery) -> Hits: ...

    def load_sender(
        self,
        queries: Sequence[SearchQuery],
        finish: LoadFinish,
        *,
        concurrency: int,
        timeout_s: float,
    ) -> AbstractAsyncContextManager[Fire]: ...

    async def aclose(self) -> None: ...


class StoreDefaults:
    """The optional parts of :class:`Store`, for a kind to inherit."""

    @property
    def retries(self) -> int:
        """No retries of its own."""
        return 0

    @property
    def retry_wait_s(self) -> float:
        return 0.0

    @property
    def lease_records(self) -> int:
        """The lease rides on the sentinel: no record of its own."""
        return 0

    async def read_back(self, store_ids: Sequence[str]) -> Sequence[Listed]:
        """No read-by-id: a record the listing skipped is missing."""
        return ()

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """Only called where :attr:`Capabilities.bulk_deletes` is declared."""
        raise NotImplementedError("this store declares no bulk delete")

    async def holders(self, store_ids: Sequence[str]) -> Mapping[str, bool] | None:
        """No read across namespaces: another tenant's record under benchd's id is not seen."""
        return None

    async def read_sentinel(self, store_id: str) -> Sequence[Listed] | None:
        """No cheaper read than the listing: the flow lists the namespace for the lease."""
        return None

    def unchanged(self, listed: Listed, record: Record) -> bool:
        """Every record is written; the store decides."""
        return False

    def stale(self, listed: Listed, record: Record) -> bool:
        """Writing a record over its listed copy replaces it: nothing to delete first."""
        return False

    def kept_as_written(self, rows: Sequence[CorpusRow]) -> Sequence[bytes | None] | None:
        """No shortcut: ``unchanged`` decides each listed record."""
        return None

    def seeded(self, corpus: SeededCorpus) -> None:
        """Nothing to learn from the corpus."""

    def load_sender(
        self,
        queries: Sequence[SearchQuery],
        finish: LoadFinish,
        *,
        concurrency: int,
        timeout_s: float,
    ) -> AbstractAsyncContextManager[Fire]:
        """Only called where :attr:`Capabilities.load_sender` is declared."""
        raise NotImplementedError("this store declares no load sender")
