"""One listing of benchd's namespace, classified: benchd's records, its sentinels, the rest.

Pure: no I/O. A listed record is benchd's only when its id — the store's
own, or the id benchd wrote it under as the listing shows it beside the
store's (:attr:`~benchd.targets.store.Listed.written_as`) — has the form of
an id benchd writes in this namespace (:mod:`benchd.targets.owned`), never
because its content matches a fixture memory. benchd's sentinel is
recognised by its id, or, where the store assigns its own ids, by its text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Literal

from benchd.targets.lease import Holder
from benchd.targets.owned import OwnedIds, legacy_sentinel_id, sentinel_id, sentinel_text
from benchd.targets.store import Listed

__all__ = [
    "Listing",
    "Which",
    "digest",
    "fingerprint",
    "legacy_sentinel_text",
    "sentinel_digests",
]

Which = Literal["current", "legacy"]
"""A sentinel of this benchd version, or of an earlier one (migrated)."""


def digest(text: str) -> str:
    """The sha256 of a text, used to recognise a record by its content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(*values: object) -> bytes | None:
    """A 16-byte digest of JSON values, equal exactly when the values are (dict order aside).

    What a listing keeps of a record for a kind's ``unchanged``, instead of the
    record: a value JSON cannot say exactly (NaN, an object, keys of mixed types)
    gives None, and a record without a fingerprint is written again, never
    assumed unchanged. Texts and nulls alone (a record's content and type, the
    common case, hashed for every listed record) skip the JSON encoder.
    """
    if all(v is None or type(v) is str for v in values):
        parts = ["n" if v is None else f"s{len(v)}:{v}" for v in values]  # type: ignore[arg-type]
        return _blake("".join(parts))
    try:
        text = json.dumps(values, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return _blake("j" + text)


def _blake(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


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
    records to which sentinel they are.
    """

    def __init__(self, records: Mapping[str, Listed], owned: OwnedIds) -> None:
        self.records = records
        self.owned = owned
        ns = owned.namespace
        self._ids: dict[str, Which] = {sentinel_id(ns): "current", legacy_sentinel_id(ns): "legacy"}
        self._digests = sentinel_digests(ns)
        self.sentinels: dict[str, Which] = {}
        self.claimed: dict[str, str] = {}
        for sid, rec in records.items():
            which = self._sentinel_of(rec)
            if which is not None:
                self.sentinels[sid] = which
                continue
            fid = self._written_for(rec)
            if fid is not None:
                self.claimed[sid] = fid

    def __len__(self) -> int:
        return len(self.records)

    def merged(self, extra: Mapping[str, Listed]) -> Listing:
        """This listing with records read back by id added."""
        return Listing({**self.records, **extra}, self.owned)

    @property
    def held(self) -> set[str]:
        """Store ids of every record of benchd's listed (its records and sentinels)."""
        return set(self.claimed) | set(self.sentinels)

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
