"""The Zengram API's wire format: reading its answers, its dates, its records. Pure.

Answer reducers are module-level, so large answers are reduced in the decode
worker (:func:`benchd.http.answers.decode`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from benchd.errors import TargetProtocolError
from benchd.fixtures.checks import created_s
from benchd.http.answers import LABEL_SOURCE_CHARS, count, finite_number, first_ids
from benchd.store.flow import content_of
from benchd.store.listing import FINGERPRINT_BYTES, fingerprint, text_pair_fingerprint
from benchd.store.owned import GLOBAL_KEYED
from benchd.store.protocol import Counts

__all__ = [
    "Key",
    "active",
    "content_digest",
    "epoch_s",
    "export_page",
    "health_labels",
    "import_counts",
    "iso_ms",
    "kept_of",
    "key",
    "keys",
    "same_dedup",
    "same_field",
    "search_hits",
    "to_ms",
    "written_kept",
]

_SUB_MS = re.compile(r"[T ]\d\d:\d\d:\d\d[.,]\d{4,}")  # a time finer than milliseconds


def iso_ms(epoch_ms: int) -> str:
    """``2026-12-01T10:00:00.123Z`` for a time in epoch milliseconds."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_ms(stamp: object) -> object:
    """A ``created_at`` cut to milliseconds; anything else (a date, not a time) as it is.

    The real server's listing cursor is cut to milliseconds, and records dated
    below that can fall between two pages: benchd never writes such a date.
    """
    text = str(stamp).strip()
    if ("." not in text and "," not in text) or not _SUB_MS.search(text):
        return stamp  # as the fixture has it: a date, or a time to the millisecond at most
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return stamp
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if moment.tzinfo is None:
        return moment.isoformat(timespec="milliseconds")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_s(stamp: object) -> float | None:
    """An ISO 8601 ``created_at`` as epoch seconds (naive = UTC), or None if it is not one
    (as the fixture's dates are read: :func:`benchd.fixtures.checks.created_s`)."""
    if type(stamp) is str:  # a listed record's: parsed here, one call fewer a record
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            return created_s(stamp)
        if moment.tzinfo is None:  # UTC: the same seconds as the aware moment's timestamp()
            return (moment - _NAIVE_EPOCH).total_seconds()
        return moment.timestamp()
    return created_s(stamp)


_NAIVE_EPOCH = datetime(1970, 1, 1)


