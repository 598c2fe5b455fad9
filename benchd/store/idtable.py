"""What a listing of 10^6 records keeps, by corpus position instead of by id string.

A listing of benchd's namespace is mostly benchd's own copies of the corpus,
each under the id benchd derives for its fixture memory
(:meth:`~benchd.store.owned.OwnedIds.store_id`). Such a record needs no id
string, dict entry or object of its own: its corpus position
(:meth:`~benchd.store.owned.OwnedIds.index`) says which one it is, and what
the listing keeps of it (:class:`~benchd.store.protocol.Listed`'s fingerprint
and creation time) fits in fixed-width arrays. Any other record (a
sentinel, a foreign one, a store-assigned id, an earlier corpus's) is kept as
it came, by id. :class:`ListedTable` is such a listing, :class:`IdSet` a set
of store ids kept the same way. Both read and iterate like the dict and set
they replace; a record read from them is made anew (equal, not identical).

Pure: no I/O.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableSet, Sequence
from typing import TYPE_CHECKING, overload

from benchd.store.lease import Holder
from benchd.store.owned import OwnedIds
from benchd.store.protocol import Listed

if TYPE_CHECKING:
    import numpy as np

__all__ = ["IdSet", "ListedRows", "ListedTable", "Row", "SeenIds", "zero_positions"]

_LISTED = 1  # the position's record is listed
_AS_ID = 2  # ... with ``written_as`` its own id (else None)
_NO_KEPT = 4  # ... with no fingerprint (``kept`` None)


def _positions(flags: bytes | bytearray) -> Iterator[int]:
    """The positions whose flag byte is not zero, in order."""
    return (at for at, flag in enumerate(flags) if flag)


def zero_positions(flags: bytes | bytearray) -> Iterator[int]:
    """The positions of the zero bytes of ``flags``, ascending."""
    at = flags.find(0)
    while at >= 0:
        yield at
        at = flags.find(0, at + 1)


class ListedTable(Mapping[str, Listed]):
    """A listing's records by store id: the corpus's copies by position, the rest by id.

    ``add`` is ``dict.__setitem__`` keyed by the record's own id (a later
    record under an id replaces the earlier one).
    """

    __slots__ = ("_count", "_created", "_flags", "_kept", "_width", "extras", "owned")

    def __init__(self, owned: OwnedIds) -> None:
        self.owned = owned
        self._flags = bytearray(len(owned))  # per position: 0, or _LISTED and the others
        self._width = -1  # bytes of ``kept`` in the array (set by the first record with one)
        self._kept = bytearray()  # per position, ``_width`` bytes
        self._created: array[float] | None = None  # per position, NaN for None
        self._count = 0  # positions listed
        self.extras: dict[str, Listed] = {}  # records not kept by position, by id

    def add(self, record: Listed) -> None:
        """Keep ``record`` under its id, replacing what that id held."""
        plain = record.lease is None and record.digest is None
        at = self.owned.index(record.id)
        if not self._put(record.id, at, record.written_as, plain, record.kept, record.created_s):
            self.extras[record.id] = record

    def add_all(self, records: Iterable[Listed]) -> None:
        """:meth:`add` each of ``records`` in turn; a :class:`ListedRows` row by row, its
        records made only where kept as they came."""
        if not isinstance(records, ListedRows):
            for record in records:
                self.add(record)
            return
        put, rows, flags, extras = self._put, records.rows, self._flags, self.extras
        positions = self.owned.indexes([row[0] for row in rows])
        for n, (sid, written_as, lease, kept, created) in enumerate(rows):
            at, dates, width = positions[n], self._created, self._width
            if (  # the common row, kept by position here (else as _put keeps it)
                at is not None
                and lease is None
                and (written_as is None or written_as == sid)
                and (kept is None or len(kept) == width)
                and dates is not None
                and created is not None
                and created == created  # not NaN
                and not extras
            ):
                flag = _LISTED if written_as is None else _LISTED | _AS_ID
                if kept is None:
                    flag |= _NO_KEPT
                else:
                    start = at * width
                    self._kept[start : start + width] = kept
                dates[at] = created
                if not flags[at]:
                    self._count += 1
                flags[at] = flag
            elif not put(sid, at, written_as, lease is None, kept, created):
                extras[sid] = records[n]

    def _put(
        self,
        sid: str,
        index: int | None,
        written_as: str | None,
        plain: bool,
        kept: bytes | None,
        created: float | None,
    ) -> bool:
        """Keep a record by position (``index``: ``owned.index(sid)``; ``plain``: it carries
        no lease and no digest); False where the arrays cannot say it exactly (the caller
        keeps it by id)."""
        at = None
        if (
            plain
            and (written_as is None or written_as == sid)
            and (kept is None or self._width < 0 or len(kept) == self._width)
            and (created is None or created == created)  # not NaN
        ):
            at = index
        if at is None:
            self._drop(index)
            return False
        if self.extras:
            self.extras.pop(sid, None)
        flags = _LISTED if written_as is None else _LISTED | _AS_ID
        if kept is None:
            flags |= _NO_KEPT
        else:
            if self._width < 0:
                self._width = len(kept)
                self._kept = bytearray(self._width * len(self._flags))
            start = at * self._width
            self._kept[start : start + self._width] = kept
        if created is not None or self._created is not None:
            if self._created is None:
                self._created = array("d", [math.nan]) * len(self._flags)
            self._created[at] = math.nan if created is None else created
        if not self._flags[at]:
            self._count += 1
        self._flags[at] = flags
        return True

    def _drop(self, at: int | None) -> None:
        if at is not None and self._flags[at]:
            self._flags[at] = 0
            self._count -= 1

    def _at(self, store_id: str, at: int) -> Listed:
        flags = self._flags[at]
        kept = None
        if not flags & _NO_KEPT:
            start = at * self._width
            kept = bytes(self._kept[start : start + self._width])
        created = None if self._created is None else self._created[at]
        return Listed(
            store_id,
            store_id if flags & _AS_ID else None,
            kept=kept,
            created_s=None if created is None or math.isnan(created) else created,
        )

    def listed(self, store_id: str, at: int) -> Listed | None:
        """``self.get(store_id)`` where ``store_id`` is benchd's id for corpus position ``at``
        (the position not derived again from the id)."""
        if self.extras:
            found = self.extras.get(store_id)
            if found is not None:
                return found
        return self._at(store_id, at) if self._flags[at] else None

    def position(self, store_id: str) -> int | None:
        """The corpus position ``store_id`` is listed at (by position), else None."""
        at = self.owned.index(store_id)
        return at if at is not None and self._flags[at] else None

    def listed_at(self, at: int) -> bool:
        """Whether the record for corpus position ``at`` is listed by position."""
        return bool(self._flags[at])

    def positions(self) -> Iterator[int]:
        """The corpus positions listed (by position), in corpus order."""
        return _positions(self._flags)

    @property
    def by_position(self) -> int:
        """How many records are kept by position."""
        return self._count

    def kept_equal(self, start: int, wanted: Sequence[bytes | None]) -> bytes:
        """One byte per corpus position from ``start`` on, one for each of ``wanted``: 1
        where the position is listed by position with ``kept`` equal to ``wanted``'s (None
        equals nothing), else 0. A run where every one is equal is compared in one piece."""
        n, width = len(wanted), self._width
        if width <= 0 or start < 0 or start + n > len(self._flags):
            return bytes(n)
        comparable = self._flags[start : start + n].translate(_KEPT_LISTED)
        span = self._kept[start * width : (start + n) * width]
        whole = comparable.count(0) == 0 and all(w is not None and len(w) == width for w in wanted)
        if whole and b"".join(wanted) == span:  # type: ignore[arg-type]  # none is None
            return b"\x01" * n
        out = bytearray(n)
        for at in _positions(comparable):
            one = wanted[at]
            if one is not None and one == bytes(span[at * width : (at + 1) * width]):
                out[at] = 1
        return bytes(out)

    def listed_flags(self) -> bytes:
        """One byte per corpus position: 1 where listed by position, else 0."""
        return bytes(self._flags.translate(_ONE_IF_SET))

    def __getitem__(self, store_id: str) -> Listed:
        if self.extras:
            found = self.extras.get(store_id)
            if found is not None:
                return found
        at = self.position(store_id)
        if at is None:
            raise KeyError(store_id)
        return self._at(store_id, at)

    def __contains__(self, store_id: object) -> bool:
        if not isinstance(store_id, str):
            return False
        return store_id in self.extras or self.position(store_id) is not None

    def __iter__(self) -> Iterator[str]:
        yield from self.extras
        for at in self.positions():
            yield self.owned.store_id_at(at)

    def __len__(self) -> int:
        return self._count + len(self.extras)

    def copy(self) -> ListedTable:
        other = ListedTable.__new__(ListedTable)
        other.owned = self.owned
        other._flags = bytearray(self._flags)
        other._width = self._width
        other._kept = bytearray(self._kept)
        other._created = None if self._created is None else array("d", self._created)
        other._count = self._count
        other.extras = dict(self.extras)
        return other


_ONE_IF_SET = bytes([0] + [1] * 255)
# 1 for a position listed by position with its ``kept`` in the array, else 0
_KEPT_LISTED = bytes(1 if f & _LISTED and not f & _NO_KEPT else 0 for f in range(256))

Row = tuple[str, str | None, Holder | None, bytes | None, float | None]
"""A listed record without a digest: id, written_as, lease, kept, created_s."""


class ListedRows(Sequence[Listed]):
    """A page's records as rows (:data:`Row`), each made a :class:`Listed` only when read:
    :meth:`ListedTable.add_all` keeps most of a page's records from their rows alone."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def append(self, row: Row) -> None:
        self.rows.append(row)

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Listed: ...

    @overload
    def __getitem__(self, index: slice) -> list[Listed]: ...

    def __getitem__(self, index: int | slice) -> Listed | list[Listed]:
        if isinstance(index, slice):
            return [_listed(row) for row in self.rows[index]]
        return _listed(self.rows[index])


