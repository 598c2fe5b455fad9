"""The ``http`` target: any HTTP/JSON store, described by request templates.

Config (:mod:`benchd.kinds.http.config`) says how a search, a seed batch,
an export page and a delete look; this adapter renders those requests and
reads their answers, and :class:`~benchd.store.flow.NamespaceFlow` seeds
the way it does for ``zengram``: bounded concurrent batches, paged export to
verify the seed, prove ownership (a sentinel record written on the first
seed), ids derived from the namespace (``{id}`` renders
``benchd:<namespace>:<fixture id>``; a store that assigns its own ids must
keep that one in a field the export reads as ``fixture_ids``), deletes
restricted to benchd's records as listed in its namespace, and errors that
name the endpoint.
The search halves are sans-I/O (:class:`~benchd.http.sender.HttpSearch`),
so the load engine sends searches over its own pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from benchd.config.secrets import Secret
from benchd.errors import TargetProtocolError
from benchd.http.answers import decode
from benchd.http.client import Answer, ErrorContext
from benchd.http.sender import Connect
from benchd.kinds.http.config import Endpoint, HttpConfig
from benchd.kinds.http.lease import LeaseRecords, is_lease_name
from benchd.kinds.http.records import (
    batch_counts,
    content_of,
    export_page,
    health_labels,
    search_hits,
)
from benchd.kinds.http.templating import MISSING, as_text, render, render_text
from benchd.kinds.over_http import FlowOverHttp, NoLongerListed, StoreOverHttp, before_retry
from benchd.kinds.vectors import SENTINEL_TEXT, embed_stage
from benchd.result import TargetInfo
from benchd.store.lease import LeaseHolder
from benchd.store.owned import namespaced_fields, sentinel_id
from benchd.store.protocol import (
    Capabilities,
    Counts,
    Hits,
    Listed,
    Page,
    Recheck,
    Record,
    SeedPlan,
)
from benchd.store.target import SearchQuery, WriteRate

if TYPE_CHECKING:
    from benchd.embed.stage import EmbedStage

__all__ = [
    "KIND",
    "HttpConfig",
    "TemplatedStore",
    "TemplatedTarget",
]

KIND = "http"


def _params(template: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters or headers: rendered as text; an exact missing placeholder drops one."""
    out: dict[str, str] = {}
    for name, value in template.items():
        rendered = render(value, values)
        if rendered is not MISSING:
            out[name] = as_text(rendered)
    return out


def _headers(template: Mapping[str, Any], values: Mapping[str, Any], what: str) -> dict[str, str]:
    """Rendered headers; a value HTTP cannot carry (non-ASCII, a line break) is refused."""
    out = _params(template, values)
    for name, value in out.items():
        if not value.isascii() or "\r" in value or "\n" in value:
            raise TargetProtocolError(
                f"{what}: header {name} would carry non-ASCII text or a line break; "
                "send that placeholder in the query or body instead"
            )
    return out


def _quote(value: str) -> str:
    """Escape a value substituted into a URL path (an id may hold '/' or spaces)."""
    return quote(value, safe="")


