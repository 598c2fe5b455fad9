"""The ``http`` target: any HTTP/JSON store, described by request templates.

Config (:mod:`benchd.targets.http.config`) says how a search, a seed batch,
an export page and a delete look; this adapter renders those requests and
reads their answers, and :class:`~benchd.targets.seeding.SeededStore` seeds
the way it does for ``zengram``: bounded concurrent batches, paged export to
verify the seed, prove ownership (a sentinel record written on the first
seed), ids derived from the namespace (``{id}`` renders
``benchd:<namespace>:<fixture id>``; a store that assigns its own ids must
keep that one in a field the export reads as ``fixture_ids``), deletes
restricted to benchd's records as listed in its namespace, and errors that
name the endpoint.
The search halves are sans-I/O (:class:`~benchd.targets.transport.HttpSearch`),
so the load engine sends searches over its own pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any
from urllib.parse import quote

import httpx

from benchd.config.kinds import CommonSettings, StoreCosts
from benchd.config.secrets import Secret
from benchd.errors import TargetProtocolError
from benchd.result import TargetInfo
from benchd.targets.answers import decode
from benchd.targets.base import SearchQuery
from benchd.targets.client import Answer, ErrorContext
from benchd.targets.http.config import Endpoint, HttpConfig
from benchd.targets.http.records import (
    batch_counts,
    content_of,
    digest,
    export_page,
    health_labels,
    legacy_sentinel_digest,
    search_hits,
    sentinel_memory,
)
from benchd.targets.http.templating import MISSING, as_text, render, render_text
from benchd.targets.owned import legacy_sentinel_id, namespaced_fields, sentinel_id
from benchd.targets.seeding import Counts, SeededStore, SeedPlan
from benchd.targets.store import Capabilities

__all__ = ["KIND", "HttpConfig", "HttpTarget", "http_capabilities", "http_common", "http_costs"]

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


class HttpTarget(SeededStore[Mapping[str, str]]):
    """A :class:`~benchd.targets.base.Target` for any store the templates describe."""

    kind = KIND

    def __init__(
        self,
        config: HttpConfig,
        secret: Secret | None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        auth = {} if secret is None else {config.auth_header: config.auth_prefix + secret.reveal()}
        context = ErrorContext(
            api="the API this probe's templates describe",
            key_source=secret.source if secret else "",
        )
        super().__init__(config, auth, transport, context=context)
        self._search_what = f"{config.search.method} {self._base}{config.search.path}"
        ns = config.namespace
        self._sentinel_ids = {sentinel_id(ns), legacy_sentinel_id(ns)}  # hidden from rankings
        self._sentinel_marks = {
            digest(content_of(sentinel_memory(ns))): "current",
            legacy_sentinel_digest(ns): "legacy",
        }

    def _what(self, template: Endpoint | None) -> str:
        assert template is not None
        return f"{template.method} {self._base}{template.path}"

    async def _call(
        self, template: Endpoint, values: Mapping[str, Any], *, allow: tuple[int, ...] = ()
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
        )

    # -- protocol ---------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return http_capabilities(self.config)

    async def info(self) -> TargetInfo:
        """Read model/version from the health endpoint if configured, else the config label."""
        model, version = self.config.model, ""
        health = self.config.health
        if health is not None:
            answer = await self._call(health, {"namespace": self.config.namespace})
            what = self._what(health)
            found, version = await decode(answer.body, what, partial(health_labels, health, what))
            model = model or found
        return TargetInfo(kind=KIND, endpoint=self._base, model=model, version=version)

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        answer = await self._call(self.config.search, self._search_values(query))
        return await self.parse_search_response(answer, query)

    # -- sans-I/O search halves, used by the load engine -----------------------

    def _search_values(self, query: SearchQuery) -> dict[str, Any]:
        max_k = self.config.search.max_k
        k = query.limit + 1  # room for the sentinel, which is dropped, never scored
        return {
            "q": query.q,
            "k": min(k, max_k) if max_k else k,
            "namespace": self.config.namespace,
            "reference_date": MISSING if query.reference_date is None else query.reference_date,
        }

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

    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ""
    ) -> tuple[str, ...]:
        """A 2xx search answer's fixture ids: at most the limit asked for, sentinels removed."""
        what = what or self._search_what
        sent = self._search_values(query)["k"]  # what was asked (room for the sentinel)
        search = self.config.search
        reduce = partial(search_hits, search.ids, search.scores, sent, what)
        ids, scores = await decode(answer.body, what, reduce)
        return self._ranked(ids, scores, query.limit)

    def _is_sentinel_id(self, server_id: str) -> bool:
        return server_id in self._sentinel_ids  # the store may have assigned the sentinel's id

    # -- seeding hooks (the flow is SeededStore's) ----------------------------------

    def _plan(self) -> SeedPlan:
        c = self.config
        return SeedPlan(
            namespace=c.namespace,
            cleanup=c.cleanup,
            adopt_namespace=c.adopt_namespace,
            # without [probe.target.seed] / [probe.target.delete] these limits go unused
            batch_size=c.seed.batch_size if c.seed is not None else 1,
            concurrency=c.seed.concurrency if c.seed is not None else 1,
            delete_concurrency=c.delete.concurrency if c.delete is not None else 1,
            exports=c.export is not None,
            writes=c.seed is not None,
            deletes=c.delete is not None,
            verifies=c.verify,
        )

    def _record(self, memory: Mapping[str, Any]) -> Any:
        """One record as the templates render it, with benchd's own id for a fixture memory."""
        seed = self.config.seed
        assert seed is not None
        fid = str(memory.get("id", ""))
        sid = self._owned.store_of.get(fid, fid)  # the sentinel keeps its own id
        ns = self.config.namespace
        # facts' key and statuses' subject are global on a Zengram-style store: never the
        # fixture's own (owned.namespaced_fields), as the zengram kind writes them
        keyed = namespaced_fields(ns, fid, memory)
        values = {
            "id": sid,
            "content": content_of(memory),
            "namespace": ns,
            "memory": {**memory, "id": sid, **keyed},
        }
        record = render(seed.record, values)
        if seed.fields:
            if not isinstance(record, dict):
                raise TargetProtocolError(
                    f"{self._what(seed)}: seed.fields needs seed.record to render an object"
                )
            record.update(render(seed.fields, values))
        return record

    def _sentinel_of(self, server_id: str, record: Mapping[str, str]) -> str | None:
        """By id or fixture-id column, else by content; a store-assigned id is remembered."""
        ns = self.config.namespace
        which: str | None = None
        for value in (server_id, record.get("fid")):
            if value == sentinel_id(ns):
                which = "current"
            elif value == legacy_sentinel_id(ns):
                which = which or "legacy"
        which = which or self._sentinel_marks.get(record.get("digest", ""))
        if which is not None:
            self._sentinel_ids.add(server_id)
        return which

    def _written_for(self, server_id: str, record: Mapping[str, str]) -> str | None:
        """By benchd's id, as the store's id or in the fixture-id column; never by content."""
        for value in (server_id, record.get("fid")):
            if value is not None and self._owned.is_owned(value):
                return self._owned.fixture_id(value) or value
        return None

    def _legacy_for(self, server_id: str, record: Mapping[str, str]) -> str | None:
        for value in (server_id, record.get("fid")):
            if value is not None and value in self._owned.fixture_ids:
                return value
        return None

    async def _write_sentinel(self) -> None:
        counts = await self._import_batch([sentinel_memory(self.config.namespace)])
        if counts[2]:
            raise TargetProtocolError(
                f"{self._what(self.config.seed)}: the store rejected benchd's sentinel record; "
                "check [probe.target.seed] against the store's API"
            )

    async def _import_batch(self, batch: Sequence[Any]) -> Counts:
        """Send one batch; the store's counts if the config names them, else all imported."""
        seed = self.config.seed
        assert seed is not None
        values = {"records": [self._record(m) for m in batch], "namespace": self.config.namespace}
        answer = await self._call(seed, values)
        if not any((seed.imported, seed.skipped, seed.errors)):
            return len(batch), 0, 0
        what = self._what(seed)
        return await decode(answer.body, what, partial(batch_counts, seed, len(batch), what))

    async def _delete_one(self, server_id: str) -> bool:
        delete = self.config.delete
        assert delete is not None
        values = {"id": server_id, "namespace": self.config.namespace}
        answer = await self._call(delete, values, allow=delete.gone)
        return answer.status not in delete.gone

    # -- export, verification ------------------------------------------------------

    async def export_namespace(self) -> dict[str, dict[str, str]]:
        """Every listed record by server id, with ``fid`` (fixture id) / ``digest`` if known.

        Bounded in pages (``export.max_pages``) and in records (the listing
        limit); each page is cut to ``page_size`` records.
        """
        export = self.config.export
        assert export is not None
        what = self._what(export)
        records: dict[str, dict[str, str]] = {}
        offset = 0
        for page in range(1, export.max_pages + 1):
            values = {
                "namespace": self.config.namespace,
                "offset": offset,
                "limit": export.page_size,
                "page": page,
            }
            answer = await self._call(export, values)
            listed, n, more = await decode(
                answer.body, what, partial(export_page, export, offset, what)
            )
            records.update(listed)
            offset += n
            if len(records) > self._listing_limit:
                raise TargetProtocolError(
                    f"{what}: the namespace lists more than {self._listing_limit} records; "
                    "benchd's namespace holds only its corpus: check export.has_more / "
                    "export.total, or the namespace"
                )
            if not more:
                return records
        raise TargetProtocolError(
            f"{what}: still more pages after export.max_pages = {export.max_pages}; "
            "check export.has_more / export.total, or raise max_pages"
        )

    async def _searchable_after(
        self, memories: Sequence[Mapping[str, Any]], missing: tuple[str, ...]
    ) -> float | None:
        """Poll for the last memory that verified (a lost one never shows); None if unset."""
        kept = [m for m in memories if str(m["id"]) not in missing]
        timeout_s = self.config.searchable_timeout_s
        if not kept or self.config.seed is None or timeout_s <= 0:
            return None
        limit = self.config.search.max_k or 100
        return await self._time_to_searchable(kept[-1], limit=limit, timeout_s=timeout_s)


