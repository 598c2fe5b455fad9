"""The ids benchd writes, and how a store id is recognised as benchd's (DESIGN §2a).

Ids in the stores benchd probes are global across namespaces: importing a
fixture's own id ``m1`` would overwrite (and move) whatever record ``m1``
another tenant holds. So a fixture id is only a *label*: the id benchd writes
is derived from the namespace and the fixture id, ``benchd:<namespace>:<fixture
id>``, shortened to a stable hash where it would be long
(:func:`owned_id`). Rankings are mapped back through :class:`OwnedIds`; a
result benchd did not write is never mapped to a fixture id (it scores as
non-relevant, see :func:`foreign_label`).

The store also keys some *fields* across tenants: the real server upserts every
fact into a facts table by its ``key`` (no key: its content hash) and every
status into a statuses table by its ``subject`` (no subject: ``unknown``), with
no namespace in either key. So benchd namespaces those fields exactly like ids
(:func:`namespaced_fields`): every fact benchd writes carries a ``key``, every
status a ``subject``, each derived from the namespace.

The sentinel that marks a namespace as benchd's has an id of its own,
``benchd-sentinel:<namespace>``; earlier versions wrote
``benchd-sentinel-<namespace>`` (:func:`legacy_sentinel_id`) and the
fixture's ids unchanged, which :mod:`benchd.store.flow` migrates.
Pure functions, no I/O.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from typing import Any

__all__ = [
    "MAX_ID_CHARS",
    "OWNER_KEY",
    "OwnedIds",
    "foreign_label",
    "is_sentinel",
    "legacy_sentinel_id",
    "namespace_problem",
    "namespaced_fields",
    "owned_id",
    "owned_prefix",
    "owner_mark",
    "sentinel_id",
    "sentinel_text",
]

MAX_ID_CHARS = 128
"""Ids benchd writes are at most this long (stores cap ids; the reference store at 256)."""

MAX_NAMESPACE_CHARS = 64


def namespace_problem(value: str) -> str | None:
    """Config check for a reserved namespace: it goes into every id, URL and query benchd sends.

    Printable, no whitespace, at most 64 characters; never empty or ``global``.
    """
    if not value or value == "global":
        return "must be a dedicated namespace, never empty or 'global'"
    if len(value) > MAX_NAMESPACE_CHARS:
        return f"must be at most {MAX_NAMESPACE_CHARS} characters"
    if not value.isprintable() or any(c.isspace() for c in value):
        return "must be printable, without spaces or control characters (e.g. 'benchd-eval')"
    return None


OWNER_KEY = "benchd_owner"
"""The metadata key of benchd's mark on a record it wrote (namespace and fixture id)."""

_HASHED_PREFIX_OVER = 64  # a namespace longer than this is hashed in the prefix


def _hash(text: str, n: int = 32) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


@functools.lru_cache(maxsize=256)
def owned_prefix(namespace: str) -> str:
    """What every id benchd writes into ``namespace`` starts with."""
    if len(namespace) > _HASHED_PREFIX_OVER:
        return f"benchd:#{_hash(namespace, 24)}:"
    return f"benchd:{namespace}:"


def owned_id(namespace: str, fixture_id: str) -> str:
    """The store id benchd writes for ``fixture_id`` in ``namespace``.

    ``benchd:<namespace>:<fixture id>`` when that fits in :data:`MAX_ID_CHARS`,
    else the prefix and ``#`` plus a sha256 of the fixture id: stable across
    processes and versions, so a restart finds its own records again.
    """
    prefix = owned_prefix(namespace)
    if _written_plain(prefix, fixture_id):
        return prefix + fixture_id
    return f"{prefix}#{_hash(fixture_id)}"


def _written_plain(prefix: str, fixture_id: str) -> bool:
    """Whether :func:`owned_id` writes ``fixture_id`` as it is after ``prefix`` (the
    namespace's :func:`owned_prefix`), not hashed."""
    return len(prefix) + len(fixture_id) <= MAX_ID_CHARS and not fixture_id.startswith("#")


GLOBAL_KEYED = ("key", "subject")
"""Record fields the real server keys across tenants (facts by key, statuses by subject)."""

_FILLED = {"fact": "key", "status": "subject"}  # the field each type is upserted by


