"""Pure helpers of the ``http`` target: reading ids and columns, matching records.

No I/O: everything here turns decoded JSON answers and fixture records into
ids, counts and the fixture-id ↔ server-id map, raising
:class:`~benchd.errors.TargetProtocolError` with the endpoint (``what``) and
the configured path when an answer does not fit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from benchd.errors import TargetProtocolError
from benchd.http.answers import LABEL_SOURCE_CHARS, count, finite_number
from benchd.kinds.http.config import ExportTemplate, HealthTemplate, SeedTemplate
from benchd.kinds.http.templating import PathError, as_text, extract, lookup, parse_path
from benchd.store.flow import content_of  # re-exported
from benchd.store.listing import digest, legacy_sentinel_text
from benchd.store.owned import OWNER_KEY, sentinel_id, sentinel_text

__all__ = [
    "Listing",
    "batch_counts",
    "column_at",
    "content_of",
    "count_at",
    "digest",
    "export_page",
    "health_labels",
    "ids_at",
    "legacy_sentinel_digest",
    "more_pages",
    "search_hits",
    "sentinel_id",
    "sentinel_memory",
]

_ANY_COUNT = 2**63 - 1

Listing = Mapping[str, Mapping[str, str]]
"""An export: server id -> {"fid": fixture id, "digest": sha256 of content} (each optional)."""


def sentinel_memory(namespace: str) -> dict[str, Any]:
    """The sentinel as a fixture-shaped memory (rendered through the seed templates)."""
    return {
        "id": sentinel_id(namespace),
        "type": "fact",
        "key": "benchd-sentinel",
        "importance": "low",
        "content": sentinel_text(namespace),
        "metadata": {OWNER_KEY: {"namespace": namespace, "sentinel": "true"}},
    }


def legacy_sentinel_digest(namespace: str) -> str:
    """The digest of the sentinel content earlier benchd versions wrote."""
    return digest(legacy_sentinel_text(namespace))


def _at(path: str, data: Any, what: str, role: str) -> Any:
    try:
        return extract(parse_path(path), data)
    except PathError as exc:
        raise TargetProtocolError(f"{what}: {role} path {path!r}: {exc}") from None


def ids_at(path: str, data: Any, what: str, limit: int | None = None) -> list[str]:
    """The ids at ``path`` (the first ``limit``): strings or integers, or TargetProtocolError."""
    value = _at(path, data, what, "ids")
    if not isinstance(value, list):
        raise TargetProtocolError(
            f"{what}: ids path {path!r} gave {type(value).__name__}, expected an array of ids"
        )
    value = value if limit is None else value[: max(0, limit)]
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise TargetProtocolError(
                f"{what}: ids path {path!r}: element {i} is {_short(item)}, "
                "expected a string or integer id"
            )
    return [str(item) for item in value]


def _short(item: Any) -> str:
    text = json.dumps(item)
    return text if len(text) <= 60 else text[:57] + "..."


def column_at(
    path: str | None, data: Any, n: int, what: str, keep: int | None = None
) -> list[str | None]:
    """A per-record column parallel to ``n`` ids (fixture ids, contents), or all None.

    ``keep`` cuts it as the ids were cut.
    """
    keep = n if keep is None else min(n, keep)
    if not path:
        return [None] * keep
    value = _at(path, data, what, "column")
    if not isinstance(value, list) or len(value) != n:
        raise TargetProtocolError(f"{what}: path {path!r} must give one value per id ({n})")
    return [None if v is None else as_text(v) for v in value[:keep]]


def count_at(path: str, data: Any, what: str, most: int = _ANY_COUNT) -> int:
    """A count: a non-negative integer, at most ``most`` (what was sent)."""
    return count(_at(path, data, what, "count"), f"count path {path!r}", most, what)


def more_pages(export: ExportTemplate, data: Any, page: int, offset: int, what: str) -> bool:
    """Whether another export page follows (has_more, total, or a full page)."""
    if page == 0:
        return False
    if export.has_more:
        return bool(_at(export.has_more, data, what, "has_more"))
    if export.total:
        return offset < count_at(export.total, data, what)
    return page >= export.page_size


# -- answer reducers: module-level, so large answers are reduced in the decode worker --


def search_hits(
    path: str, scores: str | None, limit: int, what: str, data: Any
) -> tuple[list[str], list[float | None]]:
    """The first ``limit`` server ids of a search answer, and the store's score of each.

    With no ``scores`` path every score is None. A scores path that does not
    give one value per id is a protocol error; a value that is not a finite
    number is None (scores feed only the drift stage's score shift).
    """
    ids = ids_at(path, data, what, limit)
    if not scores:
        return ids, [None] * len(ids)
    every = _at(path, data, what, "ids")
    column = _at(scores, data, what, "scores")
    if not isinstance(column, list) or len(column) != len(every):
        raise TargetProtocolError(
            f"{what}: scores path {scores!r} must give one value per id ({len(every)})"
        )
    return ids, [finite_number(v) for v in column[: len(ids)]]


def health_labels(health: HealthTemplate, what: str, data: Any) -> tuple[str, str]:
    """(model, version) at the health template's paths ('' where it names none)."""
    labels = [
        as_text(lookup(parse_path(path), data))[:LABEL_SOURCE_CHARS] if path else ""
        for path in (health.model, health.version)
    ]
    return labels[0], labels[1]


def batch_counts(seed: SeedTemplate, sent: int, what: str, data: Any) -> tuple[int, int, int]:
    """(imported, skipped, errors) at the seed template's paths, adding up to at most ``sent``.

    An unnamed imported count is what the others leave of ``sent``.
    """
    paths = (seed.imported, seed.skipped, seed.errors)
    counts = [count_at(p, data, what, sent) if p else 0 for p in paths]
    if not seed.imported:
        counts[0] = sent - counts[1] - counts[2]
    if counts[0] < 0 or sum(counts) > sent:
        raise TargetProtocolError(
            f"{what}: counts imported/skipped/errors = {tuple(counts)} add up to more "
            f"than the {sent} record(s) sent"
        )
    return counts[0], counts[1], counts[2]


def export_page(
    export: ExportTemplate, offset: int, what: str, data: Any
) -> tuple[dict[str, dict[str, str]], int, bool]:
    """One export page: ({server id: {fid, digest}}, ids on it, another page follows).

    The page is cut to ``page_size`` records, as many as were asked for.
    """
    every = ids_at(export.ids, data, what)
    ids = every[: export.page_size]
    fids = column_at(export.fixture_ids, data, len(every), what, keep=len(ids))
    texts = column_at(export.contents, data, len(every), what, keep=len(ids))
    records: dict[str, dict[str, str]] = {}
    for sid, fid, text in zip(ids, fids, texts, strict=True):
        rec = records[sid] = {}
        if fid is not None:
            rec["fid"] = fid
        if text is not None:
            rec["digest"] = digest(text)
    more = export.paged and more_pages(export, data, len(ids), offset + len(ids), what)
    return records, len(ids), more
