"""A cycle against a namespace that already holds the corpus decides what to keep without a
record compared one by one, and still writes every record that differs.

The zengram kind says what a listing keeps of each corpus record as benchd writes it
(``kept_as_written``); the flow keeps a listed copy keeping the same bytes, and asks
``unchanged`` only of the others. The same bytes never keep a record ``unchanged`` would
write again (checked here over the ways a record can differ), and against the reference
store a changed text, type, key or subject is still written, exactly as ``unchanged`` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import httpx
import pytest

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramStore, ZengramTarget
from benchd.refstore.server import RunningRefStore
from benchd.refstore.testing import running_refstore_fixture
from benchd.store.owned import owned_id, owner_mark
from benchd.store.protocol import Listed, Record

pytestmark = pytest.mark.anyio

KEY = "kept-test-key-0123456789"
NS = "benchd-kept"
BOUND_S = 60  # a bound against a hung test, never a timing assertion
TYPES = ("fact", "status", "event", "decision")


def _memory(i: int) -> dict[str, Any]:
    memory: dict[str, Any] = {
        "id": f"k{i}",
        "type": TYPES[i % 4],
        "content": f"Kept record {i} about topic{i}",
        "created_at": f"2025-04-{1 + i % 28:02d}T10:00:00Z",
    }
    if i % 10 == 1:
        memory["key"] = f"key-{i}"  # a fact with its own key (namespaced as written)
    if i % 10 == 2:
        memory["subject"] = f"subject-{i}"  # a status with its own subject
    return memory


CORPUS = [_memory(i) for i in range(120)]


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fixture ids ``ZengramStore.unchanged`` was asked about."""
    ids: list[str] = []
    real = ZengramStore.unchanged

    def counted(self: ZengramStore, listed: Listed, record: Record) -> bool:
        ids.append(record.fixture_id)
        return real(self, listed, record)

    monkeypatch.setattr(ZengramStore, "unchanged", counted)
    return ids


async def _seed(url: str, memories: list[dict[str, Any]]) -> Any:
    config = ZengramConfig(url=url, namespace=NS, max_retries=0, cleanup="never")
    target = ZengramTarget(config, Secret(KEY, "test"))
    try:
        with anyio.fail_after(BOUND_S):
            return await target.seed(memories)
    finally:
        await target.aclose()


async def _stored(url: str) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": KEY}) as client:
        answer = await client.get("/export", params={"client_id": NS, "limit": 500})
    return {r["id"]: r for r in answer.json()["memories"] if r.get("active", True)}


async def test_a_kept_corpus_is_kept_without_a_record_compared_one_by_one(
    store: RunningRefStore, asked: list[str]
) -> None:
    first = await _seed(store.url, CORPUS)
    asked.clear()
    again = await _seed(store.url, CORPUS)
    assert (first.imported, again.imported, again.unchanged) == (120, 0, 120)
    assert asked == []  # the whole corpus kept by its listed bytes: no Record, no Listed


async def test_a_record_changed_in_text_type_key_or_subject_is_still_written(
    store: RunningRefStore, asked: list[str]
) -> None:
    await _seed(store.url, CORPUS)
    changed = [dict(m) for m in CORPUS]
    changed[3]["content"] += " (edited)"
    changed[5]["type"] = "fact"  # an event made a fact: keyed by its own id now
    changed[11]["key"] = "key-other"
    changed[22]["subject"] = "subject-other"
    changed[40]["created_at"] = "2025-05-01T10:00:00Z"  # the store's dedup: as unchanged
    changed[41]["metadata"] = {"source": "elsewhere"}  # the same
    asked.clear()
    report = await _seed(store.url, changed)
    assert (report.imported, report.unchanged, report.errors) == (4, 116, 0)
    assert sorted(asked) == ["k11", "k22", "k3", "k5"]  # only those are asked one by one
    stored = await _stored(store.url)
    assert stored[owned_id(NS, "k3")]["content"].endswith("(edited)")
    assert stored[owned_id(NS, "k5")]["type"] == "fact"
    assert stored[owned_id(NS, "k11")]["key"] == owned_id(NS, "key-other")
    assert stored[owned_id(NS, "k22")]["subject"] == owned_id(NS, "subject-other")


