"""Per-query values equal trec_eval's C code (pytrec_eval) on random runs.

Runs have tied scores, short lists, graded and negative judgments, judged
topics with no results and result topics with no judgments; both benchd's
offline scorer and the per-query ``query_metrics`` must agree with
trec_eval's own arithmetic.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchd.scoring.ranking import query_metrics
from benchd.scoring.trec.evaluate import ScoreOptions, score_files
from benchd.scoring.trec.measures import parse_measures

pytrec_eval = pytest.importorskip("pytrec_eval")

# trec_eval 9 (inside pytrec_eval) and 10 differ only for iprec_at_recall and
# 11pt_avg (rounding of recall cut-offs), so those are compared in the
# conformance tests against trec_eval 10's own outputs instead.
MEASURES = [
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "Rprec",
    "bpref",
    "recip_rank",
    "P.1,2,3,5,10",
    "recall.1,2,3,5,10",
    "ndcg",
    "ndcg_cut.1,2,3,5,10",
    "map_cut.1,2,3,5,10",
    "relative_P.1,3,10",
    "success.1,2,5",
    "Rprec_mult",
    "set_P",
    "set_relative_P",
    "set_recall",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
]
DOCS = [f"d{i}" for i in range(12)]
QIDS = ["q1", "q2", "q3", "q4"]

Judgments = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


@st.composite
def judgments_and_run(draw: st.DrawFn) -> tuple[Judgments, Run]:
    """Random qrels (grades -1..3, at least one non-negative) and a run with ties."""
    qrels: Judgments = {}
    for qid in draw(st.lists(st.sampled_from(QIDS), min_size=1, max_size=4, unique=True)):
        judged = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 3), min_size=1))
        if all(g < 0 for g in judged.values()):
            judged[DOCS[0]] = 0  # trec_eval needs one non-negative grade per topic
        qrels[qid] = judged
    run: Run = {}
    scores = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 7.25])  # few values: many ties
    for qid in draw(st.lists(st.sampled_from(QIDS), min_size=1, max_size=4, unique=True)):
        run[qid] = draw(st.dictionaries(st.sampled_from(DOCS), scores, min_size=1))
    return qrels, run


def _write(directory: Path, qrels: Judgments, run: Run) -> tuple[Path, Path]:
    qrels_path, run_path = directory / "qrels", directory / "run"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())
    )
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {s} tag\n"
            for q, docs in run.items()
            for rank, (d, s) in enumerate(docs.items(), start=1)
        )
    )
    return qrels_path, run_path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(judgments_and_run(), st.integers(1, 2))  # pytrec_eval rejects level 0
def test_offline_scorer_equals_trec_eval_per_query(data: tuple[Judgments, Run], level: int) -> None:
    qrels, run = data
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES), relevance_level=level)
    want = expected.evaluate(run)
    options = ScoreOptions(parse_measures(MEASURES), rel_level=level)
    names = options.selection.names()
    with tempfile.TemporaryDirectory() as tmp:
        qrels_path, run_path = _write(Path(tmp), qrels, run)
        if not want:  # no topic in both files: benchd refuses instead of printing nothing
            return
        scored = score_files(qrels_path, run_path, options)
    got = {qid: dict(zip(names, row, strict=True)) for qid, row in scored.per_query}
    assert set(got) == set(want)
    for qid, values in want.items():
        for name, value in values.items():
            assert got[qid][name] == pytest.approx(value, rel=1e-12, abs=1e-12), (qid, name)


_PAIRS = {  # benchd per-query name -> trec_eval name
    "precision": "P",
    "recall": "recall",
    "hit": "success",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}
_KS = (1, 2, 3, 5, 10)


@st.composite
def ranking_and_judgments(draw: st.DrawFn) -> tuple[list[str], dict[str, int]]:
    """A ranked list (possibly short or empty) and judgments with a relevant id."""
    ranked = draw(st.lists(st.sampled_from(DOCS), max_size=12, unique=True))
    relevance = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 3), min_size=1))
    if not any(g >= 1 for g in relevance.values()):
        relevance[draw(st.sampled_from(DOCS))] = draw(st.integers(1, 3))
    return ranked, relevance


@settings(max_examples=150, deadline=None)
@given(ranking_and_judgments())
def test_query_metrics_equal_trec_eval(case: tuple[list[str], dict[str, int]]) -> None:
    ranked, relevance = case
    ks = ",".join(map(str, _KS))
    measures = {f"{m}.{ks}" for m in _PAIRS.values()} | {"map", "recip_rank", "Rprec"}
    # Distinct decreasing scores keep the given order through trec_eval's sort.
    run = {"q": {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}}
    if not ranked:
        run = {"q": {"not-judged": 1.0}}
    want = pytrec_eval.RelevanceEvaluator({"q": relevance}, measures).evaluate(run)["q"]
    got = query_metrics(ranked, relevance, _KS)
    for ours, theirs in _PAIRS.items():
        for k in _KS:
            assert got[f"{ours}@{k}"] == pytest.approx(want[f"{theirs}_{k}"], abs=1e-12)
    assert got["ap"] == pytest.approx(want["map"], abs=1e-12)
    assert got["rr"] == pytest.approx(want["recip_rank"], abs=1e-12)
    assert got["r_precision"] == pytest.approx(want["Rprec"], abs=1e-12)
    for k in _KS:  # the two measures trec_eval has no name for
        first = got["rr"] and round(1 / got["rr"])
        assert got[f"mrr@{k}"] == (got["rr"] if first and first <= k else 0.0)
        assert got[f"recall_all@{k}"] == (1.0 if got[f"recall@{k}"] == 1.0 else 0.0)
