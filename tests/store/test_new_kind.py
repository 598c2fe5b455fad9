"""A kind added as one module plus one registry line gets every guarantee from the flow."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import memory_kind
import pytest

from benchd.config.load import parse_config
from benchd.errors import OwnershipError
from benchd.kinds import TARGET_KINDS, build_target
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import LeaseHolder
from benchd.store.owned import owned_id, sentinel_id
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

NS = "benchd-memory"
MEMORIES = [
    {"id": f"m{i}", "content": f"record number {i} about topic{i}"} for i in range(7)
]
FOREIGN = {  # another tenant's records: the fixture's very ids and texts
    m["id"]: {"id": m["id"], "namespace": "tenant", "content": m["content"], "metadata": {}}
    for m in MEMORIES
}


@pytest.fixture(autouse=True)
def tenants() -> Iterator[None]:
    memory_kind.TENANTS.clear()
    memory_kind.TENANTS.update(copy.deepcopy(FOREIGN))
    memory_kind.CALLS.clear()
    yield
    memory_kind.TENANTS.clear()


def flow(**settings: Any) -> NamespaceFlow:
    target = build_target("memory", memory_kind.MemorySettings(namespace=NS, **settings), None)
    assert isinstance(target, NamespaceFlow)
    return target


def foreign_untouched() -> None:
    assert {k: memory_kind.TENANTS[k] for k in FOREIGN} == FOREIGN
    assert not any(i in FOREIGN for _, i in memory_kind.CALLS)


def ours() -> set[str]:
    return {i for i, r in memory_kind.TENANTS.items() if r["namespace"] == NS}


def test_the_kind_is_registered_for_config_and_construction_by_its_one_line() -> None:
    assert TARGET_KINDS["memory"].settings_type is memory_kind.MemorySettings
    data = {"probe": [{"name": "p", "fixture": "f.json", "target": {"kind": "memory"}}]}
    probe = parse_config(data, file="t.toml", base=Path(".")).probes[0]
    assert probe.target.namespace == "benchd-eval" and probe.target.cleanup == "never"


async def test_a_seed_is_written_under_owned_ids_verified_and_searchable() -> None:
    target = flow()
    report = await target.seed(MEMORIES)
    assert (report.imported, report.verified, report.missing) == (7, 7, ())
    assert report.searchable_after_s is not None
    assert ours() == {owned_id(NS, m["id"]) for m in MEMORIES} | {sentinel_id(NS)}
    assert (await target.search(SearchQuery("topic3", 3)))[0] == "m3"
    info = await target.info()
    assert info.lacks == ()
    foreign_untouched()


async def test_a_namespace_benchd_did_not_write_is_refused_unless_adopted() -> None:
    memory_kind.TENANTS["theirs"] = {"id": "theirs", "namespace": NS, "content": "x"}
    with pytest.raises(OwnershipError, match="already holds 1 record"):
        await flow().seed(MEMORIES)
    assert memory_kind.CALLS == []
    report = await flow(adopt_namespace=True, cleanup="before").seed(MEMORIES)
    assert report.adopted and report.verified == 7
    assert memory_kind.TENANTS["theirs"]["content"] == "x"
    foreign_untouched()


async def test_cleanup_after_and_release_delete_only_what_benchd_wrote() -> None:
    target = flow(cleanup="after")
    await target.seed(MEMORIES)
    assert target.leftover_records == 8
    assert await target.cleanup([m["id"] for m in MEMORIES]) == 7
    assert await target.release() == 1
    assert ours() == set() and target.leftover_records == 0
    foreign_untouched()


async def test_a_second_writer_is_refused_by_the_lease_and_a_once_measures_read_only() -> None:
    first = flow()
    first.lease = LeaseHolder("daemon-a", ttl_s=600, fixture_hash="h")
    await first.seed(MEMORIES)
    second = flow()
    second.lease = LeaseHolder("daemon-b", ttl_s=600, fixture_hash="h")
    with pytest.raises(OwnershipError, match="leased by benchd instance 'daemon-a'"):
        await second.seed(MEMORIES)
    once = flow()
    once.lease = LeaseHolder("daemon-b", ttl_s=60, fixture_hash="h", role="once")
    writes = len(memory_kind.CALLS)
    report = await once.seed(MEMORIES)
    assert report.read_only_beside is not None and report.verified == 7
    assert len(memory_kind.CALLS) == writes  # not one write or delete
    assert await once.cleanup([m["id"] for m in MEMORIES]) == 0


async def test_purge_deletes_benchds_records_then_its_sentinel_and_counts_the_rest() -> None:
    await flow().seed(MEMORIES)
    memory_kind.TENANTS["theirs"] = {"id": "theirs", "namespace": NS, "content": "x"}
    purged = await flow().purge(MEMORIES, force=False)
    assert (purged.records, purged.sentinels, purged.foreign) == (7, 1, 1)
    assert memory_kind.CALLS[-1] == ("delete", sentinel_id(NS))  # the sentinel last
    assert ours() == {"theirs"}
    foreign_untouched()


async def test_a_store_that_cannot_delete_says_so_and_is_never_asked_to() -> None:
    target = flow(deletes=False, cleanup="before")
    await target.seed(MEMORIES)
    await target.seed(MEMORIES)
    assert await target.cleanup([m["id"] for m in MEMORIES]) == 0
    assert not any(op == "delete" for op, _ in memory_kind.CALLS)
    with pytest.raises(OwnershipError, match="cannot list and delete"):
        await target.purge(MEMORIES, force=False)
    lacks = (await target.info()).lacks
    assert any("no cleanup and no purge" in line for line in lacks)


def test_a_kinds_builder_takes_the_lease_and_the_write_share_it_keeps_within() -> None:
    """What the probe runner grants a target is given to its builder, never set on it: the
    lease it holds, and its share of the write budget, read as its deletes begin (a
    daemon's reload may plan a new one)."""
    holder = LeaseHolder("daemon-a", ttl_s=600, fixture_hash="h")
    share: list[float | None] = [2.0]
    flow = build_target(
        "memory", memory_kind.MemorySettings(namespace=NS), None, lease=holder,
        write_rate=lambda: share[0],
    )  # fmt: skip
    assert isinstance(flow, NamespaceFlow) and flow.lease is holder
    assert flow.deleter.write_rate is not None and flow.deleter.write_rate() == 2.0
    share[0] = None
    assert flow.deleter.write_rate() is None
    bare = build_target("memory", memory_kind.MemorySettings(namespace=NS), None)
    assert isinstance(bare, NamespaceFlow) and bare.lease is None
    assert bare.deleter.write_rate is None
