"""One listing of benchd's namespace, classified: benchd's records, its sentinels, the rest.

Pure: no I/O. A listed record is benchd's only when its id — the store's
own, or the id benchd wrote it under as the listing shows it beside the
store's (:attr:`~benchd.store.protocol.Listed.written_as`) — has the form of
an id benchd writes in this namespace (:mod:`benchd.store.owned`), never
because its content matches a fixture memory. benchd's sentinel is
recognised by its id, or, where the store assigns its own ids, by its text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Literal

from benchd.store.idtable import IdSet, ListedTable, zero_positions
from benchd.store.lease import Holder
from benchd.store.owned import OwnedIds, legacy_sentinel_id, sentinel_id, sentinel_text
from benchd.store.protocol import Listed

__all__ = [
    "FINGERPRINT_BYTES",
    "MIN_LISTING_RECORDS",
    "Listing",
    "Which",
    "digest",
    "fingerprint",
    "legacy_sentinel_text",
    "listing_limit",
    "sentinel_digests",
    "text_fingerprint",
    "text_pair_fingerprint",
]

Which = Literal["current", "legacy"]
"""A sentinel of this benchd version, or of an earlier one (migrated)."""


def digest(text: str) -> str:
    """The sha256 of a text, used to recognise a record by its content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


FINGERPRINT_BYTES = 8
"""A changed record passes for unchanged only if its 64-bit digest equals the stored one's."""


