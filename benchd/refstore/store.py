"""The reference store's behaviour, independent of HTTP: import, search, export, delete.

:class:`RefStore` owns the SQLite index, the embedder and the retriever
choice. Routes in :mod:`benchd.refstore.app` parse requests into plain
arguments and call it; everything here runs on the event loop thread, and
every state change that needs an ``await`` (embedding) happens *before* the
synchronous write, so a request never observes a half-applied change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchd.embed.models import Embedder, EmbedderSpecError, parse_embedder
from benchd.refstore.catalog import SearchFilter
from benchd.refstore.clock import StoreClock
from benchd.refstore.index import MemoryIndex
from benchd.refstore.profiles import DECAY_TYPES, IMPORT_CHUNK, Profile
from benchd.refstore.records import InvalidRecord, NewRecord, parse_record, parse_timestamp
from benchd.refstore.retrievers import (
    bm25_candidates,
    dense_candidates,
    rrf_fuse,
    tag_candidates,
)
from benchd.refstore.shapes import effective_score, export_shape, shape_result
from benchd.refstore.structured import StructuredQuery
from benchd.refstore.temporal import resolve_temporal
from benchd.refstore.text import retry_terms

__all__ = ["ExportQuery", "RefStore", "SearchQuery"]

_CANDIDATE_CAP = 50
_DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed ``GET /memory/search``."""

    q: str
    limit: int = 10
    client_id: str | None = None
    type: str | None = None
    format: str = "default"
    track_access: bool = True
    reference: datetime | None = None
    date_from: float | None = None
    date_to: float | None = None


@dataclass(frozen=True, slots=True)
class ExportQuery:
    """A parsed ``GET /export``."""

    client_id: str | None = None
    type: str | None = None
    limit: int = 1000
    offset: int = 0
    active_only: bool = True
    since_ts: float | None = None  # created at or after (the real server: created_after)


@dataclass(frozen=True, slots=True)
class _Hit:
    rid: int
    score: float
    sources: list[str]