def namespaced_fields(
    namespace: str, fixture_id: str, record: Mapping[str, Any], own_id: str | None = None
) -> dict[str, str]:
    """The ``key``/``subject`` benchd writes for a fixture record in ``namespace``.

    A given value becomes ``benchd:<namespace>:<value>`` (:func:`owned_id`'s
    form); a fact without a key and a status without a subject get the
    record's own id (so the facts row names the memory), since the store's
    fallbacks (the content hash, ``unknown``) are global too. Fields the
    record neither has nor needs are left out. ``own_id``: the record's own
    id, ``owned_id(namespace, fixture_id)``, where the caller has it.
    """
    kind = record.get("type") or "event"
    needed = _FILLED.get(kind if type(kind) is str else str(kind))
    if "key" not in record and "subject" not in record:  # most records: neither is given
        if needed is None:
            return {}
        return {needed: own_id if own_id is not None else owned_id(namespace, fixture_id)}
    fields: dict[str, str] = {}
    for name in GLOBAL_KEYED:
        value = record.get(name)
        if value is not None and value != "":
            fields[name] = owned_id(namespace, value if type(value) is str else str(value))
    if needed is not None and needed not in fields:
        fields[needed] = owned_id(namespace, fixture_id)  # the record's own id
    return fields


def sentinel_id(namespace: str) -> str:
    """The id of the record that marks ``namespace`` as benchd's (and carries its lease)."""
    if len(namespace) > _HASHED_PREFIX_OVER:
        return f"benchd-sentinel:#{_hash(namespace, 24)}"
    return f"benchd-sentinel:{namespace}"


def sentinel_text(namespace: str) -> str:
    """The sentinel's content (unlike the legacy sentinel's, so the store's dedup keeps both)."""
    return (
        f"benchd sentinel record: namespace {namespace} holds benchd's probe corpus, "
        "written and deleted by benchd only"
    )


def legacy_sentinel_id(namespace: str) -> str:
    """The sentinel id benchd wrote before ids were derived (migrated on first contact)."""
    return f"benchd-sentinel-{namespace}"


def is_sentinel(namespace: str, store_id: str) -> bool:
    """Whether ``store_id`` is benchd's sentinel in ``namespace`` (current or legacy)."""
    return store_id in (sentinel_id(namespace), legacy_sentinel_id(namespace))


def owner_mark(namespace: str, fixture_id: str) -> dict[str, str]:
    """The metadata benchd adds to a record so it is recognised where the store assigns ids."""
    return {"namespace": namespace, "fixture_id": fixture_id}


def foreign_label(store_id: str, fixture_ids: Set[str]) -> str:
    """How a result benchd did not write appears in a ranking: ``!<store id>``.

    Never equal to a fixture id (another ``!`` is added on a clash), so it
    always scores as non-relevant.
    """
    label = "!" + store_id
    while label in fixture_ids:
        label = "!" + label
    return label


