"""The ``zengram`` target: a Zengram-style memory API over HTTP.

Every trap of the real API (see DESIGN §2) is handled here and nowhere else:
the reserved ``client_id`` on every write and search, ``read_only=true`` so
probing does not bump ``access_count``, ``format=index`` with either result
shape accepted, imports in chunks of at most 500, 429 honoured with
``Retry-After``, 401 never retried, verification through paged ``/export``,
and deletes restricted to ids benchd seeded in its namespace, which it marks
with a sentinel record on first seed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
import httpx

from benchd.errors import OwnershipError, TargetProtocolError
from benchd.result import SeedReport, TargetInfo
from benchd.schema import check
from benchd.secrets import Secret
from benchd.targets.base import Progress, SearchQuery
from benchd.targets.http_util import (
    DEFAULT_MAX_RESPONSE_BYTES,
    decode_json,
    http_url_problem,
    open_clients,
    positive_problem,
    raise_for_status,
    run_bounded,
)

__all__ = ["KIND", "ZengramConfig", "ZengramTarget", "sentinel_id"]

KIND = "zengram"
IMPORT_CAP = 500
SEARCH_CAP = 100
EXPORT_PAGE = 500


@dataclass(frozen=True, slots=True)
class ZengramConfig:
    """``[probe.target]`` keys for ``kind = "zengram"``."""

    url: str = field(metadata=check(http_url_problem))
    api_key_env: str | None = None
    api_key_file: str | None = None
    namespace: str = field(
        default="benchd-eval",
        metadata=check(
            lambda v: (
                None
                if v and v != "global"
                else "must be a dedicated client_id, never empty or 'global'"
            )
        ),
    )
    cleanup: Literal["before", "after", "never"] = "before"
    model: str = ""  # label for the store's embedding model when /health has none
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
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
    keep_ids: bool = True  # false: the store assigns ids; map them back by content
    adopt_namespace: bool = False
    headers: dict[str, str] = field(default_factory=dict)


def sentinel_id(namespace: str) -> str:
    return f"benchd-sentinel-{namespace}"


def _content_of(record: Mapping[str, Any]) -> str:
    return str(record.get("content") or record.get("text") or "")


def _content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ZengramTarget:
    """A :class:`~benchd.targets.base.Target` for Zengram-compatible stores."""

    kind = KIND

    def __init__(self, config: ZengramConfig, secret: Secret | None) -> None:
        self.config = config
        auth = {} if secret is None else {"x-api-key": secret.reveal()}
        self._base, self._client, self._http = open_clients(self.config, auth)
        self._server_ids: dict[str, str] = {}  # fixture id -> server id
        self._fixture_ids: dict[str, str] = {}  # server id -> fixture id

    # -- protocol ---------------------------------------------------------------

    async def info(self) -> TargetInfo:
        """``GET /health`` (no key needed); the model label comes from it or the config."""
        response = await self._http.request("GET", "/health")
        body = decode_json(response, f"GET {self._base}/health")
        model = self.config.model
        version = ""
        if isinstance(body, dict):
            model = model or str(body.get("model") or body.get("embedding_model") or "")
            version = str(body.get("version") or "")
        return TargetInfo(kind=KIND, endpoint=self._base, model=model, version=version)

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        started = time.monotonic()
        retries_before = self._http.retries
        existing = await self.export_namespace()
        adopted = self._check_ownership(existing, memories)
        if sentinel_id(self.config.namespace) not in existing:
            await self._write_sentinel()
        if self.config.cleanup == "before":
            await self._delete_seeded(existing, memories)
        records = [self._prepare(m) for m in memories]
        imported, skipped, errors = await self._import_all(records, progress)
        verified, missing = len(records), tuple[str, ...]()
        if self.config.verify or not self.config.keep_ids:
            verified, missing = await self._verify(memories)
        searchable = await self._time_to_searchable(memories) if memories else 0.0
        return SeedReport(
            requested=len(records),
            imported=imported,
            skipped=skipped,
            errors=errors,
            verified=verified,
            missing=missing,
            retries=self._http.retries - retries_before,
            duration_s=time.monotonic() - started,
            searchable_after_s=searchable,
            adopted=adopted,
        )

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        request = self.build_search_request(query)
        what = f"GET {self._base}/memory/search"
        response = await self._http.request("GET", "/memory/search", params=request.url.params)
        return self.parse_search_response(
            response.status_code, response.headers, response.content, what=what
        )

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Soft-delete these fixture ids (only ever ids benchd seeded) in the namespace."""
        targets = [self._server_ids.get(i, i) for i in ids]
        deleted = 0

        async def one(server_id: str) -> None:
            nonlocal deleted
            response = await self._http.request_allowing(
                "DELETE", f"/memory/{server_id}", allow=(404,)
            )
            if response.status_code != 404:
                deleted += 1

        await run_bounded(targets, one, limit=self.config.seed_concurrency)
        return deleted

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- sans-I/O search halves, used by the load engine -----------------------

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        params: dict[str, str | int] = {
            "q": query.q,
            "limit": min(query.limit, SEARCH_CAP),
            "client_id": self.config.namespace,
            "read_only": "true",
            "track_access": "false",
            "format": "index",
        }
        if query.reference_date:
            params["reference_date"] = query.reference_date
        return self._client.build_request("GET", "/memory/search", params=params)

    def parse_search_response(
        self, status: int, headers: Mapping[str, str], body: bytes, *, what: str = "search"
    ) -> tuple[str, ...]:
        if status >= 300:
            # Only Retry-After matters here; a header that is not ASCII must not crash the parse.
            retry = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
            kept = {} if retry is None else {b"retry-after": retry.encode("utf-8", "replace")}
            raise_for_status(httpx.Response(status, headers=kept, content=body), what)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise TargetProtocolError(f"{what}: answer is not JSON ({len(body)} bytes)") from None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise TargetProtocolError(f"{what}: answer has no 'results' array")
        return self._ranked_ids(results, what)

    def _ranked_ids(self, results: list[Any], what: str) -> tuple[str, ...]:
        sentinel = sentinel_id(self.config.namespace)
        ranked: list[str] = []
        for item in results:
            # index format and the zero-hit retry's full payloads both carry "id"
            raw = item.get("id") if isinstance(item, dict) else None
            if raw is None:
                raise TargetProtocolError(f"{what}: a result has no 'id'")
            server_id = str(raw)
            if server_id != sentinel:
                ranked.append(self._fixture_ids.get(server_id, server_id))
        return tuple(ranked)

    # -- seeding ------------------------------------------------------------------

    def _prepare(self, memory: Mapping[str, Any]) -> dict[str, Any]:
        record = dict(memory)
        record["client_id"] = self.config.namespace  # never the fixture's own
        record.pop("active", None)  # never seed inactive records
        record.setdefault("created_at", datetime.now(UTC).isoformat())
        if not self.config.keep_ids:
            record.pop("id", None)
        return record

    def _sentinel_record(self) -> dict[str, Any]:
        ns = self.config.namespace
        return {
            "id": sentinel_id(ns),
            "type": "fact",
            "key": "benchd-sentinel",
            "importance": "low",
            "client_id": ns,
            "content": f"benchd sentinel: client_id {ns} is reserved for benchd's probe corpus",
        }

    async def _delete_seeded(
        self, existing: Mapping[str, Mapping[str, Any]], memories: Sequence[Mapping[str, Any]]
    ) -> None:
        """Soft-delete our earlier copies so the import re-embeds them (explicit re-seed)."""
        hashes = {_content_hash(_content_of(m)) for m in memories}
        ids = {str(m["id"]) for m in memories}
        ours = [
            sid
            for sid, rec in existing.items()
            if sid in ids
            or (not self.config.keep_ids and _content_hash(_content_of(rec)) in hashes)
        ]
        self._server_ids.clear()
        self._fixture_ids.clear()
        await self.cleanup(ours)

    async def _write_sentinel(self) -> None:
        imported, skipped, _ = await self._import([self._sentinel_record()])
        if imported + skipped == 0:
            raise TargetProtocolError(
                f"POST {self._base}/export/import: the store rejected benchd's sentinel record; "
                "is this a Zengram-compatible API?"
            )

    async def _import_all(
        self, records: list[dict[str, Any]], progress: Progress | None
    ) -> tuple[int, int, int]:
        size = self.config.seed_batch
        chunks = [records[i : i + size] for i in range(0, len(records), size)]
        totals = [0, 0, 0]
        done = 0

        async def one(chunk: list[dict[str, Any]]) -> None:
            nonlocal done
            counts = await self._import(chunk)
            for i, n in enumerate(counts):
                totals[i] += n
            done += len(chunk)
            if progress is not None:
                progress(done, len(records))

        await run_bounded(chunks, one, limit=self.config.seed_concurrency)
        return totals[0], totals[1], totals[2]

    async def _import(self, chunk: list[dict[str, Any]]) -> tuple[int, int, int]:
        what = f"POST {self._base}/export/import"
        response = await self._http.request(
            "POST", "/export/import", json={"data": chunk, "operator_approved": True}
        )
        body = decode_json(response, what)
        try:
            return int(body["imported"]), int(body["skipped"]), int(body["errors"])
        except (KeyError, TypeError, ValueError):
            raise TargetProtocolError(
                f"{what}: answer lacks integer imported/skipped/errors counts"
            ) from None

    async def export_namespace(self) -> dict[str, dict[str, Any]]:
        """Every active record in the namespace, by server id (paged ``GET /export``)."""
        what = f"GET {self._base}/export"
        records: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        offset = 0
        while True:
            params = {"client_id": self.config.namespace, "limit": EXPORT_PAGE, "offset": offset}
            body = decode_json(await self._http.request("GET", "/export", params=params), what)
            page = body.get("memories") if isinstance(body, dict) else None
            if not isinstance(page, list):
                raise TargetProtocolError(f"{what}: answer has no 'memories' array")
            ids = [str(r["id"]) for r in page if isinstance(r, dict) and "id" in r]
            for rec in page:
                if isinstance(rec, dict) and "id" in rec and rec.get("active", True) is not False:
                    records[str(rec["id"])] = rec
            offset += len(page)
            if not page or not body.get("has_more"):
                return records
            if seen.issuperset(ids):  # a store that pages forever must not hang the cycle
                raise TargetProtocolError(
                    f"{what}: has_more is true but the page at offset {offset - len(page)} "
                    "holds no record not seen before; the store's paging is broken"
                )
            seen.update(ids)

    def _check_ownership(
        self, existing: Mapping[str, Mapping[str, Any]], memories: Sequence[Mapping[str, Any]]
    ) -> bool:
        ns = self.config.namespace
        if not existing or sentinel_id(ns) in existing:
            return False
        if self.config.adopt_namespace:
            return True
        raise OwnershipError(
            f"namespace (client_id) {ns!r} at {self._base} already holds {len(existing)} "
            "record(s) benchd did not write (no benchd sentinel); choose an unused namespace, "
            "or set adopt_namespace = true (benchd once/run --adopt-namespace) if it is yours"
        )

    async def _verify(self, memories: Sequence[Mapping[str, Any]]) -> tuple[int, tuple[str, ...]]:
        """Check every fixture id is present; build the id map by content if needed."""
        existing = await self.export_namespace()
        by_hash = {_content_hash(_content_of(r)): sid for sid, r in existing.items()}
        self._server_ids.clear()
        self._fixture_ids.clear()
        missing: list[str] = []
        for memory in memories:
            fid = str(memory["id"])
            sid = fid if fid in existing else by_hash.get(_content_hash(_content_of(memory)))
            if sid is None:
                missing.append(fid)
                continue
            if sid != fid:
                self._server_ids[fid] = sid
                self._fixture_ids[sid] = fid
        return len(memories) - len(missing), tuple(missing)

    async def _time_to_searchable(self, memories: Sequence[Mapping[str, Any]]) -> float | None:
        """Seconds until the last seeded memory is found by its own text (bounded polling)."""
        probe = memories[-1]
        query = SearchQuery(q=_content_of(probe)[:200], limit=SEARCH_CAP)
        started = time.monotonic()
        delay = 0.02
        with anyio.move_on_after(self.config.searchable_timeout_s):
            while True:
                if str(probe["id"]) in await self.search(query):
                    return time.monotonic() - started
                await anyio.sleep(delay)  # polling an external system, not synchronising
                delay = min(delay * 2, 0.5)
        return None
