"""The one small protocol every store adapter implements.

Adapters know HTTP (or in-process) details; nothing else does. Each method
translates transport failures and bad payloads into :mod:`benchd.errors`
``TargetError`` subclasses, so callers see a bounded ``kind``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx

from benchd.result import SeedReport, TargetInfo

__all__ = ["CountsRetries", "HttpSearch", "Progress", "SearchQuery", "Target"]

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while long work advances."""


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a target needs to run one labeled query."""

    q: str
    limit: int
    reference_date: str | None = None


@runtime_checkable
class Target(Protocol):
    """A retrieval store as benchd sees it."""

    async def info(self) -> TargetInfo:
        """Describe the store (kind, endpoint, model label); cheap, no auth side effects."""
        ...

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace and verify it is there."""
        ...

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Return fixture ids in the store's rank order (at most ``query.limit``)."""
        ...

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete these fixture ids from the reserved namespace; return how many went."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class HttpSearch(Protocol):
    """Optional sans-I/O halves of ``search`` for HTTP targets.

    A target that offers them lets the load engine own the connections (one
    fast pool sized to the load) while the adapter still decides what a
    request looks like and what an answer means.
    """

    def build_search_request(self, query: SearchQuery) -> httpx.Request: ...

    def parse_search_response(
        self, status: int, headers: Mapping[str, str], body: bytes, *, what: str = ...
    ) -> tuple[str, ...]: ...


@runtime_checkable
class CountsRetries(Protocol):
    """Optional: a target that retries requests says how many it has retried so far."""

    @property
    def retries(self) -> int: ...
