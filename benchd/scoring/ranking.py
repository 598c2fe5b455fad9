"""Per-query ranking measures, defined as trec_eval defines them.

Everything here is pure and works on one query: a ranked list of ids (best
first) and the judgments ``{id: grade}``. A document is *relevant* when its
grade is at least ``rel_level`` (default 1); unjudged documents count as
non-relevant. The measures, for a cut-off ``k`` and ``R`` relevant ids:

- ``hit@k``        1 if any relevant id is in the top k (trec_eval ``success_k``)
- ``recall@k``     relevant in the top k / R (trec_eval ``recall_k``)
- ``recall_all@k`` 1 if every relevant id is in the top k (LongMemEval)
- ``precision@k``  relevant in the top k / k, a short list padded with
  non-relevant (trec_eval ``P_k``)
- ``mrr@k``        1 / rank of the first relevant id if it is within k, else 0
- ``ndcg@k``       DCG@k / IDCG@k with gain = grade (grades > 0 only) and
  discount log2(rank + 1); the ideal ranking sorts all judged grades; 0 when
  the ideal DCG is 0 (trec_eval ``ndcg_cut_k``)
- ``map@k``        sum of precision at each relevant rank <= k, / R
  (trec_eval ``map_cut_k``)
- ``rr``           1 / rank of the first relevant id, no cut-off (``recip_rank``)
- ``ap``           average precision over the whole list (``map`` per query)
- ``r_precision``  relevant in the top R / R (``Rprec``)

A store whose search answers a *set* (a substring filter, in no order: MCP
server-memory's ``search_nodes``) is scored by :func:`set_metrics` instead,
over the whole returned set and with no cut-off (keys without ``@k``):
``hit``, ``recall``, ``recall_all`` and ``precision`` (relevant in the set /
the set's size). Rank measures (MRR, nDCG, MAP, P@k, rr, ap, R-precision)
would only measure the store's arbitrary order, so a set has none
(:data:`RANK_ONLY_REASON`).

The work is done over the ranks of the relevant documents (usually a handful)
rather than over the whole list, so one query costs a few microseconds.
Sums are accumulated in rank order, like trec_eval's C loops, so values are
bit-identical to trec_eval's.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, count

from benchd.config.thresholds import METRIC_NAMES, SET_METRIC_NAMES, UNCUT_METRIC_NAMES

__all__ = [
    "METRIC_NAMES",
    "RANK_ONLY_REASON",
    "SET_METRIC_NAMES",
    "UNCUT_METRIC_NAMES",
    "dcg_discounts",
    "ideal_dcg_prefix",
    "query_metrics",
    "rank_only_keys",
    "relevant_in_top",
    "set_metrics",
]


RANK_ONLY_REASON = (
    "the store's search answers an unordered set: rank measures (mrr, ndcg, map, "
    "precision@k, rr, ap, r_precision) are not defined; hit, recall, recall_all and "
    "precision are over the whole returned set"
)

# METRIC_NAMES (cut-off measures, keys "<name>@<k>") and UNCUT_METRIC_NAMES, in
# report order, are named where config checks them (benchd.config.thresholds).

# _DISCOUNTS[i] = log2(i + 2): the discount of the document at 0-based rank i.
_DISCOUNTS: list[float] = [math.log2(i + 2) for i in range(1024)]


def dcg_discounts(n: int) -> list[float]:
    """The shared discount table, grown so that it covers ranks ``0..n-1``."""
    if n > len(_DISCOUNTS):
        _DISCOUNTS.extend(math.log2(i + 2) for i in range(len(_DISCOUNTS), n))
    return _DISCOUNTS


def ideal_dcg_prefix(grades: Iterable[int]) -> list[float]:
    """``out[j]`` = DCG of the ideal ranking's first ``j`` documents.

    The ideal ranking holds every judged grade > 0, best first; ``out[0]`` is
    0 and the list has one entry per positive grade plus one.
    """
    positive = sorted((g for g in grades if g > 0), reverse=True)
    disc = dcg_discounts(len(positive))
    out = [0.0]
    total = 0.0
    for i, gain in enumerate(positive):
        total += gain / disc[i]
        out.append(total)
    return out


def _first_occurrences(ranked: Sequence[str]) -> list[str | None]:
    """Blank out repeated ids so only their first occurrence can score.

    A store that returns the same id twice has spent a slot on nothing new:
    the repeat keeps its rank (so P@k still divides by k) but counts as
    non-relevant, which keeps precision and recall within [0, 1].
    """
    seen: set[str] = set()
    out: list[str | None] = []
    for doc in ranked:
        if doc in seen:
            out.append(None)
        else:
            seen.add(doc)
            out.append(doc)
    return out


def _grades(ranked: Sequence[str], relevance: Mapping[str, int]) -> list[int]:
    """The grade of each ranked id (0 when unjudged or a repeat)."""
    docs: Sequence[str | None] = ranked
    if len(set(ranked)) != len(ranked):
        docs = _first_occurrences(ranked)
    get = relevance.get
    return [0 if d is None else get(d, 0) for d in docs]


def relevant_in_top(
    ranked: Sequence[str], relevance: Mapping[str, int], k: int, rel_level: int = 1
) -> int:
    """How many distinct relevant ids (grade >= ``rel_level``) are in the top ``k``."""
    grades = _grades(ranked[:k], relevance)
    return sum(1 for g in grades if g >= rel_level)


def _prefix_precision_sums(ranks: Sequence[int]) -> list[float]:
    """``out[j]`` = sum of precision at the first ``j`` relevant ranks."""
    out = [0.0]
    total = 0.0
    for j, rank in enumerate(ranks, start=1):
        total += j / rank
        out.append(total)
    return out


def _dcg_at_cuts(grades: Sequence[int], cuts: Sequence[int]) -> list[float]:
    """DCG of ``grades`` truncated at each of the ascending ``cuts``."""
    positive = list(compress(count(), map((0).__lt__, grades)))
    disc = dcg_discounts(len(grades))
    out: list[float] = []
    total = 0.0
    idx = 0
    for cut in cuts:
        while idx < len(positive) and positive[idx] < cut:
            pos = positive[idx]
            total += grades[pos] / disc[pos]
            idx += 1
        out.append(total)
    return out


def query_metrics(
    ranked: Sequence[str],
    relevance: Mapping[str, int],
    ks: Sequence[int],
    *,
    rel_level: int = 1,
) -> dict[str, float]:
    """Every measure of one query: ``"<name>@<k>"`` for each k, plus rr, ap, r_precision.

    Raises ``ValueError`` when no judged id reaches ``rel_level`` (the query
    cannot be scored) or when a k is not a positive integer.
    """
    num_rel = sum(1 for g in relevance.values() if g >= rel_level)
    if num_rel == 0:
        raise ValueError(f"no relevant ids (grade >= {rel_level}) among the judgments")
    if any(k <= 0 for k in ks):
        raise ValueError(f"cut-offs must be positive integers, got {list(ks)}")
    grades = _grades(ranked, relevance)
    ranks = list(compress(count(1), map(rel_level.__le__, grades)))
    psum = _prefix_precision_sums(ranks)
    ideal = ideal_dcg_prefix(relevance.values())
    cuts = sorted(set(ks))
    dcgs = dict(zip(cuts, _dcg_at_cuts(grades, cuts), strict=True))
    first = ranks[0] if ranks else 0
    out: dict[str, float] = {}
    for k in ks:
        hits = bisect_right(ranks, k)
        idcg = ideal[min(k, len(ideal) - 1)]
        out[f"hit@{k}"] = 1.0 if hits else 0.0
        out[f"recall@{k}"] = hits / num_rel
        out[f"recall_all@{k}"] = 1.0 if hits == num_rel else 0.0
        out[f"precision@{k}"] = hits / k
        out[f"mrr@{k}"] = 1.0 / first if 0 < first <= k else 0.0
        out[f"ndcg@{k}"] = dcgs[k] / idcg if idcg > 0.0 else 0.0
        out[f"map@{k}"] = psum[hits] / num_rel
    out["rr"] = 1.0 / first if first else 0.0
    out["ap"] = psum[-1] / num_rel
    out["r_precision"] = bisect_right(ranks, num_rel) / num_rel
    return out


def set_metrics(
    returned: Sequence[str],
    relevance: Mapping[str, int],
    ks: Sequence[int] = (),
    *,
    rel_level: int = 1,
) -> dict[str, float]:
    """The set measures of one query (:data:`SET_METRIC_NAMES`); ``ks`` is not used.

    Takes the arguments :func:`query_metrics` takes, so a cycle picks one or
    the other. A repeated id counts once; an empty set has precision 0.
    Raises ``ValueError`` when no judged id reaches ``rel_level``.
    """
    del ks  # a set has no cut-off: it is scored whole
    num_rel = sum(1 for g in relevance.values() if g >= rel_level)
    if num_rel == 0:
        raise ValueError(f"no relevant ids (grade >= {rel_level}) among the judgments")
    distinct = set(returned)
    found = sum(1 for d in distinct if relevance.get(d, 0) >= rel_level)
    return {
        "hit": 1.0 if found else 0.0,
        "recall": found / num_rel,
        "recall_all": 1.0 if found == num_rel else 0.0,
        "precision": found / len(distinct) if distinct else 0.0,
    }


def rank_only_keys(ks: Sequence[int]) -> tuple[str, ...]:
    """The keys a ranking has and a set has not, at the cut-offs ``ks`` (report order)."""
    cut = [m for m in METRIC_NAMES if m not in ("hit", "recall", "recall_all")]
    return (*(f"{m}@{k}" for m in cut for k in ks), *UNCUT_METRIC_NAMES)
