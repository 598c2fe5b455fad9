"""trec_eval's measures over one topic, measure selection (``-m``) and averaging.

Each measure family mirrors a trec_eval ``m_*.c`` file: same name, same
default cut-offs, same arithmetic in the same order (so the values are
bit-identical), same averaging (arithmetic mean over topics; sums for the
counts; geometric mean for ``gm_map`` / ``gm_bpref``). A topic arrives as the ranks
and grades of its retrieved judged documents plus all its judgments; negative
qrels grades mean "in the pool but not judged", as in trec_eval.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from benchd.errors import UsageError
from benchd.scoring.ranking import dcg_discounts, ideal_dcg_prefix

__all__ = [
    "FAMILIES",
    "MIN_GEO_MEAN",
    "Family",
    "Selection",
    "Topic",
    "parse_measures",
]

MIN_GEO_MEAN = 0.00001  # trec_eval.h: floor of a value before its log is taken

ParamKind = Literal["none", "int_cuts", "float_cuts"]
Aggregate = Literal["mean", "sum", "gmean", "count", "runid"]


class Topic:
    """One topic: where its judged documents were ranked, and all its judgments.

    ``hits`` holds ``(rank, grade)`` for every retrieved document the qrels
    judge (grade >= 0), by rank; unjudged documents only occupy ranks, which
    is all trec_eval's measures need from them (``num_ret``).
    """

    __slots__ = ("hits", "judged", "num_rel", "num_ret", "ranks")

    def __init__(
        self, num_ret: int, hits: list[tuple[int, int]], judged: Collection[int], rel_level: int
    ) -> None:
        self.num_ret = num_ret
        self.hits = hits
        self.judged = judged  # every grade the qrels give this topic
        self.num_rel = sum(map(rel_level.__le__, judged))
        # 1-based ranks of the relevant retrieved documents, ascending.
        self.ranks = [rank for rank, grade in hits if grade >= rel_level]


Compute = Callable[[Topic, tuple[float, ...], int], list[float]]


@dataclass(frozen=True, slots=True)
class Family:
    """One trec_eval measure: its name, parameters and how it is computed and averaged."""

    name: str
    compute: Compute
    params: ParamKind = "none"
    defaults: tuple[float, ...] = ()
    aggregate: Aggregate = "mean"
    integer: bool = False
    per_query: bool = True

    def names(self, params: tuple[float, ...]) -> list[str]:
        """The output names, e.g. ``P_5``, ``iprec_at_recall_0.10``."""
        if self.params == "int_cuts":
            return [f"{self.name}_{int(p)}" for p in params]
        if self.params == "float_cuts":
            return [f"{self.name}_{p:3.2f}" for p in params]
        return [self.name]


def _psum(ranks: Sequence[int], upto: int | None = None) -> float:
    """Sum of precision at each relevant rank (at the first ``upto`` of them)."""
    total = 0.0
    for j, rank in enumerate(ranks[:upto] if upto is not None else ranks, start=1):
        total += j / rank
    return total


def _ap(t: Topic) -> float:
    return _psum(t.ranks) / t.num_rel if t.ranks else 0.0


def _num_ret(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [float(t.num_ret)]


def _num_rel(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [float(t.num_rel)]


def _num_rel_ret(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [float(len(t.ranks))]


def _one(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [1.0]


def _map(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [_ap(t)]


def _rprec(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if min(t.num_ret, t.num_rel) == 0:
        return [0.0]
    return [bisect_right(t.ranks, t.num_rel) / t.num_rel]


def _bpref(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    """bpref: each relevant doc scores 1 - (judged non-relevant above it) / min(N, R)."""
    num_rel = t.num_rel
    num_nonrel = sum(1 for g in t.judged if 0 <= g < lvl)
    denom = float(min(num_nonrel, num_rel))
    total, nonrel_so_far = 0.0, 0
    for _, g in t.hits:
        if g < lvl:
            nonrel_so_far += 1
        elif nonrel_so_far > 0:
            total += 1.0 - min(nonrel_so_far, num_rel) / denom
        else:
            total += 1.0
    return [total / num_rel if num_rel else total]


def _recip_rank(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [1.0 / t.ranks[0] if t.ranks else 0.0]


def _precision(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [bisect_right(t.ranks, k) / k for k in p]


def _recall(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if t.num_rel == 0:
        return [0.0] * len(p)
    return [bisect_right(t.ranks, k) / t.num_rel for k in p]


def _relative_p(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if t.num_rel == 0:
        return [0.0] * len(p)
    return [bisect_right(t.ranks, k) / min(k, t.num_rel) for k in p]


def _success(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    first = t.ranks[0] if t.ranks else 0
    return [1.0 if 0 < first <= k else 0.0 for k in p]


def _map_cut(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if t.num_rel == 0:
        return [0.0] * len(p)
    return [_psum(t.ranks, bisect_right(t.ranks, k)) / t.num_rel for k in p]


def _dcg_prefix_at(hits: Sequence[tuple[int, int]], cuts: Sequence[int]) -> list[float]:
    """DCG at each ascending cut: gain = grade when > 0, discount log2(rank + 1)."""
    disc = dcg_discounts(hits[-1][0] if hits else 0)
    out: list[float] = []
    total, idx, end = 0.0, 0, len(hits)
    for cut in cuts:
        while idx < end and hits[idx][0] <= cut:
            rank, grade = hits[idx]
            if grade > 0:
                total += grade / disc[rank - 1]
            idx += 1
        out.append(total)
    return out


def _ideal(judged: Collection[int]) -> list[float]:
    """Ideal DCG prefix of a topic's judgments, memoised by the multiset of grades."""
    key = tuple(sorted(judged))
    ideal = _IDEAL_CACHE.get(key)
    if ideal is None:
        if len(_IDEAL_CACHE) > 4096:
            _IDEAL_CACHE.clear()
        ideal = _IDEAL_CACHE[key] = ideal_dcg_prefix(key)
    return ideal


