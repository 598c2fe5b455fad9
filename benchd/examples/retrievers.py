"""Two in-process retrievers for ``kind = "python"``: BM25 and a tag scorer.

Pure Python, no dependencies; they implement the simple retriever protocol
of :mod:`benchd.kinds.python` (``index(memories)`` + ``search(q, k)``), so
a config can compare them side by side (``configs/python-bm25-vs-tags.toml``)::

    [probe.target]
    kind = "python"
    factory = "benchd.examples.retrievers:bm25"
    options = { k1 = 1.2, b = 0.75 }
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BM25Retriever", "TagRetriever", "bm25", "tags", "words"]

_WORD = re.compile(r"[a-z0-9]+")
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "our", "the", "that",
    "this", "to", "was", "we", "what", "when", "where", "which", "who", "why", "with",
})
# fmt: on


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words, stopwords removed."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _text(memory: Mapping[str, Any]) -> str:
    return str(memory.get("content") or memory.get("text") or "")


class BM25Retriever:
    """Okapi BM25 over each memory's content (idf = ln(1 + (N - df + .5) / (df + .5)))."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1, self.b = k1, b
        self.model = f"bm25(k1={k1:g},b={b:g})"
        self._ids: list[str] = []
        self._tf: list[Counter[str]] = []
        self._lengths: list[int] = []
        self._idf: dict[str, float] = {}
        self._avgdl = 0.0

    def index(self, memories: Sequence[Mapping[str, Any]]) -> None:
        """Replace the index with these memories."""
        self._ids = [str(m["id"]) for m in memories]
        self._tf = [Counter(words(_text(m))) for m in memories]
        self._lengths = [sum(tf.values()) for tf in self._tf]
        n = len(self._tf)
        self._avgdl = sum(self._lengths) / n if n else 0.0
        df = Counter(w for tf in self._tf for w in tf)
        self._idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def search(self, q: str, k: int) -> list[str]:
        """The ``k`` best ids; ties go to the earlier memory."""
        terms = [t for t in dict.fromkeys(words(q)) if t in self._idf]
        scored = [(self._score(i, terms), i) for i in range(len(self._ids))]
        ranked = sorted((pair for pair in scored if pair[0] > 0), key=lambda p: (-p[0], p[1]))
        return [self._ids[i] for _, i in ranked[:k]]

    def _score(self, i: int, terms: Sequence[str]) -> float:
        tf, length = self._tf[i], self._lengths[i]
        norm = self.k1 * (1 - self.b + self.b * length / self._avgdl) if self._avgdl else self.k1
        return sum(self._idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if tf[t])


class TagRetriever:
    """Scores by the fraction of query words found in a memory's tags, key and type.

    Tags are split on ``-``/``_`` too (``ledger-api`` matches "ledger"). Ties
    are broken by the fraction of query words in the content, weighted by
    ``content_weight`` (0 for a pure tag scorer), then by corpus order.
    """

    def __init__(self, content_weight: float = 0.1) -> None:
        self.content_weight = content_weight
        self.model = f"tags(content_weight={content_weight:g})"
        self._ids: list[str] = []
        self._tags: list[frozenset[str]] = []
        self._words: list[frozenset[str]] = []

    def index(self, memories: Sequence[Mapping[str, Any]]) -> None:
        """Replace the index with these memories."""
        self._ids = [str(m["id"]) for m in memories]
        self._tags = [_tag_words(m) for m in memories]
        self._words = [frozenset(words(_text(m))) for m in memories]

    def search(self, q: str, k: int) -> list[str]:
        """The ``k`` best ids with at least one matching word."""
        terms = frozenset(words(q))
        if not terms:
            return []
        scored = []
        for i in range(len(self._ids)):
            tag_part = len(terms & self._tags[i]) / len(terms)
            word_part = len(terms & self._words[i]) / len(terms)
            score = tag_part + self.content_weight * word_part
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda p: (-p[0], p[1]))
        return [self._ids[i] for _, i in scored[:k]]


def _tag_words(memory: Mapping[str, Any]) -> frozenset[str]:
    raw = memory.get("tags")
    labels = [str(t) for t in raw] if isinstance(raw, list) else []
    labels += [str(memory[key]) for key in ("key", "type", "subject") if memory.get(key)]
    out: set[str] = set()
    for label in labels:
        out.update(words(label.replace("-", " ").replace("_", " ")))
    return frozenset(out)


def bm25(k1: float = 1.2, b: float = 0.75) -> BM25Retriever:
    """Factory for ``factory = "benchd.examples.retrievers:bm25"``."""
    return BM25Retriever(k1=k1, b=b)


def tags(content_weight: float = 0.1) -> TagRetriever:
    """Factory for ``factory = "benchd.examples.retrievers:tags"``."""
    return TagRetriever(content_weight=content_weight)
