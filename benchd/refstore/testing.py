"""Helpers for tests anywhere in benchd that need a real reference store.

Use from a conftest::

    from benchd.refstore.testing import refstore_fixture, load_fixture_records

    refstore = refstore_fixture(scope="session")     # -> a started RefStoreThread

or directly ``with started_refstore() as store: ...``. Stores run on an
ephemeral loopback port with rate limits off unless asked otherwise.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import RefStoreThread, RunningRefStore, running_refstore

__all__ = [
    "fixture_memories",
    "import_ok",
    "import_records",
    "make_config",
    "refstore_fixture",
    "running_refstore_fixture",
    "search_ids",
    "started_refstore",
]


def make_config(**overrides: Any) -> RefStoreConfig:
    """A test config: random key, ephemeral port, in-memory, no rate limits."""
    settings: dict[str, Any] = {
        "api_key": "test-" + secrets.token_hex(8),
        "read_limit_per_min": 0,
        "write_limit_per_min": 0,
    }
    settings.update(overrides)
    return RefStoreConfig(**settings)


@contextmanager
def started_refstore(**overrides: Any) -> Iterator[RefStoreThread]:
    """A started :class:`RefStoreThread`, stopped on exit."""
    with RefStoreThread(make_config(**overrides)) as store:
        yield store


def refstore_fixture(name: str = "refstore", scope: str = "function", **overrides: Any) -> Any:
    """A pytest fixture called ``name`` yielding a started :class:`RefStoreThread`.

    Assign it in a conftest or test module: ``refstore = refstore_fixture(scope="module")``.
    ``overrides`` are :class:`RefStoreConfig` fields (e.g. ``retriever="bm25"``).
    """
    import pytest

    @pytest.fixture(scope=scope, name=name)  # type: ignore[call-overload,untyped-decorator]
    def refstore() -> Iterator[RefStoreThread]:
        with started_refstore(**overrides) as store:
            yield store

    return refstore


def running_refstore_fixture(name: str = "store", **overrides: Any) -> Any:
    """A pytest fixture called ``name`` serving a :class:`RunningRefStore` in the test's own
    event loop (an async test's), for as long as the test runs.

    ``overrides`` are :class:`RefStoreConfig` fields, as for :func:`refstore_fixture`.
    """
    import pytest

    @pytest.fixture(name=name)
    async def store() -> AsyncIterator[RunningRefStore]:
        async with running_refstore(make_config(**overrides)) as running:
            yield running

    return store


def import_records(store: RefStoreThread, records: list[dict[str, Any]]) -> dict[str, int]:
    """Import records in 500-record requests; return the summed counts."""
    totals = {"imported": 0, "skipped": 0, "errors": 0}
    with httpx.Client(base_url=store.url, headers={"x-api-key": store.api_key}) as client:
        for start in range(0, len(records), 500):
            body = {"data": records[start : start + 500], "operator_approved": True}
            reply = client.post("/export/import", json=body)
            reply.raise_for_status()
            for key in totals:
                totals[key] += int(reply.json()[key])
    return totals


def fixture_memories(path: str | Path) -> list[dict[str, Any]]:
    """The ``memories`` list of a fixture file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    memories: list[dict[str, Any]] = data["memories"]
    return memories


def import_ok(client: httpx.Client, records: list[dict[str, Any]]) -> dict[str, int]:
    """POST records (approved) through ``client`` and return the counts; fails unless 200."""
    reply = client.post("/export/import", json={"data": records, "operator_approved": True})
    if reply.status_code != 200:
        raise AssertionError(f"import answered {reply.status_code}: {reply.text}")
    counts: dict[str, int] = reply.json()
    return counts


def search_ids(client: httpx.Client, q: str, **params: Any) -> list[str]:
    """Ids of a read-only, index-format search, in rank order; fails unless 200."""
    query = {"q": q, "format": "index", "read_only": "true", **params}
    reply = client.get("/memory/search", params=query)
    if reply.status_code != 200:
        raise AssertionError(f"search answered {reply.status_code}: {reply.text}")
    return [str(hit["id"]) for hit in reply.json()["results"]]