_IDEAL_CACHE: dict[tuple[int, ...], list[float]] = {}


def _ndcg_cut(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    """nDCG at each ascending cut; DCG summed in rank order, as _dcg_prefix_at does."""
    hits = t.hits
    disc = dcg_discounts(hits[-1][0] if hits else 0)
    ideal = _ideal(t.judged)
    top = len(ideal) - 1
    out = []
    total, idx, end = 0.0, 0, len(hits)
    for k in p:
        cut = int(k)
        while idx < end:
            rank, grade = hits[idx]
            if rank > cut:
                break
            if grade > 0:
                total += grade / disc[rank - 1]
            idx += 1
        idcg = ideal[cut if cut < top else top]
        out.append(total / idcg if idcg > 0.0 else total)
    return out


def _ndcg(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    (dcg,) = _dcg_prefix_at(t.hits, [t.num_ret])
    idcg = _ideal(t.judged)[-1]
    return [dcg / idcg if idcg > 0.0 else 0.0]


def _iprec_cutoffs(t: Topic, p: tuple[float, ...]) -> list[float]:
    """Interpolated precision at each recall fraction in ``p`` (trec_eval v10)."""
    num_rel_ret = len(t.ranks)
    values = [0.0] * len(p)
    if t.num_ret == 0:
        return values
    cutoffs = [_lround(frac * t.num_rel) for frac in p]
    cut = len(p) - 1
    while cut >= 0 and cutoffs[cut] > num_rel_ret:
        cut -= 1
    int_precis = num_rel_ret / t.num_ret
    rel_so_far = num_rel_ret
    # Walk the relevant ranks from the bottom: interpolated precision at a
    # recall level is the best precision at that level or any later one.
    for rank in reversed(t.ranks):
        int_precis = max(int_precis, rel_so_far / rank)
        while cut >= 0 and rel_so_far == cutoffs[cut]:
            values[cut] = int_precis
            cut -= 1
        rel_so_far -= 1
    while cut >= 0:
        values[cut] = int_precis
        cut -= 1
    return values


def _lround(x: float) -> int:
    """C's lround: halves round away from zero (Python's round() does not)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def _iprec(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return _iprec_cutoffs(t, p)


def _11pt_avg(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    total = 0.0
    for value in _iprec_cutoffs(t, p):
        total += value
    return [total / len(p)]


def _rprec_mult(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    """Precision at R * each factor, cut-offs rounded as trec_eval does (+0.9, truncate)."""
    num_rel_ret = len(t.ranks)
    out = []
    for frac in p:
        cut = int(frac * t.num_rel + 0.9)
        if cut > t.num_ret:
            out.append(num_rel_ret / cut if cut else 0.0)
        elif cut <= 0 or num_rel_ret == 0:
            out.append(0.0)
        else:
            out.append(bisect_right(t.ranks, cut) / cut)
    return out


def _set_p(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [len(t.ranks) / t.num_ret if t.num_ret else 0.0]


def _set_relative_p(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    denom = min(t.num_ret, t.num_rel)
    return [len(t.ranks) / denom if denom else 0.0]


def _set_recall(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [len(t.ranks) / t.num_rel if t.num_rel else 0.0]


def _set_map(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if not (t.num_ret and t.num_rel):
        return [0.0]
    rr = float(len(t.ranks))
    return [(rr * rr) / (float(t.num_ret) * float(t.num_rel))]


def _set_f(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    if not t.ranks:
        return [0.0]
    precision = len(t.ranks) / t.num_ret
    recall = len(t.ranks) / t.num_rel
    beta = 1.0
    return [(beta + 1.0) * precision * recall / (beta * precision + recall)]


def _num_nonrel_judged_ret(t: Topic, p: tuple[float, ...], lvl: int) -> list[float]:
    return [float(len(t.hits) - len(t.ranks))]


_CUTS = (5.0, 10.0, 15.0, 20.0, 30.0, 100.0, 200.0, 500.0, 1000.0)
_RECALLS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_R_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)

# In trec_eval's own order (measures.c), which is also the output order.
FAMILIES: tuple[Family, ...] = (
    Family("runid", _one, aggregate="runid", per_query=False),
    Family("num_q", _one, aggregate="count", integer=True, per_query=False),
    Family("num_ret", _num_ret, aggregate="sum", integer=True),
    Family("num_rel", _num_rel, aggregate="sum", integer=True),
    Family("num_rel_ret", _num_rel_ret, aggregate="sum", integer=True),
    Family("map", _map),
    Family("gm_map", _map, aggregate="gmean", per_query=False),
    Family("Rprec", _rprec),
    Family("bpref", _bpref),
    Family("recip_rank", _recip_rank),
    Family("iprec_at_recall", _iprec, "float_cuts", _RECALLS),
    Family("P", _precision, "int_cuts", _CUTS),
    Family("recall", _recall, "int_cuts", _CUTS),
    Family("gm_bpref", _bpref, aggregate="gmean", per_query=False),
    Family("Rprec_mult", _rprec_mult, "float_cuts", _R_MULTS),
    Family("11pt_avg", _11pt_avg, defaults=_RECALLS),
    Family("ndcg", _ndcg),
    Family("ndcg_cut", _ndcg_cut, "int_cuts", _CUTS),
    Family("map_cut", _map_cut, "int_cuts", _CUTS),
    Family("relative_P", _relative_p, "int_cuts", _CUTS),
    Family("success", _success, "int_cuts", (1.0, 5.0, 10.0)),
    Family("set_P", _set_p),
    Family("set_relative_P", _set_relative_p),
    Family("set_recall", _set_recall),
    Family("set_map", _set_map),
    Family("set_F", _set_f),
    Family("num_nonrel_judged_ret", _num_nonrel_judged_ret, aggregate="sum", integer=True),
)
_BY_NAME = {f.name: f for f in FAMILIES}
_OFFICIAL = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
)
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "all_trec": tuple(f.name for f in FAMILIES),
}


@dataclass(frozen=True, slots=True)
class Selection:
    """The measures to compute, in output order, each with its parameters."""

    items: tuple[tuple[Family, tuple[float, ...]], ...]

    def names(self) -> list[str]:
        """Output name of every value, in the order ``evaluate`` returns them."""
        return [n for fam, params in self.items for n in fam.names(params)]

    def columns(self) -> list[tuple[str, Family]]:
        """(output name, family) of every value, in output order."""
        return [(n, fam) for fam, params in self.items for n in fam.names(params)]

    def evaluate(self, topic: Topic, rel_level: int) -> list[float]:
        """All selected values for one topic, flat, in output order."""
        out: list[float] = []
        for fam, params in self.items:
            out.extend(fam.compute(topic, params, rel_level))
        return out


def _parse_params(fam: Family, text: str, spec: str) -> set[float]:
    if fam.params == "none":
        raise UsageError(f"-m {spec}: measure {fam.name} takes no parameters (use -m {fam.name})")
    values: set[float] = set()
    for part in text.split(","):
        try:
            value = float(int(part)) if fam.params == "int_cuts" else float(part)
        except ValueError:
            kind = "positive integers" if fam.params == "int_cuts" else "numbers"
            raise UsageError(
                f"-m {spec}: parameter {part!r} is not valid; {fam.name} takes "
                f"comma-separated {kind}, e.g. -m {fam.name}.{_example(fam)}"
            ) from None
        if not math.isfinite(value) or value < 0 or (fam.params == "int_cuts" and value == 0):
            raise UsageError(f"-m {spec}: parameter {part} must be positive")
        values.add(value)
    return values


def _example(fam: Family) -> str:
    return "5,10" if fam.params == "int_cuts" else "0.1,0.5"


def parse_measures(specs: Sequence[str]) -> Selection:
    """Turn ``-m`` arguments (``official``, ``all_trec``, ``P.5,10``...) into a selection.

    With no ``-m`` the ``official`` set is used, as in trec_eval. A family named
    with parameters uses exactly those (merged over repeated ``-m``); a family
    named bare or through a nickname uses trec_eval's defaults.
    """
    wanted: dict[str, set[float] | None] = {}
    for spec in specs or ["official"]:
        name, _, text = spec.partition(".")
        if name in NICKNAMES and not text:
            for member in NICKNAMES[name]:
                wanted.setdefault(member, None)
            continue
        fam = _BY_NAME.get(name)
        if fam is None:
            known = ", ".join([*NICKNAMES, *_BY_NAME])
            raise UsageError(f"-m {spec}: unknown measure {name!r} (benchd implements: {known})")
        if text or "." in spec:
            given = _parse_params(fam, text, spec)
            wanted[name] = (wanted.get(name) or set()) | given
        else:
            wanted.setdefault(name, None)
    items = []
    for fam in FAMILIES:
        if fam.name in wanted:
            params = wanted[fam.name]
            items.append((fam, tuple(sorted(params)) if params else fam.defaults))
    return Selection(tuple(items))
