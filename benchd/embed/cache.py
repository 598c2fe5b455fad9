"""Vectors already computed, on disk, by model label, width, role and text.

The embed stage asks here before it asks the model: an unchanged corpus is
embedded once per machine, not once per cycle nor per ``benchd once``. A
vector is keyed by the embedder's label (so a model switch misses), its role
(``passage`` or ``query``: e5 embeds them differently) and the sha256 of the
text, and read only at the width asked for (or, before the stage knows it,
the width last written under the label). Writing rows of another width under
a label removes that label's rows of the old width (:meth:`VectorCache.put`
counts them): one label's rows never mix two widths.

One SQLite file in WAL mode holds them, so a daemon and a ``once`` beside it
share it safely; it is bounded (:data:`MAX_ROWS`, oldest written first out).
The file is never reached through a symbolic link, and a database that is not
benchd's vector cache (no :data:`APPLICATION_ID`, tables of its own) is
refused untouched (:class:`CacheRefused`): the stage then computes vectors.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "APPLICATION_ID",
    "CACHE_FILE",
    "MAX_ROWS",
    "CacheRefused",
    "Role",
    "VectorCache",
    "default_cache_dir",
]

Role = Literal["passage", "query"]
CACHE_FILE = "vectors.sqlite3"
MAX_ROWS = 500_000
"""At most this many vectors are kept (about 0.8 GB at 384 dimensions)."""

APPLICATION_ID = int.from_bytes(b"bnch", "big")
"""SQLite's ``application_id`` of benchd's vector cache: what tells it from another database."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    role TEXT NOT NULL,
    digest BLOB NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, role, digest)
)""",
    "CREATE TABLE IF NOT EXISTS widths (model TEXT PRIMARY KEY, dims INTEGER NOT NULL)",
)
_OWN_TABLES = {"vectors", "widths"}
_CHUNK = 500  # keys per SELECT (SQLite's bound-parameter limit is 32766)


def default_cache_dir() -> Path:
    """``$BENCHD_CACHE_DIR``, else ``$XDG_CACHE_HOME/benchd``, else ``~/.cache/benchd``."""
    explicit = os.environ.get("BENCHD_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "benchd"


class CacheRefused(Exception):
    """The cache file is a symbolic link, not a regular file, or another program's database."""


def _open_file(path: Path) -> tuple[int, int]:
    """Create or open ``path`` without following a link; its (device, inode)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise CacheRefused(f"{path} is a symbolic link; benchd opens only its own") from None
        raise exc
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        raise CacheRefused(f"{path} is not a regular file")
    return info.st_dev, info.st_ino


def _same_file(path: Path, identity: tuple[int, int]) -> None:
    """Refuse ``path`` (and its WAL files) if swapped for a link since it was opened."""
    info = os.lstat(path)
    if (info.st_dev, info.st_ino) != identity or not stat.S_ISREG(info.st_mode):
        raise CacheRefused(f"{path} changed while it was opened (now a link or another file)")
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.is_symlink():
            raise CacheRefused(f"{side} is a symbolic link; benchd opens only its own files")


def _claim(db: sqlite3.Connection, path: Path) -> None:
    """Check the database is benchd's cache (or empty, or one written before the marker)."""
    (app,) = db.execute("PRAGMA application_id").fetchone()
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if app == APPLICATION_ID or (app == 0 and tables <= _OWN_TABLES):
        return
    raise CacheRefused(
        f"{path} is another program's SQLite database (application_id {app}, "
        f"{len(tables)} tables), not benchd's vector cache; set [probe.target.embed] cache_dir "
        "to a directory of benchd's own"
    )


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
        identity = _open_file(self.path)
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        try:
            _same_file(self.path, identity)
            _claim(self._db, self.path)
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._db.commit()
        except BaseException:
            self._db.close()
            raise

    def width(self, model: str) -> int | None:
        """The width of the vectors last written under ``model``, if any."""
        with self._lock:
            row = self._db.execute("SELECT dims FROM widths WHERE model = ?", (model,)).fetchone()
            if row is None:  # a file written before the widths table: its latest row
                row = self._db.execute(
                    "SELECT dims FROM vectors WHERE model = ? ORDER BY rowid DESC LIMIT 1",
                    (model,),
                ).fetchone()
        return None if row is None else int(row[0])

    def get(
        self, model: str, role: Role, texts: Sequence[str], dims: int
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The cached ``dims``-wide vectors of ``texts`` by position; one not cached is absent."""
        digests = [_digest(t) for t in texts]
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        unique = list(dict.fromkeys(digests))
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                part = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT digest, vector FROM vectors "
                    f"WHERE model = ? AND role = ? AND dims = ? AND digest IN ({marks})",
                    (model, role, dims, *part),
                ).fetchall()
                for digest, blob in rows:
                    vector = np.frombuffer(blob, dtype="<f4")
                    if vector.shape == (dims,):
                        found[bytes(digest)] = vector.astype(np.float32)
        return {i: found[d] for i, d in enumerate(digests) if d in found}

    def put(self, model: str, role: Role, texts: Sequence[str], vectors: npt.NDArray[Any]) -> int:
        """Keep these vectors (row i is the vector of ``texts[i]``), then trim to the bound.

        Returns how many rows of another width under ``model`` were removed.
        """
        dims = int(vectors.shape[1])
        rows = [
            (model, role, _digest(t), dims, np.asarray(v, dtype="<f4").tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            dropped = self._keep_width(model, dims)
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
        return dropped

    def _keep_width(self, model: str, dims: int) -> int:
        """Record ``dims`` as ``model``'s width; remove its rows of any other (locked)."""
        row = self._db.execute("SELECT dims FROM widths WHERE model = ?", (model,)).fetchone()
        if row is not None and int(row[0]) == dims:
            return 0
        gone = self._db.execute(
            "DELETE FROM vectors WHERE model = ? AND dims != ?", (model, dims)
        ).rowcount
        self._db.execute("INSERT OR REPLACE INTO widths (model, dims) VALUES (?, ?)", (model, dims))
        return int(gone)

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            self._db.close()