def active(
    page: Sequence[dict[str, Any]], ids: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The active records of a page, by server id (``ids``: the page's, where known)."""
    if ids is None:
        return {str(r["id"]): r for r in page if r.get("active", True) is not False}
    return {sid: r for sid, r in zip(ids, page, strict=True) if r.get("active", True) is not False}


def content_digest(text: str) -> bytes:
    """A record's text as a listing keeps it: 16 bytes (the sentinel's rewrite, read-backs)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


_PART = FINGERPRINT_BYTES  # bytes of each fingerprint in what a listing keeps
_ABSENT = fingerprint(None)  # a field the record does not hold: no digest taken per record
# A field holding the record's own id (the key or subject benchd fills): no digest taken per
# record either; no fingerprint's text begins with "i", so none is this constant.
_SELF = hashlib.blake2b(b"i", digest_size=_PART).digest()
_KEY, _SUBJECT = GLOBAL_KEYED  # kept in this order


def kept_of(record: Mapping[str, Any], own_id: str | None = None) -> bytes | None:
    """What benchd compares of a stored record, as a listing keeps it (never its text).

    Fingerprints (:func:`~benchd.store.listing.fingerprint`) of what the
    import's dedup compares (content and type), then of each field the server
    keys across tenants (``key``, ``subject``:
    :data:`~benchd.store.owned.GLOBAL_KEYED`), a field the record does not
    hold, or that holds its own id (``own_id``, the listed id; by default its
    ``id``), as a constant (one digest a record where benchd filled the key);
    None where one cannot be taken (the record is then written again).
    """
    dedup = _dedup(record)
    if dedup is None:
        return None
    if own_id is None:
        rid = record.get("id")
        own_id = None if rid is None else str(rid)
    return _kept(dedup, record.get(_KEY), record.get(_SUBJECT), own_id)


def _kept(dedup: bytes, key: object, subject: object, own_id: str | None) -> bytes | None:
    """What a listing keeps: ``dedup`` and the :func:`_slot` of the key and the subject."""
    key_part, subject_part = _slot(key, own_id), _slot(subject, own_id)
    if key_part is None or subject_part is None:
        return None
    return dedup + key_part + subject_part


def _slot(value: object, own_id: str | None) -> bytes | None:
    """What a listing keeps of one of :data:`~benchd.store.owned.GLOBAL_KEYED`'s fields."""
    if value is None:
        return _ABSENT
    return _SELF if value == own_id else fingerprint(value)


def written_kept(memory: Mapping[str, Any], fields: Mapping[str, str], own_id: str) -> bytes | None:
    """:func:`kept_of` of ``memory`` stored as benchd writes it under ``own_id``: ``fields``
    (the namespaced ``key``/``subject``) in place of its own. A listed copy keeping these
    bytes has the memory's content and type and every one of ``fields``."""
    dedup = _dedup(memory)
    if dedup is None:
        return None
    key = fields[_KEY] if _KEY in fields else memory.get(_KEY)
    subject = fields[_SUBJECT] if _SUBJECT in fields else memory.get(_SUBJECT)
    return _kept(dedup, key, subject, own_id)


def _dedup(record: Mapping[str, Any]) -> bytes | None:
    kind = record.get("type", "event")
    content = content_of(record)
    return text_pair_fingerprint(content, kind) if type(kind) is str else fingerprint(content, kind)


def same_dedup(kept: bytes, memory: Mapping[str, Any]) -> bool:
    """The stored record (as :func:`kept_of` keeps it) has ``memory``'s content and type."""
    wanted = _dedup(memory)
    return wanted is not None and kept[:_PART] == wanted


def same_field(kept: bytes, name: str, value: object, own_id: str | None = None) -> bool:
    """The stored record (as :func:`kept_of` keeps it, listed under ``own_id``) holds
    ``value`` in field ``name`` (one of :data:`~benchd.store.owned.GLOBAL_KEYED`)."""
    at = (1 + GLOBAL_KEYED.index(name)) * _PART
    wanted = _slot(value, own_id)
    return wanted is not None and kept[at : at + _PART] == wanted


Key = tuple[str, bytes]
"""How a read-back recognises a record: its id ("" for none) and its content digest."""


def key(record: Mapping[str, Any]) -> Key:
    """A prepared record's read-back key.

    The content is part of it, so a changed record whose old version is still
    stored under its id is not mistaken for written.
    """
    rid = record.get("id")
    return ("" if rid is None else str(rid)), content_digest(content_of(record))


def keys(contents: Mapping[str, bytes]) -> set[Key]:
    """The read-back keys of listed records (server id -> content digest), by id and alone."""
    held: set[Key] = set()
    for server_id, content in contents.items():
        held.update(((server_id, content), ("", content)))
    return held


# -- answer reducers: module-level, so large answers are reduced in the decode worker --


def label(value: Any) -> str:
    return str(value)[:LABEL_SOURCE_CHARS] if isinstance(value, str | int | float) else ""


def health_labels(data: Any) -> tuple[str, str]:
    """(model, version) from ``/health``; an answer that is not an object has neither."""
    if not isinstance(data, dict):
        return "", ""
    model = label(data.get("model")) or label(data.get("embedding_model"))
    return model, label(data.get("version"))


def search_hits(limit: int, what: str, data: Any) -> tuple[list[str], list[float | None]]:
    """Server ids of the first ``limit`` results (index format or full payloads), and scores.

    A score is the result's ``effective_score`` (else ``score``) when it is a
    finite number; it feeds only the drift stage's label-free signal.
    """
    results = data.get("results") if isinstance(data, dict) else None
    ids = first_ids(results, limit, what)
    assert isinstance(results, list)  # first_ids refused anything else
    return ids, [score(item) for item in results[: len(ids)]]


def score(item: Any) -> float | None:
    for key in ("effective_score", "score"):
        value = finite_number(item.get(key)) if isinstance(item, dict) else None
        if value is not None:
            return value
    return None


def import_counts(sent: int, what: str, data: Any) -> Counts:
    """(imported, skipped, errors): non-negative integers adding up to at most ``sent``."""
    if not isinstance(data, dict):
        raise TargetProtocolError(f"{what}: answer lacks integer imported/skipped/errors counts")
    try:
        counts = tuple(count(data[k], k, sent, what) for k in ("imported", "skipped", "errors"))
    except KeyError as exc:
        raise TargetProtocolError(f"{what}: answer lacks the {exc} count") from None
    if sum(counts) > sent:
        raise TargetProtocolError(
            f"{what}: counts imported/skipped/errors = {counts} add up to more than "
            f"the {sent} record(s) sent"
        )
    return counts[0], counts[1], counts[2]


def export_page(size: int, what: str, data: Any) -> tuple[list[dict[str, Any]], bool]:
    """(records with an id, at most ``size`` of them; has_more) from one ``/export`` page."""
    page = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(page, list):
        raise TargetProtocolError(f"{what}: answer has no 'memories' array")
    records = [
        r
        for r in page[:size]  # an id that is a text needs no label made of it
        if isinstance(r, dict) and ((type(rid := r.get("id")) is str and rid != "") or label(rid))
    ]
    return records, bool(data.get("has_more")) and len(page) > 0
