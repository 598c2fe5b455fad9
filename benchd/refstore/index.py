"""SQLite storage for the reference store: records, soft deletes and BM25 (FTS5).

One connection, used only from the event loop thread (queries take well
under a millisecond, so a thread hop would cost more than it saves). Each
SQL text is fixed per filter shape, so :mod:`sqlite3`'s statement cache
keeps them prepared. Row ids also index the numpy :class:`Catalog` that the
dense and tag retrievers scan.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from benchd.refstore.catalog import Catalog, FloatMatrix, SearchFilter
from benchd.refstore.paging import PageCursors
from benchd.refstore.records import NewRecord
from benchd.refstore.structured import StructuredTables
from benchd.refstore.text import words

__all__ = ["MemoryIndex"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    client_id TEXT NOT NULL,
    type TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    active INTEGER NOT NULL,
    created_ts REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at TEXT,
    deleted_at TEXT,
    tag_text TEXT NOT NULL,
    payload TEXT NOT NULL,
    vec BLOB,
    vec_model TEXT
);
CREATE INDEX IF NOT EXISTS memories_dedup ON memories (content_hash, client_id, type)
    WHERE active = 1;
CREATE INDEX IF NOT EXISTS memories_client ON memories (client_id, rid);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(body, tokenize = 'porter unicode61');
"""

_COLUMNS = "rid, id, active, access_count, last_accessed_at, deleted_at, payload"


def _where_sql(where: SearchFilter, alias: str = "") -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value, op in (
        ("client_id", where.client_id, "="),
        ("type", where.type, "="),
        ("created_ts", where.since_ts, ">="),
        ("created_ts", where.until_ts, "<="),
    ):
        if value is not None:
            clauses.append(f"{alias}{column} {op} ?")
            params.append(value)
    return "".join(f" AND {clause}" for clause in clauses), params


