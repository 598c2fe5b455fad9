"""The ``http`` target: any HTTP/JSON store, described by request templates.

Config (:mod:`benchd.targets.http_config`) says how a search, a seed batch,
an export page and a delete look; this adapter does the rest the way the
``zengram`` adapter does: seeding in bounded concurrent batches, paged
export to verify the seed, prove ownership (a sentinel record written on the
first seed) and map store-assigned ids back to fixture ids by content,
deletes restricted to what benchd seeded, and errors that name the endpoint.
The search halves are sans-I/O (:class:`~benchd.targets.base.HttpSearch`),
so the load engine sends searches over its own pool.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from benchd.errors import OwnershipError, TargetProtocolError
from benchd.result import SeedReport, TargetInfo
from benchd.secrets import Secret
from benchd.targets.base import Progress, SearchQuery
from benchd.targets.http_config import Endpoint, HttpConfig
from benchd.targets.http_records import (
    Listing,
    column_at,
    content_of,
    count_at,
    digest,
    ids_at,
    map_fixture_ids,
    more_pages,
    sentinel_id,
    sentinel_memory,
)
from benchd.targets.http_util import (
    decode_json,
    open_clients,
    raise_for_status,
    run_bounded,
)
from benchd.targets.templating import MISSING, as_text, lookup, parse_path, render, render_text

__all__ = ["KIND", "HttpConfig", "HttpTarget"]

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


class HttpTarget:
    """A :class:`~benchd.targets.base.Target` for any store the templates describe."""

    kind = KIND

    def __init__(self, config: HttpConfig, secret: Secret | None) -> None:
        self.config = config
        auth = {} if secret is None else {config.auth_header: config.auth_prefix + secret.reveal()}
        self._base, self._client, self._http = open_clients(config, auth)
        self._search_what = f"{config.search.method} {self._base}{config.search.path}"
        self._server_ids: dict[str, str] = {}  # fixture id -> server id
        self._fixture_ids: dict[str, str] = {}  # server id -> fixture id
        self._sentinels = {sentinel_id(config.namespace)}  # server ids to hide from rankings

    def _what(self, template: Endpoint | None) -> str:
        assert template is not None
        return f"{template.method} {self._base}{template.path}"

    async def _call(
        self, template: Endpoint, values: Mapping[str, Any], *, allow: tuple[int, ...] = ()
    ) -> httpx.Response:
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

    async def info(self) -> TargetInfo:
        """Read model/version from the health endpoint if configured, else the config label."""
        model, version = self.config.model, ""
        health = self.config.health
        if health is not None:
            response = await self._call(health, {"namespace": self.config.namespace})
            data = decode_json(response, self._what(health))
            if health.model and not model:
                model = as_text(lookup(parse_path(health.model), data))
            if health.version:
                version = as_text(lookup(parse_path(health.version), data))
        return TargetInfo(kind=KIND, endpoint=self._base, model=model, version=version)

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        started = time.monotonic()
        retries_before = self._http.retries
        owned = self.config.export is not None and self.config.seed is not None
        existing = await self.export_namespace() if self.config.export is not None else {}
        adopted = self._check_ownership(existing) if owned else False
        if owned and not self._has_sentinel(existing):
            await self._write_sentinel()
        if self.config.cleanup == "before":
            await self._delete_seeded(existing, memories)
        counts = (0, 0, 0)
        if self.config.seed is not None:
            counts = await self._seed_all(memories, progress)
        verified, missing = len(memories), tuple[str, ...]()
        if self.config.export is not None and self.config.verify:
            verified, missing = await self._verify(memories)
        kept = [m for m in memories if str(m["id"]) not in missing]  # a lost one never shows
        searchable = await self._time_to_searchable(kept)
        return SeedReport(
            requested=len(memories),
            imported=counts[0],
            skipped=counts[1],
            errors=counts[2],
            verified=verified,
            missing=missing,
            retries=self._http.retries - retries_before,
            duration_s=time.monotonic() - started,
            searchable_after_s=searchable,
            adopted=adopted,
        )

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        response = await self._call(self.config.search, self._search_values(query))
        ranked = self.parse_search_response(
            response.status_code, response.headers, response.content, what=self._search_what
        )
        return ranked[: query.limit]

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete these fixture ids (mapped to server ids); only ids benchd seeded."""
        delete = self.config.delete
        if delete is None:
            return 0
        targets = [self._server_ids.get(i, i) for i in ids]
        deleted = 0

        async def one(server_id: str) -> None:
            nonlocal deleted
            values = {"id": server_id, "namespace": self.config.namespace}
            response = await self._call(delete, values, allow=delete.gone)
            if response.status_code not in delete.gone:
                deleted += 1

        await run_bounded(targets, one, limit=delete.concurrency)
        return deleted

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- sans-I/O search halves, used by the load engine -----------------------

    def _search_values(self, query: SearchQuery) -> dict[str, Any]:
        max_k = self.config.search.max_k
        return {
            "q": query.q,
            "k": min(query.limit, max_k) if max_k else query.limit,
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

    def parse_search_response(
        self, status: int, headers: Mapping[str, str], body: bytes, *, what: str = ""
    ) -> tuple[str, ...]:
        what = what or self._search_what
        if status >= 300:
            ascii_headers = {k: v for k, v in headers.items() if k.isascii() and v.isascii()}
            raise_for_status(httpx.Response(status, headers=ascii_headers, content=body), what)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise TargetProtocolError(f"{what}: answer is not JSON ({len(body)} bytes)") from None
        ids = ids_at(self.config.search.ids, data, what)
        return tuple(self._fixture_ids.get(i, i) for i in ids if i not in self._sentinels)

    # -- seeding ------------------------------------------------------------------

    def _record(self, memory: Mapping[str, Any]) -> Any:
        seed = self.config.seed
        assert seed is not None
        values = {
            "id": str(memory.get("id", "")),
            "content": content_of(memory),
            "namespace": self.config.namespace,
            "memory": dict(memory),
        }
        record = render(seed.record, values)
        if seed.fields:
            if not isinstance(record, dict):
                raise TargetProtocolError(
                    f"{self._what(seed)}: seed.fields needs seed.record to render an object"
                )
            record.update(render(seed.fields, values))
        return record

    def _has_sentinel(self, existing: Listing) -> bool:
        sentinel = sentinel_memory(self.config.namespace)
        mark = digest(content_of(sentinel))
        for sid, rec in existing.items():
            if sentinel["id"] in (sid, rec.get("fid")) or rec.get("digest") == mark:
                self._sentinels.add(sid)
                return True
        return False

    async def _write_sentinel(self) -> None:
        counts = await self._seed_batch([sentinel_memory(self.config.namespace)])
        if counts[2]:
            raise TargetProtocolError(
                f"{self._what(self.config.seed)}: the store rejected benchd's sentinel record; "
                "check [probe.target.seed] against the store's API"
            )

    async def _seed_all(
        self, memories: Sequence[Mapping[str, Any]], progress: Progress | None
    ) -> tuple[int, int, int]:
        seed = self.config.seed
        assert seed is not None
        size = seed.batch_size
        batches = [memories[i : i + size] for i in range(0, len(memories), size)]
        totals = [0, 0, 0]
        done = 0

        async def one(batch: Sequence[Mapping[str, Any]]) -> None:
            nonlocal done
            for i, n in enumerate(await self._seed_batch(batch)):
                totals[i] += n
            done += len(batch)
            if progress is not None:
                progress(done, len(memories))

        await run_bounded(batches, one, limit=seed.concurrency)
        return totals[0], totals[1], totals[2]

    async def _seed_batch(self, batch: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
        """Send one batch; the store's counts if the config names them, else all imported."""
        seed = self.config.seed
        assert seed is not None
        values = {"records": [self._record(m) for m in batch], "namespace": self.config.namespace}
        response = await self._call(seed, values)
        paths = (seed.imported, seed.skipped, seed.errors)
        if not any(paths):
            return len(batch), 0, 0
        data = decode_json(response, self._what(seed))
        counts = [0, 0, 0]
        for i, path in enumerate(paths):
            if path:
                counts[i] = count_at(path, data, self._what(seed))
        if not seed.imported:
            counts[0] = len(batch) - counts[1] - counts[2]
        return counts[0], counts[1], counts[2]

    async def _delete_seeded(
        self, existing: Listing, memories: Sequence[Mapping[str, Any]]
    ) -> None:
        """Delete earlier copies of the corpus (same id, or same content) so it is re-written."""
        ids = {str(m["id"]) for m in memories}
        digests = {digest(content_of(m)) for m in memories}
        ours = [
            sid
            for sid, rec in existing.items()
            if sid not in self._sentinels
            and (sid in ids or rec.get("fid") in ids or rec.get("digest") in digests)
        ]
        self._server_ids.clear()
        self._fixture_ids.clear()
        await self.cleanup(ours)

    # -- export, ownership, verification ----------------------------------------

    async def export_namespace(self) -> dict[str, dict[str, str]]:
        """Every listed record by server id, with ``fid`` (fixture id) / ``digest`` if known."""
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
            data = decode_json(await self._call(export, values), what)
            ids = ids_at(export.ids, data, what)
            fids = column_at(export.fixture_ids, data, len(ids), what)
            texts = column_at(export.contents, data, len(ids), what)
            for sid, fid, text in zip(ids, fids, texts, strict=True):
                rec = records[sid] = {}
                if fid is not None:
                    rec["fid"] = fid
                if text is not None:
                    rec["digest"] = digest(text)
            offset += len(ids)
            if not export.paged or not more_pages(export, data, len(ids), offset, what):
                return records
        raise TargetProtocolError(
            f"{what}: still more pages after export.max_pages = {export.max_pages}; "
            "check export.has_more / export.total, or raise max_pages"
        )

    def _check_ownership(self, existing: Listing) -> bool:
        ns = self.config.namespace
        if not existing or self._has_sentinel(existing):
            return False
        if self.config.adopt_namespace:
            return True
        raise OwnershipError(
            f"namespace {ns!r} at {self._base} already holds {len(existing)} record(s) benchd "
            "did not write (no benchd sentinel); choose an unused namespace, or set "
            "adopt_namespace = true (benchd once/run --adopt-namespace) if it is yours"
        )

    async def _verify(self, memories: Sequence[Mapping[str, Any]]) -> tuple[int, tuple[str, ...]]:
        """Check every fixture id is listed; map store-assigned ids back (fixture id, content)."""
        existing = await self.export_namespace()
        self._has_sentinel(existing)  # learn a store-assigned sentinel id
        mapping, missing = map_fixture_ids(existing, memories, self._sentinels)
        self._server_ids = mapping
        self._fixture_ids = {sid: fid for fid, sid in mapping.items()}
        return len(memories) - len(missing), tuple(missing)

    async def _time_to_searchable(self, memories: Sequence[Mapping[str, Any]]) -> float | None:
        """Seconds until the last memory is found by its own text (bounded polling)."""
        if not memories or self.config.seed is None or self.config.searchable_timeout_s <= 0:
            return None
        probe = memories[-1]
        query = SearchQuery(q=content_of(probe)[:200], limit=self.config.search.max_k or 100)
        started = time.monotonic()
        delay = 0.02
        with anyio.move_on_after(self.config.searchable_timeout_s):
            while True:
                if str(probe["id"]) in await self.search(query):
                    return time.monotonic() - started
                await anyio.sleep(delay)  # polling an external system, not synchronising
                delay = min(delay * 2, 0.5)
        return None
