"""The ``mcp`` kind as a store of the seam: tool calls behind :class:`~benchd.targets.store.Store`.

Everything benchd promises about a namespace (owned ids, a seed verified by
listing, deletes only of listed records, the sentinel, purge) comes from the
shared flow (:class:`~benchd.targets.flow.NamespaceFlow`, which
:func:`mcp_target` builds over an :class:`McpStore`); this module only maps
the seam's operations onto the tool map
(:class:`~benchd.targets.mcp.tools.ToolStore`), and verifies each delete by
listing again (an MCP delete tool's "done" is no proof).

How benchd's records are kept apart (``namespace_by``): ``argument`` —
every tool takes ``{namespace}`` (``user_id``, ``namespace``, ...), so the
listing shows only benchd's namespace; ``server`` — the server holds only
benchd's records (its own memory file), so everything it lists is in
benchd's namespace. With neither, benchd writes nothing unless
``adopt_namespace`` says the operator accepts sharing the server (config
refuses it otherwise, saying why); its records are still told apart by
their owned ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchd.config.kinds import StoreCosts
from benchd.config.secrets import Secret
from benchd.errors import ConfigError, OwnershipError, TargetProtocolError
from benchd.logging import get_logger
from benchd.result import TargetInfo
from benchd.targets.base import ProbeTarget, SearchQuery
from benchd.targets.flow import NamespaceFlow
from benchd.targets.mcp.config import NO_NAMESPACE, McpConfig
from benchd.targets.store import (
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

__all__ = [
    "KIND",
    "McpMapError",
    "McpStore",
    "mcp_capabilities",
    "mcp_costs",
    "mcp_target",
]

KIND = "mcp"

MAX_LIST_PAGES = 1000
"""Listing pages read at most (a server whose pages never end is cut there)."""

log = get_logger("benchd.targets")


class McpMapError(TargetProtocolError):
    """The tool map names a tool or argument the server does not offer (``.problems``)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        more = len(self.problems) - 1
        tail = f" (and {more} more: benchd validate --check-store lists them)" if more else ""
        super().__init__(self.problems[0] + tail)


def mcp_capabilities(config: McpConfig) -> Capabilities:
    """What the tool map allows: listing, writing and deleting each need their tool."""
    tools = config.tools
    return Capabilities(
        lists=tools.list is not None,
        writes=tools.write is not None,
        deletes=tools.delete is not None,
        scores=tools.search.scores is not None,
        unranked=tools.search.returns == "set",
        retries=config.transport == "http",
    )



def mcp_costs(config: McpConfig) -> StoreCosts:
    """List pages and write batches as the tool map says (one page where it does not page)."""
    tools = config.tools
    return StoreCosts(
        page_size=tools.list.page_size if tools.list is not None else 500,
        batch_size=tools.write.batch_size if tools.write is not None else 500,
        lists=2 if config.verify else 1,
        searchable_polls=1 if config.searchable_timeout_s > 0 else 0,
    )


def mcp_target(config: McpConfig, secret: Secret | None) -> ProbeTarget:
    """The kind's probe target: the shared namespace flow over an :class:`McpStore`."""
    return NamespaceFlow(McpStore(config, secret))


class McpStore(StoreDefaults):
    """One probe's MCP server, as the seam's store (see the module docstring)."""

    def __init__(self, config: McpConfig, secret: Secret | None) -> None:
        # the SDK is imported here, not when the registry is: config loads without it
        try:
            from benchd.targets.mcp.connect import open_session
            from benchd.targets.mcp.tools import ToolStore
        except ImportError as exc:
            raise ConfigError(
                f"kind = 'mcp' needs the MCP SDK ({exc.name} is missing): "
                "pip install 'benchd[mcp]'"
            ) from None

        self.config = config
        self.session = open_session(config, secret)
        self.tools = ToolStore(config, self.session)

    @property
    def plan(self) -> SeedPlan:
        tools, config = self.config.tools, self.config
        return SeedPlan(
            namespace=config.namespace,
            cleanup=config.cleanup,
            adopt_namespace=config.adopt_namespace,
            batch_size=tools.write.batch_size if tools.write is not None else 1,
            concurrency=tools.write.concurrency if tools.write is not None else 1,
            delete_concurrency=tools.delete.concurrency if tools.delete is not None else 1,
            verifies=config.verify,
            namespace_label="namespace",
            endpoint=config.endpoint,
            searchable_timeout_s=config.searchable_timeout_s,
        )

    @property
    def capabilities(self) -> Capabilities:
        return mcp_capabilities(self.config)

    @property
    def retries(self) -> int:
        http = self.session.http
        return http.retries if http is not None else 0

    @property
    def retry_wait_s(self) -> float:
        http = self.session.http
        return http.retry_wait_s if http is not None else 0.0

    async def check(self) -> list[str]:
        """The tool map's mismatches with the server's ``tools/list``, one line each."""
        return await self.tools.check()

    async def info(self) -> TargetInfo:
        """Check the tool map against ``tools/list`` (a mismatch fails the cycle), read labels."""
        problems = await self.tools.check()
        for line in problems:
            log.warning("tool map mismatch", problem=line)
        if problems:
            raise McpMapError(problems)
        model, version = await self.tools.labels()
        server = self.session.server
        if not version and server is not None:
            version = f"{server.name} {server.version}".strip()
        return TargetInfo(kind=KIND, endpoint=self.config.endpoint, model=model, version=version)

    async def list_page(self, cursor: str | None) -> Page:
        page = int(cursor or 0)
        ids, more = await self.tools.list_page(page)
        return Page([Listed(id=i) for i in ids], str(page + 1) if more else None)

    async def write(self, batch: Sequence[Record]) -> Counts:
        self._may_write()
        sent = await self.tools.write([_values(r, self.config.namespace) for r in batch])
        return sent, 0, 0

    async def write_sentinel(self, record: Record) -> None:
        await self.write([record])

    async def delete(self, store_id: str, recheck: Recheck | None = None) -> bool:
        """Call the delete tool, then list: its "done" is no proof (server-memory says it
        for a name it never held), so a record still listed after it is an error."""
        del recheck  # deletes are not retried here: the listing below is the proof
        self._may_write()
        await self.tools.delete(store_id)
        if await self._listed(store_id):
            tool = self.config.tools.delete
            raise TargetProtocolError(
                f"namespace {self.config.namespace!r} at {self.config.endpoint}: the delete "
                f"tool {tool.name if tool else ''!r} answered success for {store_id!r}, which "
                "is still listed; benchd verifies every delete by listing"
            )
        return True

    async def _listed(self, store_id: str) -> bool:
        """Whether a fresh listing (every page, until found) shows ``store_id``."""
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await self.list_page(cursor)
            if any(record.id == store_id for record in page.records):
                return True
            cursor = page.next
            if cursor is None:
                return False
        return False

    async def search(self, query: SearchQuery) -> Hits:
        ids, scores = await self.tools.search(query.q, query.limit, query.reference_date)
        return Hits(ids, scores)

    async def aclose(self) -> None:
        await self.session.aclose()

    def _may_write(self) -> None:
        config = self.config
        if config.namespace_by is None and not config.adopt_namespace:
            raise OwnershipError(NO_NAMESPACE)




def _values(record: Record, namespace: str) -> Mapping[str, Any]:
    """What a record template may name: ``{id}``, ``{content}``, ``{namespace}``, ``{memory.*}``."""
    memory = record.memory
    content = str(memory.get("content") or memory.get("text") or "")
    return {"id": record.store_id, "content": content, "namespace": namespace, "memory": memory}