def _listed(row: Row) -> Listed:
    sid, written_as, lease, kept, created = row
    return Listed(sid, written_as, None, lease, kept, created)


class IdSet(MutableSet[str]):
    """A set of store ids: benchd's ids for the corpus as one byte per position, others as
    strings. Iterating makes each corpus id's string anew."""

    __slots__ = ("_count", "_flags", "_other", "owned")

    def __init__(self, owned: OwnedIds, ids: Iterable[str] = ()) -> None:
        self.owned = owned
        self._flags = bytearray(len(owned))
        self._count = 0
        self._other: set[str] = set()
        self.update(ids)

    @classmethod
    def of_table(cls, table: ListedTable, ids: Iterable[str] = ()) -> IdSet:
        """The ids ``table`` lists by position, and ``ids``."""
        out = cls(table.owned)
        out._flags = bytearray(table.listed_flags())
        out._count = table.by_position
        out.update(ids)
        return out

    def add(self, value: str) -> None:
        at = self.owned.index(value)
        if at is None:
            self._other.add(value)
        elif not self._flags[at]:
            self._flags[at] = 1
            self._count += 1

    def discard(self, value: str) -> None:
        at = self.owned.index(value)
        if at is None:
            self._other.discard(value)
        elif self._flags[at]:
            self._flags[at] = 0
            self._count -= 1

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        at = self.owned.index(value)
        return value in self._other if at is None else bool(self._flags[at])

    def __iter__(self) -> Iterator[str]:
        yield from self._other
        for at in _positions(self._flags):
            yield self.owned.store_id_at(at)

    def __len__(self) -> int:
        return self._count + len(self._other)

    def update(self, ids: Iterable[str]) -> None:
        """:meth:`add` each of ``ids``, their positions looked up in one loop."""
        ids = ids if isinstance(ids, list | tuple) else list(ids)
        flags, other, count = self._flags, self._other, self._count
        for store_id, at in zip(ids, self.owned.indexes(ids), strict=True):
            if at is None:
                other.add(store_id)
            elif not flags[at]:
                flags[at] = 1
                count += 1
        self._count = count

    def others(self) -> Iterator[str]:
        """The ids not kept by position."""
        return iter(self._other)

    def flags_without(self, drop: bytes) -> bytes:
        """One byte per position: 1 where this set holds it and ``drop`` has 0 (same owned)."""
        n = len(self._flags)
        mine = int.from_bytes(self._flags, "little")
        return (mine & ~int.from_bytes(drop, "little")).to_bytes(n, "little")

    def add_flags(self, flags: bytes) -> None:
        """Add the positions where ``flags`` (one byte each, 0 or 1) has 1."""
        n = len(self._flags)
        mine = int.from_bytes(self._flags, "little") | int.from_bytes(flags, "little")
        self._flags = bytearray(mine.to_bytes(n, "little"))
        self._count = n - self._flags.count(0)