def fingerprint(*values: object) -> bytes | None:
    """A digest of JSON values (:data:`FINGERPRINT_BYTES`), equal exactly when the values
    are (dict order aside), short of a 64-bit collision.

    What a listing keeps of a record for a kind's ``unchanged``, instead of the
    record: a value JSON cannot say exactly (NaN, an object, keys of mixed types)
    gives None, and a record without a fingerprint is written again, never
    assumed unchanged. Texts and nulls alone (a record's content and type, the
    common case, hashed for every listed record) skip the JSON encoder.
    """
    if len(values) == 2 and type(values[0]) is str and type(values[1]) is str:
        return text_pair_fingerprint(values[0], values[1])
    if len(values) == 1 and type(values[0]) is str:
        return text_fingerprint(values[0])
    if all(v is None or type(v) is str for v in values):
        parts = ["n" if v is None else f"s{len(v)}:{v}" for v in values]  # type: ignore[arg-type]
        return _blake("".join(parts))
    try:
        text = json.dumps(values, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return _blake("j" + text)


def text_pair_fingerprint(first: str, second: str) -> bytes:
    """``fingerprint(first, second)`` of two texts (a record's content and type, taken of
    every listed record): the same digest, without the general case's checks."""
    return _blake(f"s{len(first)}:{first}s{len(second)}:{second}")


def text_fingerprint(text: str) -> bytes:
    """``fingerprint(text)`` of one text (a listed record's ``key`` or ``subject``): the same
    digest, without the general case's checks."""
    return _blake(f"s{len(text)}:{text}")


def _blake(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=FINGERPRINT_BYTES).digest()


def legacy_sentinel_text(namespace: str) -> str:
    """The sentinel text earlier benchd versions wrote."""
    return f"benchd sentinel: client_id {namespace} is reserved for benchd's probe corpus"


def sentinel_digests(namespace: str) -> dict[str, Which]:
    """The digests of the sentinel texts, current and legacy."""
    return {
        digest(sentinel_text(namespace)): "current",
        digest(legacy_sentinel_text(namespace)): "legacy",
    }


class Listing:
    """A listing of the namespace, by store id, with benchd's part of it worked out.

    ``claimed`` maps each record benchd wrote (no sentinel) to the fixture id
    it was written for (its own id where the fixture id is not in the corpus:
    an earlier version of the fixture); ``sentinels`` maps benchd's sentinel
    records to which sentinel they are. Where ``records`` is a
    :class:`~benchd.store.idtable.ListedTable` over ``owned``, its records
    kept by position are benchd's copies of the corpus by construction, and
    only the others are looked at one by one: nothing is kept per record
    beyond the table.
    """

    def __init__(self, records: Mapping[str, Listed], owned: OwnedIds) -> None:
        self.records = records
        self.owned = owned
        ns = owned.namespace
        self._ids: dict[str, Which] = {sentinel_id(ns): "current", legacy_sentinel_id(ns): "legacy"}
        self._digests = sentinel_digests(ns)
        self.sentinels: dict[str, Which] = {}
        table = records if isinstance(records, ListedTable) and records.owned is owned else None
        self._table = table
        # benchd's records not kept by position, to the fixture id each was written for
        self.assigned: dict[str, str] = {}
        for sid, rec in (table.extras if table is not None else records).items():
            which = self._sentinel_of(rec)
            if which is not None:
                self.sentinels[sid] = which
                continue
            fid = self._written_for(rec)
            if fid is not None:
                self.assigned[sid] = fid
        self.claimed: Mapping[str, str] = _Claimed(table, self.assigned)
        self._assigned_fixtures: set[str] | None = None  # assigned's fixture ids, when asked

    def __len__(self) -> int:
        return len(self.records)

    def merged(self, extra: Mapping[str, Listed]) -> Listing:
        """This listing with records read back by id added."""
        if self._table is None:
            return Listing({**self.records, **extra}, self.owned)
        table = self._table.copy()
        for record in extra.values():
            table.add(record)
        return Listing(table, self.owned)

    @property
    def held(self) -> IdSet:
        """Store ids of every record of benchd's listed (its records and sentinels)."""
        ids = [*self.assigned, *self.sentinels]
        if self._table is not None:
            return IdSet.of_table(self._table, ids)
        return IdSet(self.owned, ids)

    def held_beside(self, earlier: IdSet) -> IdSet:
        """The store ids this listing claims, and those of ``earlier`` it does not claim (sent
        batches the listing does not show, the sentinel)."""
        out = IdSet(self.owned, self.assigned)
        table = self._table
        if table is not None:
            out.add_flags(table.listed_flags())
            if earlier.owned is self.owned:
                out.add_flags(earlier.flags_without(table.listed_flags()))
                out.update(s for s in earlier.others() if s not in self.claimed)
                return out
        out.update(s for s in earlier if s not in self.claimed)
        return out

    def unlisted(self) -> Iterator[int] | None:
        """The corpus positions its table does not list by position, ascending (None: it
        keeps no table over ``owned``)."""
        if self._table is None:
            return None
        return zero_positions(self._table.listed_flags())

    def fixture_listed(self, fixture_id: str) -> bool:
        """Whether any listed record of benchd's was written for ``fixture_id``."""
        at = self.owned.position(fixture_id)
        if self._table is not None and at is not None and self._table.listed_at(at):
            return True
        if self._assigned_fixtures is None:
            self._assigned_fixtures = set(self.assigned.values())
        return fixture_id in self._assigned_fixtures

    def claims(self, fixture_id: str) -> bool:
        """Whether benchd's copy of ``fixture_id`` is listed under the id benchd derives."""
        at = self.owned.position(fixture_id)
        if self._table is not None and at is not None and self._table.listed_at(at):
            return True
        return self.assigned.get(self.owned.store_id(fixture_id)) == fixture_id

    @property
    def foreign(self) -> int:
        """How many listed records benchd did not write."""
        return len(self.records) - len(self.claimed) - len(self.sentinels)

    @property
    def lease(self) -> Holder | None:
        """The lease on the current sentinel; None where there is none."""
        record = self.records.get(sentinel_id(self.owned.namespace))
        return record.lease if record is not None else None

    def has_current_sentinel(self) -> bool:
        return "current" in self.sentinels.values()

    def legacy(self) -> list[str]:
        """Listed records an earlier benchd version wrote (bare fixture ids; no sentinel)."""
        return [
            sid
            for sid, rec in self.records.items()
            if sid not in self.sentinels and self._legacy_for(rec) is not None
        ]

    def _sentinel_of(self, record: Listed) -> Which | None:
        which: Which | None = None
        for value in (record.id, record.written_as):
            found = self._ids.get(value) if value is not None else None
            if found == "current" or (found is not None and which is None):
                which = found
        if which is None and record.digest is not None:
            which = self._digests.get(record.digest)
        return which

    def _written_for(self, record: Listed) -> str | None:
        for value in (record.id, record.written_as):
            if value is not None and self.owned.is_owned(value):
                return self.owned.fixture_id(value) or value
        return None

    def _legacy_for(self, record: Listed) -> str | None:
        for value in (record.id, record.written_as):
            if value is not None and value in self.owned.fixture_ids:
                return value
        return None


class _Claimed(Mapping[str, str]):
    """A listing's claimed records (store id -> fixture id): those its table keeps by
    position (each benchd's copy of the fixture memory at that position), then the rest."""

    __slots__ = ("_assigned", "_table")

    def __init__(self, table: ListedTable | None, assigned: Mapping[str, str]) -> None:
        self._table = table
        self._assigned = assigned

    def __getitem__(self, store_id: str) -> str:
        found = self._assigned.get(store_id)
        if found is not None:
            return found
        at = None if self._table is None else self._table.position(store_id)
        if at is None:
            raise KeyError(store_id)
        return self._table.owned.fixture_at(at)  # type: ignore[union-attr]

    def __contains__(self, store_id: object) -> bool:
        if store_id in self._assigned:
            return True
        return isinstance(store_id, str) and self._table is not None and (
            self._table.position(store_id) is not None
        )

    def __iter__(self) -> Iterator[str]:
        yield from self._assigned
        if self._table is not None:
            for at in self._table.positions():
                yield self._table.owned.store_id_at(at)

    def __len__(self) -> int:
        return len(self._assigned) + (0 if self._table is None else self._table.by_position)


MIN_LISTING_RECORDS = 20_000
"""A namespace listing may hold at least this many records (see :func:`listing_limit`)."""


def listing_limit(corpus: int) -> int:
    """Most records a namespace listing may hold before it is a ``decode`` error.

    The namespace is benchd's own: it holds the corpus and a sentinel. Twice
    the corpus (earlier copies before a cleanup) and never below
    :data:`MIN_LISTING_RECORDS` leaves room for an adopted namespace, while a
    store that pages forever stops within a bounded number of records.
    """
    return max(MIN_LISTING_RECORDS, 2 * corpus + 1)
