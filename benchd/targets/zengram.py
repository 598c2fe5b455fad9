"""The ``zengram`` target: a Zengram-style memory API over HTTP.

Every trap of the real API (see DESIGN §2) is handled here and nowhere else:
the reserved ``client_id`` on every write and search, ``read_only=true`` so
probing does not bump ``access_count``, ``format=index`` with either result
shape accepted, imports in chunks of at most 500, 429 honoured with
``Retry-After``, 401 never retried, verification through paged ``/export``,
and deletes restricted to benchd's own records as listed in its namespace
(or read back with its ``client_id``), which it marks with a sentinel record
on first seed. Ids are derived from the namespace
(``benchd:<namespace>:<fixture id>``, see :mod:`benchd.targets.owned`),
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
(:func:`benchd.targets.owned.namespaced_fields`). Date words resolve against
the corpus's own time: a query without ``reference_date`` is sent the
corpus's latest ``created_at`` (the fixture's, or the one benchd stamped, as
stored), so a kept corpus answers date-word queries the same way week after
week.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar, Literal

import anyio
import httpx

from benchd.config.kinds import CommonSettings, StoreCosts
from benchd.config.schema import check, headers_problem, label_problem
from benchd.config.secrets import Secret
from benchd.errors import TargetProtocolError, TargetTimeout
from benchd.result import TargetInfo
from benchd.targets.answers import count, decode, finite_number, first_ids
from benchd.targets.base import SearchQuery
from benchd.targets.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    Answer,
    ErrorContext,
    http_url_problem,
    positive_problem,
)
from benchd.targets.lease import Holder, holder_of
from benchd.targets.owned import (
    OWNER_KEY,
    legacy_sentinel_id,
    namespace_problem,
    namespaced_fields,
    owner_mark,
    sentinel_id,
    sentinel_text,
)
from benchd.targets.seeding import Counts, SeededStore, SeedPlan, content_of, digest
from benchd.targets.store import Capabilities

__all__ = [
    "KIND",
    "ZengramConfig",
    "ZengramTarget",
    "sentinel_id",
    "zengram_capabilities",
    "zengram_common",
    "zengram_costs",
]

KIND = "zengram"
IMPORT_CAP = 500
SEARCH_CAP = 100
EXPORT_PAGE = 500
_SUB_MS = re.compile(r"[T ]\d\d:\d\d:\d\d[.,]\d{4,}")  # a time finer than milliseconds
# Listings that look for records the first one skipped: page sizes whose boundaries fall
# far from multiples of EXPORT_PAGE (and from each other's) up to several thousand records.
RESCUE_PAGES = (331, 457)
READ_BACK_POLLS = 5  # listings while a timed-out import may still be writing


def _iso_ms(epoch_ms: int) -> str:
    """``2026-12-01T10:00:00.123Z`` for a time in epoch milliseconds."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


@dataclass(frozen=True, slots=True)
class ZengramConfig:
    """``[probe.target]`` keys for ``kind = "zengram"``."""

    # What keeping the lease costs each writing cycle, for the budget planner:
    # the heartbeat deletes and re-imports the sentinel, then reads it back by
    # listing the namespace once more (the real server has no read by id).
    lease_writes_per_cycle: ClassVar[int] = 2
    lease_listings_per_cycle: ClassVar[int] = 1

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
    seed_concurrency: int = field(default=4, metadata=check(positive_problem))
    max_retries: int = 3
    backoff_s: float = 0.25
    max_retry_after_s: float = 30.0
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(positive_problem)
    )
    verify: bool = True
    searchable_timeout_s: float = 30.0
    keep_ids: bool = True  # false: the store assigns ids; benchd's mark maps them back
    adopt_namespace: bool = False
    headers: dict[str, str] = field(default_factory=dict, metadata=check(headers_problem))


