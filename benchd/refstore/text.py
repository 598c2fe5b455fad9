"""Query tokenising for the reference store's retrievers (the word tokens live in embed)."""

from __future__ import annotations

from benchd.embed.text import STOPWORDS, content_words, words

__all__ = ["STOPWORDS", "content_words", "fts_match", "retry_terms", "words"]


def fts_match(text: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's content words, or None if it has none."""
    terms = dict.fromkeys(content_words(text))
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def retry_terms(text: str) -> str:
    """The topic words a zero-hit retry searches for: content words longer than two letters."""
    return " ".join(w for w in content_words(text) if len(w) > 2)
