"""A store kind defined in tests: one module, one registry line, every guarantee from the flow.

``kind = "memory"`` keeps records in a process-wide :data:`TENANTS` table
shared by every namespace (ids global across namespaces, as the real
Zengram server keeps them): a write upserts by id and *moves* the record
into the writer's namespace, exactly the trap benchd's owned ids avoid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchd.config.kinds import CommonSettings, StoreCosts
from benchd.config.secrets import Secret
from benchd.kinds import TargetKind, register
from benchd.result import TargetInfo
from benchd.store.flow import NamespaceFlow, content_of
from benchd.store.lease import LeaseHolder, holder_of
from benchd.store.owned import OWNER_KEY
from benchd.store.protocol import (
    Capabilities,
    Counts,
    Hits,
    Listed,
    Page,
    Record,
    SeedPlan,
    StoreDefaults,
)
from benchd.store.target import SearchQuery, WriteRate

TENANTS: dict[str, dict[str, Any]] = {}
"""Every record of the shared backing store, by id (each with its ``namespace``)."""

CALLS: list[tuple[str, str]] = []
"""(operation, id) of every write and delete, in order."""


@dataclass(frozen=True, slots=True)
class MemorySettings:
    namespace: str = "benchd-eval"
    cleanup: str = "never"
    adopt_namespace: bool = False
    page: int = 3
    deletes: bool = True
    options: dict[str, Any] = field(default_factory=dict)


class MemoryStore(StoreDefaults):
    def __init__(self, settings: MemorySettings) -> None:
        self.settings = settings

    @property
    def plan(self) -> SeedPlan:
        s = self.settings
        return SeedPlan(
            namespace=s.namespace,
            cleanup=s.cleanup,  # type: ignore[arg-type]
            adopt_namespace=s.adopt_namespace,
            batch_size=2,
            concurrency=2,
            delete_concurrency=2,
            endpoint="memory:",
            searchable_timeout_s=5.0,
        )

    @property
    def capabilities(self) -> Capabilities:
        return memory_capabilities(self.settings)

    async def info(self) -> TargetInfo:
        return TargetInfo(kind="memory", endpoint="memory:")

    async def list_page(self, cursor: str | None, *, compare: bool = True) -> Page:
        mine = sorted(i for i, r in TENANTS.items() if r["namespace"] == self.settings.namespace)
        start = int(cursor or 0)
        page = mine[start : start + self.settings.page]
        more = start + len(page) < len(mine)
        return Page([self._listed(i) for i in page], str(start + len(page)) if more else None)

    def _listed(self, rid: str) -> Listed:
        mark = TENANTS[rid].get("metadata", {}).get(OWNER_KEY)
        return Listed(rid, lease=holder_of(mark))

    async def write(self, batch: Sequence[Record]) -> Counts:
        for record in batch:
            CALLS.append(("write", record.store_id))
            TENANTS[record.store_id] = {
                "id": record.store_id,
                "namespace": self.settings.namespace,  # an upsert moves the record here
                "content": content_of(record.memory),
                "metadata": {OWNER_KEY: dict(record.mark)},
            }
        return len(batch), 0, 0

    async def write_sentinel(self, record: Record) -> None:
        await self.write([record])

    async def delete(self, store_id: str, recheck: object = None) -> bool:
        CALLS.append(("delete", store_id))
        return TENANTS.pop(store_id, None) is not None

    async def search(self, query: SearchQuery) -> Hits:
        words = set(query.q.lower().split())
        mine = [r for r in TENANTS.values() if r["namespace"] == self.settings.namespace]
        scored = sorted(
            mine, key=lambda r: (-len(words & set(r["content"].lower().split())), r["id"])
        )
        return Hits([r["id"] for r in scored[: query.limit + 1]])

    async def aclose(self) -> None:
        return None


def memory_capabilities(settings: MemorySettings) -> Capabilities:
    return Capabilities(lists=True, writes=True, deletes=settings.deletes, lease=True)


def memory_common(settings: MemorySettings) -> CommonSettings:
    return CommonSettings(
        namespace=settings.namespace,
        cleanup=settings.cleanup,  # type: ignore[arg-type]
        adopt_namespace=settings.adopt_namespace,
    )


def build(
    settings: MemorySettings,
    secret: Secret | None,
    *,
    lease: LeaseHolder | None = None,
    write_rate: WriteRate | None = None,
) -> NamespaceFlow:
    return NamespaceFlow(MemoryStore(settings), lease=lease, write_rate=write_rate)


register(TargetKind("memory", MemorySettings, build, memory_capabilities, memory_common, lambda s: StoreCosts()))  # noqa: E501  the one registry line
