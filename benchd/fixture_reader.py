"""Read a fixture file (JSON or JSON Lines) into checked, plain parts.

One :class:`FixtureReader` collects every problem of a file — nothing stops at
the first — as one-line messages ``FILE: JSON-PATH: what is wrong; how to fix``
(``FILE:LINE: JSON-PATH: ...`` for JSON Lines). JSON Lines files are read one
line at a time, so a corpus of 10^6 memories never exists as one parsed
document. The public entry points live in :mod:`benchd.fixtures`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchd.fixture_checks import QuerySpec, check_date, check_memory, json_kind, parse_query

__all__ = [
    "JSONL_SUFFIXES",
    "FixtureReader",
    "canonical_json",
    "derive_memory_id",
    "derive_query_id",
    "read_fixture",
]

JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
_JSONL_KINDS = ("memory", "query", "fixture")
_PLURAL = {"memory": "memories", "query": "queries"}


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: object) -> bytes:
    """Serialise ``value`` with sorted keys and no spaces: equal content, equal bytes."""
    return _CANONICAL.encode(value).encode()


def derive_memory_id(rec: Mapping[str, Any]) -> str:
    """The id of a memory that has none: ``m-`` + 16 hex of sha256(canonical record)."""
    return "m-" + hashlib.sha256(canonical_json(rec)).hexdigest()[:16]


def derive_query_id(q: str) -> str:
    """The id of a query that has none: ``q-`` + 10 hex of sha256(query text)."""
    return "q-" + hashlib.sha256(q.encode()).hexdigest()[:10]


class FixtureReader:
    """Collects memories and queries record by record, then cross-checks them.

    ``keep=False`` validates without holding the memories (only their ids), which is
    what ``benchd validate`` needs for a huge corpus.
    """

    def __init__(self, file: str, *, jsonl: bool, keep: bool = True) -> None:
        self.file = file
        self.jsonl = jsonl
        self.keep = keep
        self._problems: list[tuple[tuple[int, int], str]] = []
        self.memories: list[Mapping[str, Any]] = []
        self.queries: list[QuerySpec] = []
        self.reference_date: str | None = None
        self.memory_count = 0
        self.query_count = 0
        self._query_where: list[int] = []
        self._ids: dict[str, int] = {}
        self._contents: dict[bytes, int] = {}
        self._hash = hashlib.sha256(b"benchd-fixture-v1\nmemories\n")

    # ----------------------------------------------------------------- locations

    def where(self, section: str, n: int, sub: str = "") -> str:
        """Format a record location: ``FILE: $.memories[3].k`` or ``FILE:12: $.memory.k``."""
        if self.jsonl:
            return f"{self.file}:{n}: $.{section}{sub}"
        return f"{self.file}: $.{_PLURAL[section]}[{n}]{sub}"

    def _ref(self, section: str, n: int) -> str:
        return f"line {n}" if self.jsonl else f"$.{_PLURAL[section]}[{n}]"

    def at(self, section: str, n: int) -> tuple[int, int]:
        """The sort position of a record's problems: file order, top-level keys first."""
        return (1 if self.jsonl or section == "memory" else 2, n)

    def problem(self, where: str, message: str, at: tuple[int, int] = (0, 0)) -> None:
        """Record one problem; ``at`` orders it (see :meth:`at`)."""
        self._problems.append((at, f"{where}: {message}"))

    @property
    def problems(self) -> list[str]:
        """Every problem, in file order (a record's cross-check problems beside it)."""
        return [text for _, text in sorted(self._problems, key=lambda item: item[0])]

    # ----------------------------------------------------------------- records

    def add_memory(self, rec: object, n: int) -> None:
        """Check one memory record found at index (JSON) or line (JSONL) ``n``."""
        self.memory_count += 1
        issues = check_memory(rec)
        for sub, message in issues:
            self.problem(self.where("memory", n, sub), message, self.at("memory", n))
        if not isinstance(rec, dict):
            return
        if self.jsonl:  # one shared key object per field name, not one per line
            rec = {sys.intern(k): v for k, v in rec.items()}
        if "id" not in rec:
            rec = {"id": derive_memory_id(rec), **rec}
        elif not isinstance(rec["id"], str):
            return
        if self._track_id(rec["id"], n) and not issues:
            self._track_content(rec, n)
            if self.keep:
                self.memories.append(rec)
                self._hash.update(canonical_json(rec) + b"\n")

    def _track_id(self, mid: str, n: int) -> bool:
        first = self._ids.setdefault(mid, n)
        if first == n:
            return True
        self.problem(
            self.where("memory", n, ".id"),
            f"duplicate id {json.dumps(mid)} (first at {self._ref('memory', first)}); "
            "give each memory a unique id",
            self.at("memory", n),
        )
        return False

    def _track_content(self, rec: dict[str, Any], n: int) -> None:
        content = rec.get("content", rec.get("text"))
        # a 16-byte digest, not the text: validating 10^6 memories keeps no content
        key = hashlib.blake2b(f"{rec.get('type')}\0{content}".encode(), digest_size=16).digest()
        seen = self._contents.setdefault(key, n)
        if seen != n:
            self.problem(
                self.where("memory", n, ".content" if "content" in rec else ".text"),
                f"same content and type as {self._ref('memory', seen)}: the store keeps only "
                "one of them (it deduplicates by content); change the text or remove one",
                self.at("memory", n),
            )

    def add_query(self, obj: object, n: int) -> None:
        """Check one query object found at index (JSON) or line (JSONL) ``n``."""
        self.query_count += 1
        spec, issues = parse_query(obj)
        for sub, message in issues:
            self.problem(self.where("query", n, sub), message, self.at("query", n))
        if spec is not None:
            self.queries.append(spec)
            self._query_where.append(n)

    def set_reference_date(self, value: object, where: str) -> None:
        problem = check_date(value)
        if problem is None:
            self.reference_date = str(value)
        else:
            self.problem(where, problem)

    # ----------------------------------------------------------------- cross-checks

    def finish(self) -> str:
        """Assign query ids, check judged ids against the corpus; return the content hash."""
        self._assign_query_ids()
        for spec, n in zip(self.queries, self._query_where, strict=True):
            for mid, path in spec.judged_paths.items():
                if mid not in self._ids:
                    self.problem(
                        self.where("query", n, path),
                        f"{json.dumps(mid)} is not the id of any memory; fix the id or add "
                        "that memory",
                        self.at("query", n),
                    )
            if spec.reference_date is None:
                spec.reference_date = self.reference_date
        self._hash.update(b"queries\n")
        for spec in self.queries:
            self._hash.update(canonical_json(_query_record(spec)) + b"\n")
        return self._hash.hexdigest()

    def _assign_query_ids(self) -> None:
        used: dict[str, int] = {}
        for spec, n in zip(self.queries, self._query_where, strict=True):
            if spec.id is None:
                continue
            first = used.setdefault(spec.id, n)
            if first != n:
                self.problem(
                    self.where("query", n, ".id"),
                    f"duplicate query id {json.dumps(spec.id)} (first at "
                    f"{self._ref('query', first)}); give each query a unique id",
                    self.at("query", n),
                )
        for spec in self.queries:
            if spec.id is None:
                spec.id = _unique(derive_query_id(spec.q), used)
                used[spec.id] = -1