class MemoryIndex:
    """Records in SQLite (in memory or a file) plus their numpy mirror."""

    def __init__(self, path: str | None, dims: int) -> None:
        self._db = sqlite3.connect(
            path or ":memory:", check_same_thread=False, isolation_level=None
        )
        self.persistent = bool(path)
        if path:
            self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.executescript(_SCHEMA)
        self.structured = StructuredTables(self._db)
        self.catalog = Catalog(dims)
        self._cursors = PageCursors[int]()  # after a page: its last row id
        self._ms_cursors = PageCursors[tuple[int, str]]()  # the real server's time cursor
        self._quiet_changes = 0  # rows changed that no listing depends on

    def close(self) -> None:
        self._db.close()

    # -- loading and writing -------------------------------------------------

    def load_catalog(self, model: str) -> list[tuple[int, str]]:
        """Fill the catalog from the database; return ``(rid, text)`` rows still to embed.

        Vectors stored by the same ``model`` are reused, so a file-backed
        store restarted with a remote embedder does not re-embed everything.
        """
        rows = self._db.execute(
            "SELECT rid, client_id, type, created_ts, active, tag_text, payload, vec, vec_model"
            " FROM memories"
        ).fetchall()
        texts: list[tuple[int, str]] = []
        stored: list[tuple[int, bytes]] = []
        for rid, client_id, type_, created_ts, active, tag_text, payload, vec, vec_model in rows:
            self.catalog.put(
                rid,
                client_id=client_id,
                type_=type_,
                created_ts=created_ts,
                active=bool(active),
                tags=frozenset(words(tag_text)),
            )
            if vec is not None and vec_model == model:
                stored.append((rid, vec))
            else:
                texts.append((rid, json.loads(payload)["text"]))
        if stored and len({len(vec) for _rid, vec in stored}) == 1:
            matrix = np.frombuffer(b"".join(vec for _rid, vec in stored), dtype="<f4")
            self.catalog.set_vectors([rid for rid, _vec in stored], matrix.reshape(len(stored), -1))
        elif stored:
            texts.extend(self._text_of(rid) for rid, _vec in stored)
        return texts

    def _text_of(self, rid: int) -> tuple[int, str]:
        payload = self._db.execute("SELECT payload FROM memories WHERE rid = ?", (rid,)).fetchone()
        return rid, json.loads(payload[0])["text"]

    def set_vectors(self, rids: Sequence[int], matrix: FloatMatrix, model: str) -> None:
        """Give rows their vectors; a file-backed store also keeps them, tagged with ``model``."""
        self.catalog.set_vectors(list(rids), matrix)
        if not self.persistent or not rids:
            return
        self.begin()
        try:
            self._db.executemany(
                "UPDATE memories SET vec = ?, vec_model = ? WHERE rid = ?",
                [(matrix[i].astype("<f4").tobytes(), model, rid) for i, rid in enumerate(rids)],
            )
        finally:
            self.commit()

    def begin(self) -> None:
        self._db.execute("BEGIN")

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def is_duplicate(self, record: NewRecord) -> bool:
        """True when an active record has the same content hash, tenant and type."""
        row = self._db.execute(
            "SELECT 1 FROM memories WHERE content_hash = ? AND client_id = ? AND type = ?"
            " AND active = 1 LIMIT 1",
            (record.content_hash, record.client_id, record.type),
        ).fetchone()
        return row is not None

    def write(self, record: NewRecord) -> int:
        """Insert the record, or overwrite the one with the same id; return its row id."""
        rid = self._upsert_row(record)
        self._db.execute(
            "INSERT INTO memories_fts (rowid, body) VALUES (?, ?)", (rid, record.content)
        )
        self.catalog.put(
            rid,
            client_id=record.client_id,
            type_=record.type,
            created_ts=record.created_ts,
            active=bool(record.payload["active"]),
            tags=frozenset(words(record.tag_text)),
        )
        return rid

    def _upsert_row(self, record: NewRecord) -> int:
        """Write the memories row (dropping an overwritten row's FTS entry); return its rid."""
        values = (
            record.client_id,
            record.type,
            record.content_hash,
            1 if record.payload["active"] else 0,
            record.created_ts,
            record.access_count,
            record.tag_text,
            json.dumps(record.payload),
        )
        found = self._db.execute("SELECT rid FROM memories WHERE id = ?", (record.id,)).fetchone()
        if found is None:
            cursor = self._db.execute(
                "INSERT INTO memories (client_id, type, content_hash, active, created_ts,"
                " access_count, tag_text, payload, id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, record.id),
            )
            return int(cursor.lastrowid or 0)
        rid = int(found[0])
        self._db.execute(
            "UPDATE memories SET client_id = ?, type = ?, content_hash = ?, active = ?,"
            " created_ts = ?, access_count = ?, tag_text = ?, payload = ?, deleted_at = NULL,"
            " vec = NULL, vec_model = NULL"
            " WHERE rid = ?",
            (*values, rid),
        )
        self._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (rid,))
        return rid

    def deactivate(self, memory_id: str, now: str) -> str | None:
        """Soft-delete by id: ``"deleted"``, ``"already_inactive"`` or None if unknown."""
        row = self._db.execute(
            "SELECT rid, active FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            return None
        if not row[1]:
            return "already_inactive"
        self._db.execute(
            "UPDATE memories SET active = 0, deleted_at = ? WHERE rid = ?", (now, row[0])
        )
        self.catalog.set_active(int(row[0]), False)
        return "deleted"

    def bump_access(self, rids: Sequence[int], now: str) -> None:
        """Count one more access for each returned row (the store's ranking boost).

        These changes leave listings' cursors valid: no listing filters or
        orders by access counts (see :meth:`generation`).
        """
        before = self._db.total_changes
        self._db.executemany(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ?"
            " WHERE rid = ?",
            [(now, rid) for rid in rids],
        )
        self._quiet_changes += self._db.total_changes - before

    # -- reading ---------------------------------------------------------------

    def bm25(self, match: str, where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        """Top rows for an FTS5 MATCH expression, best first, score = -bm25 (> 0)."""
        extra, params = _where_sql(where, "m.")
        sql = (
            "SELECT m.rid, -bm25(memories_fts) FROM memories_fts"
            " JOIN memories m ON m.rid = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND m.active = 1{extra}"
            " ORDER BY bm25(memories_fts) LIMIT ?"
        )
        return [(int(r), float(s)) for r, s in self._db.execute(sql, (match, *params, limit))]

    def fetch(self, rids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Full payloads (with id, access_count, active) for the given rows."""
        wanted = list(rids)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE rid IN ({marks})", wanted
        ).fetchall()
        return {int(row[0]): _payload(row) for row in rows}

    def by_id(self, memory_id: str) -> tuple[int, dict[str, Any]] | None:
        """One record (active or not) by its global id: ``(rid, payload)``, or None."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else (int(row[0]), _payload(row))

    def export(
        self, where: SearchFilter, active_only: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of records in insertion order, and the total that match.

        Answers exactly what :meth:`export_by_offset` answers, in O(page): a
        page that starts where an earlier one ended, the table unchanged
        since, is read from that page's last row id on, and the total is the
        one counted then (see :mod:`benchd.refstore.paging`).
        """
        extra, params = _where_sql(where)
        cond = ("active = 1" if active_only else "1 = 1") + extra
        key = (cond, tuple(params))
        total = self._total(cond, params)
        start = self._cursors.start(key, offset)
        if start is None:
            rows = self._page(cond, params, limit, offset)
        else:
            end, last_rid = start
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {cond} AND rid > ?"
                " ORDER BY rid LIMIT ? OFFSET ?",
                (*params, last_rid, limit, offset - end),
            ).fetchall()
        if rows:
            self._cursors.remember(key, offset + len(rows), int(rows[-1][0]))
        return [_payload(row) for row in rows], total

    def export_by_offset(
        self, where: SearchFilter, active_only: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """:meth:`export` the plain way, counting and stepping over ``offset`` rows each time."""
        extra, params = _where_sql(where)
        cond = ("active = 1" if active_only else "1 = 1") + extra
        rows = self._page(cond, params, limit, offset)
        return [_payload(row) for row in rows], self._count(cond, params)

    def generation(self) -> tuple[int, int]:
        """Changes the table went through: equal twice, no listing answer can differ.

        Rows written by this connection (every INSERT, UPDATE and DELETE
        counts, whichever path issued it) except access-count bumps, which
        touch no column a listing filters or orders by (the payloads listed
        are read fresh), plus SQLite's count of commits by other connections
        to the same file.
        """
        others = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        return self._db.total_changes - self._quiet_changes, others

    def _total(self, cond: str, params: Sequence[Any]) -> int:
        """Rows matching ``cond``: counted once per generation of the table."""
        generation = self.generation()
        self._cursors.sync(generation)
        self._ms_cursors.sync(generation)
        key = (cond, tuple(params))
        total = self._cursors.total(key)
        if total is None:
            total = self._count(cond, params)
            self._cursors.set_total(key, total)
        return total

    def _count(self, cond: str, params: Sequence[Any]) -> int:
        row = self._db.execute(f"SELECT COUNT(*) FROM memories WHERE {cond}", params).fetchone()
        return int(row[0])

    def _page(self, cond: str, params: Sequence[Any], limit: int, offset: int) -> list[Any]:
        return self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {cond} ORDER BY rid LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One record's full payload by id (active or not), or None."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else _payload(row)

    def export_by_ms_cursor(
        self, where: SearchFilter, active_only: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Pages as the real server cuts them: by a ``(created_at, id)`` cursor in milliseconds.

        Rows are listed newest first (``created_at``, then ``id``, descending);
        each page starts below the previous page's last row, with that row's
        time cut to the millisecond. Rows sharing one exact millisecond are
        all listed (the id breaks the tie), but a row dated below the
        millisecond, in the boundary millisecond and older than the boundary
        row, falls between the two pages. ``offset`` counts rows of that cut
        listing (which depends on ``limit``: the cuts fall every ``limit``
        rows); ``total`` counts them all.

        The cut listing is walked from its start, ``limit`` rows at a time,
        up to ``offset + limit``; a page of the same filter and size that
        ended at or before ``offset``, the table unchanged since, saves the
        walk up to there (:mod:`benchd.refstore.paging`).
        """
        extra, params = _where_sql(where)
        cond = ("active = 1" if active_only else "1 = 1") + extra
        total = self._total(cond, params)
        walk = (f"{cond} cut every {limit}", tuple(params))
        start = self._ms_cursors.start(walk, offset)
        base, cursor = (0, None) if start is None else start
        listed, cursor = self._ms_walk(cond, params, limit, cursor, offset + limit - base)
        if cursor is not None:
            self._ms_cursors.remember(walk, base + len(listed), cursor)
        return [_payload(row) for row in listed[offset - base : offset - base + limit]], total

    def _ms_walk(
        self,
        cond: str,
        params: Sequence[Any],
        limit: int,
        cursor: tuple[int, str] | None,
        wanted: int,
    ) -> tuple[list[Sequence[Any]], tuple[int, str] | None]:
        """At least ``wanted`` rows of the cut listing from ``cursor`` on (fewer at its end)."""
        us = "CAST(ROUND(created_ts * 1000000) AS INTEGER)"
        listed: list[Sequence[Any]] = []
        while len(listed) < wanted:
            after = "" if cursor is None else f" AND ({us} < ? OR ({us} = ? AND id < ?))"
            more = () if cursor is None else (cursor[0], cursor[0], cursor[1])
            rows = self._db.execute(
                f"SELECT {_COLUMNS}, {us} FROM memories WHERE {cond}{after}"
                f" ORDER BY {us} DESC, id DESC LIMIT ?",
                (*params, *more, limit),
            ).fetchall()
            if not rows:
                break
            listed.extend(row[:-1] for row in rows)
            cursor = (int(rows[-1][-1]) // 1000 * 1000, str(rows[-1][1]))
        return listed, cursor

    def texts(self) -> list[tuple[int, str]]:
        """Every row's ``(rid, text)``: what a new embedder must re-embed."""
        rows = self._db.execute("SELECT rid, payload FROM memories").fetchall()
        return [(int(rid), json.loads(payload)["text"]) for rid, payload in rows]

    def count_active(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM memories WHERE active = 1").fetchone()[0])


def _payload(row: Sequence[Any]) -> dict[str, Any]:
    _rid, memory_id, active, access_count, last_accessed_at, deleted_at, payload = row
    body: dict[str, Any] = json.loads(payload)
    body["id"] = memory_id
    body["active"] = bool(active)
    body["access_count"] = int(access_count)
    body["last_accessed_at"] = last_accessed_at or body.get("created_at")
    body["deleted_at"] = deleted_at
    return body
