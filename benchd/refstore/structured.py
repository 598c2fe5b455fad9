"""The real server's structured tables: facts by ``key``, statuses by ``subject``, across tenants.

Beside its memories, the target API (v4.3) upserts every imported ``fact``
into a facts table keyed by ``key`` alone (a fact without a key: its content
hash) and every ``status`` into a statuses table keyed by ``subject`` alone
(without one: ``unknown``). Neither key holds the ``client_id``: importing a
fact under another tenant's key rewrites that tenant's row and moves it into
the importer's namespace, and deleting the memory leaves the row. The
``zengram-4.3`` profile keeps these tables so tests see what a prober that
writes fixture keys unchanged does to other tenants; ``GET /memory/query``
lists them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

__all__ = ["STRUCTURED_SCHEMA", "StructuredQuery", "StructuredTables", "table_of"]

STRUCTURED_SCHEMA = """
CREATE TABLE IF NOT EXISTS facts (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    content TEXT,
    source_agent TEXT,
    client_id TEXT NOT NULL,
    category TEXT,
    importance TEXT,
    knowledge_category TEXT,
    content_hash TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS statuses (
    subject TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    source_agent TEXT,
    client_id TEXT NOT NULL,
    category TEXT,
    importance TEXT,
    knowledge_category TEXT,
    content_hash TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""

_TABLES = {"fact": "facts", "facts": "facts", "status": "statuses", "statuses": "statuses"}
_KEY = {"facts": "key", "statuses": "subject"}
_VALUE = {"facts": "value", "statuses": "status"}
_SHARED = (
    "source_agent",
    "client_id",
    "category",
    "importance",
    "knowledge_category",
    "content_hash",
)
MAX_LIMIT = 500


def table_of(kind: str | None) -> str | None:
    """The table ``GET /memory/query?type=`` names (``fact``/``facts``, ``status``/...)."""
    return _TABLES.get(kind or "")


@dataclass(frozen=True, slots=True)
class StructuredQuery:
    """A parsed ``GET /memory/query`` for facts or statuses."""

    table: str
    client_id: str | None = None
    match: str | None = None  # a substring of the key (facts) or subject (statuses)
    limit: int = 50


class StructuredTables:
    """Upserts and listings on the index's SQLite connection (inside its transactions)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        db.executescript(STRUCTURED_SCHEMA)

    def upsert(self, payload: dict[str, Any], now: str) -> None:
        """Write a fact or status row as the real server does; other types write none."""
        table = {"fact": "facts", "status": "statuses"}.get(str(payload.get("type")))
        if table is None:
            return
        if table == "facts":
            key = payload.get("key") or payload["content_hash"]
        else:
            key = payload.get("subject") or "unknown"
        key_col, value_col = _KEY[table], _VALUE[table]
        extra = ", content" if table == "facts" else ""
        columns = f"{key_col}, {value_col}{extra}, {', '.join(_SHARED)}, created_at, updated_at"
        values: list[Any] = [key, payload["text"]]
        if table == "facts":
            values.append(payload["text"])
        values.extend(payload.get(name) for name in _SHARED)
        values.extend((payload.get("created_at") or now, now))
        updates = ", ".join(
            f"{c} = excluded.{c}"
            for c in (value_col, *(("content",) if extra else ()), *_SHARED, "updated_at")
        )
        marks = ", ".join("?" * len(values))
        self._db.execute(
            f"INSERT INTO {table} ({columns}) VALUES ({marks})"
            f" ON CONFLICT ({key_col}) DO UPDATE SET {updates}",
            values,
        )

    def list(self, query: StructuredQuery) -> list[dict[str, Any]]:
        """Rows newest update first, filtered by tenant and key/subject substring."""
        table = query.table
        clauses, params = ["1 = 1"], list[Any]()
        if query.client_id is not None:
            clauses.append("client_id = ?")
            params.append(query.client_id)
        if query.match is not None:
            escaped = query.match.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            clauses.append(f"{_KEY[table]} LIKE ? ESCAPE '\\'")
            params.append(f"%{escaped}%")
        cursor = self._db.execute(
            f"SELECT * FROM {table} WHERE {' AND '.join(clauses)}"
            f" ORDER BY updated_at DESC, {_KEY[table]} LIMIT ?",
            (*params, min(max(1, query.limit), MAX_LIMIT)),
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
