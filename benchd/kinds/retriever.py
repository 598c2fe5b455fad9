"""The ``python`` kind's store: a retriever with batch hooks, under the namespace flow.

A retriever that offers these hooks (plain functions, run in worker threads,
at most ``concurrency`` at a time) gets every promise benchd keeps for a
namespace from :class:`~benchd.store.flow.NamespaceFlow`::

    write(batch: list[dict]) -> None | int | (written, skipped, errors)
        # upsert each record by its "id"; keep "metadata" as given
    list(cursor: str | None) -> list[dict] | (list[dict], next_cursor)
        # the records of its namespace as written (id, metadata), a page at a time
    delete(id: str) -> bool | None                 # False: it was already gone
    search(q: str, k: int) -> list[str]             # ids, best first
    search_scores(q: str, k: int) -> list[(id, score)]   # optional: with scores
    close() -> None                                 # optional
    model: str                                      # optional label

The records it is given carry benchd's own ids (``benchd:<namespace>:<fixture
id>``) and benchd's mark in ``metadata["benchd_owner"]``; the sentinel among
them carries the lease. Its factory is passed the probe's ``namespace`` when
it takes one, so it can keep the namespace apart in a shared backing store
(a collection, a table, a prefix). Whatever ``list`` shows that is not under
benchd's ids is another tenant's, and benchd never writes over or deletes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from benchd.errors import TargetProtocolError
from benchd.http.answers import finite_number
from benchd.http.messages import raised
from benchd.result import TargetInfo
from benchd.store.lease import holder_of
from benchd.store.listing import fingerprint
from benchd.store.owned import OWNER_KEY, owned_id, owned_prefix
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
from benchd.store.target import SearchQuery

__all__ = ["HOOKS", "RetrieverPlan", "RetrieverStore", "has_hooks"]

T = TypeVar("T")

HOOKS = ("write", "list", "search")
"""What a retriever needs for the namespace flow (``delete`` adds cleanup and purge)."""


def has_hooks(retriever: Any) -> bool:
    """Whether ``retriever`` offers the batch hooks (else it is an ``index``-only one)."""
    return all(callable(getattr(retriever, name, None)) for name in HOOKS)


@dataclass(frozen=True, slots=True)
class RetrieverPlan:
    """What the store reads of the ``python`` kind's settings, and the kind's name."""

    kind: str
    factory: str
    model: str
    plan: SeedPlan
    concurrency: int


class RetrieverStore(StoreDefaults):
    """A :class:`~benchd.store.protocol.Store` over a retriever's batch hooks."""

    def __init__(self, retriever: Any, settings: RetrieverPlan) -> None:
        self.retriever = retriever
        self.settings = settings
        self._limiter = anyio.CapacityLimiter(settings.concurrency)
        self._deletes = callable(getattr(retriever, "delete", None))
        self._scores = callable(getattr(retriever, "search_scores", None))

    async def _run(self, method: str, *args: Any) -> Any:
        fn: Callable[..., Any] = getattr(self.retriever, method)

        def call() -> Any:
            try:
                return fn(*args)
            except Exception as exc:  # user code: record it in the cycle, do not crash
                raise self._error(f"{method}() raised {raised(exc)}") from None

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    def _error(self, what: str) -> TargetProtocolError:
        return TargetProtocolError(f"python target {self.settings.factory}: {what}")

    @property
    def plan(self) -> SeedPlan:
        return self.settings.plan

    @property
    def capabilities(self) -> Capabilities:
        """Listing, writing and the lease by contract; delete and scores where offered."""
        return Capabilities(
            lists=True, writes=True, deletes=self._deletes, lease=True, scores=self._scores
        )

    async def info(self) -> TargetInfo:
        model = self.settings.model or str(getattr(self.retriever, "model", "") or "")
        endpoint = f"python:{self.settings.factory}"
        return TargetInfo(kind=self.settings.kind, endpoint=endpoint, model=model)

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        answer = await self._run("list", cursor)
        items, following = answer if isinstance(answer, tuple) else (answer, None)
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise self._error(f"list() returned {type(items).__name__}, expected a list")
        records = [self._listed(item, compare) for item in items]
        return Page(records, None if following is None else str(following))

    def _listed(self, item: Any, compare: bool) -> Listed:
        """One listed record (a dict with its id and metadata, or a bare id), fingerprinted
        for ``unchanged`` where ``compare``."""
        record = item if isinstance(item, dict) else {"id": item}
        rid = record.get("id")
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            raise self._error(f"list() returned a record without a string id: {rid!r}")
        ns = self.plan.namespace
        metadata = record.get("metadata")
        mark = metadata.get(OWNER_KEY) if isinstance(metadata, dict) else None
        written_as = None
        if isinstance(mark, dict) and mark.get("namespace") == ns:
            fid = mark.get("fixture_id")
            written_as = owned_id(ns, str(fid)) if fid is not None else owned_prefix(ns)
        kept = fingerprint(record) if compare else None
        return Listed(str(rid), written_as, lease=holder_of(mark), kept=kept)

    async def write(self, batch: Sequence[Record]) -> Counts:
        records = [_wire(r) for r in batch]
        answer = await self._run("write", records)
        if answer is None:
            return len(records), 0, 0
        if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer <= len(batch):
            return answer, 0, len(batch) - answer
        if (
            isinstance(answer, tuple)
            and len(answer) == 3
            and all(isinstance(n, int) and n >= 0 for n in answer)
            and sum(answer) <= len(batch)
        ):
            return answer[0], answer[1], answer[2]
        raise self._error(f"write() returned {answer!r}; expected None, a count or 3 counts")

    async def write_sentinel(self, record: Record) -> None:
        written, skipped, _ = await self.write([record])
        if written + skipped == 0:
            raise self._error("write() rejected benchd's sentinel record")

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool:
        """In-process: no retry waits, so nothing to re-check."""
        return await self._run("delete", store_id) is not False

    def unchanged(self, listed: Listed, record: Record) -> bool:
        """Listed as written (text and mark): writing it again would change nothing."""
        return listed.kept is not None and listed.kept == fingerprint(_wire(record))

    async def search(self, query: SearchQuery) -> Hits:
        k = query.limit  # the flow's room for the sentinel included: dropped, never scored
        if self._scores:
            pairs = await self._run("search_scores", query.q, k)
            ids = _ids([p[0] if isinstance(p, tuple | list) and p else p for p in pairs], k, self)
            scores = [_score(p) for p in list(pairs)[: len(ids)]]
            return Hits(ids, scores)
        return Hits(_ids(await self._run("search", query.q, k), k, self))

    async def aclose(self) -> None:
        if callable(getattr(self.retriever, "close", None)):
            await self._run("close")


def _wire(record: Record) -> dict[str, Any]:
    """What the retriever is given: the memory under benchd's id, with benchd's mark."""
    metadata = record.memory.get("metadata")
    return {
        **record.memory,
        "id": record.store_id,
        "metadata": {**(metadata if isinstance(metadata, dict) else {}), OWNER_KEY: record.mark},
    }


def _score(pair: Any) -> float | None:
    """The score of an ``(id, score)`` pair where it is a finite number."""
    value = pair[1] if isinstance(pair, tuple | list) and len(pair) > 1 else None
    return finite_number(value)


def _ids(ranked: Any, limit: int, store: RetrieverStore) -> list[str]:
    """The first ``limit`` ids (a longer answer is cut before it is checked)."""
    if isinstance(ranked, str | bytes) or not isinstance(ranked, Sequence):
        raise store._error(f"search() returned {type(ranked).__name__}, expected a list of ids")
    out = []
    for item in list(ranked)[: max(0, limit)]:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise store._error(
                f"search() returned an id of type {type(item).__name__}; "
                "ids are strings (or integers)"
            )
        out.append(str(item))
    return out
