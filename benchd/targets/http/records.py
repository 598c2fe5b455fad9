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
from benchd.targets.http.config import ExportTemplate
from benchd.targets.http.templating import PathError, as_text, extract, parse_path
from benchd.targets.owned import OWNER_KEY, sentinel_id, sentinel_text
from benchd.targets.seeding import content_of, digest  # re-exported

__all__ = [
    "Listing",
    "column_at",
    "content_of",
    "count_at",
    "digest",
    "ids_at",
    "legacy_sentinel_digest",
    "more_pages",
    "sentinel_id",
    "sentinel_memory",
]

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
    return digest(f"benchd sentinel: client_id {namespace} is reserved for benchd's probe corpus")


def _at(path: str, data: Any, what: str, role: str) -> Any:
    try:
        return extract(parse_path(path), data)
    except PathError as exc:
        raise TargetProtocolError(f"{what}: {role} path {path!r}: {exc}") from None


def ids_at(path: str, data: Any, what: str) -> list[str]:
    """The ids at ``path``: an array of strings or integers, or TargetProtocolError."""
    value = _at(path, data, what, "ids")
    if not isinstance(value, list):
        raise TargetProtocolError(
            f"{what}: ids path {path!r} gave {type(value).__name__}, expected an array of ids"
        )
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise TargetProtocolError(
                f"{what}: ids path {path!r}: element {i} is {json.dumps(item)[:60]}, "
                "expected a string or integer id"
            )
    return [str(item) for item in value]


def column_at(path: str | None, data: Any, n: int, what: str) -> list[str | None]:
    """A per-record column parallel to ``n`` ids (fixture ids, contents), or all None."""
    if not path:
        return [None] * n
    value = _at(path, data, what, "column")
    if not isinstance(value, list) or len(value) != n:
        raise TargetProtocolError(f"{what}: path {path!r} must give one value per id ({n})")
    return [None if v is None else as_text(v) for v in value]


def count_at(path: str, data: Any, what: str) -> int:
    value = _at(path, data, what, "count")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TargetProtocolError(f"{what}: count path {path!r} is not an integer")
    return value


def more_pages(export: ExportTemplate, data: Any, page: int, offset: int, what: str) -> bool:
    """Whether another export page follows (has_more, total, or a full page)."""
    if page == 0:
        return False
    if export.has_more:
        return bool(_at(export.has_more, data, what, "has_more"))
    if export.total:
        total = count_at(export.total, data, what)
        return offset < total
    return page >= export.page_size
