"""The ``lancedb`` kind: its settings, filters, marks and scores, and the embedded store itself.

LanceDB runs in this process (a directory under ``tmp_path``): what the kind writes is read
back with its own client. The conformance cases (another tenant, the lease, ``once`` and
``run``) are in tests/stores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchd.config.load import load_config
from benchd.embed.config import EmbedConfig
from benchd.errors import (
    ConfigError,
    OwnershipError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.kinds import TARGET_KINDS, capabilities_of
from benchd.kinds.lancedb import (
    MAX_MARK_CHARS,
    LancedbConfig,
    LancedbIO,
    LancedbStore,
    error_of,
    literal,
    table_name,
)
from benchd.store.flow import NamespaceFlow
from benchd.store.owned import OwnedIds
from benchd.store.protocol import Record
from benchd.store.target import SearchQuery

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
lancedb = pytest.importorskip("lancedb", reason="needs benchd[lancedb]")


def config(tmp: Path, **kw: Any) -> LancedbConfig:
    embed = EmbedConfig(model=kw.pop("model", "hash:64"), cache_dir=str(tmp / "cache"))
    return LancedbConfig(path=str(tmp / "db"), embed=embed, **kw)


def write_config(tmp: Path, target: str) -> Path:
    path = tmp / "benchd.toml"
    path.write_text(f"""