class ZengramTarget(SeededStore[Mapping[str, Any]]):
    """A :class:`~benchd.targets.base.Target` for Zengram-compatible stores."""

    kind = KIND
    keeps_lease = True

    def __init__(
        self,
        config: ZengramConfig,
        secret: Secret | None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        auth = {} if secret is None else {"x-api-key": secret.reveal()}
        context = ErrorContext(api="a Zengram API", key_source=secret.source if secret else "")
        super().__init__(config, auth, transport, context=context)
        self._last_fill_ms = 0
        self._sent_created: dict[str, str] = {}  # fixture id -> the created_at benchd filled
        self._listed: Mapping[str, Mapping[str, Any]] = {}  # the latest listing, by server id
        self._anchor: str | None = None  # the corpus's "now", sent as reference_date
        self._leased = False  # this process wrote its lease (released on shutdown)

    # -- protocol ---------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return zengram_capabilities(self.config)

    async def info(self) -> TargetInfo:
        """``GET /health`` (no key needed); the model label comes from it or the config."""
        answer = await self._http.request("GET", "/health")
        model, version = await decode(answer.body, f"GET {self._base}/health", _health_labels)
        return TargetInfo(
            kind=KIND, endpoint=self._base, model=self.config.model or model, version=version
        )

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        request = self.build_search_request(query)
        answer = await self._http.request("GET", "/memory/search", params=request.url.params)
        return await self.parse_search_response(answer, query)

    # -- sans-I/O search halves, used by the load engine -----------------------

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        params: dict[str, str | int] = {
            "q": query.q,
            # one more than asked: room for the sentinel, which is dropped, never scored
            "limit": min(query.limit + 1, SEARCH_CAP),
            "client_id": self.config.namespace,
            "read_only": "true",
            "track_access": "false",
            "format": "index",
        }
        reference = query.reference_date or self._anchor
        if reference:
            params["reference_date"] = reference
        return self._client.build_request("GET", "/memory/search", params=params)

    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ""
    ) -> tuple[str, ...]:
        """A 2xx search answer's fixture ids, at most the limit asked for, sentinel removed."""
        what = what or f"GET {self._base}/memory/search"
        sent = min(query.limit + 1, SEARCH_CAP)  # what was asked (room for the sentinel)
        ids, scores = await decode(answer.body, what, partial(_search_hits, sent, what))
        return self._ranked(ids, scores, query.limit)

    # -- seeding hooks (the flow is SeededStore's) ----------------------------------

    def _plan(self) -> SeedPlan:
        c = self.config
        return SeedPlan(
            namespace=c.namespace,
            cleanup=c.cleanup,
            adopt_namespace=c.adopt_namespace,
            batch_size=c.seed_batch,
            concurrency=c.seed_concurrency,
            delete_concurrency=c.seed_concurrency,
            verifies=c.verify or not c.keep_ids,  # store-assigned ids need the map
            namespace_label="namespace (client_id)",
        )

    def _prepare(self, memory: Mapping[str, Any]) -> dict[str, Any]:
        """The import record: benchd's own id (or none) and mark, forced into the namespace."""
        ns = self.config.namespace
        fid = str(memory["id"])
        record = dict(memory)
        record["client_id"] = ns  # never the fixture's own
        record.pop("active", None)  # never seed inactive records
        # The store keys facts by key and statuses by subject across tenants: never
        # write a fixture's own (or none, whose fallbacks are global too).
        record.update(namespaced_fields(ns, fid, memory))
        if record.get("created_at") is None:
            record["created_at"] = self._fill_time()
            self._sent_created[fid] = record["created_at"]
        else:
            record["created_at"] = _to_ms(record["created_at"])
        metadata = record.get("metadata")
        record["metadata"] = {
            **(metadata if isinstance(metadata, dict) else {}),
            OWNER_KEY: owner_mark(ns, fid),
        }
        if self.config.keep_ids:
            record["id"] = self._owned.store_of[fid]
        else:
            record.pop("id", None)
        return record

    def _fill_time(self) -> str:
        """Now, in milliseconds, and never a millisecond this target already used.

        The real server's export cursor skips records that share a page-boundary
        millisecond; records benchd dates never do.
        """
        self._last_fill_ms = max(int(time.time() * 1000), self._last_fill_ms + 1)
        return _iso_ms(self._last_fill_ms)

    def _corpus_time(self, memories: Sequence[Mapping[str, Any]]) -> str | None:
        """The latest ``created_at`` of the corpus: the fixture's, or benchd's as stored.

        Sent as ``reference_date`` to a query that has none, it makes date
        words resolve against the corpus rather than the calendar. With
        ``cleanup = "never"`` the records benchd dated keep the time of the
        seed that wrote them, so "recently" or "this week" keep meaning the
        same records however long ago that seed was.
        """
        latest: float | None = None
        for memory in memories:
            stamp = memory.get("created_at")
            if stamp is None:
                fid = str(memory["id"])
                stored = self._listed.get(self._server_id(fid), {})
                stamp = stored.get("created_at") or self._sent_created.get(fid)
            moment = _epoch_s(stamp)
            if moment is not None and (latest is None or moment > latest):
                latest = moment
        return None if latest is None else _iso_ms(round(latest * 1000))

    def _sentinel_record(self, *, released: bool = False) -> dict[str, Any]:
        ns = self.config.namespace
        return {
            "created_at": self._fill_time(),
            "id": sentinel_id(ns),
            "type": "fact",
            "key": sentinel_id(ns),  # a fact's key is global: one per namespace
            "importance": "low",
            "client_id": ns,
            "content": sentinel_text(ns) + self._lease_text(),
            "metadata": {
                OWNER_KEY: self.lease.mark(ns, released=released)
                if self.lease is not None
                else {"namespace": ns, "sentinel": "true"}
            },
        }

    def _lease_text(self) -> str:
        """The holder in words: fixed for the process, so the sentinel's embedding (and so
        the store's candidate pool, which it competes for) does not change between cycles."""
        lease = self.lease
        if lease is None:
            return ""
        return f" Leased by benchd instance {lease.instance}, pid {lease.pid}, {lease.token}."

    def _lease_of(self, existing: Mapping[str, Mapping[str, Any]]) -> Holder | None:
        record = existing.get(sentinel_id(self.config.namespace))
        metadata = record.get("metadata") if record is not None else None
        return holder_of(metadata.get(OWNER_KEY)) if isinstance(metadata, dict) else None

    async def _read_lease(self) -> Holder | None:
        """The lease as the namespace lists it now (the real server has no read by id)."""
        return self._lease_of(await self._list())

    def _sentinel_of(self, server_id: str, record: Mapping[str, Any]) -> str | None:
        ns = self.config.namespace
        if server_id == sentinel_id(ns):
            return "current"
        return "legacy" if server_id == legacy_sentinel_id(ns) else None

    def _written_for(self, server_id: str, record: Mapping[str, Any]) -> str | None:
        """By benchd's id in this namespace, or (store-assigned ids) by benchd's mark."""
        if self._owned.is_owned(server_id):
            return self._owned.fixture_id(server_id) or server_id
        metadata = record.get("metadata")
        mark = metadata.get(OWNER_KEY) if isinstance(metadata, dict) else None
        if isinstance(mark, dict) and mark.get("namespace") == self.config.namespace:
            fid = mark.get("fixture_id")
            return str(fid) if fid is not None else server_id
        return None

    def _unchanged(
        self, existing: Mapping[str, Mapping[str, Any]], memories: Sequence[Mapping[str, Any]]
    ) -> frozenset[str]:
        """Ids stored with the same content and type: the import's dedup would skip them."""
        if not self.config.keep_ids:
            return frozenset()
        same: set[str] = set()
        for memory in memories:
            fid = str(memory["id"])
            stored = existing.get(self._owned.store_of.get(fid, ""))
            if (
                stored is not None
                and content_of(stored) == content_of(memory)
                and stored.get("type", "event") == memory.get("type", "event")
            ):
                same.add(fid)
        return frozenset(same)

    async def _delete_one(self, server_id: str) -> bool:
        """``DELETE /memory/{id}``; False if the store no longer had it, or benchd's namespace no
        longer lists it after a retry's wait (a 429's ``Retry-After`` can be long, and the
        store's DELETE carries no namespace: the record is checked again before it goes)."""

        async def still_ours() -> None:
            if not await self._still_listed(server_id):
                raise _NoLongerListed

        try:
            answer = await self._http.request_allowing(
                "DELETE", f"/memory/{server_id}", allow=(404,), before_retry=still_ours
            )
        except _NoLongerListed:
            return False
        return answer.status != 404

    async def _write_sentinel(self, *, released: bool = False) -> None:
        """Write the sentinel (and lease); a heartbeat deletes this process's own first.

        The store skips an import whose text it already holds (dedup runs
        before the upsert), so the heartbeat in the metadata would never be
        refreshed: delete-then-import writes it with the same text, hence
        the same embedding, every cycle. The pair is shielded from
        cancellation (a SIGTERM between the two would leave the namespace
        without its sentinel), bounded by :meth:`_sentinel_bound_s`.
        """
        record = self._sentinel_record(released=released)
        listed = self._listed.get(record["id"])
        with anyio.CancelScope(shield=True) as shield:
            shield.deadline = anyio.current_time() + self._sentinel_bound_s()
            if listed is not None and content_of(listed) == record["content"]:
                await self._delete_one(record["id"])
            counts = await self._import_batch([record])
            self._leased = not released
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

    async def release_lease(self) -> bool:
        """Hand the lease back on shutdown (SIGTERM): the sentinel stays, its lease expired.

        Only a lease this process holds now (listed with its own token) is
        released, so another instance can take the namespace over at once
        instead of waiting out ``ttl_s``. Whether a lease was released.
        """
        me = self.lease
        if me is None or self._read_only is not None or not self._leased:
            return False
        holder = self._lease_of(await self._list())
        if holder is None or holder.token != me.token:
            return False
        await self._write_sentinel(released=True)
        self._leased = False
        return True

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
            held = _keys(await self.export_namespace())
            missing = [r for r in missing if _key(r) not in held]
            if not missing or (poll and len(missing) == before):
                break
        ids = [str(r["id"]) for r in missing if r.get("id") is not None]
        if ids and len(ids) < len(records):  # some written: the rest may sit on a page boundary
            held = _keys(await self._read_back(ids))
            missing = [r for r in missing if _key(r) not in held]
        return missing

    async def _post_import(self, batch: Sequence[Any]) -> Counts:
        what = f"POST {self._base}/export/import"
        c = self.config
        answer = await self._http.request_allowing(
            "POST",
            "/export/import",
            allow=(),
            json={"data": list(batch), "operator_approved": True},
            deadline_s=c.timeout_s + c.import_timeout_per_record_s * len(batch),
            retry_timeouts=False,
        )
        return await decode(answer.body, what, partial(_import_counts, len(batch), what))

    async def export_namespace(self, page_size: int = EXPORT_PAGE) -> dict[str, dict[str, Any]]:
        """Every active record in the namespace, by server id (paged ``GET /export``).

        Bounded: each page is cut to the page size asked for, and the listing
        stops with a ``decode`` error past ``listing_limit`` records (so past
        that many pages) or when a page brings nothing new.
        """
        what = f"GET {self._base}/export"
        records: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        offset = 0
        most = self._listing_limit
        for _ in range(most // page_size + 2):
            params = {"client_id": self.config.namespace, "limit": page_size, "offset": offset}
            answer = await self._http.request("GET", "/export", params=params)
            page, more = await decode(answer.body, what, partial(_export_page, page_size, what))
            ids = [str(r["id"]) for r in page]
            for rec in page:
                if rec.get("active", True) is not False:
                    records[str(rec["id"])] = rec
            offset += len(page)
            if not page or not more:
                self._listed = records
                return records
            if seen.issuperset(ids):  # a store that pages forever must not hang the cycle
                raise TargetProtocolError(
                    f"{what}: has_more is true but the page at offset {offset - len(page)} "
                    "holds no record not seen before; the store's paging is broken"
                )
            seen.update(ids)
            if len(seen) > most:
                break
        raise TargetProtocolError(
            f"{what}: the namespace lists more than {most} records; benchd's namespace "
            "holds only its corpus: check the store's paging (has_more) or the namespace"
        )

    async def _read_back(self, server_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Records the listing did not show, looked for in listings with other page sizes.

        The real server has no ``GET /memory/{id}``, and its listing cursor can
        skip records dated below the millisecond in a page-boundary millisecond;
        a listing with another page size puts its boundaries on other records.
        At most ``len(RESCUE_PAGES)`` listings, only while some are still not
        found. Only active records of benchd's namespace are listed, so only
        those count.
        """
        wanted = set(server_ids)
        found: dict[str, dict[str, Any]] = {}
        for size in RESCUE_PAGES:
            if wanted <= found.keys():
                break
            listed = await self.export_namespace(size)
            found.update((sid, rec) for sid, rec in listed.items() if sid in wanted)
        return found

    async def _searchable_after(
        self, memories: Sequence[Mapping[str, Any]], missing: tuple[str, ...]
    ) -> float | None:
        """Learn the corpus's time (see :meth:`_corpus_time`); poll for the last memory kept.

        A memory the store did not keep never shows: polling for it would
        spend ``searchable_timeout_s`` to learn nothing.
        """
        self._anchor = self._corpus_time(memories)
        if not memories:
            return 0.0
        kept = [m for m in memories if str(m["id"]) not in missing]
        if not kept:
            return None
        return await self._time_to_searchable(
            kept[-1], limit=SEARCH_CAP, timeout_s=self.config.searchable_timeout_s
        )


def zengram_capabilities(config: ZengramConfig) -> Capabilities:
    """Everything: a paged listing, batch imports, deletes, a lease in the sentinel, scores."""
    return Capabilities(
        lists=True,
        writes=True,
        deletes=True,
        lease=True,
        owned_keys=True,
        load_sender=True,
        scores=True,
        retries=True,
    )


def zengram_common(config: ZengramConfig) -> CommonSettings:
    return CommonSettings(
        namespace=config.namespace,
        url=config.url,
        cleanup=config.cleanup,
        adopt_namespace=config.adopt_namespace,
        api_key_env=config.api_key_env,
        api_key_file=config.api_key_file,
    )


def zengram_costs(config: ZengramConfig) -> StoreCosts:
    """Export pages of 500, imports of ``seed_batch``, the lease heartbeat; 120/60 a minute."""
    return StoreCosts(
        page_size=EXPORT_PAGE,
        batch_size=config.seed_batch,
        lists=2 if config.verify else 1,
        searchable_polls=1 if config.searchable_timeout_s > 0 else 0,
        lease_listings=config.lease_listings_per_cycle,
        lease_writes=config.lease_writes_per_cycle,
        reads_per_min=120,  # the Zengram API's default limits per key (fixed 60 s windows)
        writes_per_min=60,
    )


class _NoLongerListed(Exception):
    """A delete waiting to be retried: its record left benchd's namespace meanwhile."""


def _to_ms(stamp: object) -> object:
    """A ``created_at`` cut to milliseconds; anything else (a date, not a time) as it is.

    The real server's listing cursor is cut to milliseconds, and records dated
    below that can fall between two pages: benchd never writes such a date.
    """
    text = str(stamp).strip()
    if not _SUB_MS.search(text):
        return stamp  # as the fixture has it: a date, or a time to the millisecond at most
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return stamp
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if moment.tzinfo is None:
        return moment.isoformat(timespec="milliseconds")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _epoch_s(stamp: object) -> float | None:
    """An ISO 8601 ``created_at`` as epoch seconds (naive = UTC), or None if it is not one."""
    try:
        moment = datetime.fromisoformat(str(stamp).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _key(record: Mapping[str, Any]) -> str:
    """How a read-back recognises a prepared record: ``id#digest`` (``#digest`` without an id).

    The content is part of it, so a changed record whose old version is still
    stored under its id is not mistaken for written.
    """
    rid = record.get("id")
    return ("" if rid is None else str(rid)) + "#" + digest(content_of(record))


def _keys(listed: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The read-back keys of listed records, by id and by content alone."""
    held: set[str] = set()
    for server_id, record in listed.items():
        content = "#" + digest(content_of(record))
        held.update((server_id + content, content))
    return held


# -- answer reducers: module-level, so large answers are reduced in the decode worker --


def _label(value: Any) -> str:
    return str(value)[:200] if isinstance(value, str | int | float) else ""


def _health_labels(data: Any) -> tuple[str, str]:
    """(model, version) from ``/health``; an answer that is not an object has neither."""
    if not isinstance(data, dict):
        return "", ""
    model = _label(data.get("model")) or _label(data.get("embedding_model"))
    return model, _label(data.get("version"))


def _search_hits(limit: int, what: str, data: Any) -> tuple[list[str], list[float | None]]:
    """Server ids of the first ``limit`` results (index format or full payloads), and scores.

    A score is the result's ``effective_score`` (else ``score``) when it is a
    finite number; it feeds only the drift stage's label-free signal.
    """
    results = data.get("results") if isinstance(data, dict) else None
    ids = first_ids(results, limit, what)
    assert isinstance(results, list)  # first_ids refused anything else
    return ids, [_score(item) for item in results[: len(ids)]]


def _score(item: Any) -> float | None:
    for key in ("effective_score", "score"):
        value = finite_number(item.get(key)) if isinstance(item, dict) else None
        if value is not None:
            return value
    return None


def _import_counts(sent: int, what: str, data: Any) -> Counts:
    """(imported, skipped, errors): non-negative integers adding up to at most ``sent``."""
    if not isinstance(data, dict):
        raise TargetProtocolError(f"{what}: answer lacks integer imported/skipped/errors counts")
    try:
        counts = tuple(count(data[k], k, sent, what) for k in ("imported", "skipped", "errors"))
    except KeyError as exc:
        raise TargetProtocolError(f"{what}: answer lacks the {exc} count") from None
    if sum(counts) > sent:
        raise TargetProtocolError(
            f"{what}: counts imported/skipped/errors = {counts} add up to more than "
            f"the {sent} record(s) sent"
        )
    return counts[0], counts[1], counts[2]


def _export_page(size: int, what: str, data: Any) -> tuple[list[dict[str, Any]], bool]:
    """(records with an id, at most ``size`` of them; has_more) from one ``/export`` page."""
    page = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(page, list):
        raise TargetProtocolError(f"{what}: answer has no 'memories' array")
    records = [r for r in page[:size] if isinstance(r, dict) and _label(r.get("id"))]
    return records, bool(data.get("has_more")) and len(page) > 0
