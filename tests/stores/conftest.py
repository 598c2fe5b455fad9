"""One real server per store for the whole session, started on first use (see store_servers)."""

from __future__ import annotations

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
