"""One real server per store for the whole session, started on first use (see store_servers).

``$BENCHD_TEST_STORES`` splits the store matrices between pytest processes (scripts/test.sh
runs them in parallel): ``only:pgvector`` keeps the tests of tests/stores that run against
pgvector, ``except:pgvector,chroma`` keeps every other test, so each process starts only the
servers of its own store and the parts together hold the whole suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from store_servers import (
    Chroma,
    LancedbLocal,
    Milvus,
    Postgres,
    QdrantLocal,
    run_chroma,
    run_lancedb,
    run_milvus,
    run_postgres,
    run_qdrant,
    split_by_store,
)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    with run_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def chroma() -> Iterator[Chroma]:
    with run_chroma() as server:
        yield server


@pytest.fixture(scope="session")
def milvus() -> Iterator[Milvus]:
    with run_milvus() as server:
        yield server


@pytest.fixture(scope="session")
def qdrant() -> Iterator[QdrantLocal]:
    with run_qdrant() as store:
        yield store


@pytest.fixture(scope="session")
def lancedb() -> Iterator[LancedbLocal]:
    with run_lancedb() as store:
        yield store


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = split_by_store(os.environ.get("BENCHD_TEST_STORES", ""), items)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