def _variants(memory: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``memory`` and the ways a stored copy of it may differ."""
    out = [
        dict(memory),
        {**memory, "content": memory.get("content", "") + "!"},
        {**memory, "type": "status" if memory.get("type") != "status" else "fact"},
        {**memory, "key": "another"},
        {**memory, "subject": "another"},
        {**memory, "key": ""},
        {**memory, "key": 7},
        {**memory, "created_at": "2030-01-01T00:00:00Z"},
        {**memory, "metadata": {"source": "x"}},
        {k: v for k, v in memory.items() if k not in ("key", "subject")},
    ]
    return out


FIXTURES = [
    {"id": "e", "type": "event", "content": "an event"},
    {"id": "f", "type": "fact", "content": "a fact keyed by its own id"},
    {"id": "fk", "type": "fact", "content": "a fact with a key", "key": "port"},
    {"id": "s", "type": "status", "content": "a status"},
    {"id": "ss", "type": "status", "content": "a status with a subject", "subject": "db"},
    {"id": "d", "content": "no type given"},
    {"id": "t", "type": "event", "text": "text, not content"},
    {"id": "n", "type": 3, "content": "a type that is not a text"},
    {"id": "blank", "type": "fact", "content": "an empty key", "key": ""},
    {"id": "#odd", "type": "fact", "content": "an id benchd hashes"},
]


async def test_the_bytes_a_record_is_kept_by_never_keep_one_unchanged_would_write() -> None:
    """Over the ways a stored copy can differ from the fixture: equal bytes only where
    ``unchanged`` keeps the record too; a copy stored as benchd writes it is kept by them."""
    store = ZengramStore(ZengramConfig(url="http://127.0.0.1:9", namespace=NS), None)
    try:
        for memory in FIXTURES:
            fid = str(memory["id"])
            sid, mark = owned_id(NS, fid), owner_mark(NS, fid)
            record = Record(sid, fid, memory, mark)
            wanted = store.kept_as_written([(sid, fid, memory)])
            assert wanted is not None
            for n, variant in enumerate(_variants(memory)):
                written = store._import_record(sid, fid, variant, dict(mark), sid)
                listed = store._listed(sid, written)
                same = wanted[0] is not None and wanted[0] == listed.kept
                assert not same or store.unchanged(listed, record), (fid, n)
                if n == 0:
                    assert same and store.unchanged(listed, record), fid
    finally:
        await store.aclose()


async def test_a_store_assigning_its_ids_compares_one_by_one() -> None:
    config = ZengramConfig(url="http://127.0.0.1:9", namespace=NS, keep_ids=False)
    store = ZengramStore(config, None)
    try:
        assert store.kept_as_written([(owned_id(NS, "e"), "e", FIXTURES[0])]) is None
    finally:
        await store.aclose()


async def test_a_key_holding_the_records_own_id_is_kept_without_a_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key or subject benchd fills (the record's own id) is kept as a constant on both
    sides (no digest a record), yet tells a copy keyed otherwise from one keyed by its id."""
    import benchd.kinds.zengram_wire as wire

    digests: list[object] = []
    real = wire.fingerprint

    def counted(*values: object) -> bytes | None:
        digests.append(values)
        return real(*values)

    monkeypatch.setattr(wire, "fingerprint", counted)
    store = ZengramStore(ZengramConfig(url="http://127.0.0.1:9", namespace=NS), None)
    try:
        fact, status = FIXTURES[1], FIXTURES[3]  # keyed by their own ids as written
        for memory in (fact, status):
            fid = str(memory["id"])
            sid, mark = owned_id(NS, fid), owner_mark(NS, fid)
            listed = store._listed(sid, store._import_record(sid, fid, memory, dict(mark), sid))
            assert store.kept_as_written([(sid, fid, memory)]) == [listed.kept]
            assert store.unchanged(listed, Record(sid, fid, memory, mark))
        assert digests == []
        # a copy keyed by its own id is not one keyed by another value, either way round
        sid = owned_id(NS, "f")
        by_id = store._listed(sid, {"id": sid, "type": "fact", "content": "c", "key": sid})
        other = store._listed(sid, {"id": sid, "type": "fact", "content": "c", "key": "k"})
        assert by_id.kept != other.kept
        assert not store.unchanged(
            by_id, Record(sid, "f", {"type": "fact", "content": "c", "key": "k"}, {})
        )
        assert store.unchanged(by_id, Record(sid, "f", {"type": "fact", "content": "c"}, {}))
        assert not store.unchanged(other, Record(sid, "f", {"type": "fact", "content": "c"}, {}))
    finally:
        await store.aclose()


@pytest.mark.parametrize("answer", ["none", "short", "nothing comparable"])
async def test_without_bytes_for_every_row_each_record_is_asked(
    store: RunningRefStore, asked: list[str], monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """No shortcut, one that answers fewer rows than asked, or no bytes: ``unchanged``
    decides each record, and a changed one is still written."""
    await _seed(store.url, CORPUS)

    def kept_as_written(self: ZengramStore, rows: list[Any]) -> list[bytes | None] | None:
        if answer == "none":
            return None
        return [] if answer == "short" else [None] * len(rows)

    monkeypatch.setattr(ZengramStore, "kept_as_written", kept_as_written)
    changed = [dict(m) for m in CORPUS]
    changed[7]["content"] += " (edited)"
    asked.clear()
    report = await _seed(store.url, changed)
    assert (report.imported, report.unchanged) == (1, 119)
    assert sorted(asked) == sorted(m["id"] for m in CORPUS)
