"""Checks for one fixture record at a time: pure functions, no I/O, no file names.

Each check returns *issues*: ``(path, message)`` pairs where ``path`` is the
JSON path relative to the record (``""`` for the record itself, ``".k"``,
``".relevance[\\"m1\\"]"``) and ``message`` reads "what is wrong; how to fix".
The reader (:mod:`benchd.fixture_reader`) prefixes the file and the record's
own location, so every problem ends up as one actionable line.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

__all__ = [
    "QUERY_KEYS",
    "Issue",
    "QuerySpec",
    "check_date",
    "check_memory",
    "json_kind",
    "parse_query",
]

Issue = tuple[str, str]
"""``(path relative to the record, "what is wrong; how to fix")``."""

QUERY_KEYS = frozenset({"id", "q", "expected_ids", "relevance", "k", "category", "reference_date"})
_MAX_CATEGORY_LEN = 64
_STRING_FIELDS = ("type", "key", "client_id", "subject")


def json_kind(value: object) -> str:
    """Name a decoded JSON value's type the way JSON (not Python) names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: object) -> str:
    """A short JSON rendering of a value for a message (never a whole record)."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _key_path(key: str) -> str:
    return "[" + json.dumps(key, ensure_ascii=False) + "]"


def check_date(value: object) -> str | None:
    """Return a problem if ``value`` is not an ISO 8601 date or date-time string."""
    if not isinstance(value, str):
        return f'expected an ISO date string like "2026-05-31", got {json_kind(value)}'
    try:
        if len(value) == 10:
            date.fromisoformat(value)
        else:
            datetime.fromisoformat(value)
    except ValueError:
        return (
            f'{_show(value)} is not an ISO 8601 date; write it as "YYYY-MM-DD" '
            '(or a date-time like "2026-05-31T09:00:00Z")'
        )
    return None


# --------------------------------------------------------------------------- memories


def check_memory(rec: object) -> list[Issue]:
    """Check one import record; every field not named here passes through unchecked."""
    if not isinstance(rec, dict):
        return [("", f"expected an object (an import record), got {json_kind(rec)}")]
    issues: list[Issue] = []
    _check_content(rec, issues)
    if "id" in rec:
        rid = rec["id"]
        if not isinstance(rid, str) or not rid.strip():
            issues.append(
                (
                    ".id",
                    f"expected a non-empty string, got {_show(rid)}; "
                    "give a string id or omit it to derive one from the content",
                )
            )
    for name in _STRING_FIELDS:
        if name in rec and not isinstance(rec[name], str):
            issues.append((f".{name}", f"expected a string, got {json_kind(rec[name])}"))
    _check_memory_optionals(rec, issues)
    return issues


def _check_content(rec: Mapping[str, Any], issues: list[Issue]) -> None:
    content = rec.get("content")
    if content is None:
        content = rec.get("text")
        name = "text"
    else:
        name = "content"
    if content is None:
        issues.append(("", 'no content; give a non-empty "content" (or "text") string'))
    elif not isinstance(content, str):
        issues.append((f".{name}", f"expected a string, got {json_kind(content)}"))
    elif not content.strip():
        issues.append((f".{name}", "empty content; write the memory's text or remove the record"))


def _check_memory_optionals(rec: Mapping[str, Any], issues: list[Issue]) -> None:
    if "active" in rec:
        active = rec["active"]
        if active is False:
            issues.append(
                (
                    ".active",
                    "inactive record (active: false): benchd never seeds inactive "
                    "records because they can still surface through keyword search; "
                    'remove the record or the "active" field',
                )
            )
        elif active is not True:
            issues.append((".active", f"expected true or false, got {json_kind(active)}"))
    if "importance" in rec:
        imp = rec["importance"]
        if isinstance(imp, bool) or not isinstance(imp, str | int | float):
            issues.append(
                (
                    ".importance",
                    f'expected a string ("low", "medium", "high") or a '
                    f"number, got {json_kind(imp)}",
                )
            )
    if "tags" in rec:
        tags = rec["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            issues.append((".tags", 'expected a list of strings; write tags as ["a", "b"]'))
    if "created_at" in rec:
        problem = check_date(rec["created_at"])
        if problem is not None:
            issues.append((".created_at", problem))


# --------------------------------------------------------------------------- queries


@dataclass(slots=True)
class QuerySpec:
    """A query as written, before ids are assigned and checked against the corpus.

    ``judged_paths`` maps each judged memory id to its path inside the query,
    so a later "no such memory" problem can point at the exact element.
    """

    q: str
    relevance: dict[str, int]
    judged_paths: dict[str, str]
    id: str | None = None
    k: int | None = None
    category: str | None = None
    reference_date: str | None = None


def parse_query(obj: object) -> tuple[QuerySpec | None, list[Issue]]:
    """Check one query object; return its spec (``None`` if not an object) and its issues.

    The spec is returned even when there are issues, so that its judged ids can
    still be checked against the corpus and every problem is reported at once.
    """
    if not isinstance(obj, dict):
        return None, [("", f'expected an object with "q" and "expected_ids", got {json_kind(obj)}')]
    issues: list[Issue] = []
    _check_query_keys(obj, issues)
    q = _query_text(obj, issues)
    relevance, paths = _judgments(obj, issues)
    spec = QuerySpec(q=q or "", relevance=relevance, judged_paths=paths)
    spec.id = _optional_str(obj, "id", issues, "give a stable string id or omit it")
    spec.category = _optional_str(obj, "category", issues, 'name a category like "temporal"')
    if spec.category is not None and len(spec.category) > _MAX_CATEGORY_LEN:
        issues.append(
            (
                ".category",
                f"longer than {_MAX_CATEGORY_LEN} characters; use a short "
                "label (it becomes a Prometheus label value)",
            )
        )
    spec.k = _query_k(obj, issues)
    if "reference_date" in obj:
        problem = check_date(obj["reference_date"])
        if problem is None:
            spec.reference_date = obj["reference_date"]
        else:
            issues.append((".reference_date", problem))
    return spec, issues


def _check_query_keys(obj: Mapping[str, Any], issues: list[Issue]) -> None:
    for key in obj:
        if key in QUERY_KEYS or key.startswith("_"):
            continue
        close = difflib.get_close_matches(key, sorted(QUERY_KEYS), n=1)
        hint = (
            f'did you mean "{close[0]}"?'
            if close
            else ("known keys: " + ", ".join(sorted(QUERY_KEYS)) + '; prefix comments with "_"')
        )
        issues.append((_key_path(key), f"unknown query key; {hint}"))


def _query_text(obj: Mapping[str, Any], issues: list[Issue]) -> str | None:
    if "q" not in obj:
        issues.append(("", 'no query text; give a non-empty "q" string'))
        return None
    q = obj["q"]
    if not isinstance(q, str):
        issues.append((".q", f"expected a string, got {json_kind(q)}"))
        return None
    if not q.strip():
        issues.append((".q", "empty query text; write the question or remove the query"))
        return None
    return q


def _optional_str(obj: Mapping[str, Any], name: str, issues: list[Issue], fix: str) -> str | None:
    if name not in obj:
        return None
    value = obj[name]
    if not isinstance(value, str) or not value.strip():
        issues.append((f".{name}", f"expected a non-empty string, got {_show(value)}; {fix}"))
        return None
    return value


def _query_k(obj: Mapping[str, Any], issues: list[Issue]) -> int | None:
    if "k" not in obj:
        return None
    k = obj["k"]
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        issues.append((".k", f"{_show(k)} is not a positive integer; give k >= 1 or omit it"))
        return None
    return k


def _judgments(
    obj: Mapping[str, Any], issues: list[Issue]
) -> tuple[dict[str, int], dict[str, str]]:
    has_ids, has_rel = "expected_ids" in obj, "relevance" in obj
    if has_ids and has_rel:
        issues.append(
            (
                "",
                'both "expected_ids" and "relevance" given; keep one '
                '("relevance" for graded judgments)',
            )
        )
        return {}, {}
    if has_ids:
        relevance, paths = _expected_ids(obj["expected_ids"], issues)
    elif has_rel:
        relevance, paths = _graded(obj["relevance"], issues)
    else:
        relevance, paths = {}, {}
    if any(path.startswith((".expected_ids", ".relevance")) for path, _ in issues):
        return relevance, paths  # the element problems already say what to fix
    if not relevance:
        where = ".expected_ids" if has_ids else ".relevance" if has_rel else ""
        issues.append(
            (
                where,
                'no relevant ids; give a non-empty "expected_ids" list or a '
                '"relevance" object with at least one grade > 0',
            )
        )
    elif max(relevance.values()) <= 0:
        issues.append(
            (
                ".relevance",
                "no relevant ids (every grade is <= 0); give at least one memory a grade > 0",
            )
        )
    return relevance, paths


def _expected_ids(value: object, issues: list[Issue]) -> tuple[dict[str, int], dict[str, str]]:
    if not isinstance(value, list):
        issues.append((".expected_ids", f"expected a list of memory ids, got {json_kind(value)}"))
        return {}, {}
    relevance: dict[str, int] = {}
    paths: dict[str, str] = {}
    for i, mid in enumerate(value):
        path = f".expected_ids[{i}]"
        if not isinstance(mid, str) or not mid:
            issues.append((path, f"expected a memory id string, got {_show(mid)}"))
        elif mid in relevance:
            issues.append((path, f"{_show(mid)} is listed twice; remove the repeat"))
        else:
            relevance[mid] = 1
            paths[mid] = path
    return relevance, paths


def _graded(value: object, issues: list[Issue]) -> tuple[dict[str, int], dict[str, str]]:
    if not isinstance(value, dict):
        issues.append(
            (".relevance", f'expected an object {{"memory-id": grade}}, got {json_kind(value)}')
        )
        return {}, {}
    relevance: dict[str, int] = {}
    paths: dict[str, str] = {}
    for mid, grade in value.items():
        path = ".relevance" + _key_path(mid)
        if not mid:
            issues.append((path, "empty memory id; use the id of a memory"))
        elif isinstance(grade, bool) or not isinstance(grade, int):
            issues.append(
                (
                    path,
                    f"grade {_show(grade)} is not an integer; use an integer "
                    "grade (> 0 relevant, <= 0 judged non-relevant)",
                )
            )
        else:
            relevance[mid] = grade
            paths[mid] = path
    return relevance, paths
