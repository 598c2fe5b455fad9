"""GET /export paging by cursor answers exactly what OFFSET paging answers, in O(page).

The reference for every comparison is :meth:`MemoryIndex.export_by_offset`
(``COUNT(*)`` plus ``ORDER BY rid LIMIT n OFFSET k``, nothing remembered),
which is what the store answered before page cursors; for the zengram-4.3
profile's millisecond cursor, :func:`ms_cursor_reference`, the walk from the
start on every page that the store did before.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from benchd.refstore.catalog import SearchFilter
from benchd.refstore.index import _COLUMNS, MemoryIndex, _payload, _where_sql
from benchd.refstore.paging import PageCursors
from benchd.refstore.records import parse_record, parse_timestamp

NOW = "2026-06-01T00:00:00.000Z"
TIMES = ["2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]
# rows sharing a millisecond, and rows below it, that the millisecond cursor can lose
SUB_MS = ["2026-02-01T00:00:00.000400Z", "2026-02-01T00:00:00.000100Z", "2026-02-01T00:00:00.001Z"]
IDS = [f"m{i}" for i in range(16)]
CLIENTS = ["a", "b"]
TYPES = ["fact", "event"]

_page_args = {
    "where": st.builds(
        SearchFilter,
        client_id=st.sampled_from([None, *CLIENTS]),
        type=st.sampled_from([None, *TYPES]),
        since_ts=st.sampled_from([None, parse_timestamp(TIMES[1]).timestamp()]),
    ),
    "active_only": st.booleans(),
    "limit": st.integers(1, 6),
}
_record = st.fixed_dictionaries(
    {
        "id": st.sampled_from([*IDS, None]),  # None: a new id, never written before
        "content": st.sampled_from(["alpha", "beta", "gamma", "delta"]),  # dedup collisions
        "client_id": st.sampled_from(CLIENTS),
        "type": st.sampled_from(TYPES),
        "created_at": st.sampled_from(TIMES + SUB_MS),
    },
    optional={"active": st.just(False)},
)


def import_records(index: MemoryIndex, raws: list[dict[str, Any]]) -> None:
    """What RefStore._import does to the index: dedup, upsert, structured rows, vectors."""
    records = [parse_record(raw, NOW) for raw in raws]
    rids: list[int] = []
    index.begin()
    try:
        for record in records:
            if not index.is_duplicate(record):
                rids.append(index.write(record))
                index.structured.upsert(record.payload, NOW)
    finally:
        index.commit()
    index.set_vectors(rids, np.ones((len(rids), 4), dtype=np.float32), "hash:4")


def ms_cursor_reference(
    index: MemoryIndex, where: SearchFilter, active_only: bool, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """``export_by_ms_cursor`` as it was before page cursors: the walk from the start."""
    extra, params = _where_sql(where)
    cond = ("active = 1" if active_only else "1 = 1") + extra
    db = index._db
    total = int(db.execute(f"SELECT COUNT(*) FROM memories WHERE {cond}", params).fetchone()[0])
    us = "CAST(ROUND(created_ts * 1000000) AS INTEGER)"
    listed: list[Any] = []
    cursor: tuple[int, str] | None = None
    while len(listed) < offset + limit:
        after = "" if cursor is None else f" AND ({us} < ? OR ({us} = ? AND id < ?))"
        more = () if cursor is None else (cursor[0], cursor[0], cursor[1])
        rows = db.execute(
            f"SELECT {_COLUMNS}, {us} FROM memories WHERE {cond}{after}"
            f" ORDER BY {us} DESC, id DESC LIMIT ?",
            (*params, *more, limit),
        ).fetchall()
        if not rows:
            break
        listed.extend(row[:-1] for row in rows)
        cursor = (int(rows[-1][-1]) // 1000 * 1000, str(rows[-1][1]))
    return [_payload(row) for row in listed[offset : offset + limit]], total


def page_both(
    index: MemoryIndex, where: SearchFilter, active_only: bool, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """The page by cursor, asserted equal to the page by OFFSET (and the same for the
    millisecond cursor's pages)."""
    fast = index.export(where, active_only, limit, offset)
    assert fast == index.export_by_offset(where, active_only, limit, offset)
    cut = index.export_by_ms_cursor(where, active_only, limit, offset)
    assert cut == ms_cursor_reference(index, where, active_only, limit, offset)
    return fast


class ListingMachine(RuleBasedStateMachine):
    """Random imports, upserts, deletes, access bumps and pages at random or cursor offsets."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="benchd-paging-"))
        self.index: MemoryIndex | None = None
        self.fresh = 0
        self.ends: list[int] = []  # offsets where pages ended: the cursors' offsets
        self.cursor_pages = 0
        self.last = (SearchFilter(), True, 5)  # the filter and size of the last page asked for

    @initialize(persistent=st.booleans(), seed=st.integers(0, 40))
    def open_index(self, persistent: bool, seed: int) -> None:
        """A file or in memory, holding ``seed`` records spread over tenants, types and dates."""
        self.index = MemoryIndex(str(self.dir / "m.db") if persistent else None, dims=4)
        import_records(
            self.index,
            [
                {
                    "id": f"seed-{i}",
                    "content": f"seed {i}",
                    "client_id": CLIENTS[i % 2],
                    "type": TYPES[i // 2 % 2],
                    "created_at": TIMES[i % 3],
                }
                for i in range(seed)
            ],
        )

    @property
    def ix(self) -> MemoryIndex:
        assert self.index is not None
        return self.index

    def page(
        self, where: SearchFilter, active_only: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        hits = self.ix._cursors.hits + self.ix._ms_cursors.hits
        answer = page_both(self.ix, where, active_only, limit, offset)
        self.cursor_pages += self.ix._cursors.hits + self.ix._ms_cursors.hits - hits
        self.last = (where, active_only, limit)
        return answer

    @rule(raws=st.lists(_record, min_size=1, max_size=8))
    def import_(self, raws: list[dict[str, Any]]) -> None:
        for raw in raws:
            if raw["id"] is None:
                self.fresh += 1
                raw["id"] = f"new-{self.fresh}"
        import_records(self.ix, raws)

    @rule(memory_id=st.sampled_from(IDS))
    def delete(self, memory_id: str) -> None:
        self.ix.deactivate(memory_id, NOW)

    @rule(memory_ids=st.lists(st.sampled_from(IDS), max_size=4))
    def bump_access(self, memory_ids: list[str]) -> None:
        found = [self.ix.by_id(memory_id) for memory_id in memory_ids]
        self.ix.bump_access([hit[0] for hit in found if hit is not None], NOW)

    @rule(**_page_args, offset=st.integers(0, 24))
    def page_anywhere(
        self, where: SearchFilter, active_only: bool, limit: int, offset: int
    ) -> None:
        rows, _total = self.page(where, active_only, limit, offset)
        self.ends.append(offset + len(rows))

    @rule(**_page_args, data=st.data())
    def page_at_a_page_end(
        self, where: SearchFilter, active_only: bool, limit: int, data: st.DataObject
    ) -> None:
        offset = data.draw(st.sampled_from([0, *self.ends]))
        rows, _total = self.page(where, active_only, limit, offset)
        self.ends.append(offset + len(rows))

    @rule(size=st.one_of(st.none(), st.integers(1, 6)), back=st.integers(0, 2))
    def next_page(self, size: int | None, back: int) -> None:
        """The last paged listing again (its page size, or another), from where it ended
        (or a page before)."""
        where, active_only, limit = self.last
        limit = limit if size is None else size
        offset = self.ends[-1 - back] if len(self.ends) > back else 0
        rows, _total = self.page(where, active_only, limit, offset)
        self.ends.append(offset + len(rows))

    @rule(**_page_args)
    def list_everything(self, where: SearchFilter, active_only: bool, limit: int) -> None:
        offset = 0
        while True:
            rows, total = self.page(where, active_only, limit, offset)
            offset += len(rows)
            if not rows:
                assert offset >= total
                break

    @invariant()
    def ends_stay_few(self) -> None:
        del self.ends[:-8]

    def teardown(self) -> None:
        served = "10+" if self.cursor_pages >= 10 else str(self.cursor_pages)
        event(f"pages served from a cursor: {served}")
        if self.index is not None:
            self.index.close()
        shutil.rmtree(self.dir, ignore_errors=True)


ListingMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],  # a busy shared box draws slowly
)
test_cursor_pages_answer_what_offset_pages_answer = ListingMachine.TestCase


# -- deterministic checks --------------------------------------------------------


def _seeded(n: int = 30, path: str | None = None) -> MemoryIndex:
    index = MemoryIndex(path, dims=4)
    import_records(
        index,
        [
            {"id": f"r{i}", "content": f"record {i}", "client_id": "a" if i % 3 else "b"}
            for i in range(n)
        ],
    )
    return index


@pytest.fixture
def index() -> Iterator[MemoryIndex]:
    seeded = _seeded()
    yield seeded
    seeded.close()


def test_a_whole_listing_counts_once_and_steps_over_no_earlier_page(index: MemoryIndex) -> None:
    sql: list[str] = []
    index._db.set_trace_callback(sql.append)
    where, offset, pages = SearchFilter(client_id="a"), 0, []
    while not pages or pages[-1][0]:
        pages.append(index.export(where, True, 4, offset))
        offset += len(pages[-1][0])
    index._db.set_trace_callback(None)
    assert (offset, pages[0][1], len(pages)) == (20, 20, 6)
    assert len([s for s in sql if "COUNT(*)" in s]) == 1  # on the first page only
    assert len([s for s in sql if "rid >" in s]) == 5  # every later page from a cursor
    offsets = range(0, 24, 4)
    assert pages == [index.export_by_offset(where, True, 4, at) for at in offsets]


def test_a_millisecond_cursor_listing_walks_each_row_once(index: MemoryIndex) -> None:
    sql: list[str] = []
    index._db.set_trace_callback(sql.append)
    where, offset, pages = SearchFilter(client_id="a"), 0, []
    while not pages or pages[-1][0]:
        pages.append(index.export_by_ms_cursor(where, True, 4, offset))
        offset += len(pages[-1][0])
    index._db.set_trace_callback(None)
    assert (offset, len(pages)) == (20, 6)
    assert len([s for s in sql if "COUNT(*)" in s]) == 1
    # one query a page (the last one finds the end), not 1 + 2 + ... + 6 walking from the start
    assert len([s for s in sql if "ORDER BY CAST" in s]) == len(pages)
    offsets = range(0, 24, 4)
    assert pages == [ms_cursor_reference(index, where, True, 4, at) for at in offsets]


def _write(index: MemoryIndex, raw: dict[str, Any]) -> None:
    """One upsert through :meth:`MemoryIndex.write` alone (no vectors, no structured rows)."""
    index.begin()
    index.write(parse_record(raw, NOW))
    index.commit()


# name -> (active_only of the listing, the change); each write path on its own
_MUTATIONS: dict[str, tuple[bool, Callable[[MemoryIndex], object]]] = {
    "delete a listed row": (True, lambda ix: ix.deactivate("r1", NOW)),
    "import a row after the cursor": (
        True,
        lambda ix: _write(ix, {"id": "late", "content": "late", "client_id": "a"}),
    ),
    "import an inactive row": (
        False,
        lambda ix: _write(ix, {"id": "off", "content": "off", "client_id": "a", "active": False}),
    ),
    "move another tenant's row in by id": (
        True,
        lambda ix: _write(ix, {"id": "r3", "content": "moved", "client_id": "a"}),
    ),
    "move a listed row out by id": (
        True,
        lambda ix: _write(ix, {"id": "r2", "content": "moved", "client_id": "b"}),
    ),
    "rewrite a listed row in place": (
        True,
        lambda ix: _write(ix, {"id": "r8", "content": "new text", "client_id": "a"}),
    ),
    "write from another connection": (True, lambda ix: _other_connection(ix)),
}


def _other_connection(index: MemoryIndex) -> None:
    path = index._db.execute("PRAGMA database_list").fetchone()[2]
    other = sqlite3.connect(path)
    with other:
        other.execute("UPDATE memories SET active = 0 WHERE id = 'r1'")
    other.close()


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
def test_no_cursor_or_total_is_served_after_a_change(mutation: str, tmp_path: Path) -> None:
    index = _seeded(path=str(tmp_path / "m.db"))  # a file, so another connection can write
    active_only, change = _MUTATIONS[mutation]
    where = SearchFilter(client_id="a")
    page_both(index, where, active_only, 5, 0)
    hits = index._cursors.hits
    cached = page_both(index, where, active_only, 5, 5)  # from the cursor page 1 left
    assert index._cursors.hits == hits + 1
    change(index)
    after = page_both(index, where, active_only, 5, 5)
    assert after != cached  # the change moved this page or the total
    index.close()


def test_access_bumps_keep_the_cursors_and_still_show_fresh_counts(index: MemoryIndex) -> None:
    where = SearchFilter(client_id="a")
    page_both(index, where, True, 5, 0)
    hits = index._cursors.hits
    found = index.by_id("r10")
    assert found is not None
    index.bump_access([found[0]], NOW)
    rows, _total = page_both(index, where, True, 5, 5)
    assert index._cursors.hits == hits + 1
    assert [row["access_count"] for row in rows if row["id"] == "r10"] == [1]


def test_page_cursors_keep_a_few_listings_and_a_few_ends_each() -> None:
    cursors = PageCursors(listings=2, ends=2)
    cursors.sync(1)
    for key in ("x", "y", "z"):
        for end in (10, 20, 30):
            cursors.remember((key, ()), end, end * 100)
    assert cursors.start(("x", ()), 25) is None  # the oldest listing went
    assert cursors.start(("z", ()), 15) is None  # the oldest end of z went
    assert cursors.start(("z", ()), 25) == (20, 2000)
    assert cursors.start(("z", ()), 99) == (30, 3000)
    cursors.sync(2)
    assert cursors.start(("z", ()), 99) is None
