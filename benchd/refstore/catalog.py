"""In-memory mirror of the stored rows for the dense and tag retrievers.

SQLite holds the records and the BM25 index; the dense and tag scorers need
to touch every active row per query, which is only fast as whole-array numpy
operations. :class:`Catalog` keeps, per SQLite row id: the unit vector, the
active flag, tenant and type codes, ``created_at`` as epoch seconds and the
tag words. Row ids index the arrays directly (they grow by doubling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Catalog", "SearchFilter"]

FloatMatrix = npt.NDArray[np.float32]
Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.intp], FloatMatrix]
# Below this share of non-zero entries (hashing embedders at 1024 dims sit
# near 3%) per-dimension postings beat a full mat-vec by far.
SPARSE_MAX_DENSITY = 0.05


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which rows a search may return: tenant, type and a ``created_at`` window."""

    client_id: str | None = None
    type: str | None = None
    since_ts: float | None = None
    until_ts: float | None = None


class Catalog:
    """Row metadata and vectors as numpy arrays, indexed by SQLite row id."""

    def __init__(self, dims: int) -> None:
        self._codes: dict[str, int] = {}
        self.size = 0
        self._postings: Postings | None = None
        self._postings_fresh = False
        self._allocate(1024, dims)

    def _allocate(self, capacity: int, dims: int) -> None:
        self.vectors: FloatMatrix = np.zeros((capacity, dims), dtype=np.float32)
        self.active = np.zeros(capacity, dtype=bool)
        self.client = np.full(capacity, -1, dtype=np.int32)
        self.type = np.full(capacity, -1, dtype=np.int32)
        self.created = np.zeros(capacity, dtype=np.float64)
        self.tags: list[frozenset[str]] = [frozenset()] * capacity

    @property
    def dims(self) -> int:
        return int(self.vectors.shape[1])

    def _grow(self, rid: int) -> None:
        capacity = len(self.active)
        if rid < capacity:
            return
        new_capacity = max(capacity * 2, rid + 1)
        old = (self.vectors, self.active, self.client, self.type, self.created, self.tags)
        self._allocate(new_capacity, self.dims)
        self.vectors[:capacity] = old[0]
        self.active[:capacity] = old[1]
        self.client[:capacity] = old[2]
        self.type[:capacity] = old[3]
        self.created[:capacity] = old[4]
        self.tags[:capacity] = old[5]

    def code(self, value: str) -> int:
        """A small integer for a tenant or type string (stable for the process)."""
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self._codes)
        return found

    def put(
        self,
        rid: int,
        *,
        client_id: str,
        type_: str,
        created_ts: float,
        active: bool,
        tags: frozenset[str],
    ) -> None:
        """Record (or overwrite) one row's metadata; set its vector with :meth:`set_vectors`."""
        self._grow(rid)
        self.size = max(self.size, rid + 1)
        self.client[rid] = self.code(client_id)
        self.type[rid] = self.code(type_)
        self.created[rid] = created_ts
        self.active[rid] = active
        self.tags[rid] = tags

    def set_active(self, rid: int, active: bool) -> None:
        if rid < self.size:
            self.active[rid] = active

    def set_vectors(self, rids: list[int], matrix: FloatMatrix) -> None:
        """Store unit vectors for rows; a new dimension replaces the whole matrix."""
        if not rids:
            return
        self._postings_fresh = False
        if matrix.shape[1] != self.dims:
            self.vectors = np.zeros((len(self.active), matrix.shape[1]), dtype=np.float32)
        self.vectors[np.asarray(rids, dtype=np.int64)] = matrix

    def mask(self, where: SearchFilter) -> npt.NDArray[np.bool_]:
        """Boolean mask over ``[0, size)`` of active rows matching ``where``."""
        n = self.size
        keep = self.active[:n].copy()
        if where.client_id is not None:
            keep &= self.client[:n] == self._codes.get(where.client_id, -2)
        if where.type is not None:
            keep &= self.type[:n] == self._codes.get(where.type, -2)
        if where.since_ts is not None:
            keep &= self.created[:n] >= where.since_ts
        if where.until_ts is not None:
            keep &= self.created[:n] <= where.until_ts
        return keep

    def scores(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Dot product of ``query`` with every row in ``[0, size)``."""
        postings = self._current_postings()
        if postings is None:
            return self.vectors[: self.size] @ query
        indptr, rows, values = postings
        dims = np.flatnonzero(query)
        starts, ends = indptr[dims], indptr[dims + 1]
        if len(dims) == 0 or not np.any(ends > starts):
            return np.zeros(self.size, dtype=np.float32)
        picks = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
        weights = values[picks] * np.repeat(query[dims], ends - starts)
        return np.bincount(rows[picks], weights=weights, minlength=self.size).astype(np.float32)

    def _current_postings(self) -> Postings | None:
        """Per-dimension (row, value) lists when the vectors are sparse; rebuilt after writes."""
        if self._postings_fresh:
            return self._postings
        live = self.vectors[: self.size]
        self._postings = None
        if np.count_nonzero(live) <= SPARSE_MAX_DENSITY * live.size:
            rows, cols = np.nonzero(live)
            order = np.argsort(cols, kind="stable")
            indptr = np.zeros(self.dims + 1, dtype=np.int64)
            np.cumsum(np.bincount(cols, minlength=self.dims), out=indptr[1:])
            self._postings = (indptr, rows[order], live[rows[order], cols[order]])
        self._postings_fresh = True
        return self._postings
