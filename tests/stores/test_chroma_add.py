"""Chroma's add skips an id the collection holds and answers success: the chroma kind says so.

Against the real ``chroma run``: another tenant's records in a shared
collection sit under the very ids benchd writes, outside benchd's namespace.
benchd's write (a delete filtered on its namespace, then an add) cannot
replace them, and Chroma answers the add ``201 {}`` without storing it; the
write fails with ``ownership``, naming how many records were stored and why,
and the tenant's records stay byte-identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from store_servers import Chroma

from benchd.embed.config import EmbedConfig
from benchd.errors import OwnershipError
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds.chroma import ChromaConfig, ChromaStore
from benchd.store.owned import OwnedIds
from benchd.store.protocol import Record

pytestmark = pytest.mark.anyio
COLLECTION = "held-ids"


def tenant_holds(chroma: Chroma, ids: list[str]) -> tuple[str, Any]:
    """A collection whose owner holds ``ids`` (its own metadata, no benchd namespace)."""
    base = f"{chroma.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    httpx.delete(f"{base}/{COLLECTION}", timeout=30)
    cid = httpx.post(base, json={"name": COLLECTION}, timeout=30).json()["id"]
    body = {
        "ids": ids,
        "documents": [f"the tenant's {i}" for i in ids],
        "metadatas": [{"tenant": "other"} for _ in ids],
        "embeddings": [[1.0] + [0.0] * 255 for _ in ids],
    }
    httpx.post(f"{base}/{cid}/add", json=body, timeout=30).raise_for_status()
    return f"{base}/{cid}", body


def snapshot(collection: str) -> Any:
    include = {"where": {"tenant": "other"}, "include": ["documents", "metadatas", "embeddings"]}
    return httpx.post(f"{collection}/get", json=include, timeout=30).json()


async def test_an_add_chroma_skipped_fails_with_ownership_and_says_why(
    chroma: Chroma, tmp_path: Path
) -> None:
    ns = "held-ids-ns"
    memories = [dict(m) for m in load_fixture(packaged_fixture("smoke")).memories]
    owned = OwnedIds.of(ns, memories)
    batch = [
        Record(owned.store_of[str(m["id"])], str(m["id"]), m, {"namespace": ns}) for m in memories
    ]
    held = [r.store_id for r in batch[:5]]  # five of benchd's ids are the tenant's
    collection, _ = tenant_holds(chroma, held)
    before = snapshot(collection)
    store = ChromaStore(
        ChromaConfig(
            url=chroma.url, embed=EmbedConfig(model="hash:256", cache_dir=str(tmp_path)),
            namespace=ns, shared=True, collection=COLLECTION,
        ),
        None,
    )  # fmt: skip
    try:
        with pytest.raises(OwnershipError) as raised:
            await store.write(batch)
    finally:
        await store.aclose()
    message = str(raised.value)
    assert f"chroma collection {COLLECTION}" in message
    assert f"stored {len(batch) - 5} of {len(batch)} records" in message
    assert "5 of these ids are held outside benchd's namespace 'held-ids-ns'" in message
    assert snapshot(collection) == before and len(before["ids"]) == 5
