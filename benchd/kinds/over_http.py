"""What the HTTP store kinds share: one connection, a sans-I/O search, the load sender.

:class:`StoreOverHttp` holds the retrying client of a store reached over HTTP
(``zengram``, ``http``) and implements the store protocol's transport parts
once: retries, ``aclose`` and the load pass's own sender, which sends the
kind's search requests over the load engine's pool and parses them with the
kind's reader. :class:`FlowOverHttp` is the namespace flow over such a store,
with the sans-I/O search halves the load engine and tests use.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import httpx

from benchd.http.client import (
    NO_CONTEXT,
    Answer,
    ClientSettings,
    ErrorContext,
    RetryingClient,
    open_clients,
)
from benchd.http.sender import Connect, search_fire
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import LeaseHolder
from benchd.store.protocol import Hits, LoadFinish, Recheck, Store, StoreDefaults
from benchd.store.target import Fire, SearchQuery, WriteRate

__all__ = [
    "FlowOverHttp",
    "NoLongerListed",
    "SearchesOverHttp",
    "StoreOverHttp",
    "before_retry",
    "delete_rechecked",
]


class StoreOverHttp(StoreDefaults):
    """A store reached over HTTP: the connection, and searches in two sans-I/O halves."""

    def __init__(
        self,
        settings: ClientSettings,
        auth: dict[str, str],
        connect: Connect | None = None,
        *,
        context: ErrorContext = NO_CONTEXT,
    ) -> None:
        self._base, self._client, self._http = open_clients(
            settings, auth, connect, context=context
        )

    @property
    def retries(self) -> int:
        """Requests retried so far (429 with Retry-After, 5xx, connection errors)."""
        return self._http.retries

    @property
    def retry_wait_s(self) -> float:
        """Seconds waited before those retries (backoff and ``Retry-After``)."""
        return self._http.retry_wait_s

    @abstractmethod
    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        """The search request for ``query`` (sans-I/O: the load pass sends it)."""

    @abstractmethod
    async def parse_hits(self, answer: Answer, query: SearchQuery, *, what: str = "") -> Hits:
        """The store ids (and scores) of a 2xx search answer."""

    def load_sender(
        self,
        queries: Sequence[SearchQuery],
        finish: LoadFinish,
        *,
        concurrency: int,
        timeout_s: float,
    ) -> AbstractAsyncContextManager[Fire]:
        """The load pass's sender: the engine's own pool, this store's requests and parsing."""
        return search_fire(
            _Finishing(self, finish),
            queries,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_response_bytes=self._http.max_bytes,
            errors=self._http.context,
        )

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._http.aclose()


class NoLongerListed(Exception):
    """A delete waiting to be retried: its record left benchd's namespace meanwhile."""


def before_retry(recheck: Recheck | None) -> Callable[[], Awaitable[None]]:
    """The retrying client's ``before_retry`` for a delete: raises :class:`NoLongerListed`
    when ``recheck`` says the record is no longer benchd's."""

    async def still_ours() -> None:
        if recheck is not None and not await recheck():
            raise NoLongerListed

    return still_ours


async def delete_rechecked(
    http: RetryingClient, path: str, gone: tuple[int, ...], recheck: Recheck | None
) -> bool:
    """Send a DELETE; False if the store says it is ``gone``, or ``recheck`` says the record
    left benchd's namespace while a retry waited (the delete is then not sent again)."""

    try:
        answer = await http.request_allowing(
            "DELETE", path, allow=gone, before_retry=before_retry(recheck)
        )
    except NoLongerListed:
        return False
    return answer.status not in gone


class _Finishing:
    """A store's search halves whose parsed hits the flow maps to fixture ids."""

    def __init__(self, store: StoreOverHttp, finish: LoadFinish) -> None:
        self._store = store
        self._finish = finish

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        return self._store.build_search_request(query)

    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ""
    ) -> tuple[str, ...]:
        return self._finish(await self._store.parse_hits(answer, query, what=what), query)


class SearchesOverHttp(Store, Protocol):
    """A store whose searches come in two sans-I/O halves (a :class:`StoreOverHttp`)."""

    def build_search_request(self, query: SearchQuery) -> httpx.Request: ...

    async def parse_hits(self, answer: Answer, query: SearchQuery, *, what: str = "") -> Hits: ...


class FlowOverHttp(NamespaceFlow):
    """The namespace flow over a :class:`StoreOverHttp`, with its sans-I/O search halves."""

    def __init__(
        self,
        store: SearchesOverHttp,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> None:
        super().__init__(store, lease=lease, write_rate=write_rate)
        self.http_store = store

    def build_search_request(self, query: SearchQuery) -> httpx.Request:
        return self.http_store.build_search_request(self.asked(query))

    async def parse_search_response(
        self, answer: Answer, query: SearchQuery, *, what: str = ""
    ) -> tuple[str, ...]:
        """A 2xx search answer's fixture ids: at most the limit asked for, sentinel removed."""
        hits = await self.http_store.parse_hits(answer, self.asked(query), what=what)
        return self.finish(hits, query)
