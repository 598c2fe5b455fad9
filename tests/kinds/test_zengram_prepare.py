"""The import records the zengram kind sends are byte for byte what they were: its
``_prepare`` against a frozen reference copy, over memories of every shape a fixture can
give (encoded as the HTTP client encodes a body)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from benchd.kinds import zengram_wire as wire
from benchd.kinds.zengram import ZengramConfig, ZengramStore
from benchd.store.namespace import Namespace, RecordRows
from benchd.store.owned import GLOBAL_KEYED, OWNER_KEY, namespaced_fields, owned_id, sentinel_id
from benchd.store.protocol import Record

NS = "bench-prep"
FILL_FROM_MS = 10**13  # far ahead of the clock: each filled time is the one before + 1 ms


# -- the reference: _prepare, namespaced_fields and to_ms as the wire format was fixed --

_FILLED = {"fact": "key", "status": "subject"}


def reference_fields(namespace: str, fixture_id: str, record: Mapping[str, Any]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for name in GLOBAL_KEYED:
        value = record.get(name)
        if value is not None and value != "":
            fields[name] = owned_id(namespace, value if type(value) is str else str(value))
    kind = record.get("type") or "event"
    needed = _FILLED.get(kind if type(kind) is str else str(kind))
    if needed is not None and needed not in fields:
        fields[needed] = owned_id(namespace, fixture_id)
    return fields


def reference_to_ms(stamp: object) -> object:
    text = str(stamp).strip()
    if ("." not in text and "," not in text) or not wire._SUB_MS.search(text):
        return stamp
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return stamp
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if moment.tzinfo is None:
        return moment.isoformat(timespec="milliseconds")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reference_prepare(store: ZengramStore, record: Record) -> dict[str, Any]:
    ns = store.config.namespace
    out = dict(record.memory)
    out["client_id"] = ns
    out.pop("active", None)
    if record.fixture_id:
        out.update(reference_fields(ns, record.fixture_id, record.memory))
    stamp = out.get("created_at")
    if stamp is None:
        out["created_at"] = store._fill_time()
        if record.fixture_id:
            store._filled_ms = store._last_fill_ms
    else:
        out["created_at"] = reference_to_ms(stamp)
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = {**metadata, OWNER_KEY: dict(record.mark)}
    else:
        out["metadata"] = {OWNER_KEY: dict(record.mark)}
    if store.config.keep_ids or not record.fixture_id:
        out["id"] = record.store_id
    else:
        out.pop("id", None)
    return out


# -- the memories ---------------------------------------------------------------------

STAMPS: list[object] = [
    "2025-12-26T10:10:00Z",
    "2025-12-26T10:10:00.123Z",
    "2025-12-26T10:10:00.123456Z",
    "2025-12-26T10:10:00.123456",
    "2025-12-26T10:10:00,123456+02:00",
    "2025-12-26 10:10:00.1234z",
    " 2025-12-26T10:10:00.9999999Z ",
    "2025-12-26T10:10:00.12345 not a date",
    "2025-12-26",
    "yesterday. or so",
    "",
    1766743800,
    17667438.5,
    None,
]
METADATA: list[object] = [{"source": "notes", OWNER_KEY: "theirs"}, {}, ["a"], "text", None, 3]
KEYS: list[object] = ["port", 5544, "", None, "#hashed", "x" * 200]
TYPES: list[object] = ["fact", "status", "event", "decision", None, "", ["odd"], 7]


def memories() -> list[dict[str, Any]]:
    """Memories of every shape, each field varied against the others."""
    out: list[dict[str, Any]] = []
    for i, stamp in enumerate(STAMPS):
        for j, metadata in enumerate(METADATA):
            kind = TYPES[(i + j) % len(TYPES)]
            memory: dict[str, Any] = {"content": f"memory {i}.{j}", "type": kind}
            if (i + j) % 3:
                memory = {"id": f"m-{i}-{j}", **memory}
            if stamp is not None or j % 2:
                memory["created_at"] = stamp
            if metadata is not None or i % 2:
                memory["metadata"] = metadata
            for k, name in enumerate(GLOBAL_KEYED):
                value = KEYS[(i + j + k) % len(KEYS)]
                if (i * j + k) % 4:
                    memory[name] = value
            if (i + j) % 4 == 1:
                memory["active"] = bool(j % 2)
            if (i + j) % 5 == 2:
                memory["client_id"] = "global"
            if i % 4 == 3:
                memory = {"text": memory.pop("content"), **memory}
            out.append(memory)
    return out


def as_sent(record: Mapping[str, Any]) -> bytes:
    """A record as the HTTP client encodes an import body: key order and all."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def stores(keep_ids: bool) -> tuple[ZengramStore, ZengramStore]:
    config = ZengramConfig(url="http://127.0.0.1:9", namespace=NS, keep_ids=keep_ids)
    pair = ZengramStore(config, None), ZengramStore(config, None)
    for store in pair:
        store._last_fill_ms = FILL_FROM_MS
    return pair


def corpus_records(store: ZengramStore, batch: list[dict[str, Any]]) -> list[Record]:
    namespace = Namespace(store)
    with_ids = [m if "id" in m else {"id": f"derived-{n}", **m} for n, m in enumerate(batch)]
    namespace.own(tuple(str(m["id"]) for m in with_ids))
    return [namespace.record(m) for m in with_ids]


