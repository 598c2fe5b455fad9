"""What every converter shares: which documents to keep, what was left out, progress.

Converters read a public benchmark's files (see :mod:`benchd.convert.reading`)
and hand memory and query records to a :class:`~benchd.convert.writer.FixtureWriter`.
They stream: the documents are never held, only the judgments, the query texts
and a fingerprint and id per document (to merge duplicate texts).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["ContentIndex", "ConvertSummary", "CorpusTracker", "Progress", "Tally"]

_PROGRESS_EVERY = 5000


class ContentIndex:
    """Which id first carried each text, so duplicates can be merged into it.

    A Zengram-style store keeps one record per (content, type): importing a
    second record with the same text is skipped, so a judgment on it would point
    at nothing. Converters merge such duplicates into the first id instead, and
    move their judgments along. A 16-byte digest and the owning id are kept per text.
    """

    def __init__(self) -> None:
        self._first: dict[bytes, str] = {}

    def claim(self, doc_id: str, content: str) -> str:
        """Return the id that owns ``content``: ``doc_id`` itself if the text is new."""
        digest = hashlib.blake2b(content.encode("utf-8"), digest_size=16).digest()
        return self._first.setdefault(digest, doc_id)


class CorpusTracker:
    """Decides which documents become memories and where each judgment ends up.

    ``judged`` limits bookkeeping to the ids some judgment names (``None``: track
    every id), so a million-document corpus with a few thousand judgments stays
    small. Empty documents are skipped; a document whose text an earlier one
    already carries is merged into that one (see :class:`ContentIndex`).
    """

    def __init__(self, judged: Collection[str] | None = None) -> None:
        self._judged = judged
        self._contents = ContentIndex()
        self._owner: dict[str, str] = {}

    def admit(self, doc_id: str, content: str, tally: Tally) -> bool:
        """Record one document; True if it should be written as a memory."""
        if not content.strip():
            tally.skipped_memories += 1
            return False
        owner = self._contents.claim(doc_id, content)
        if self._judged is None or doc_id in self._judged:
            self._owner[doc_id] = owner
        if owner != doc_id:
            tally.merged_memories += 1
            return False
        return True

    def owner(self, doc_id: str) -> str | None:
        """The memory id that stands for ``doc_id`` (``None`` if it was never written)."""
        return self._owner.get(doc_id)

    def relevance(self, judged: Mapping[str, int], tally: Tally) -> dict[str, int]:
        """Positive judgments mapped onto written memories, best grade first."""
        kept: dict[str, int] = {}
        for doc_id, grade in judged.items():
            if grade <= 0:
                continue
            owner = self._owner.get(doc_id)
            if owner is None:
                tally.dropped_judgments += 1
                continue
            kept[owner] = max(grade, kept.get(owner, 0))
        return dict(sorted(kept.items(), key=lambda item: -item[1]))


@dataclass(slots=True)
class Tally:
    """Counters a converter fills while it runs (mutable on purpose: it accumulates)."""

    dropped_queries: int = 0  # no positive judgment left
    dropped_judgments: int = 0  # judged id missing from the corpus (or empty)
    skipped_memories: int = 0  # empty content
    merged_memories: int = 0  # same text as an earlier document: judgments moved to it
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ConvertSummary:
    """What a conversion wrote and what it left out, for the one-line report."""

    source: str
    out: str
    memories: int
    queries: int
    dropped_queries: int = 0
    dropped_judgments: int = 0
    skipped_memories: int = 0
    merged_memories: int = 0
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, source: str, out: str, memories: int, queries: int, tally: Tally) -> ConvertSummary:
        """Freeze a finished conversion's counts."""
        return cls(
            source=source,
            out=out,
            memories=memories,
            queries=queries,
            dropped_queries=tally.dropped_queries,
            dropped_judgments=tally.dropped_judgments,
            skipped_memories=tally.skipped_memories,
            merged_memories=tally.merged_memories,
            notes=tuple(tally.notes),
        )

    def describe(self) -> str:
        """A human one-liner: counts written, then anything dropped and why."""
        parts = [f"wrote {self.out}: {self.memories} memories, {self.queries} queries"]
        if self.dropped_queries:
            parts.append(f"{self.dropped_queries} queries dropped (no relevant document)")
        if self.dropped_judgments:
            parts.append(f"{self.dropped_judgments} judgments dropped (document not in corpus)")
        if self.skipped_memories:
            parts.append(f"{self.skipped_memories} empty documents skipped")
        if self.merged_memories:
            parts.append(
                f"{self.merged_memories} duplicate documents merged into the first with the "
                "same text (a store keeps only one)"
            )
        parts.extend(self.notes)
        return "; ".join(parts)


class Progress:
    """A carriage-return counter on stderr while converting, only when stderr is a terminal."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._label = label
        self._enabled = bool(getattr(self._stream, "isatty", lambda: False)())
        self._shown = False

    def tick(self, memories: int, queries: int) -> None:
        """Report the running counts every few thousand records."""
        if self._enabled and (memories + queries) % _PROGRESS_EVERY == 0:
            self._stream.write(f"\r{self._label}: {memories} memories, {queries} queries")
            self._stream.flush()
            self._shown = True

    def close(self) -> None:
        """End the counter's line so later output starts clean."""
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()
