"""RefStore and its catalog in-process: write ordering, sparse scoring."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import numpy as np
import pytest

from benchd.embed.models import FloatMatrix, HashEmbedder
from benchd.refstore.catalog import Catalog
from benchd.refstore.store import RefStore, SearchQuery


class GatedEmbedder(HashEmbedder):
    """A hashing embedder that waits for a gate before answering."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims)
        self.entered = anyio.Event()
        self.gate = anyio.Event()

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.entered.set()
        await self.gate.wait()
        return self.embed_sync(texts)


@pytest.mark.anyio
async def test_an_embedder_switch_waits_for_a_running_import() -> None:
    store = await RefStore.open(None, "hash:64", "dense")
    gated = GatedEmbedder(64)
    store.embedder = gated
    records = [{"id": "a", "content": "the release train leaves at noon"}]
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.import_records, records)
        await gated.entered.wait()
        tg.start_soon(store.switch_embedder, "hash:16")
        await anyio.wait_all_tasks_blocked()
        assert store.embedder is gated  # the switch is queued behind the import
        gated.gate.set()
    assert store.embedder.spec == "hash:16"
    assert store.index.catalog.dims == 16
    assert np.isclose(np.linalg.norm(store.index.catalog.vectors[1]), 1.0)
    reply = await store.search(SearchQuery(q="release train", track_access=False))
    assert [hit["id"] for hit in reply["results"]] == ["a"]
    await store.close()


def test_sparse_postings_score_exactly_like_the_full_mat_vec() -> None:
    embedder = HashEmbedder(1024)
    texts = [f"memory {i} about topic {i % 7} and service {i % 13}" for i in range(300)]
    catalog = Catalog(dims=1)
    for rid in range(1, len(texts) + 1):
        catalog.put(rid, client_id="c", type_="fact", created_ts=0.0, active=True, tags=frozenset())
    catalog.set_vectors(list(range(1, len(texts) + 1)), embedder.embed_sync(texts))
    query = embedder.embed_sync(["topic 3 service 5"])[0]
    sparse = catalog.scores(query)
    assert catalog._postings is not None  # the hashing vectors took the sparse path
    dense = catalog.vectors[: catalog.size] @ query
    assert np.allclose(sparse, dense, atol=1e-6)
    assert not np.any(catalog.scores(np.zeros(1024, dtype=np.float32)))
