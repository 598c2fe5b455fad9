"""Labeled corpora: the target API's eval fixture format, loaded strictly.

A fixture is ``{"memories": [import records], "queries": [{"q", "expected_ids",
"k"?}]}`` — the target API's own eval format, loaded verbatim (unknown top-level
keys such as ``_comment`` are ignored, memories pass through untouched) — with
benchd's extensions: query ``id``, ``category``, graded ``relevance``,
``reference_date`` and a JSON Lines form for big corpora. docs/fixtures.md
describes the format and every validation message.

::

    load_fixture(path) -> Fixture          raises FixtureError with every problem
    validate_fixture(path) -> [problem]    one line each: FILE: JSON-PATH: what; fix
    check_fixture(path) -> FixtureCheck    problems + counts, without keeping memories
    packaged_fixture("smoke") -> Path      a fixture shipped inside the package
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchd.errors import FixtureError
from benchd.fixture_checks import QuerySpec
from benchd.fixture_reader import JSONL_SUFFIXES, read_fixture

__all__ = [
    "PACKAGED_FIXTURES",
    "Fixture",
    "FixtureCheck",
    "LabeledQuery",
    "check_fixture",
    "fixture_name",
    "load_fixture",
    "packaged_fixture",
    "validate_fixture",
    "write_fixture",
]

PACKAGED_FIXTURES: tuple[str, ...] = (
    "smoke",
    "knowledge-update",
    "temporal",
    "multi-session",
    "preference",
)
"""Names accepted by :func:`packaged_fixture`; ``smoke`` is the embedded default."""

_NAME_MAX = 64


@dataclass(frozen=True, slots=True)
class LabeledQuery:
    """One query with its judgments: ``relevance`` maps memory id -> grade.

    Grades > 0 are relevant; 0 or negative grades are judged non-relevant.
    ``expected_ids`` lists the relevant ids in the order the fixture gave them.
    ``reference_date`` is the query's own, else the fixture's.
    """

    id: str
    q: str
    relevance: Mapping[str, int]
    k: int | None = None
    category: str | None = None
    reference_date: str | None = None

    @property
    def expected_ids(self) -> tuple[str, ...]:
        return tuple(i for i, g in self.relevance.items() if g > 0)


@dataclass(frozen=True, slots=True)
class Fixture:
    """A corpus of import-shaped memory records plus labeled queries."""

    name: str  # a bounded label: the file stem
    path: str
    memories: tuple[Mapping[str, Any], ...]  # import records, each with an "id"
    queries: tuple[LabeledQuery, ...]
    content_hash: str  # sha256 hex of the canonical memories + queries
    reference_date: str | None = None

    @property
    def memory_ids(self) -> tuple[str, ...]:
        """Every memory's id, in file order."""
        return tuple(str(m["id"]) for m in self.memories)

    @property
    def categories(self) -> tuple[str, ...]:
        """The distinct query categories, sorted (queries without one are not counted)."""
        return tuple(sorted({q.category for q in self.queries if q.category is not None}))


@dataclass(frozen=True, slots=True)
class FixtureCheck:
    """What validating one file found: its problems, and its size when it has none."""

    path: str
    problems: tuple[str, ...]
    memories: int
    queries: int
    categories: int

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """``FILE: ok (34 memories, 12 queries, 3 categories)``; singular for 1."""
        counts = ", ".join(
            _plural(n, word)
            for n, word in (
                (self.memories, "memory"),
                (self.queries, "query"),
                (self.categories, "category"),
            )
        )
        return f"{self.path}: ok ({counts})"


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"1 {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def fixture_name(path: str | Path) -> str:
    """The fixture's bounded label: its file stem, lower-cased, only ``[a-z0-9_-]``."""
    stem = Path(path).name
    for suffix in (".json", *JSONL_SUFFIXES):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    label = re.sub(r"[^a-z0-9_-]+", "_", stem.lower()).strip("_-")[:_NAME_MAX]
    return label or "fixture"


def load_fixture(path: str | Path) -> Fixture:
    """Load and fully validate a JSON or JSON Lines fixture.

    Raises :class:`~benchd.errors.FixtureError` holding every problem found.
    """
    path = Path(path)
    reader, content_hash = read_fixture(path, keep=True)
    if reader.problems:
        raise FixtureError(reader.problems)
    return Fixture(
        name=fixture_name(path),
        path=str(path),
        memories=tuple(reader.memories),
        queries=tuple(_labeled(spec) for spec in reader.queries),
        content_hash=content_hash,
        reference_date=reader.reference_date,
    )


def check_fixture(path: str | Path) -> FixtureCheck:
    """Validate a fixture without keeping its memories; report problems and counts."""
    reader, _ = read_fixture(Path(path), keep=False)
    categories = {s.category for s in reader.queries if s.category is not None}
    return FixtureCheck(
        path=str(path),
        problems=tuple(reader.problems),
        memories=reader.memory_count,
        queries=reader.query_count,
        categories=len(categories),
    )


def validate_fixture(path: str | Path) -> list[str]:
    """Every problem of a fixture, one line each (``[]`` when it is valid)."""
    return list(check_fixture(path).problems)


def _labeled(spec: QuerySpec) -> LabeledQuery:
    assert spec.id is not None  # ids are assigned before a fixture is built
    return LabeledQuery(
        id=spec.id,
        q=spec.q,
        relevance=dict(spec.relevance),
        k=spec.k,
        category=spec.category,
        reference_date=spec.reference_date,
    )


def packaged_fixture(name: str = "smoke") -> Path:
    """The path of a fixture shipped inside the installed package."""
    if name not in PACKAGED_FIXTURES:
        raise FixtureError(
            [
                f"{name}: no packaged fixture by that name; choose one of "
                + ", ".join(PACKAGED_FIXTURES)
            ]
        )
    return Path(str(resources.files("benchd").joinpath("data", f"{name}.json")))


# --------------------------------------------------------------------------- writing


def _query_json(query: LabeledQuery, default_date: str | None) -> dict[str, Any]:
    graded = any(g != 1 for g in query.relevance.values())
    out: dict[str, Any] = {"id": query.id, "q": query.q}
    if graded:
        out["relevance"] = dict(query.relevance)
    else:
        out["expected_ids"] = list(query.relevance)
    for key in ("k", "category"):
        if getattr(query, key) is not None:
            out[key] = getattr(query, key)
    if query.reference_date is not None and query.reference_date != default_date:
        out["reference_date"] = query.reference_date
    return out


def write_fixture(fixture: Fixture, path: str | Path) -> None:
    """Write ``fixture`` as JSON, or as JSON Lines when ``path`` ends in .jsonl/.ndjson.

    Loading the written file gives the same ids, judgments and ``content_hash``.
    """
    path = Path(path)
    meta = {"reference_date": fixture.reference_date} if fixture.reference_date else {}
    queries = [_query_json(q, fixture.reference_date) for q in fixture.queries]
    if path.suffix.lower() not in JSONL_SUFFIXES:
        doc = {**meta, "memories": list(fixture.memories), "queries": queries}
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return
    with path.open("w", encoding="utf-8") as fh:
        if meta:
            fh.write(json.dumps({"fixture": meta}, ensure_ascii=False) + "\n")
        for memory in fixture.memories:
            fh.write(json.dumps({"memory": memory}, ensure_ascii=False) + "\n")
        for query in queries:
            fh.write(json.dumps({"query": query}, ensure_ascii=False) + "\n")