MERGE_AT = 1 << 16  # hashes a SeenIds holds in a set before it sorts them into its array


class SeenIds:
    """Which ids a paged listing has shown so far, as 8-byte hashes, not strings.

    Enough to tell a page that brings nothing new (a store paging forever)
    from one that does: a page of 500 ids all colliding with earlier ones by
    chance does not happen. Recent hashes sit in a set, merged into a sorted
    numpy array every ``merge_at`` (numpy is imported then: ``validate``
    builds a store without it). A bit filter beside the array (a bit per
    hash's top bits, 16 to 32 bits per hash held) rules out most of a page's
    hashes without a search of the array: only the few it cannot rule out
    are looked up.
    """

    __slots__ = ("_bits", "_filter", "_merge_at", "_recent", "_sorted")

    def __init__(self, merge_at: int = MERGE_AT) -> None:
        self._sorted: np.ndarray | None = None
        self._filter: np.ndarray | None = None  # uint8, a bit per slot of the top bits
        self._bits = 0  # log2 of the filter's slots
        self._recent: set[int] = set()
        self._merge_at = merge_at

    def __len__(self) -> int:
        return (0 if self._sorted is None else len(self._sorted)) + len(self._recent)

    def add_new(self, ids: Iterable[str]) -> bool:
        """Add ``ids``; whether any of them was not seen before."""
        hashes: list[int] = list(map(hash, ids))
        if self._sorted is not None and hashes:
            import numpy as np

            wanted = np.array(hashes, dtype=np.int64)
            hashes = wanted[~self._in_sorted(wanted)].tolist()
        new = not self._recent.issuperset(hashes)
        self._recent.update(hashes)
        if len(self._recent) >= self._merge_at:
            import numpy as np

            merged = np.sort(np.fromiter(self._recent, dtype=np.int64, count=len(self._recent)))
            # No hash is in both (a recent one was new to the array): the union is the recent
            # ones put in their places, one copy of the array (not a sort of it all again).
            held = self._sorted
            self._sorted = (
                merged if held is None else np.insert(held, np.searchsorted(held, merged), merged)
            )
            self._recent = set()
            self._note(merged)
        return new

    def _in_sorted(self, wanted: np.ndarray) -> np.ndarray:
        """Which of ``wanted`` (int64) the sorted array holds, as a bool array."""
        import numpy as np

        assert self._sorted is not None and self._filter is not None
        maybe = np.flatnonzero(self._marked(wanted))  # the filter cannot rule these out
        found = np.zeros(len(wanted), dtype=bool)
        if len(maybe):
            held = self._sorted
            candidates = wanted[maybe]
            at = np.minimum(np.searchsorted(held, candidates), len(held) - 1)
            found[maybe] = held[at] == candidates
        return found

    def _slots(self, hashes: np.ndarray) -> np.ndarray:
        """Each hash's slot in the filter: its top ``_bits`` bits."""
        import numpy as np

        slots: np.ndarray = np.right_shift(hashes.view(np.uint64), np.uint64(64 - self._bits))
        return slots

    def _marked(self, hashes: np.ndarray) -> np.ndarray:
        """Whether each hash's filter bit is set (every held hash's is)."""
        import numpy as np

        assert self._filter is not None
        slots = self._slots(hashes)
        bit = (slots & np.uint64(7)).astype(np.uint8)
        marked: np.ndarray = ((self._filter[slots >> np.uint64(3)] >> bit) & 1).astype(bool)
        return marked

    def _note(self, merged: np.ndarray) -> None:
        """Set the filter bits of ``merged`` (just added to the array); the filter made anew,
        at 32 bits a hash held, once it holds fewer than 16."""
        import numpy as np

        assert self._sorted is not None
        held = len(self._sorted)
        if self._filter is None or held * 16 > (1 << self._bits):
            self._bits = min(63, max(16, (held * 32 - 1).bit_length()))
            self._filter = np.zeros(1 << (self._bits - 3), dtype=np.uint8)
            merged = self._sorted
        slots = self._slots(merged)
        bits = (np.uint64(1) << (slots & np.uint64(7))).astype(np.uint8)
        np.bitwise_or.at(self._filter, slots >> np.uint64(3), bits)
