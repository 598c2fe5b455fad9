"""Labeled corpora: the target API's eval fixture format, loaded strictly.

MODEL ONLY — the loader and validator are being written (see issue 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Fixture", "LabeledQuery"]


@dataclass(frozen=True, slots=True)
class LabeledQuery:
    """One query with its judgments: ``relevance`` maps memory id -> grade.

    Grades > 0 are relevant; 0 or negative grades are judged non-relevant.
    ``expected_ids`` lists the relevant ids in the order the fixture gave them.
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