[[probe]]
name = "lance"
fixture = "packaged:smoke"
[probe.target]
kind = "lancedb"
{target}
[probe.target.embed]
model = "hash:64"
""")
    return path


# -- settings -------------------------------------------------------------------------------


def test_the_shipped_example_loads_and_the_registry_declares_the_kind() -> None:
    (probe,) = load_config(CONFIGS / "lancedb.toml").probes
    settings = probe.target.settings
    assert isinstance(settings, LancedbConfig) and settings.path == "./lancedb-data"
    assert table_name(settings) == "benchd_benchd_eval"
    kind = TARGET_KINDS["lancedb"]
    assert kind.settings_type is LancedbConfig
    caps = capabilities_of("lancedb", settings)
    assert caps.lists and caps.writes and caps.deletes and caps.lease and caps.holders
    assert caps.owned_ids and caps.scores and caps.full_answers and caps.bulk_deletes > 0
    assert caps.lacks() == ()
    common = settings.common()
    assert common.url is None and common.namespace == "benchd-eval"  # in-process: no URL


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ('path = "s3://bucket/db"', "probe[0].target.path: must be a local directory"),
        ('path = ""', "probe[0].target.path: must name the database's directory"),
        ('path = "d"\ntable = "no spaces"', "probe[0].target.table: must be 1-255 characters"),
        ('path = "d"\nid_column = "id; DROP"', "probe[0].target.id_column: must be a column"),
        ('path = "d"\nshared = true', "shared = true needs table"),
        ('path = "d"\nmark_column = "id"', "five different columns"),
        ('path = "d"\ndistance = "hamming"', "probe[0].target.distance"),
        ('path = "d"\nnamespace = "global"', "probe[0].target.namespace"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_key(
    tmp_path: Path, target: str, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path, target))
    text = str(err.value)
    assert message in text and "Traceback" not in text, text


def test_filter_literals_double_quotes_and_refuse_control_characters() -> None:
    assert literal("it's") == "'it''s'"
    assert literal("a\\b") == "'a\\b'"  # SQL: a backslash is itself
    with pytest.raises(TargetProtocolError, match="control character"):
        literal("a\nb")


def test_errors_are_benchds_kinds_with_bounded_text() -> None:
    assert isinstance(error_of(OSError("Permission denied (os error 13)"), "w"), TargetUnreachable)
    assert isinstance(error_of(RuntimeError("operation timed out"), "w"), TargetTimeout)
    long = error_of(RuntimeError("lance error: " + "x" * 100_000), "w")
    assert isinstance(long, TargetProtocolError) and long.kind == "decode"
    assert len(long.message) < 2_000


# -- the embedded store --------------------------------------------------------------------


def records(namespace: str, memories: list[dict[str, Any]]) -> list[Record]:
    owned = OwnedIds.of(namespace, memories)
    return [
        Record(owned.store_of[str(m["id"])], str(m["id"]), m, {"namespace": namespace})
        for m in memories
    ]


MEMORIES = [
    {"id": "o'brien", "content": "the quoted one: o'brien's notes on postgres"},
    {"id": "back\\slash", "content": "a backslash in the id, a note on milvus"},
    {"id": "plain", "content": "the plain one, about chroma collections"},
    {"id": "ünï", "content": "unicode ids are ids too, about qdrant points"},
]


@pytest.mark.anyio
@pytest.mark.parametrize("distance", ["cosine", "l2", "ip"])
async def test_quoted_ids_round_trip_and_each_distance_ranks_the_record_itself_first(
    tmp_path: Path, distance: str
) -> None:
    ns = f"unit-{distance}"
    store = LancedbStore(config(tmp_path, namespace=ns, distance=distance))
    batch = records(ns, MEMORIES)
    try:
        assert await store.write(batch) == (len(batch), 0, 0)
        page = await store.list_page(None)
        assert sorted(r.id for r in page.records) == sorted(r.store_id for r in batch)
        assert page.next is None
        listed = {r.id: r for r in page.records}
        assert all(store.unchanged(listed[r.store_id], r) for r in batch)
        for i, memory in enumerate(MEMORIES):
            hits = await store.search(SearchQuery(q=str(memory["content"]), limit=4))
            assert hits.ids[0] == batch[i].store_id
            scores = [s for s in hits.scores if s is not None]
            assert len(scores) == 4 and scores == sorted(scores, reverse=True)
        assert await store.delete(batch[0].store_id) is True
        assert await store.delete(batch[0].store_id) is False
        assert await store.delete_many([r.store_id for r in batch]) == 3
        assert (await store.list_page(None)).records == []
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_listing_pages_are_keyset_pages_in_id_order(tmp_path: Path) -> None:
    ns = "unit-pages"
    store = LancedbStore(config(tmp_path, namespace=ns))
    store.page_size = 3
    memories = [{"id": f"m{n:02d}", "content": f"record number {n}"} for n in range(10)]
    batch = records(ns, memories)
    try:
        await store.write(batch[5:])  # two commits: rows in two fragments, out of id order
        await store.write(batch[:5])
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await store.list_page(cursor)
            pages += 1
            seen += [r.id for r in page.records]
            if page.next is None:
                break
            cursor = page.next
        assert seen == sorted(r.store_id for r in batch) and pages == 4
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_hostile_rows_in_benchds_namespace_are_read_bounded(tmp_path: Path) -> None:
    """Rows another writer put in benchd's namespace: a mark that is not JSON, one of
    megabytes, one that is a list; a zero vector (LanceDB refuses NaN ones). They list with
    no mark (so they are rewritten, never trusted); LanceDB's cosine search leaves the zero
    vector out (its distance is NaN), so the answer is short, which the flow counts."""
    ns = "unit-hostile"
    store = LancedbStore(config(tmp_path, namespace=ns))
    batch = records(ns, MEMORIES[:1])
    try:
        await store.write(batch)
        table = lancedb.connect(str(tmp_path / "db")).open_table("benchd_unit_hostile")
        zero = [0.0] * 64
        table.add([
            {"id": "x1", "namespace": ns, "content": "t", "benchd": "{not json", "vector": zero},
            {"id": "x2", "namespace": ns, "content": "t", "benchd": json.dumps(
                {"benchd_digest": "d" * MAX_MARK_CHARS}), "vector": [0.1] * 64},
            {"id": "x3", "namespace": ns, "content": "t", "benchd": "[1, 2]", "vector": [0.2] * 64},
        ])  # fmt: skip
        listed = {r.id: r for r in (await store.list_page(None)).records}
        assert {k: listed[k].digest for k in ("x1", "x2", "x3")} == dict.fromkeys(
            ("x1", "x2", "x3")
        )
        assert listed[batch[0].store_id].digest is not None
        io = store.io
        assert isinstance(io, LancedbIO)
        (cut,) = await io._rows_where("id = 'x2'", io._columns(mark=True), 1)
        assert len(cut["benchd"]) == MAX_MARK_CHARS + 1  # handed over cut, never whole
        hits = await store.search(SearchQuery(q="anything", limit=10))
        assert set(hits.ids) == {batch[0].store_id, "x2", "x3"}
        assert all(s is not None for s in hits.scores)
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_a_second_process_lease_is_seen_at_once(tmp_path: Path) -> None:
    """Read consistency interval 0: a sentinel another connection rewrites is read as it is
    now, not as this connection last saw it."""
    from benchd.store.lease import LeaseHolder
    from benchd.store.owned import sentinel_id, sentinel_text

    ns = "unit-lease"
    mine = LancedbStore(config(tmp_path, namespace=ns))
    theirs = LancedbStore(config(tmp_path, namespace=ns))
    memory = {"id": sentinel_id(ns), "content": sentinel_text(ns)}
    try:
        first = LeaseHolder(instance="a", ttl_s=60.0, fixture_hash="f")
        await mine.write_sentinel(Record(sentinel_id(ns), "", memory, first.mark(ns)))
        (only,) = (await mine.list_page(None)).records
        assert only.lease is not None and only.lease.instance == "a"
        second = LeaseHolder(instance="b", ttl_s=60.0, fixture_hash="f")
        await theirs.write_sentinel(Record(sentinel_id(ns), "", memory, second.mark(ns)))
        page = await mine.list_page("")  # not the first page: the open table is kept
        (only,) = page.records
        assert only.lease is not None and only.lease.instance == "b"
    finally:
        await mine.aclose()
        await theirs.aclose()


@pytest.mark.anyio
async def test_own_table_of_another_namespace_and_shared_table_missing_are_refused(
    tmp_path: Path,
) -> None:
    first = LancedbStore(config(tmp_path, namespace="unit-a", table="t"))
    try:
        await first.write(records("unit-a", MEMORIES[:1]))
    finally:
        await first.aclose()
    second = NamespaceFlow(LancedbStore(config(tmp_path, namespace="unit-b", table="t")))
    try:
        with pytest.raises(OwnershipError, match="benchd's for another namespace"):
            await second.seed(MEMORIES)
    finally:
        await second.aclose()
    shared = LancedbStore(config(tmp_path, namespace="unit-c", table="none", shared=True))
    try:
        with pytest.raises(TargetProtocolError, match="benchd never creates a table"):
            await shared.list_page(None)
    finally:
        await shared.aclose()


@pytest.mark.anyio
async def test_an_unwritable_directory_is_a_connect_error_naming_the_table(
    tmp_path: Path,
) -> None:
    (tmp_path / "db").write_text("a file where the directory should be")
    store = LancedbStore(config(tmp_path, namespace="unit-file"))
    try:
        with pytest.raises((TargetUnreachable, TargetProtocolError)) as err:
            await store.write(records("unit-file", MEMORIES[:1]))
        assert "lancedb table benchd_unit_file at" in str(err.value)
    finally:
        await store.aclose()


def test_the_io_names_its_table_and_path_in_every_error(tmp_path: Path) -> None:
    settings = config(tmp_path, namespace="unit-where")
    from benchd.kinds.vectors import embed_stage

    io = LancedbIO(settings, embed_stage(settings.embed))
    assert io.where == f"lancedb table benchd_unit_where at {tmp_path / 'db'}"


@pytest.mark.anyio
async def test_columns_named_as_sql_keywords_are_columns(tmp_path: Path) -> None:
    """Every filter quotes its columns: a shared table's ``and`` or ``not`` is read as the
    column, never as SQL."""
    ns = "unit-keywords"
    names = {"id_column": "and", "namespace_column": "not", "content_column": "select",
             "mark_column": "is", "vector_column": "from"}  # fmt: skip
    store = LancedbStore(config(tmp_path, namespace=ns, **names))
    batch = records(ns, MEMORIES)
    try:
        await store.write(batch)
        assert await store.holders([batch[0].store_id]) == {batch[0].store_id: True}
        listed = {r.id: r for r in (await store.list_page(None)).records}
        assert set(listed) == {r.store_id for r in batch}
        assert all(store.unchanged(listed[r.store_id], r) for r in batch)
        hits = await store.search(SearchQuery(q=str(MEMORIES[1]["content"]), limit=2))
        assert hits.ids[0] == batch[1].store_id
        assert await store.delete_many([r.store_id for r in batch]) == len(batch)
    finally:
        await store.aclose()
