"""Word tokens shared by the hashing embedder and the reference store's retrievers."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "content_words", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words that carry no topic: dropping them keeps BM25 OR-queries
# from matching the whole corpus and keeps the hashing embedder's cosine
# about content rather than grammar.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "up",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "about",
        "after",
        "all",
        "also",
        "any",
        "before",
        "being",
        "between",
        "both",
        "each",
        "few",
        "more",
        "most",
        "no",
        "nor",
        "not",
        "only",
        "other",
        "out",
        "over",
        "own",
        "same",
        "some",
        "such",
        "too",
        "under",
        "until",
        "very",
        "just",
        "should",
        "now",
    ]
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Word tokens without stopwords."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
