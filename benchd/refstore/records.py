"""Memory records: validation of import-shaped input and the stored payload.

The reference store accepts the same record shape the target API's
``POST /export/import`` accepts and applies the same limits (content up to
10,000 characters, metadata up to 10 KiB serialized, string fields up to 256
characters, the four memory types and the four importance levels). A record
that breaks a rule is *counted* as an import error, never answered with 500.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "IMPORTANCE_WEIGHTS",
    "MEMORY_TYPES",
    "InvalidRecord",
    "NewRecord",
    "content_hash",
    "iso_now",
    "parse_record",
    "parse_timestamp",
]

MEMORY_TYPES = frozenset({"event", "fact", "decision", "status"})
IMPORTANCE_WEIGHTS: dict[str, float] = {"critical": 1.0, "high": 0.85, "medium": 0.7, "low": 0.5}
MAX_CONTENT_CHARS = 10_000
MAX_METADATA_BYTES = 10_240
MAX_STRING_CHARS = 256
_STRING_FIELDS = ("key", "subject", "client_id", "category", "source_agent", "knowledge_category")


class InvalidRecord(ValueError):
    """One import record breaks a rule; the import counts it in ``errors``."""


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A validated record ready to store: indexed columns plus the full payload."""

    id: str
    content: str
    type: str
    client_id: str
    content_hash: str
    created_ts: float
    access_count: int
    tag_text: str
    payload: dict[str, Any]


def iso_now() -> str:
    """The current UTC time as ISO 8601 with milliseconds, like JavaScript's toISOString."""
    return _iso(datetime.now(UTC))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: str) -> datetime:
    """Parse an ISO 8601 date or timestamp (``Z`` allowed); naive values are UTC."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def content_hash(content: str) -> str:
    """The target API's content hash: first 16 hex digits of SHA-256."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def _opt_str(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRecord(f"{name} must be a string")
    if len(value) > MAX_STRING_CHARS:
        raise InvalidRecord(f"{name} exceeds {MAX_STRING_CHARS} characters")
    return value or None


def _content(raw: dict[str, Any]) -> str:
    value = raw.get("content") or raw.get("text") or ""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRecord("content (or text) must be a non-empty string")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidRecord(f"content exceeds {MAX_CONTENT_CHARS} characters")
    return value


def _choice(
    raw: dict[str, Any], name: str, allowed: frozenset[str] | dict[str, float], default: str
) -> str:
    value = raw.get(name) or default
    if not isinstance(value, str) or value not in allowed:
        raise InvalidRecord(f"{name} must be one of {sorted(allowed)}")
    return value


def _metadata(raw: dict[str, Any]) -> dict[str, Any] | None:
    value = raw.get("metadata")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRecord("metadata must be an object")
    if len(json.dumps(value)) > MAX_METADATA_BYTES:
        raise InvalidRecord(f"metadata exceeds {MAX_METADATA_BYTES} bytes")
    return value


def _str_list(raw: dict[str, Any], name: str) -> list[Any]:
    value = raw.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or len(json.dumps(value)) > MAX_METADATA_BYTES:
        raise InvalidRecord(f"{name} must be a list (at most {MAX_METADATA_BYTES} bytes)")
    return value


def _record_id(raw: dict[str, Any]) -> str:
    value = raw.get("id")
    if value is None or value == "":
        return str(uuid.uuid4())
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidRecord("id must be a string or an integer")
    text = str(value)
    if len(text) > MAX_STRING_CHARS:
        raise InvalidRecord(f"id exceeds {MAX_STRING_CHARS} characters")
    return text


def _created_at(raw: dict[str, Any], now: str) -> tuple[str, float]:
    value = raw.get("created_at")
    if value is None:
        return now, parse_timestamp(now).timestamp()
    if not isinstance(value, str):
        raise InvalidRecord("created_at must be an ISO 8601 string")
    try:
        moment = parse_timestamp(value)
    except ValueError as exc:
        raise InvalidRecord("created_at must be an ISO 8601 timestamp") from exc
    return value, moment.timestamp()


def _number(raw: dict[str, Any], name: str, default: float) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRecord(f"{name} must be a number")
    return float(value)


def _tag_text(payload: dict[str, Any]) -> str:
    """Words a tag scorer matches: key, subject, entity names and tags."""
    parts = [payload.get("key") or "", payload.get("subject") or ""]
    for entity in payload.get("entities") or []:
        parts.append(str(entity.get("name", "")) if isinstance(entity, dict) else str(entity))
    parts.extend(str(tag) for tag in payload.get("tags") or [])
    return " ".join(parts)


def parse_record(raw: Any, now: str) -> NewRecord:
    """Validate one import record and build what the index stores; raises InvalidRecord."""
    if not isinstance(raw, dict):
        raise InvalidRecord("record must be an object")
    content = _content(raw)
    strings = {name: _opt_str(raw, name) for name in _STRING_FIELDS}
    created_at, created_ts = _created_at(raw, now)
    client_id = strings["client_id"] or "global"
    payload: dict[str, Any] = {
        "text": content,
        "type": _choice(raw, "type", MEMORY_TYPES, "event"),
        "key": strings["key"],
        "subject": strings["subject"],
        "client_id": client_id,
        "knowledge_category": strings["knowledge_category"],
        "category": strings["category"] or "episodic",
        "source_agent": strings["source_agent"] or "import",
        "importance": _choice(raw, "importance", IMPORTANCE_WEIGHTS, "medium"),
        "confidence": _number(raw, "confidence", 1.0),
        "active": raw.get("active") is not False,
        "entities": _str_list(raw, "entities"),
        "tags": _str_list(raw, "tags"),
        "content_hash": content_hash(content),
        "created_at": created_at,
        "metadata": _metadata(raw),
    }
    return NewRecord(
        id=_record_id(raw),
        content=content,
        type=payload["type"],
        client_id=client_id,
        content_hash=payload["content_hash"],
        created_ts=created_ts,
        access_count=max(0, int(_number(raw, "access_count", 0))),
        tag_text=_tag_text(payload),
        payload=payload,
    )