@pytest.mark.parametrize("keep_ids", [True, False])
def test_prepared_corpus_records_are_sent_as_they_were(keep_ids: bool) -> None:
    new, old = stores(keep_ids)
    records = corpus_records(new, memories())
    assert len(records) > 80
    for record in records:
        sent = as_sent(new._prepare(record))
        assert sent == as_sent(reference_prepare(old, record)), record.memory
        assert new._filled_ms == old._filled_ms
        assert new._last_fill_ms == old._last_fill_ms
    assert new._filled_ms is not None  # some memories had their time filled


@pytest.mark.parametrize("keep_ids", [True, False])
def test_the_sentinel_is_sent_as_it_was(keep_ids: bool) -> None:
    new, old = stores(keep_ids)
    mark = {"namespace": NS, "sentinel": "true"}
    memory = {
        "id": sentinel_id(NS),
        "type": "fact",
        "key": sentinel_id(NS),
        "importance": "low",
        "content": "benchd sentinel record",
        "metadata": {OWNER_KEY: mark},
    }
    record = Record(sentinel_id(NS), "", memory, mark)
    assert as_sent(new._prepare(record)) == as_sent(reference_prepare(old, record))
    assert new._filled_ms is None and old._filled_ms is None  # the sentinel's fill is its own
    assert new._prepare(record)["key"] == sentinel_id(NS)  # not namespaced again


def test_a_prepared_record_shares_nothing_mutable_with_its_memory() -> None:
    new, _ = stores(True)
    record = corpus_records(new, [{"id": "m1", "content": "x", "metadata": {"a": 1}}])[0]
    out = new._prepare(record)
    out["metadata"][OWNER_KEY]["fixture_id"] = "changed"
    out["metadata"]["a"] = 2
    assert record.mark["fixture_id"] == "m1"
    assert record.memory["metadata"] == {"a": 1}


@pytest.mark.parametrize("memory", memories())
def test_namespaced_fields_are_what_they_were(memory: dict[str, Any]) -> None:
    fid = str(memory.get("id", "derived"))
    assert namespaced_fields(NS, fid, memory) == reference_fields(NS, fid, memory)
    assert list(namespaced_fields(NS, fid, memory)) == list(reference_fields(NS, fid, memory))
    for odd in (fid, "#" + fid, "z" * 150):  # the record's own id given, hashed or not
        given = namespaced_fields(NS, odd, memory, owned_id(NS, odd))
        assert list(given.items()) == list(reference_fields(NS, odd, memory).items())


@pytest.mark.parametrize("stamp", STAMPS)
def test_to_ms_is_what_it_was(stamp: object) -> None:
    assert wire.to_ms(stamp) == reference_to_ms(stamp)
    assert type(wire.to_ms(stamp)) is type(reference_to_ms(stamp))


@pytest.mark.parametrize("keep_ids", [True, False])
def test_a_batch_of_rows_is_sent_as_the_same_batch_of_records(keep_ids: bool) -> None:
    """The seeder's batches (rows, no Record each) give the import body its Records give."""
    by_rows, by_records = stores(keep_ids)
    sent: dict[str, list[bytes]] = {}

    def capture(store: ZengramStore, key: str) -> None:
        async def import_batch(batch: Sequence[Any]) -> tuple[int, int, int]:
            sent[key] = [as_sent(r) for r in batch]
            return len(batch), 0, 0

        store._import_batch = import_batch  # type: ignore[method-assign]

    capture(by_rows, "rows")
    capture(by_records, "records")
    with_ids = [m if "id" in m else {"id": f"derived-{n}", **m} for n, m in enumerate(memories())]
    with_ids += [  # ids owned_id hashes, facts and statuses keyed by them
        {"id": fid, "content": f"odd {n}", "type": kind}
        for n, fid in enumerate(["#odd", "y" * 150, 42])
        for kind in ("fact", "status")
    ]
    namespace = Namespace(by_rows)
    namespace.own(tuple(str(m["id"]) for m in with_ids))
    (batch,) = namespace.batches(namespace.rows(with_ids), len(with_ids))
    assert anyio.run(by_rows.write, batch) == (len(with_ids), 0, 0)
    assert batch._records is None  # the kind read the rows: no Record was made
    assert anyio.run(by_records.write, [namespace.record(m) for m in with_ids])
    assert sent["rows"] == sent["records"] and len(sent["rows"]) == len(with_ids)
    assert by_rows._filled_ms == by_records._filled_ms is not None
    assert by_rows._last_fill_ms == by_records._last_fill_ms


def test_a_batch_of_another_namespace_is_sent_as_its_records() -> None:
    """Rows cut for another namespace than the store's: each record as its Record says."""
    store, _ = stores(True)
    sent: list[bytes] = []

    async def import_batch(batch: Sequence[Any]) -> tuple[int, int, int]:
        sent.extend(as_sent(r) for r in batch)
        return len(batch), 0, 0

    store._import_batch = import_batch  # type: ignore[method-assign]
    batch = RecordRows("elsewhere", [("benchd:elsewhere:m1", "m1", {"content": "x"})])
    anyio.run(store.write, batch)
    assert sent == [as_sent(reference_prepare(stores(True)[1], batch[0]))]
    assert b"benchd:elsewhere:m1" in sent[0] and b'"fixture_id":"m1"' in sent[0]
