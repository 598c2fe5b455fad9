"""The helpers other suites use to stand up a reference store."""

from __future__ import annotations

from pathlib import Path

import httpx

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import (
    fixture_memories,
    import_records,
    make_config,
    refstore_fixture,
    started_refstore,
)

SMOKE = Path(__file__).resolve().parents[1] / "data" / "zengram-eval.json"

bm25_store = refstore_fixture(name="bm25_store", scope="module", retriever="bm25")


def test_refstore_fixture_yields_a_started_store_with_overrides(bm25_store: RefStoreThread) -> None:
    health = httpx.get(f"{bm25_store.url}/health").json()
    assert health["retriever"] == "bm25"


def test_make_config_turns_rate_limits_off_and_picks_a_random_key() -> None:
    first, second = make_config(), make_config()
    assert (first.read_limit_per_min, first.write_limit_per_min) == (0, 0)
    assert first.api_key != second.api_key and first.port == 0


def test_import_records_batches_past_the_500_record_cap() -> None:
    records = [{"id": f"m{i}", "content": f"memory number {i}"} for i in range(1200)]
    with started_refstore() as store:
        assert import_records(store, records) == {"imported": 1200, "skipped": 0, "errors": 0}


def test_fixture_memories_reads_a_fixture_file() -> None:
    assert len(fixture_memories(SMOKE)) == 32


def test_oversized_bodies_are_refused_with_413_json() -> None:
    with started_refstore() as store:
        reply = httpx.post(
            f"{store.url}/export/import",
            content=b"x" * (16 * 1024 * 1024 + 1),
            headers={"x-api-key": store.api_key},
        )
    assert reply.status_code == 413
    assert "exceeds" in reply.json()["error"]