class TemplatedStore(StoreOverHttp):
    """The :class:`~benchd.store.protocol.Store` the templates describe."""

    def __init__(
        self,
        config: HttpConfig,
        secret: Secret | None,
        *,
        connect: Connect | None = None,
    ) -> None:
        self.config = config
        auth = {} if secret is None else {config.auth_header: config.auth_prefix + secret.reveal()}
        context = ErrorContext(
            api="the API this probe's templates describe",
            key_source=secret.source if secret else "",
        )
        super().__init__(config, auth, connect, context=context)
        self._search_what = f"{config.search.method} {self._base}{config.search.path}"
        # {embedding} / {q_embedding}: vectors from benchd's embed stage (docs/targets.md)
        self._embed = embed_stage(config.embed, config) if config.embed is not None else None
        self._lease = LeaseRecords(config.namespace)  # used where the templates keep one

    @property
    def lease_records(self) -> int:
        """The lease records the latest listing showed: each takes a search result's slot."""
        return len(self._lease.leases)

    def _what(self, template: Endpoint | None) -> str:
        assert template is not None
        return f"{template.method} {self._base}{template.path}"

    async def _call(
        self,
        template: Endpoint,
        values: Mapping[str, Any],
        *,
        allow: tuple[int, ...] = (),
        recheck: Recheck | None = None,
    ) -> Answer:
        """Send one templated request through the retrying client (errors name the endpoint)."""
        body = render(template.body, values)
        return await self._http.request_allowing(
            template.method,
            render_text(template.path, values, escape=_quote),
            allow=allow,
            params=_params(template.query, values),
            headers=_headers(template.headers, values, self._what(template)),
            json=None if body is MISSING or body is None else body,
            before_retry=None if recheck is None else before_retry(recheck),
        )

    # -- the store protocol -------------------------------------------------------------

    @property
    def plan(self) -> SeedPlan:
        c = self.config
        return SeedPlan(
            namespace=c.namespace,
            cleanup=c.cleanup,
            adopt_namespace=c.adopt_namespace,
            # without [probe.target.seed] / [probe.target.delete] these limits go unused
            batch_size=c.seed.batch_size if c.seed is not None else 1,
            concurrency=c.seed.concurrency if c.seed is not None else 1,
            delete_concurrency=c.delete.concurrency if c.delete is not None else 1,
            verifies=c.verify,
            endpoint=self._base,
            searchable_timeout_s=c.searchable_timeout_s if c.seed is not None else 0.0,
            searchable_limit=c.search.max_k or 100,
        )

    @classmethod
    def capabilities_for(cls, settings: HttpConfig) -> Capabilities:
        """What the configured templates allow: listing, writing and deleting each need
        theirs; a lease needs all three, and a store that keeps the ids benchd writes (the
        lease record is known by its id)."""
        return Capabilities(
            owned_ids=settings.keeps_ids(),
            lists=settings.export is not None,
            writes=settings.seed is not None,
            deletes=settings.delete is not None,
            lease=settings.holds_lease(),
            owned_keys=settings.seed is not None,  # {memory} carries namespaced key/subject
            load_sender=True,
            scores=bool(settings.search.scores),
            full_answers=settings.search.full_answers,
            retries=True,
        )

    @classmethod
    def probe_target(
        cls,
        settings: HttpConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> TemplatedTarget:
        """The namespace flow over a store of these settings."""
        return TemplatedTarget(settings, secret, lease=lease, write_rate=write_rate)

    @property
    def capabilities(self) -> Capabilities:
        return self.capabilities_for(self.config)

    async def info(self) -> TargetInfo:
        """Read model/version from the health endpoint if configured, else the config label."""
        model, version = self.config.model, ""
        health = self.config.health
        if health is not None:
            answer = await self._call(health, {"namespace": self.config.namespace})
            what = self._what(health)
            found, version = await decode(answer.body, what, partial(health_labels, health, what))
            model = model or found
        if self._embed is None:
            return TargetInfo(kind=KIND, endpoint=self._base, model=model, version=version)
        # benchd computes the vectors: its embedder is the model, with its canary
        canary = await self._embed.canary()
        return TargetInfo(KIND, self._base, self._embed.label, version, canary=canary)

    @property
    def embed(self) -> EmbedStage | None:
        """The embed stage of an ``{embedding}`` template (None without one)."""
        return self._embed

    async def search(self, query: SearchQuery) -> Hits:
        if self._embed is not None:
            await self._embed.query(query.q)  # remembered: the load pass builds requests sync
        answer = await self._call(self.config.search, self._search_values(query))
        return await self.parse_hits(answer, query)

    def _search_values(self, query: SearchQuery) -> dict[str, Any]:
        max_k = self.config.search.max_k
        # the flow's room for the sentinel and the lease records included (lease_records):
        # dropped, never scored
        k = query.limit
        return {
            "q": query.q,
            "k": min(k, max_k) if max_k else k,
            "namespace": self.config.namespace,
            "reference_date": MISSING if query.reference_date is None else query.reference_date,
            "q_embedding": self._query_vector(query.q),
        }

    def _query_vector(self, text: str) -> Any:
        """The query's vector, remembered by the embed stage (MISSING without one)."""
        if self._embed is None:
            return MISSING
        vector = self._embed.remembered_query(text)
        if vector is None:  # the serial pass embeds every query before the load pass
            raise TargetProtocolError(f"{self._search_what}: no vector for the query yet")
        return vector

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        search = self.config.search
        values = self._search_values(query)
        body = render(search.body, values)
        return self._client.build_request(
            search.method,
            render_text(search.path, values, escape=_quote),
            params=_params(search.query, values),
            headers=_headers(search.headers, values, self._search_what),
            json=None if body is MISSING or body is None else body,
        )

    async def parse_hits(self, answer: Answer, query: SearchQuery, *, what: str = "") -> Hits:
        """A 2xx search answer's store ids and scores (as many as were asked for)."""
        what = what or self._search_what
        sent = self._search_values(query)["k"]  # what was asked (room for the sentinel)
        search = self.config.search
        reduce = partial(search_hits, search.ids, search.scores, sent, what)
        ids, scores = await decode(answer.body, what, reduce)
        ns = self.config.namespace
        if any(is_lease_name(ns, i) for i in ids):  # a lease record is never a result
            kept = [n for n, i in enumerate(ids) if not is_lease_name(ns, i)]
            ids = [ids[n] for n in kept]
            scores = [scores[n] for n in kept] if scores else scores
        return Hits(ids, scores)

    def _record(self, record: Record, vector: Any = MISSING) -> Any:
        """One record as the templates render it, under benchd's own id."""
        seed = self.config.seed
        assert seed is not None
        sid = record.store_id
        ns = self.config.namespace
        # facts' key and statuses' subject are global on a Zengram-style store: never the
        # fixture's own (owned.namespaced_fields), as the zengram kind writes them
        keyed = namespaced_fields(ns, record.fixture_id or sid, record.memory)
        values = {
            "id": sid,
            "content": content_of(record.memory),
            "namespace": ns,
            "memory": {**record.memory, "id": sid, **keyed},
            "embedding": vector,
        }
        rendered = render(seed.record, values)
        if seed.fields:
            if not isinstance(rendered, dict):
                raise TargetProtocolError(
                    f"{self._what(seed)}: seed.fields needs seed.record to render an object"
                )
            rendered.update(render(seed.fields, values))
        return rendered

    async def write_sentinel(self, record: Record) -> None:
        """The sentinel; where the templates keep a lease, the heartbeat: a lease record
        (:mod:`benchd.kinds.http.lease`)."""
        if not self.capabilities.lease or record.mark.get("token") is None:
            await self._write_marker(record)
            return
        await self._lease.heartbeat(
            record, self._write_marker, self._delete_leases, self._list_all, self._where()
        )

    async def read_sentinel(self, store_id: str) -> Sequence[Listed] | None:
        """Right after a heartbeat, the lease its own listing read; else None (list)."""
        del store_id
        return self._lease.read_back() if self.capabilities.lease else None

    async def _write_marker(self, record: Record) -> None:
        counts = await self.write([record])
        sentinel = record.store_id == sentinel_id(self.config.namespace)
        if counts[2] or (counts[1] and not sentinel):  # a lease record is new every time
            which = "sentinel" if sentinel else "lease"
            raise TargetProtocolError(
                f"{self._what(self.config.seed)}: the store rejected benchd's {which} record; "
                "check [probe.target.seed] against the store's API"
            )

    async def _delete_leases(self, store_ids: Sequence[str]) -> None:
        for store_id in store_ids:
            await self.delete(store_id)

    async def _list_all(self) -> None:
        cursor: str | None = None
        while True:
            cursor = (await self.list_page(cursor)).next
            if cursor is None:
                return

    def _where(self) -> str:
        return f"namespace {self.config.namespace!r} at {self._base}"

    async def write(self, batch: Sequence[Record]) -> Counts:
        """Send one batch; the store's counts if the config names them, else all imported."""
        seed = self.config.seed
        assert seed is not None
        vectors: list[Any] = [MISSING] * len(batch)
        if self._embed is not None:
            # the sentinel's text carries its lease (new each process): one fixed text instead
            texts = [content_of(r.memory) if r.fixture_id else SENTINEL_TEXT for r in batch]
            rows = await self._embed.passages(texts)
            vectors = [[float(x) for x in row] for row in rows]
        records = [self._record(r, v) for r, v in zip(batch, vectors, strict=True)]
        values = {"records": records, "namespace": self.config.namespace}
        answer = await self._call(seed, values)
        if not any((seed.imported, seed.skipped, seed.errors)):
            return len(batch), 0, 0
        what = self._what(seed)
        return await decode(answer.body, what, partial(batch_counts, seed, len(batch), what))

    async def aclose(self) -> None:
        """Release the connection pool and the embed stage."""
        await super().aclose()
        if self._embed is not None:
            await self._embed.aclose()

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool:
        """Delete one record; False if gone, or no longer listed after a retry's wait."""
        delete = self.config.delete
        assert delete is not None
        values = {"id": store_id, "namespace": self.config.namespace}
        try:
            answer = await self._call(delete, values, allow=delete.gone, recheck=recheck)
        except NoLongerListed:
            return False
        return answer.status not in delete.gone

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        """One export page: each record with ``fid`` (fixture id) / ``digest`` where listed.

        The cursor is ``"<page>:<offset>"``; pages are bounded by
        ``export.max_pages`` and each is cut to ``page_size`` records.
        ``compare`` changes nothing: no record is kept unchanged (none has a
        ``kept`` to skip).
        """
        export = self.config.export
        assert export is not None
        what = self._what(export)
        page, _, at = (cursor or "1:0").partition(":")
        number, offset = int(page), int(at)
        values = {
            "namespace": self.config.namespace,
            "offset": offset,
            "limit": export.page_size,
            "page": number,
        }
        answer = await self._call(export, values)
        listed, n, more = await decode(
            answer.body, what, partial(export_page, export, offset, what)
        )
        records = [Listed(sid, rec.get("fid"), rec.get("digest")) for sid, rec in listed.items()]
        if self.capabilities.lease:
            records = self._lease.page(records, first=number == 1, last=not more)
        if not more:
            return Page(records)
        if number >= export.max_pages:
            raise TargetProtocolError(
                f"{what}: still more pages after export.max_pages = {export.max_pages}; "
                "check export.has_more / export.total, or raise max_pages"
            )
        return Page(records, f"{number + 1}:{offset + n}")


class TemplatedTarget(FlowOverHttp):
    """The namespace flow over an :class:`TemplatedStore` (what ``kind = "http"`` builds)."""

    kind = KIND

    def __init__(
        self,
        config: HttpConfig,
        secret: Secret | None,
        *,
        connect: Connect | None = None,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> None:
        self.config = config
        store = TemplatedStore(config, secret, connect=connect)
        super().__init__(store, lease=lease, write_rate=write_rate)