def _unique(base: str, used: Mapping[str, int]) -> str:
    """``base``, or ``base-2``, ``base-3``... : the first not yet taken (file order)."""
    candidate, n = base, 1
    while candidate in used:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _query_record(spec: QuerySpec) -> dict[str, Any]:
    """The canonical form of a query: what it means, not how the file spelled it."""
    return {
        "id": spec.id,
        "q": spec.q,
        "relevance": spec.relevance,
        "k": spec.k,
        "category": spec.category,
        "reference_date": spec.reference_date,
    }


# --------------------------------------------------------------------------- files


def read_fixture(path: Path, *, keep: bool = True) -> tuple[FixtureReader, str]:
    """Read and check ``path``; return the reader (problems inside) and the content hash."""
    file = str(path)
    jsonl = path.suffix.lower() in JSONL_SUFFIXES
    reader = FixtureReader(file, jsonl=jsonl, keep=keep)
    if path.is_dir():
        reader.problem(file, "is a directory; name a fixture file (.json or .jsonl)")
        return reader, ""
    try:
        if jsonl:
            with path.open("rb") as fh:
                _read_jsonl(reader, fh)
        else:
            _read_json(reader, path.read_bytes())
    except OSError as exc:
        reader.problem(file, _os_problem(exc))
        return reader, ""
    return reader, reader.finish()


