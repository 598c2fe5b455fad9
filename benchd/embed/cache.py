"""Vectors already computed, on disk, by model label, role and text.

The embed stage asks here before it asks the model: an unchanged corpus is
embedded once per machine, not once per cycle nor per ``benchd once``. A
vector is keyed by the embedder's label (so a model switch misses), its role
(``passage`` or ``query``: e5 embeds them differently) and the sha256 of the
text. One SQLite file in WAL mode holds them, so a daemon and a ``once``
beside it share it safely; it is bounded (:data:`MAX_ROWS`, oldest written
first out).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["CACHE_FILE", "MAX_ROWS", "Role", "VectorCache", "default_cache_dir"]

Role = Literal["passage", "query"]
CACHE_FILE = "vectors.sqlite3"
MAX_ROWS = 500_000
"""At most this many vectors are kept (about 0.8 GB at 384 dimensions)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    role TEXT NOT NULL,
    digest BLOB NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, role, digest)
)
"""
_CHUNK = 500  # keys per SELECT (SQLite's bound-parameter limit is 32766)


def default_cache_dir() -> Path:
    """``$BENCHD_CACHE_DIR``, else ``$XDG_CACHE_HOME/benchd``, else ``~/.cache/benchd``."""
    explicit = os.environ.get("BENCHD_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "benchd"


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class VectorCache:
    """A bounded on-disk map ``(model, role, text) -> float32 vector``; blocking calls.

    Callers run :meth:`get` and :meth:`put` in a worker thread. A cache that
    cannot be opened or written is reported once by the caller and skipped:
    vectors are then computed, never wrong.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / CACHE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()

    def get(
        self, model: str, role: Role, texts: Sequence[str]
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The cached vectors of ``texts``, by position; a text not cached is absent."""
        digests = [_digest(t) for t in texts]
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        unique = list(dict.fromkeys(digests))
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                part = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT digest, dims, vector FROM vectors "
                    f"WHERE model = ? AND role = ? AND digest IN ({marks})",
                    (model, role, *part),
                ).fetchall()
                for digest, dims, blob in rows:
                    vector = np.frombuffer(blob, dtype="<f4")
                    if vector.shape == (dims,):
                        found[bytes(digest)] = vector.astype(np.float32)
        return {i: found[d] for i, d in enumerate(digests) if d in found}

    def put(self, model: str, role: Role, texts: Sequence[str], vectors: npt.NDArray[Any]) -> None:
        """Keep these vectors (row i is the vector of ``texts[i]``), then trim to the bound."""
        rows = [
            (model, role, _digest(t), int(v.shape[0]), np.asarray(v, dtype="<f4").tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, role, digest, dims, vector) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            (count,) = self._db.execute("SELECT count(*) FROM vectors").fetchone()
            if count > MAX_ROWS:
                self._db.execute(
                    "DELETE FROM vectors WHERE rowid IN "
                    "(SELECT rowid FROM vectors ORDER BY rowid LIMIT ?)",
                    (count - MAX_ROWS,),
                )
            self._db.commit()

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            self._db.close()
