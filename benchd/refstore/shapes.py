"""Search result shapes for ``format=index|compact|full|default``, as the target API answers."""

from __future__ import annotations

import math
from typing import Any

from benchd.refstore.records import IMPORTANCE_WEIGHTS

__all__ = ["FORMATS", "effective_score", "export_shape", "shape_result"]

FORMATS = ("index", "compact", "full", "default")
_COMPACT_MAX = 200
_SUMMARY_MAX = 80


def effective_score(score: float, payload: dict[str, Any]) -> float:
    """Retrieval score × confidence × access boost × importance weight, 4 decimals."""
    access = 1.0 + 0.3 * math.log2(int(payload.get("access_count") or 0) + 1)
    weight = IMPORTANCE_WEIGHTS.get(str(payload.get("importance")), 0.7)
    confidence = float(payload.get("confidence") or 1.0)
    return round(score * confidence * access * weight, 4)


def _summary(text: str) -> str:
    first = next((line for line in text.split("\n") if line.strip()), text)
    return first[:_SUMMARY_MAX]


def shape_result(
    fmt: str, score: float, effective: float, payload: dict[str, Any], sources: list[str]
) -> dict[str, Any]:
    """One result object in the requested format."""
    text = str(payload.get("text") or "")
    if fmt == "index":
        return {
            "id": payload["id"],
            "effective_score": effective,
            "type": payload.get("type"),
            "summary": _summary(text),
            "importance": payload.get("importance"),
            "client_id": payload.get("client_id"),
            "created_at": payload.get("created_at"),
        }
    if fmt == "compact":
        return {
            "id": payload["id"],
            "score": round(score, 4),
            "effective_score": effective,
            "type": payload.get("type"),
            "content": text if len(text) <= _COMPACT_MAX else text[:_COMPACT_MAX] + "...",
            "source_agent": payload.get("source_agent"),
            "client_id": payload.get("client_id"),
            "importance": payload.get("importance"),
            "created_at": payload.get("created_at"),
        }
    full: dict[str, Any] = {
        "score": score,
        "confidence": float(payload.get("confidence") or 1.0),
        "effective_score": effective,
        **payload,
    }
    if fmt == "full":
        full["retrieval_sources"] = sources
    return full


def export_shape(payload: dict[str, Any]) -> dict[str, Any]:
    """A record as ``GET /export`` lists it: ``content`` instead of ``text``, no vectors."""
    body = {"id": payload["id"], "content": payload.get("text", "")}
    body.update((k, v) for k, v in payload.items() if k not in ("id", "text"))
    return body
