"""The ``zengram`` target: a Zengram-style memory API over HTTP.

Every trap of the real API (see DESIGN §2) is handled here and nowhere else:
the reserved ``client_id`` on every write and search, ``read_only=true`` so
probing does not bump ``access_count``, ``format=index`` with either result
shape accepted, imports in chunks of at most 500, 429 honoured with
``Retry-After``, 401 never retried, verification through paged ``/export``,
and deletes restricted to benchd's own records as listed in its namespace
(or read back with its ``client_id``), which it marks with a sentinel record
on first seed. Ids are derived from the namespace
(``benchd:<namespace>:<fixture id>``, see :mod:`benchd.store.owned`),
since the store's ids are global across ``client_id``s.

The real server is slow to import (about 100 ms per 10 records), has no
``GET /memory/{id}``, and its export cursor, cut to milliseconds, loses
records dated below the millisecond at a page boundary, so: an import
request's deadline grows with its batch; a timed-out import is read back,
never blindly re-sent (the server finishes it anyway, and a blind retry
would read ``skipped``); every ``created_at`` benchd writes is cut to the
millisecond (and those it fills are distinct milliseconds); the lease and a
record missing from the listing are read back through a second listing.
The server also keys facts (by ``key``) and statuses (by ``subject``) across
tenants: benchd namespaces both, exactly like ids
(:func:`benchd.store.owned.namespaced_fields`). Date words resolve against
the corpus's own time: a query without ``reference_date`` is sent the
corpus's latest ``created_at`` (the fixture's, or the one benchd stamped, as
stored), so a kept corpus answers date-word queries the same way week after
week.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal

import anyio
import anyio.lowlevel
import httpx

from benchd.config.kinds import Starter, StoreCosts, UrlKeyCommon
from benchd.config.schema import check, concurrency_problem, headers_problem, label_problem
from benchd.config.secrets import Secret
from benchd.errors import TargetError, TargetProtocolError, TargetTimeout
from benchd.http.answers import decode
from benchd.http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    Answer,
    ErrorContext,
    http_url_problem,
    non_negative_problem,
    positive_problem,
)
from benchd.http.sender import Connect
from benchd.kinds import zengram_wire as wire
from benchd.kinds.over_http import FlowOverHttp, StoreOverHttp, delete_rechecked
from benchd.result import TargetInfo
from benchd.store.flow import content_of
from benchd.store.idtable import ListedRows, SeenIds
from benchd.store.lease import LeaseHolder, holder_of
from benchd.store.listing import listing_limit
from benchd.store.namespace import RecordRows
from benchd.store.owned import (
    MAX_ID_CHARS,
    OWNER_KEY,
    namespace_problem,
    namespaced_fields,
    owned_id,
    owned_prefix,
    owner_mark,
    sentinel_id,
)
from benchd.store.protocol import (
    Capabilities,
    CorpusRow,
    Counts,
    Hits,
    Listed,
    Page,
    Recheck,
    Record,
    SeededCorpus,
    SeedPlan,
)
from benchd.store.target import SearchQuery, WriteRate

__all__ = [
    "KIND",
    "ZengramConfig",
    "ZengramStore",
    "ZengramTarget",
    "sentinel_id",
]

KIND = "zengram"
IMPORT_CAP = 500
SEARCH_CAP = 100
EXPORT_PAGE = 500
# Listings that look for records the first one skipped: page sizes whose boundaries fall
# far from multiples of EXPORT_PAGE (and from each other's) up to several thousand records.
RESCUE_PAGES = (331, 457)
READ_BACK_POLLS = 5  # listings while a timed-out import may still be writing

Keep = Callable[[str, bytes], bool]
"""Which listed records a read-back keeps, by server id and digest of the text."""


def _everything(_sid: str, _content: bytes) -> bool:
    return True


def _any_of(records: Sequence[Mapping[str, Any]]) -> Keep:
    """Keep a listed record with the id or the text of one of these prepared records."""
    ids = {str(r["id"]) for r in records if r.get("id") is not None}
    contents = {wire.key(r)[1] for r in records}
    return lambda sid, content: sid in ids or content in contents


def _written_as(namespace: str, prefix: str, sid: str, fid: object) -> str:
    """``owned_id(namespace, fid)`` (``prefix``: the namespace's); ``sid`` itself where that
    is the id benchd derives plainly, without making the string again."""
    text = fid if type(fid) is str else str(fid)
    cut = len(prefix)
    if (
        len(sid) == cut + len(text) <= MAX_ID_CHARS
        and text[:1] != "#"
        and sid.startswith(prefix)
        and sid.endswith(text)
    ):
        return sid
    return owned_id(namespace, text)


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


@dataclass(frozen=True, slots=True)
class ZengramConfig(UrlKeyCommon):
    """``[probe.target]`` keys for ``kind = "zengram"``."""

    starter: ClassVar[Starter] = Starter(
        "a Zengram-compatible memory API (or benchd refstore)",
        (
            ("url", "http://127.0.0.1:8084", "base URL of the store's API"),
            ("api_key_env", "BRAIN_API_KEY", "environment variable holding the key (or "
             "api_key_file); never the key itself"),
            ("namespace", "benchd-eval", "reserved client_id: benchd writes and deletes only "
             "here, never 'global'"),
            ("cleanup", "never", "never: keep the corpus (unchanged records are not re-sent: in "
             "steady state only the lease heartbeat writes, 2 a cycle); before: delete+reimport "
             "each cycle (fresh embeddings, one write per record); after: delete when done. "
             "See docs/configuration.md, 'Budgets and choosing cleanup'"),
        ),
        edit="url/api_key_env",
    )  # fmt: skip

    # What keeping the lease costs each writing cycle, for the budget planner:
    # the heartbeat deletes and re-imports the sentinel, then reads it back by
    # listing the namespace's facts created since (the real server has no read
    # by id; the sentinel is a fact): one request, the sentinel alone. (Only
    # where another holder's clock is behind does it list all the facts.)
    lease_writes_per_cycle: ClassVar[int] = 2
    lease_reads_per_cycle: ClassVar[int] = 1

    url: str = field(metadata=check(http_url_problem))
    api_key_env: str | None = None
    api_key_file: str | None = None
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "before"
    # label for the store's embedding model when /health has none
    model: str = field(default="", metadata=check(label_problem))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    # an import request may take timeout_s plus this per record: 10 s + 500 × 0.02 s = 20 s
    # for a full batch, where the real server needs >= 5 s
    import_timeout_per_record_s: float = field(default=0.02, metadata=check(_non_negative))
    seed_batch: int = field(
        default=IMPORT_CAP,
        metadata=check(lambda v: None if 0 < v <= IMPORT_CAP else f"must be 1..{IMPORT_CAP}"),
    )
    seed_concurrency: int = field(default=4, metadata=check(concurrency_problem))
    max_retries: int = field(default=3, metadata=check(non_negative_problem))
    backoff_s: float = field(default=0.25, metadata=check(non_negative_problem))
    max_retry_after_s: float = field(default=30.0, metadata=check(non_negative_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(positive_problem)
    )
    verify: bool = True
    searchable_timeout_s: float = 30.0
    keep_ids: bool = True  # false: the store assigns ids; benchd's mark maps them back
    adopt_namespace: bool = False
    headers: dict[str, str] = field(default_factory=dict, metadata=check(headers_problem))

    def costs(self) -> StoreCosts:
        """Export pages of 500, imports of ``seed_batch``, the lease heartbeat; 120/60 a
        minute."""
        return StoreCosts(
            page_size=EXPORT_PAGE,
            batch_size=self.seed_batch,
            lists=2 if self.verify else 1,
            searchable_polls=1 if self.searchable_timeout_s > 0 else 0,
            lease_reads=self.lease_reads_per_cycle,
            lease_writes=self.lease_writes_per_cycle,
            reads_per_min=120,  # the Zengram API's default limits per key (fixed 60 s windows)
            writes_per_min=60,
        )


@dataclass(frozen=True, slots=True)
class Stored:
    """A record a read-back looks for: as the flow sees it, and a digest of its text."""

    listed: Listed
    content: bytes  # wire.content_digest of its text


class ZengramStore(StoreOverHttp):
    """The :class:`~benchd.store.protocol.Store` of a Zengram-compatible API."""

    def __init__(
        self,
        config: ZengramConfig,
        secret: Secret | None,
        *,
        connect: Connect | None = None,
    ) -> None:
        self.config = config
        auth = {} if secret is None else {"x-api-key": secret.reveal()}
        context = ErrorContext(api="a Zengram API", key_source=secret.source if secret else "")
        super().__init__(config, auth, connect, context=context)
        self._last_fill_ms = 0
        self._sent = 0  # records sent this process: bounds a read-back listing
        self._most = 0  # ... and so does the largest namespace the flow listed
        # The latest created_at benchd filled for a corpus record since the corpus was last
        # told (seeded): the time of those the listing does not show. Filled times only grow.
        self._filled_ms: int | None = None
        # The sentinel's text (digest) as the latest listing shows it; None: not listed.
        self._sentinel_content: bytes | None = None
        self._paging_sentinel: bytes | None = None  # ... as the listing being paged shows it
        self._paging_active = 0  # active records of the listing being paged
        self._seen = SeenIds()  # ids of the listing being paged, active or not (hashes)
        self._ahead: dict[int, Answer] = {}  # answers to listing pages asked for early, by offset
        self._stride: tuple[int, int | None] | None = None  # the last page's length and total
        self._anchor: str | None = None  # the corpus's "now", sent as reference_date
        self._sentinel_ms: int | None = None  # the created_at benchd last wrote the sentinel at
        self._plan: tuple[ZengramConfig, SeedPlan] | None = None
        self._capabilities: tuple[ZengramConfig, Capabilities] | None = None

    # -- the store protocol ---------------------------------------------------------

    @property
    def plan(self) -> SeedPlan:
        """The flow's plan, made once per settings (the flow reads it many times a cycle)."""
        if self._plan is None or self._plan[0] is not self.config:
            self._plan = (self.config, self._plan_of(self.config))
        return self._plan[1]

    def _plan_of(self, c: ZengramConfig) -> SeedPlan:
        return SeedPlan(
            namespace=c.namespace,
            cleanup=c.cleanup,
            adopt_namespace=c.adopt_namespace,
            batch_size=c.seed_batch,
            concurrency=c.seed_concurrency,
            delete_concurrency=c.seed_concurrency,
            verifies=c.verify or not c.keep_ids,  # store-assigned ids need the map
            namespace_label="namespace (client_id)",
            endpoint=self._base,
            searchable_timeout_s=c.searchable_timeout_s,
            searchable_limit=SEARCH_CAP,
        )

    @classmethod
    def capabilities_for(cls, settings: ZengramConfig) -> Capabilities:
        """Everything: a paged listing, batch imports, deletes, a lease in the sentinel,
        scores."""
        return Capabilities(
            lists=True,
            writes=True,
            deletes=True,
            lease=True,
            owned_ids=settings.keep_ids,
            owned_keys=True,
            load_sender=True,
            scores=True,
            retries=True,
        )

    @classmethod
    def probe_target(
        cls,
        settings: ZengramConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ZengramTarget:
        """The namespace flow over a store of these settings."""
        return ZengramTarget(settings, secret, lease=lease, write_rate=write_rate)

    @property
    def capabilities(self) -> Capabilities:
        """What these settings can do, made once per settings (read many times a cycle)."""
        if self._capabilities is None or self._capabilities[0] is not self.config:
            self._capabilities = (self.config, self.capabilities_for(self.config))
        return self._capabilities[1]

    async def info(self) -> TargetInfo:
        """``GET /health`` (no key needed); the model label comes from it or the config."""
        answer = await self._http.request("GET", "/health")
        model, version = await decode(answer.body, f"GET {self._base}/health", wire.health_labels)
        return TargetInfo(
            kind=KIND, endpoint=self._base, model=self.config.model or model, version=version
        )

    async def search(self, query: SearchQuery) -> Hits:
        params = self._search_params(query)
        answer = await self._http.request("GET", "/memory/search", params=params)
        return await self.parse_hits(answer, query)

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        params = self._search_params(query)
        return self._client.build_request("GET", "/memory/search", params=params)

    def _search_params(self, query: SearchQuery) -> dict[str, str | int]:
        params: dict[str, str | int] = {
            "q": query.q,
            # as the flow asks: room for the sentinel, which is dropped, never scored
            "limit": min(query.limit, SEARCH_CAP),
            "client_id": self.config.namespace,
            "read_only": "true",
            "track_access": "false",
            "format": "index",
        }
        reference = query.reference_date or self._anchor
        if reference:
            params["reference_date"] = reference
        return params

    async def parse_hits(self, answer: Answer, query: SearchQuery, *, what: str = "") -> Hits:
        """A 2xx search answer's server ids and scores (as many as were asked for)."""
        what = what or f"GET {self._base}/memory/search"
        sent = min(query.limit, SEARCH_CAP)  # what was asked (room for the sentinel)
        ids, scores = await decode(answer.body, what, partial(wire.search_hits, sent, what))
        return Hits(ids, scores)

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        """One ``GET /export`` page of the namespace's active records (cursor: the offset).

        Each page is cut to the page size asked for; a page with ``has_more``
        that brings no record not seen before is a ``decode`` error (a store
        that pages forever must not hang the cycle). ``compare``: whether each
        record is fingerprinted for ``unchanged`` (``Listed.kept``).
        """
        offset = int(cursor or 0)
        if cursor is None:
            self._paging_sentinel, self._paging_active = None, 0
            self._seen = SeenIds()
            self._stride = None
        answer = self._ahead.pop(offset, None)
        self._ahead.clear()  # a guess that missed
        if answer is None:
            answer = await self._http.request("GET", "/export", params=self._page_params(offset))
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:
            try:
                page, more, ids, active, listed = await self._read_page(
                    tg, offset, answer, compare
                )
            except Exception as exc:  # raised as it is, not in the task group's group
                tg.cancel_scope.cancel()
                failed = exc
        if failed is not None:
            raise failed
        self._paging_active += len(listed)
        if sentinel_id(self.config.namespace) in active:  # else its copy here is inactive
            self._paging_sentinel = self._sentinel_in(page, self._paging_sentinel)
        if not page or not more:
            self._sentinel_content = self._paging_sentinel
            self._most = max(self._most, listing_limit(self._paging_active))
            self._seen = SeenIds()
            return Page(listed)
        self._check_progress(offset, ids, self._seen)
        return Page(listed, str(offset + len(page)), new=True)  # checked: inactive ones too

    async def _read_page(
        self, tg: anyio.abc.TaskGroup, offset: int, answer: Answer, compare: bool
    ) -> tuple[list[dict[str, Any]], bool, list[str], dict[str, dict[str, Any]], ListedRows]:
        """A listing page's answer decoded and its records listed while the store answers
        the next page, asked for in ``tg`` before the work: at the offset the pages so far
        point to where the last answer's total says it exists, else once this page is
        decoded (kept for the next :meth:`list_page`)."""
        stride, total = self._stride or (0, None)
        guess = offset + stride if stride > 0 and total is not None else None
        if guess is not None and total is not None and guess < total:
            await self._ask_ahead(tg, guess)
        what = f"GET {self._base}/export"
        page, more, total = await decode(answer.body, what, partial(_page_total, EXPORT_PAGE, what))
        self._stride = (len(page), total)
        following = offset + len(page) if page and more else None
        if following is not None and following != guess:
            await self._ask_ahead(tg, following)
        ids = [str(r["id"]) for r in page]
        active = wire.active(page, ids)
        return page, more, ids, active, self._listed_all(active.items(), compare)

    async def _ask_ahead(self, tg: anyio.abc.TaskGroup, offset: int) -> None:
        tg.start_soon(self._read_ahead, offset)
        await anyio.lowlevel.checkpoint()  # the request is written before the work goes on

    async def _read_ahead(self, offset: int) -> None:
        """The answer to the page at ``offset``, kept for the next :meth:`list_page`; one that
        fails is asked for again then (and fails there, with its error)."""
        try:
            answer = await self._http.request("GET", "/export", params=self._page_params(offset))
        except TargetError:
            return
        self._ahead[offset] = answer

    def _sentinel_in(self, page: Sequence[Mapping[str, Any]], found: bytes | None) -> bytes | None:
        """The digest of the sentinel's text where ``page`` lists it active (its first such
        record), else ``found``."""
        sentinel = sentinel_id(self.config.namespace)
        for record in page:
            if str(record["id"]) == sentinel and record.get("active", True) is not False:
                return wire.content_digest(content_of(record))
        return found

    def _listed(self, sid: str, record: Mapping[str, Any]) -> Listed:
        """A listed record: benchd's id from its mark (store-assigned ids), its lease, its
        created_at and a digest of what the import's dedup compares; never the text."""
        return self._listed_all(((sid, record),), True)[0]

    def _listed_all(
        self, records: Iterable[tuple[str, Mapping[str, Any]]], compare: bool
    ) -> ListedRows:
        """:meth:`_listed` of each (server id, record): a listing's 10^5 in one loop, as rows
        (no object a record: the listing's table keeps most of them in arrays); fingerprinted
        for ``unchanged`` only where ``compare``."""
        ns = self.config.namespace
        prefix = owned_prefix(ns)
        out = ListedRows()
        add = out.rows.append
        for sid, record in records:
            metadata = record.get("metadata")
            mark = metadata.get(OWNER_KEY) if isinstance(metadata, dict) else None
            written_as = None
            if isinstance(mark, dict) and mark.get("namespace") == ns:
                fid = mark.get("fixture_id")
                written_as = prefix if fid is None else _written_as(ns, prefix, sid, fid)
                written_as = sid if written_as == sid else written_as  # one string, not two
            # a mark without a lease (every record's but the sentinel's) needs no holder_of
            plain = mark is None or (type(mark) is dict and "instance" not in mark)
            stamp = record.get("created_at")
            add(
                (
                    sid,
                    written_as,
                    None if plain else holder_of(mark),
                    wire.kept_of(record, sid) if compare else None,
                    wire.epoch_s(stamp) if stamp else None,
                )
            )
        return out

    def _stored(self, page: Sequence[dict[str, Any]], keep: Keep) -> dict[str, Stored]:
        """A page's active records that ``keep`` wants, by server id, with their texts'
        digests."""
        out: dict[str, Stored] = {}
        for sid, record in wire.active(page).items():
            content = wire.content_digest(content_of(record))
            if keep(sid, content):
                out[sid] = Stored(self._listed(sid, record), content)
        return out

    async def read_back(self, store_ids: Sequence[str]) -> list[Listed]:
        """Records the listing did not show, looked for in listings with other page sizes.

        The real server has no ``GET /memory/{id}``, and its listing cursor can
        skip records dated below the millisecond in a page-boundary millisecond;
        a listing with another page size puts its boundaries on other records.
        At most ``len(RESCUE_PAGES)`` listings, only while some are still not
        found. Only active records of benchd's namespace are listed, so only
        those count.
        """
        return [s.listed for s in (await self._found(store_ids)).values()]

    async def _found(self, store_ids: Sequence[str]) -> dict[str, Stored]:
        """:meth:`read_back`'s records, as the store keeps them."""
        wanted = set(store_ids)
        found: dict[str, Stored] = {}
        for size in RESCUE_PAGES:
            if wanted <= found.keys():
                break
            found.update(await self._export_all(size, keep=lambda sid, _content: sid in wanted))
        return found

    async def read_sentinel(self, store_id: str) -> list[Listed]:
        """The sentinel (a fact) as ``GET /export?type=fact`` lists it in the namespace.

        Only the namespace's facts are listed, not the whole corpus: the lease is
        read back after each heartbeat and before ``once`` or a stopping daemon
        hands it back. First only those created since benchd last wrote the
        sentinel (``since``: usually the sentinel alone, one request); where it
        is not among them (another holder's clock is behind), all of them. The
        latest listing learns the sentinel as read now.
        """
        found = None

        def keep(sid: str, _content: bytes) -> bool:
            return sid == store_id

        if self._sentinel_ms is not None:
            since = wire.iso_ms(self._sentinel_ms - 1)
            found = (await self._export_all(EXPORT_PAGE, "fact", since, keep)).get(store_id)
        if found is None:
            found = (await self._export_all(EXPORT_PAGE, "fact", keep=keep)).get(store_id)
        if store_id == sentinel_id(self.config.namespace):
            self._sentinel_content = None if found is None else found.content
        return [] if found is None else [found.listed]

    async def write(self, batch: Sequence[Record]) -> Counts:
        if isinstance(batch, RecordRows):  # the corpus's records as rows: no Record each
            ns, prepare = batch.namespace, self._import_record
            if ns != self.config.namespace:  # not this store's corpus: its records as made
                return await self._import_batch([self._prepare(r) for r in batch])
            # each row's id is owned_id(ns, fixture id): the record's own key or subject
            records = [prepare(s, f, m, owner_mark(ns, f), s) for s, f, m in batch.rows]
            return await self._import_batch(records)
        return await self._import_batch([self._prepare(r) for r in batch])

    async def write_sentinel(self, record: Record) -> None:
        """Write the sentinel (and lease); a heartbeat deletes this process's own first.

        The store skips an import whose text it already holds (dedup runs
        before the upsert), so the heartbeat in the metadata would never be
        refreshed: delete-then-import writes it with the same text, hence
        the same embedding, every cycle. The pair is shielded from
        cancellation (a SIGTERM between the two would leave the namespace
        without its sentinel), bounded by :meth:`_sentinel_bound_s`.
        """
        sentinel = self._prepare(record)
        at = wire.epoch_s(sentinel["created_at"])
        self._sentinel_ms = None if at is None else round(at * 1000)
        is_sentinel = record.store_id == sentinel_id(self.config.namespace)
        listed = self._sentinel_content if is_sentinel else None
        with anyio.CancelScope(shield=True) as shield:
            shield.deadline = anyio.current_time() + self._sentinel_bound_s()
            if listed is not None and listed == wire.content_digest(sentinel["content"]):
                await self.delete(record.store_id)
            counts = await self._import_batch([sentinel])
        if shield.cancelled_caught:
            raise TargetTimeout(
                f"POST {self._base}/export/import: rewriting benchd's sentinel took more than "
                f"{self._sentinel_bound_s():.0f}s"
            )
        if counts[0] + counts[1] == 0:
            raise TargetProtocolError(
                f"POST {self._base}/export/import: the store rejected benchd's sentinel record; "
                "is this a Zengram-compatible API?"
            )

    def _sentinel_bound_s(self) -> float:
        """How long the shielded sentinel rewrite may take: a delete and a one-record import,
        each with its retries after the longest ``Retry-After`` honoured."""
        c = self.config
        one = c.timeout_s + c.import_timeout_per_record_s + c.max_retry_after_s
        return 2 * one * (c.max_retries + 1)

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool:
        """``DELETE /memory/{id}``; False if the store no longer had it, or benchd's namespace no
        longer lists it after a retry's wait (a 429's ``Retry-After`` can be long, and the
        store's DELETE carries no namespace: the record is checked again before it goes)."""
        return await delete_rechecked(self._http, f"/memory/{store_id}", (404,), recheck)

    def unchanged(self, listed: Listed, record: Record) -> bool:
        """Stored with the same content, type and namespaced keys: nothing to write."""
        return (
            self.config.keep_ids and self._duplicate(listed, record) and self._keyed(listed, record)
        )

    def stale(self, listed: Listed, record: Record) -> bool:
        """The import would skip the record as a duplicate of a copy keyed the old way.

        A corpus kept from a benchd version that sent the fixture's own
        ``key``/``subject`` (global on the server) is deleted and written
        again under the namespaced ones, so it stops sharing other tenants'
        facts and statuses rows.
        """
        return self._duplicate(listed, record) and not self._keyed(listed, record)

    @staticmethod
    def _duplicate(listed: Listed, record: Record) -> bool:
        """Same content and type: the import's dedup would skip the record."""
        return listed.kept is not None and wire.same_dedup(listed.kept, record.memory)

    def _keyed(self, listed: Listed, record: Record) -> bool:
        """The fields the server keys across tenants are stored as benchd namespaced them."""
        if not record.fixture_id:
            return True
        wanted = namespaced_fields(self.config.namespace, record.fixture_id, record.memory)
        return listed.kept is not None and all(
            wire.same_field(listed.kept, name, value, listed.id) for name, value in wanted.items()
        )

    def kept_as_written(self, rows: Sequence[CorpusRow]) -> list[bytes | None] | None:
        """What a listing keeps of each corpus record stored as benchd writes it (its
        namespaced key or subject): a copy keeping the same is :meth:`unchanged`. None where
        the store assigns its ids (``unchanged`` is never true then)."""
        if not self.config.keep_ids:
            return None
        ns, kept = self.config.namespace, wire.written_kept
        # each row's id is owned_id(ns, fixture id): the record's own key or subject
        return [kept(m, namespaced_fields(ns, f, m, s) if f else {}, s) for s, f, m in rows]

    def seeded(self, corpus: SeededCorpus) -> None:
        """Learn the corpus's time (see :meth:`_corpus_time`), sent with date-word queries."""
        self._anchor = self._corpus_time(corpus)

    # -- the wire format ----------------------------------------------------------------

    def _prepare(self, record: Record) -> dict[str, Any]:
        """The import record: benchd's id (or none) and mark, forced into the namespace."""
        mark = dict(record.mark)
        return self._import_record(record.store_id, record.fixture_id, record.memory, mark)

    def _import_record(
        self,
        store_id: str,
        fid: str,
        memory: Mapping[str, Any],
        mark: dict[str, Any],
        own_id: str | None = None,
    ) -> dict[str, Any]:
        """:meth:`_prepare` of a record's parts (``mark``: a copy of its mark, taken as is;
        ``own_id``: ``owned_id(namespace, fid)`` where the caller has it)."""
        ns = self.config.namespace
        out = dict(memory)
        out["client_id"] = ns  # never the fixture's own
        out.pop("active", None)  # never seed inactive records
        if fid:
            # The store keys facts by key and statuses by subject across tenants: never
            # write a fixture's own (or none, whose fallbacks are global too).
            out.update(namespaced_fields(ns, fid, memory, own_id))
        stamp = out.get("created_at")
        if stamp is None:
            out["created_at"] = self._fill_time()
            if fid:
                self._filled_ms = self._last_fill_ms
        elif type(stamp) is not str or "." in stamp or "," in stamp:
            out["created_at"] = wire.to_ms(stamp)  # no fraction of a second: kept as it is
        metadata = out.get("metadata")
        if isinstance(metadata, dict):
            out["metadata"] = {**metadata, OWNER_KEY: mark}
        else:
            out["metadata"] = {OWNER_KEY: mark}
        if self.config.keep_ids or not fid:
            out["id"] = store_id
        else:
            out.pop("id", None)
        return out

    def _fill_time(self) -> str:
        """Now, in milliseconds, and never a millisecond this target already used.

        Milliseconds, because the real server's export cursor is cut to them and
        loses records dated below at a page boundary; distinct, so the corpus's
        order in the listing is its order in the fixture.
        """
        self._last_fill_ms = max(int(time.time() * 1000), self._last_fill_ms + 1)
        return wire.iso_ms(self._last_fill_ms)

    def _corpus_time(self, corpus: SeededCorpus) -> str | None:
        """The latest ``created_at`` of the corpus: the fixture's, or benchd's as stored.

        Sent as ``reference_date`` to a query that has none, it makes date
        words resolve against the corpus rather than the calendar. With
        ``cleanup = "never"`` the records benchd dated keep the time of the
        seed that wrote them, so "recently" or "this week" keep meaning the
        same records however long ago that seed was. Only the memories that
        give no date are read for it (the corpus's latest date is known).
        """
        latest = corpus.latest_created_s
        for record in corpus.undated():
            moment = None if record.listed is None else record.listed.created_s
            if moment is None and self._filled_ms is not None:
                moment = self._filled_ms / 1000  # the latest benchd filled (none later)
            if moment is not None and (latest is None or moment > latest):
                latest = moment
        self._filled_ms = None
        return None if latest is None else wire.iso_ms(round(latest * 1000))

    async def _import_batch(self, batch: Sequence[Any]) -> Counts:
        """Import one batch; after a timeout, read back what the server wrote first.

        The server finishes a request the client stopped waiting for, so a
        blind re-send reads ``skipped`` for records it wrote. Instead the batch
        is read back (until the listing stops growing), only what is not
        stored is sent again, and the counts come from the final read-back.
        """
        pending = list(batch)
        timed_out = False
        for attempt in range(self.config.max_retries + 1):
            try:
                counts = await self._post_import(pending)
            except TargetTimeout:
                if attempt == self.config.max_retries:
                    raise
                timed_out = True
                pending = await self._not_stored(pending)
                if not pending:
                    return len(batch), 0, 0
                self._http.retries += 1  # only what is not stored is sent again: counted
                continue
            if not timed_out:
                return counts  # the store's own counts
            stored = len(batch) - len(await self._not_stored(batch, polls=1))
            return stored, max(0, len(batch) - stored - counts[2]), counts[2]
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _not_stored(self, records: Sequence[Any], polls: int = READ_BACK_POLLS) -> list[Any]:
        """The records the namespace does not hold, read back until the listing stops growing.

        Records still unlisted then are read by id when few (the export cursor
        may have skipped them); many unlisted records were simply not written.
        """
        missing = list(records)
        wait = min(5.0, max(0.5, self.config.import_timeout_per_record_s * len(records)))
        for poll in range(polls):
            if poll:
                await anyio.sleep(wait)  # the server may still be writing the timed-out import
            before = len(missing)
            listed = await self._export_all(keep=_any_of(missing))
            held = wire.keys({sid: s.content for sid, s in listed.items()})
            missing = [r for r in missing if wire.key(r) not in held]
            if not missing or (poll and len(missing) == before):
                break
        ids = [str(r["id"]) for r in missing if r.get("id") is not None]
        if ids and len(ids) < len(records):  # some written: the rest may sit on a page boundary
            held = wire.keys({sid: s.content for sid, s in (await self._found(ids)).items()})
            missing = [r for r in missing if wire.key(r) not in held]
        return missing

    async def _post_import(self, batch: Sequence[Any]) -> Counts:
        what = f"POST {self._base}/export/import"
        c = self.config
        self._sent += len(batch)
        answer = await self._http.request_allowing(
            "POST",
            "/export/import",
            allow=(),
            json={"data": list(batch), "operator_approved": True},
            deadline_s=c.timeout_s + c.import_timeout_per_record_s * len(batch),
            retry_timeouts=False,
        )
        return await decode(answer.body, what, partial(wire.import_counts, len(batch), what))

    async def _fetch_page(
        self,
        offset: int,
        size: int = EXPORT_PAGE,
        record_type: str | None = None,
        since: str | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """One ``GET /export`` page (every record on it, active or not) and has_more; of
        ``record_type`` only, and created after ``since``, where given (the API's
        ``type`` and ``since`` filters)."""
        what = f"GET {self._base}/export"
        params = self._page_params(offset, size, record_type, since)
        answer = await self._http.request("GET", "/export", params=params)
        return await decode(answer.body, what, partial(wire.export_page, size, what))

    def _page_params(
        self,
        offset: int,
        size: int = EXPORT_PAGE,
        record_type: str | None = None,
        since: str | None = None,
    ) -> dict[str, str | int]:
        params: dict[str, str | int] = {
            "client_id": self.config.namespace,
            "limit": size,
            "offset": offset,
        }
        if record_type is not None:
            params["type"] = record_type
        if since is not None:
            params["since"] = since
        return params

    def _check_progress(self, offset: int, ids: Iterable[str], seen: SeenIds) -> None:
        """A page (its ids) with has_more bringing no record not seen before: the paging is
        broken."""
        if not seen.add_new(ids):
            raise TargetProtocolError(
                f"GET {self._base}/export: has_more is true but the page at offset {offset} "
                "holds no record not seen before; the store's paging is broken"
            )

    async def _export_all(
        self,
        size: int = EXPORT_PAGE,
        record_type: str | None = None,
        since: str | None = None,
        keep: Keep | None = None,
    ) -> dict[str, Stored]:
        """The active records in the namespace (of ``record_type`` only, created after
        ``since``, where given) that ``keep`` wants, by server id: a read-back's own listing.

        Its paging state is its own (imports are read back concurrently);
        bounded like the flow's listing, by what this store was sent.
        """
        records: dict[str, Stored] = {}
        seen = SeenIds()
        offset = 0
        most = max(listing_limit(self._sent), self._most)
        for _ in range(most // size + 2):
            page, more = await self._fetch_page(offset, size, record_type, since)
            records.update(self._stored(page, keep or _everything))
            if not page or not more:
                return records
            self._check_progress(offset, (str(r["id"]) for r in page), seen)
            offset += len(page)
            if len(seen) > most:
                break
        raise TargetProtocolError(
            f"GET {self._base}/export: the namespace lists more than {most} records; benchd's "
            "namespace holds only its corpus: check the store's paging (has_more) or the namespace"
        )


def _page_total(size: int, what: str, data: Any) -> tuple[list[dict[str, Any]], bool, int | None]:
    """:func:`~benchd.kinds.zengram_wire.export_page`'s records and has_more, and the
    answer's ``total`` (None where it is not a count)."""
    records, more = wire.export_page(size, what, data)
    total = data.get("total")
    return records, more, total if type(total) is int and total >= 0 else None


class ZengramTarget(FlowOverHttp):
    """The namespace flow over a :class:`ZengramStore` (what ``kind = "zengram"`` builds)."""

    kind = KIND

    def __init__(
        self,
        config: ZengramConfig,
        secret: Secret | None,
        *,
        connect: Connect | None = None,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> None:
        self.config = config
        store = ZengramStore(config, secret, connect=connect)
        super().__init__(store, lease=lease, write_rate=write_rate)