def http_capabilities(config: HttpConfig) -> Capabilities:
    """What the configured templates allow: listing, writing and deleting each need theirs."""
    return Capabilities(
        lists=config.export is not None,
        writes=config.seed is not None,
        deletes=config.delete is not None,
        owned_keys=config.seed is not None,  # {memory} carries namespaced key/subject
        load_sender=True,
        scores=bool(config.search.scores),
        retries=True,
    )


def http_common(config: HttpConfig) -> CommonSettings:
    return CommonSettings(
        namespace=config.namespace,
        url=config.url,
        cleanup=config.cleanup,
        adopt_namespace=config.adopt_namespace,
        api_key_env=config.api_key_env,
        api_key_file=config.api_key_file,
    )


def http_costs(config: HttpConfig) -> StoreCosts:
    """Export pages and seed batches as configured (500 where a template is absent)."""
    return StoreCosts(
        page_size=config.export.page_size if config.export is not None else 500,
        batch_size=config.seed.batch_size if config.seed is not None else 500,
        lists=2 if config.verify else 1,
        searchable_polls=1 if config.searchable_timeout_s > 0 else 0,
        reads_per_min=120,  # today's default (the shipped example is a Zengram API);
        writes_per_min=60,  # a store without limits says [probe.budget] unlimited = true
    )