class RefStore:
    """Records, their vectors, the active retrieval settings, the profile and the clock."""

    def __init__(
        self,
        index: MemoryIndex,
        embedder: Embedder,
        retriever: str,
        profile: Profile | None = None,
        clock: StoreClock | None = None,
    ) -> None:
        self.index = index
        self.embedder = embedder
        # Searches embed with this one when set: the state right after a model
        # swap that did not re-embed the stored records (their vectors stay).
        self.query_embedder: Embedder | None = None
        self.retriever = retriever
        self.profile = profile or Profile()
        self.clock = clock or StoreClock()
        # Imports and embedder switches each await the embedder before they
        # write; one at a time, so no vector from a replaced model lands
        # beside the new model's vectors.
        self._write_lock = anyio.Lock()
        # Ids ranked first by every search whose filter they pass (a drill: a
        # marker record that competes for result slots, as on the real server).
        self.pinned: tuple[str, ...] = ()

    @classmethod
    async def open(
        cls,
        db: str | None,
        embedder_spec: str,
        retriever: str,
        profile: Profile | None = None,
        clock: StoreClock | None = None,
    ) -> RefStore:
        """Open (or create) the database and embed whatever it already holds.

        Caps BLAS at one thread for the process: each search does one small
        mat-vec on the event loop, and BLAS worker threads competing for a
        few cores made it several times slower, never faster.
        """
        threadpool_limits(limits=1, user_api="blas")
        embedder = parse_embedder(embedder_spec)
        try:
            index = MemoryIndex(db, dims=1)
        except BaseException:
            await embedder.aclose()
            raise
        store = cls(index, embedder, retriever, profile, clock)
        try:
            rows = index.load_catalog(embedder.spec)
            if rows:
                vectors = await embedder.embed([text for _rid, text in rows])
                index.set_vectors([rid for rid, _text in rows], vectors, embedder.spec)
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        await self.embedder.aclose()
        if self.query_embedder is not None:
            await self.query_embedder.aclose()
        self.index.close()

    @property
    def query_model(self) -> str:
        """The spec searches embed with (the document embedder's unless switched alone)."""
        return (self.query_embedder or self.embedder).spec

    # -- writes ----------------------------------------------------------------

    async def import_records(self, data: list[Any]) -> dict[str, int]:
        """Validate, dedup and upsert records; reply with counts only, like the target API.

        A paced profile writes ``IMPORT_CHUNK`` records at a time and pauses
        between chunks, so a slow import is partly written while it runs and
        finishes even when the client has given up waiting.
        """
        pause = self.profile.import_pause_s
        if pause <= 0:
            async with self._write_lock:
                return await self._import(data)
        totals = {"imported": 0, "skipped": 0, "errors": 0}
        for start in range(0, len(data), IMPORT_CHUNK):
            if start:
                await anyio.sleep(pause)  # the real server's pacing, not synchronisation
            async with self._write_lock:
                counts = await self._import(data[start : start + IMPORT_CHUNK])
            for key, value in counts.items():
                totals[key] += value
        return totals

    async def _import(self, data: list[Any]) -> dict[str, int]:
        now = self.clock.iso_now()
        parsed: list[NewRecord | None] = []
        for raw in data:
            try:
                parsed.append(parse_record(raw, now))
            except InvalidRecord:
                parsed.append(None)
        valid = [record for record in parsed if record is not None]
        vectors = await self.embedder.embed([record.content for record in valid])
        imported = skipped = 0
        written: list[int] = []
        rows: list[int] = []
        self.index.begin()
        try:
            for position, record in enumerate(valid):
                if self.index.is_duplicate(record):
                    skipped += 1
                    continue
                rows.append(self.index.write(record))
                if self.profile.structured:
                    self.index.structured.upsert(record.payload, now)
                written.append(position)
                imported += 1
        finally:
            self.index.commit()
        chosen = vectors[written] if written else vectors[:0]
        self.index.set_vectors(rows, chosen, self.embedder.spec)
        return {"imported": imported, "skipped": skipped, "errors": len(parsed) - len(valid)}

    def delete(self, memory_id: str) -> dict[str, Any] | None:
        """Soft delete; None when the id is unknown."""
        now = self.clock.iso_now()
        outcome = self.index.deactivate(memory_id, now)
        if outcome is None:
            return None
        if outcome == "already_inactive":
            return {
                "id": memory_id,
                "already_inactive": True,
                "message": "Memory was already inactive",
            }
        return {"id": memory_id, "deleted": True, "deleted_at": now, "deleted_by": "admin"}

    # -- reads -----------------------------------------------------------------

    def get(self, memory_id: str, client_id: str | None) -> dict[str, Any] | None:
        """One record as ``GET /export`` lists it; None if unknown or in another namespace."""
        payload = self.index.get(memory_id)
        if payload is None or (client_id is not None and payload.get("client_id") != client_id):
            return None
        return export_shape(payload)

    def query(self, query: StructuredQuery) -> dict[str, Any]:
        """``GET /memory/query``: facts or statuses rows (the profile's structured tables)."""
        rows = self.index.structured.list(query)
        return {"type": query.table, "count": len(rows), "results": rows}

    def export(self, query: ExportQuery) -> dict[str, Any]:
        where = SearchFilter(client_id=query.client_id, type=query.type, since_ts=query.since_ts)
        page = self.index.export_by_ms_cursor if self.profile.ms_cursor else self.index.export
        memories, total = page(where, query.active_only, query.limit, query.offset)
        return {
            "memories": [export_shape(memory) for memory in memories],
            "total": total,
            "limit": query.limit,
            "offset": query.offset,
            "has_more": query.offset + len(memories) < total,
            "exported_at": self.clock.iso_now(),
            "filters": {
                "client_id": query.client_id,
                "type": query.type,
                "active_only": query.active_only,
            },
        }

    async def _candidates(self, q: str, where: SearchFilter, depth: int) -> list[_Hit]:
        name = self.retriever
        if name == "bm25":
            return [
                _Hit(r, s, ["keyword"]) for r, s in bm25_candidates(self.index, q, where, depth)
            ]
        if name == "tags":
            return [
                _Hit(r, s, ["tags"]) for r, s in tag_candidates(self.index.catalog, q, where, depth)
            ]
        vector = (await (self.query_embedder or self.embedder).embed_queries([q]))[0]
        dense = dense_candidates(self.index.catalog, vector, where, depth)
        if name == "dense":
            return [_Hit(r, s, ["vector"]) for r, s in dense]
        keyword = bm25_candidates(self.index, q, where, depth)
        sources: dict[int, list[str]] = {}
        for label, ranked in (("vector", dense), ("keyword", keyword)):
            for rid, _score in ranked:
                sources.setdefault(rid, []).append(label)
        return [_Hit(r, s, sources[r]) for r, s in rrf_fuse([dense, keyword], depth)]

    def _where(self, query: SearchQuery) -> tuple[SearchFilter, dict[str, Any] | None]:
        """The row filter; explicit ``date_from``/``date_to`` win over date words in ``q``."""
        window = resolve_temporal(query.q, query.reference or self.clock.now())
        since, until = query.date_from, query.date_to
        temporal = None
        if window is not None:
            since = window.since.timestamp() if since is None else since
            until = window.until.timestamp() if until is None else until
            temporal = {
                "pattern": window.pattern,
                "date_from": window.since.isoformat(),
                "date_to": window.until.isoformat(),
            }
        return SearchFilter(query.client_id, query.type, since, until), temporal

    async def _ranked(
        self, query: SearchQuery, where: SearchFilter
    ) -> list[tuple[_Hit, float, dict[str, Any]]]:
        depth = (
            query.limit
            if self.retriever in ("bm25", "tags")
            else max(query.limit, min(query.limit * 2, _CANDIDATE_CAP))
        )
        hits = await self._candidates(query.q, where, depth)
        payloads = self.index.fetch(hit.rid for hit in hits)
        scored = []
        for hit in hits:
            payload = payloads.get(hit.rid)
            if payload is not None:
                self._decay(payload)
                scored.append((hit, effective_score(hit.score, payload), payload))
        scored.sort(key=lambda item: -item[1])
        return (self._pinned(where, scored) + scored)[: query.limit]

    def _pinned(
        self, where: SearchFilter, scored: list[tuple[_Hit, float, dict[str, Any]]]
    ) -> list[tuple[_Hit, float, dict[str, Any]]]:
        """Pinned records that pass the filter, taken out of ``scored`` and put first."""
        first: list[tuple[_Hit, float, dict[str, Any]]] = []
        for memory_id in self.pinned:
            found = self.index.by_id(memory_id)
            if found is None:
                continue
            rid, payload = found
            if not payload["active"] or where.client_id not in (None, payload["client_id"]):
                continue
            scored[:] = [item for item in scored if item[0].rid != rid]
            first.append((_Hit(rid, 1.0, ["pinned"]), 1.0, payload))
        return first

    def _decay(self, payload: dict[str, Any]) -> None:
        """Age fact and status confidence on the store's clock, when the profile decays."""
        factor = self.profile.decay_per_day
        if factor is None or payload.get("type") not in DECAY_TYPES:
            return
        since = payload.get("last_accessed_at") or payload.get("created_at")
        try:
            then = parse_timestamp(str(since)).timestamp()
        except ValueError:
            return
        days = (self.clock.now().timestamp() - then) / _DAY_S
        payload["confidence"] = float(payload.get("confidence") or 1.0) * factor**days

    async def search(self, query: SearchQuery) -> dict[str, Any]:
        """Rank, boost, shape; bump access counts unless the caller opted out."""
        where, temporal = self._where(query)
        ranked = await self._ranked(query, where)
        if not ranked:
            retried = await self._retry(query, where)
            if retried is not None:
                return retried
        if query.track_access and ranked:
            self.index.bump_access([hit.rid for hit, _e, _p in ranked], self.clock.iso_now())
        results = [
            shape_result(query.format, hit.score, eff, payload, hit.sources)
            for hit, eff, payload in ranked
        ]
        response: dict[str, Any] = {"query": query.q, "count": len(results), "results": results}
        if query.format == "full":
            response["retrieval"] = {"retriever": self.retriever, "model": self.embedder.spec}
            if temporal is not None:
                response["retrieval"]["temporal"] = temporal
        return response

    async def _retry(self, query: SearchQuery, where: SearchFilter) -> dict[str, Any] | None:
        """Zero hits: retry with the query's topic words under the *same* filter.

        As the real server does: the date filter (and tenant and type) stay,
        so a date-word query over records outside its window still finds
        nothing (None: answer the empty result). The retry's results are full
        payloads even when ``format=index`` was asked for, flagged ``retry: true``.
        """
        broader = retry_terms(query.q)
        if len(broader) <= 3:
            return None
        retry_query = SearchQuery(q=broader, limit=query.limit, format="default")
        ranked = await self._ranked(retry_query, where)
        if not ranked:
            return None
        results = [shape_result("default", h.score, e, p, h.sources) for h, e, p in ranked]
        return {
            "query": query.q,
            "expanded_query": broader,
            "count": len(results),
            "results": results,
            "retry": True,
        }

    # -- settings ----------------------------------------------------------------

    async def switch_embedder(self, spec: str) -> int:
        """Re-embed every stored record with a new embedder, for searches too; return how many."""
        embedder = parse_embedder(spec)
        async with self._write_lock:
            count = await self._switch(embedder)
            query, self.query_embedder = self.query_embedder, None
        if query is not None:
            await query.aclose()
        return count

    async def switch_query_embedder(self, spec: str) -> None:
        """Embed searches with another model and keep every stored vector as it is.

        The new model must give vectors of the stored ones' size: a swap of
        the provider's model whose writes have not been re-embedded yet.
        """
        embedder = parse_embedder(spec)
        try:
            dims = (await embedder.embed_queries(["dimension check"])).shape[1]
        except BaseException:
            await embedder.aclose()
            raise
        stored = self.index.catalog.dims
        if self.index.count_active() and dims != stored:
            await embedder.aclose()
            raise EmbedderSpecError(
                f"query embedder {spec} gives {dims}-d vectors but the stored ones are "
                f"{stored}-d ({self.embedder.spec}); switch 'embedder' to re-embed everything"
            )
        old, self.query_embedder = self.query_embedder, embedder
        if old is not None:
            await old.aclose()

    async def _switch(self, embedder: Embedder) -> int:
        rows = self.index.texts()
        try:
            vectors = await embedder.embed([text for _rid, text in rows])
        except BaseException:
            await embedder.aclose()
            raise
        if not rows:
            vectors = np.zeros((0, self.index.catalog.dims), dtype=np.float32)
        old, self.embedder = self.embedder, embedder
        self.index.set_vectors([rid for rid, _text in rows], vectors, embedder.spec)
        await old.aclose()
        return len(rows)

    def health(self) -> dict[str, Any]:
        if not self.profile.health_model:
            return {"status": "ok", "service": "zengram", "timestamp": self.clock.iso_now()}
        return {
            "status": "ok",
            "service": "benchd-refstore",
            "model": self.embedder.spec,
            "query_model": self.query_model,
            "retriever": self.retriever,
            "memories": self.index.count_active(),
            "timestamp": self.clock.iso_now(),
        }
