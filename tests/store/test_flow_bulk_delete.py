"""A store with a bulk delete gets benchd's deletes as sets, each id still listed as benchd's."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from memory_kind import TENANTS, MemorySettings, MemoryStore

from benchd.store import deletion
from benchd.store.flow import NamespaceFlow
from benchd.store.owned import owned_id
from benchd.store.protocol import Capabilities

pytestmark = pytest.mark.anyio

NS = "benchd-eval"


class Bulk(MemoryStore):
    """Deletes sets of up to 4 ids, only those in its namespace (as the vector kinds do)."""

    def __init__(self, settings: MemorySettings) -> None:
        super().__init__(settings)
        self.sets: list[list[str]] = []
        self.singles = 0

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, bulk_deletes=4)

    async def delete(self, store_id: str, recheck: object = None) -> bool:
        self.singles += 1
        return await super().delete(store_id, recheck)

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        self.sets.append(list(store_ids))
        if len(self.sets) == 1:  # meanwhile, another tenant's import moves m9 out of benchd's
            TENANTS[owned_id(NS, "m9")]["namespace"] = "elsewhere"
        mine = [s for s in store_ids if TENANTS.get(s, {}).get("namespace") == NS]
        for sid in mine:
            del TENANTS[sid]
        return len(mine)


@pytest.fixture(autouse=True)
def _empty_store() -> None:
    TENANTS.clear()


async def test_cleanup_deletes_in_sets_and_never_an_id_no_longer_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deletion, "RELIST_AFTER_S", -1.0)  # every delete checks a new listing
    corpus = [{"id": f"m{i}", "content": f"note {i}"} for i in range(10)]
    store = Bulk(MemorySettings(page=500))
    flow = NamespaceFlow(store)
    await flow.seed(corpus)
    TENANTS["foreign"] = {"id": "foreign", "namespace": NS, "content": "not benchd's"}
    deleted = await flow.cleanup([m["id"] for m in corpus])
    assert deleted == 9 and store.singles == 0
    assert sorted(len(s) for s in store.sets) == [1, 4, 4]  # m9 left: never sent
    assert all(owned_id(NS, "m9") not in s for s in store.sets)
    assert owned_id(NS, "m9") in TENANTS and "foreign" in TENANTS
    assert all(sid.startswith(f"benchd:{NS}:") for s in store.sets for sid in s)


async def test_a_store_without_a_bulk_delete_gets_one_delete_per_record() -> None:
    class Single(Bulk):
        @property
        def capabilities(self) -> Capabilities:
            return dataclasses.replace(super().capabilities, bulk_deletes=0)

    corpus = [{"id": f"m{i}", "content": f"note {i}"} for i in range(5)]
    store = Single(MemorySettings(page=500))
    flow = NamespaceFlow(store)
    await flow.seed(corpus)
    assert await flow.cleanup([m["id"] for m in corpus]) == 5
    assert store.sets == [] and store.singles == 5