def _os_problem(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file; check the path"
    if isinstance(exc, PermissionError):
        return "permission denied; make the file readable"
    return f"cannot read: {exc.strerror or exc}; check the path"


def _decode(reader: FixtureReader, data: bytes) -> object | None:
    """Parse one JSON document, reporting undecodable or malformed text with its position."""
    try:
        doc: object = json.loads(data.decode("utf-8-sig"))
        return doc
    except UnicodeDecodeError as exc:
        reader.problem(
            reader.file,
            f"not UTF-8 text (bad byte at offset {exc.start}); save the fixture as UTF-8 JSON",
        )
    except json.JSONDecodeError as exc:
        hint = (
            "one JSON document per file; name a JSON Lines file .jsonl"
            if exc.msg == "Extra data"
            else "fix the JSON syntax there"
        )
        reader.problem(
            f"{reader.file}:{exc.lineno}:{exc.colno}", f"invalid JSON: {exc.msg}; {hint}"
        )
    except RecursionError:
        reader.problem(
            reader.file,
            'JSON nested too deeply; a fixture is an object of "memories" and "queries" lists',
        )
    return None


def _read_json(reader: FixtureReader, data: bytes) -> None:
    if not data.strip():
        reader.problem(
            reader.file,
            'empty file; a fixture is a JSON object with "memories" and "queries" lists',
        )
        return
    doc = _decode(reader, data)
    if reader.problems:
        return
    if not isinstance(doc, dict):
        reader.problem(
            f"{reader.file}: $",
            f'expected an object with "memories" and "queries" lists, got {json_kind(doc)}',
        )
        return
    if "reference_date" in doc:
        reader.set_reference_date(doc["reference_date"], f"{reader.file}: $.reference_date")
    for i, rec in enumerate(_section(reader, doc, "memories", "import records")):
        reader.add_memory(rec, i)
    for i, query in enumerate(_section(reader, doc, "queries", "labeled queries")):
        reader.add_query(query, i)


def _section(reader: FixtureReader, doc: Mapping[str, Any], key: str, what: str) -> list[Any]:
    """The ``memories`` / ``queries`` list of a JSON fixture (empty on a problem)."""
    where = f"{reader.file}: $.{key}"
    if key not in doc:
        reader.problem(f"{reader.file}: $", f'missing "{key}"; add a non-empty list of {what}')
        return []
    items = doc[key]
    if not isinstance(items, list):
        reader.problem(where, f"expected a list of {what}, got {json_kind(items)}")
        return []
    if not items:
        reader.problem(where, f"empty list; add at least one of the {what}")
    return items


def _read_jsonl(reader: FixtureReader, lines: Iterable[bytes]) -> None:
    seen_any = False
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        obj = _decode_line(reader, raw, n)
        if obj is None:
            continue
        kind = _line_kind(reader, obj, n)
        if kind == "memory":
            reader.add_memory(obj["memory"], n)
        elif kind == "query":
            reader.add_query(obj["query"], n)
        elif kind == "fixture":
            _fixture_line(reader, obj["fixture"], n, first=not seen_any)
        seen_any = True
    if not seen_any:
        reader.problem(
            reader.file,
            'empty file; write one {"memory": {...}} or {"query": {...}} object per line',
        )
        return
    for kind, count in (("memory", reader.memory_count), ("query", reader.query_count)):
        if count == 0:
            reader.problem(
                reader.file,
                f'no {kind} lines; add at least one {{"{kind}": {{...}}}} line',
                (3, 0),
            )


def _decode_line(reader: FixtureReader, raw: bytes, n: int) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text[1:] if n == 1 and text.startswith("\ufeff") else text)
    except UnicodeDecodeError as exc:
        reader.problem(
            f"{reader.file}:{n}",
            f"not UTF-8 text (bad byte at column {exc.start + 1}); save the fixture as UTF-8",
            (1, n),
        )
        return None
    except json.JSONDecodeError as exc:
        reader.problem(
            f"{reader.file}:{n}:{exc.colno}",
            f"invalid JSON: {exc.msg}; each line must be one complete JSON object",
            (1, n),
        )
        return None
    except RecursionError:
        reader.problem(f"{reader.file}:{n}", "JSON nested too deeply; fix the line", (1, n))
        return None
    if not isinstance(obj, dict):
        reader.problem(
            f"{reader.file}:{n}: $",
            f'expected an object like {{"memory": {{...}}}}, got {json_kind(obj)}',
            (1, n),
        )
        return None
    return obj


def _line_kind(reader: FixtureReader, obj: Mapping[str, Any], n: int) -> str | None:
    kinds = [k for k in _JSONL_KINDS if k in obj]
    if len(kinds) == 1 and len(obj) == 1:
        return kinds[0]
    reader.problem(
        f"{reader.file}:{n}: $",
        'expected exactly one key, "memory", "query" or "fixture", got '
        + (", ".join(json.dumps(k) for k in obj) or "an empty object"),
        (1, n),
    )
    return None


def _fixture_line(reader: FixtureReader, meta: object, n: int, *, first: bool) -> None:
    where = f"{reader.file}:{n}: $.fixture"
    if not first:
        reader.problem(
            where, 'the {"fixture": {...}} line must be the first line; move it up', (1, n)
        )
    elif not isinstance(meta, dict):
        reader.problem(where, f"expected an object, got {json_kind(meta)}", (1, n))
    elif "reference_date" in meta:
        reader.set_reference_date(meta["reference_date"], where + ".reference_date")
