"""Candidate retrieval: ``bm25``, ``tags``, ``dense`` and ``hybrid`` (RRF, k = 60).

Each retriever returns ``(row id, score)`` pairs, best first, with scores in
(0, 1] so the store's importance and access boosts act on a common scale:
BM25 is divided by the best BM25 of the query, dense is the cosine (clipped
at a small positive floor), tags is the fraction of query words matched, and
hybrid is the RRF sum divided by its best value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from benchd.refstore.catalog import Catalog, SearchFilter
from benchd.refstore.index import MemoryIndex
from benchd.refstore.text import content_words, fts_match

__all__ = [
    "RETRIEVERS",
    "RRF_K",
    "bm25_candidates",
    "dense_candidates",
    "rrf_fuse",
    "tag_candidates",
]

RETRIEVERS = ("bm25", "tags", "dense", "hybrid")
RRF_K = 60
_FLOOR = 1e-4
Ranked = list[tuple[int, float]]


def _scaled(pairs: Ranked) -> Ranked:
    if not pairs:
        return pairs
    best = max(pairs[0][1], _FLOOR)
    return [(rid, max(score / best, _FLOOR)) for rid, score in pairs]


def bm25_candidates(index: MemoryIndex, query: str, where: SearchFilter, depth: int) -> Ranked:
    """FTS5 BM25 over content, OR of the query's content words."""
    match = fts_match(query)
    if match is None:
        return []
    return _scaled(index.bm25(match, where, depth))


def _top(scores: npt.NDArray[np.float64], depth: int) -> list[int]:
    """The positions of the ``depth`` best scores, best first, equal scores in position
    order (as the other retrievers break ties by row id): a stable sort's first ``depth``."""
    if len(scores) <= depth or depth <= 0:
        return [int(i) for i in np.argsort(-scores, kind="stable")[: max(depth, 0)]]
    cut = -np.partition(-scores, depth - 1)[depth - 1]  # the depth-th best score
    if np.isnan(cut):  # fewer than depth numbers: NaN last, as the stable sort puts it
        return [int(i) for i in np.argsort(-scores, kind="stable")[:depth]]
    above = np.flatnonzero(scores > cut)
    part = np.concatenate((above, np.flatnonzero(scores == cut)[: depth - len(above)]))
    return [int(i) for i in part[np.argsort(-scores[part], kind="stable")]]


def dense_candidates(
    catalog: Catalog, query_vector: npt.NDArray[np.float32], where: SearchFilter, depth: int
) -> Ranked:
    """Cosine between the query vector and every matching row's unit vector."""
    mask = catalog.mask(where)
    rows = np.flatnonzero(mask)
    if len(rows) == 0 or len(query_vector) != catalog.dims:
        return []
    scores = catalog.scores(query_vector)[rows].astype(np.float64)
    return [(int(rows[i]), max(float(scores[i]), _FLOOR)) for i in _top(scores, depth)]


def tag_candidates(catalog: Catalog, query: str, where: SearchFilter, depth: int) -> Ranked:
    """Fraction of the query's content words found in key, subject, entities and tags."""
    terms = frozenset(content_words(query))
    if not terms:
        return []
    tags = catalog.tags
    hits = [
        (int(rid), len(terms & tags[rid]) / len(terms))
        for rid in np.flatnonzero(catalog.mask(where))
        if not terms.isdisjoint(tags[rid])
    ]
    hits.sort(key=lambda pair: (-pair[1], pair[0]))
    return hits[:depth]


def rrf_fuse(lists: Sequence[Ranked], depth: int, k: int = RRF_K) -> Ranked:
    """Reciprocal-rank fusion: sum of 1 / (k + rank) over the lists, rank from 1."""
    fused: dict[int, float] = {}
    for ranked in lists:
        for rank, (rid, _score) in enumerate(ranked, start=1):
            fused[rid] = fused.get(rid, 0.0) + 1.0 / (k + rank)
    ordered = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))[:depth]
    return _scaled(ordered)