class OwnedIds:
    """The fixture id ↔ owned id maps of one corpus in one namespace.

    Nothing is kept per record but the fixture ids and their positions: an
    owned id is the prefix and the fixture id (:func:`owned_id`), computed
    when asked; only the few ids :func:`owned_id` hashes (long ones, or
    starting with ``#``) are mapped back through a dict. A store id maps back
    to the fixture id object held here, so the listings of 10^6 records share
    one string per fixture id, and to the fixture's position in the corpus
    (:meth:`index`), by which a listing of the corpus keeps its records in
    arrays (:mod:`benchd.store.idtable`).
    """

    def __init__(self, namespace: str, fixture_ids: Iterable[str]) -> None:
        self.namespace = namespace
        self.prefix = owned_prefix(namespace)
        order = fixture_ids if isinstance(fixture_ids, tuple) else tuple(fixture_ids)
        self._order: tuple[str, ...] = order  # position -> fixture id
        self._ids = {f: i for i, f in enumerate(order)}  # fixture id -> its position
        self.fixture_ids: Set[str] = self._ids.keys()
        room = MAX_ID_CHARS - len(self.prefix)  # the longest fixture id written plain
        self._hashed = {
            owned_id(namespace, f): f for f in self.fixture_ids if len(f) > room or f[:1] == "#"
        }  # owned id -> fixture id, where the owned id is a hash (not _written_plain)
        self.store_of: Mapping[str, str] = _StoreIds(self)
        self.fixture_of: Mapping[str, str] = _FixtureIds(self)

    def __len__(self) -> int:
        """How many positions the corpus has (its memories, in fixture order)."""
        return len(self._order)

    def _plain(self, fixture_id: str) -> bool:
        """Whether :func:`owned_id` writes ``fixture_id`` as it is (after the prefix)."""
        return _written_plain(self.prefix, fixture_id)

    @classmethod
    def of(cls, namespace: str, memories: Iterable[Mapping[str, Any]]) -> OwnedIds:
        return cls(namespace, (str(m["id"]) for m in memories))

    def store_id(self, fixture_id: str) -> str:
        """The id benchd writes for ``fixture_id`` (:func:`owned_id`, its prefix computed once)."""
        if self._plain(fixture_id):
            return self.prefix + fixture_id
        return f"{self.prefix}#{_hash(fixture_id)}"

    def _fixture_of(self, store_id: str) -> str | None:
        at = self.index(store_id)
        return None if at is None else self._order[at]

    def index(self, store_id: str) -> int | None:
        """The corpus position of the fixture memory ``store_id`` is benchd's id for, if any.

        The id must be exactly the one :meth:`store_id` derives (a record listed
        under it is benchd's copy of that memory); the last position where the
        fixture repeats an id.
        """
        prefix = self.prefix
        if not store_id.startswith(prefix):
            return None
        rest = store_id[len(prefix) :]
        if rest[:1] == "#":
            fid = self._hashed.get(store_id)
            return None if fid is None else self._ids[fid]
        return self._ids.get(rest) if len(store_id) <= MAX_ID_CHARS else None

    def indexes(self, store_ids: Iterable[str]) -> list[int | None]:
        """:meth:`index` of each of ``store_ids``, in one loop (a batch, a listing's page):
        the plain ids benchd derives looked up inline, the rest through :meth:`index`."""
        prefix, cut, get, index = self.prefix, len(self.prefix), self._ids.get, self.index
        return [
            get(sid[cut:])
            if sid.startswith(prefix) and len(sid) <= MAX_ID_CHARS and sid[cut : cut + 1] != "#"
            else index(sid)
            for sid in store_ids
        ]

    def same_ids(self, ids: Sequence[str]) -> bool:
        """Whether ``ids`` are this corpus's fixture ids, in the same order."""
        return ids is self._order or tuple(ids) == self._order

    def position(self, fixture_id: str) -> int | None:
        """The corpus position of ``fixture_id``; None if it is not the corpus's."""
        return self._ids.get(fixture_id)

    def store_id_at(self, index: int) -> str:
        """benchd's id for the fixture memory at corpus position ``index``."""
        return self.store_id(self._order[index])

    def fixture_at(self, index: int) -> str:
        """The fixture id at corpus position ``index``."""
        return self._order[index]

    def is_owned(self, store_id: str) -> bool:
        """Whether ``store_id`` has the form of an id benchd writes in this namespace."""
        return store_id.startswith(self.prefix)

    def fixture_id(self, store_id: str) -> str | None:
        """The fixture id ``store_id`` was written for, if it is one of this corpus's."""
        return self._fixture_of(store_id)

    def label(self, store_id: str, extra: Mapping[str, str] | None = None) -> str:
        """A ranked store id as scoring sees it: its fixture id, or a foreign label."""
        fid = self._fixture_of(store_id)
        if fid is None and extra is not None:
            fid = extra.get(store_id)
        return fid if fid is not None else foreign_label(store_id, self.fixture_ids)


class _StoreIds(Mapping[str, str]):
    """fixture id -> owned id, for the corpus's fixture ids: computed, not stored."""

    __slots__ = ("_owned",)

    def __init__(self, owned: OwnedIds) -> None:
        self._owned = owned

    def __getitem__(self, fixture_id: str) -> str:
        if fixture_id not in self._owned.fixture_ids:
            raise KeyError(fixture_id)
        return self._owned.store_id(fixture_id)

    def __contains__(self, fixture_id: object) -> bool:
        return fixture_id in self._owned.fixture_ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._owned.fixture_ids)

    def __len__(self) -> int:
        return len(self._owned.fixture_ids)


class _FixtureIds(Mapping[str, str]):
    """owned id -> fixture id, for the corpus's fixture ids: computed, not stored."""

    __slots__ = ("_owned",)

    def __init__(self, owned: OwnedIds) -> None:
        self._owned = owned

    def __getitem__(self, store_id: str) -> str:
        fid = self._owned.fixture_id(store_id)
        if fid is None:
            raise KeyError(store_id)
        return fid

    def __contains__(self, store_id: object) -> bool:
        return isinstance(store_id, str) and self._owned.fixture_id(store_id) is not None

    def __iter__(self) -> Iterator[str]:
        return (self._owned.store_id(f) for f in self._owned.fixture_ids)

    def __len__(self) -> int:
        return len(self._owned.fixture_ids)
