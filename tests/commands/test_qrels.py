"""``benchd qrels``: a fixture's judgments as trec_eval qrels that score to benchd's numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytrec_eval

from benchd.fixtures.model import load_fixture
from benchd.scoring.ranking import query_metrics
from benchd.scoring.trec.read import read_qrels

FIXTURE = {
    "memories": [
        {"id": "a", "content": "alpha apple"},
        {"id": "b b", "content": "beta banana"},
        {"id": "c", "content": "gamma cherry"},
        {"id": "d", "content": "delta date"},
    ],
    "queries": [
        {"id": "plain", "q": "apple", "expected_ids": ["a", "b b"]},
        {"id": "graded", "q": "cherry", "relevance": {"c": 2, "a": 1, "d": 0}},
    ],
}


def benchd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args], capture_output=True, text=True, check=False
    )


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(FIXTURE), encoding="utf-8")
    return path


def test_qrels_are_graded_where_the_fixture_grades_and_escaped_as_runs_are(
    fixture_file: Path,
) -> None:
    proc = benchd("qrels", str(fixture_file))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "plain 0 a 1",
        "plain 0 b%20b 1",
        "graded 0 c 2",
        "graded 0 a 1",
        "graded 0 d 0",
    ]


def test_qrels_read_back_as_the_fixtures_judgments(fixture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.qrels"
    proc = benchd("qrels", str(fixture_file), "--out", str(out))
    assert proc.returncode == 0 and "5 judgments" in proc.stderr
    qrels = read_qrels(out)  # trec_eval's reader: qid 0 docno rel
    fixture = load_fixture(fixture_file)
    assert qrels == {
        q.id.encode(): {doc.replace(" ", "%20").encode(): g for doc, g in q.relevance.items()}
        for q in fixture.queries
    }


def test_benchd_score_on_these_qrels_gives_benchds_own_per_query_numbers(
    fixture_file: Path, tmp_path: Path
) -> None:
    qrels = tmp_path / "tiny.qrels"
    assert benchd("qrels", str(fixture_file), "-o", str(qrels)).returncode == 0
    rankings = {"plain": ["c", "b b", "x", "a"], "graded": ["d", "a", "c", "b b"]}
    run = tmp_path / "tiny.run"
    run.write_text(
        "".join(
            f"{qid} Q0 {doc.replace(' ', '%20')} {rank} {len(docs) - rank + 1} t\n"
            for qid, docs in rankings.items()
            for rank, doc in enumerate(docs, start=1)
        )
    )
    measures = ["-m", "P.3", "-m", "recall.3", "-m", "ndcg_cut.3", "-m", "recip_rank"]
    proc = benchd("score", "-q", "-c", *measures, "--format", "json", str(qrels), str(run))
    assert proc.returncode == 0, proc.stderr
    per_query = json.loads(proc.stdout)["per_query"]
    for query in load_fixture(fixture_file).queries:
        ours = query_metrics(rankings[query.id], query.relevance, [3])
        theirs = per_query[query.id]
        assert theirs["P_3"] == pytest.approx(ours["precision@3"])
        assert theirs["recall_3"] == pytest.approx(ours["recall@3"])
        assert theirs["ndcg_cut_3"] == pytest.approx(ours["ndcg@3"])
        assert theirs["recip_rank"] == pytest.approx(ours["rr"])


def test_packaged_fixture_by_name_and_a_bad_fixture_exits_2(tmp_path: Path) -> None:
    proc = benchd("qrels", "packaged:smoke")
    assert proc.returncode == 0 and proc.stdout.startswith("ledger-primary-port 0 ")
    bad = tmp_path / "bad.json"
    bad.write_text('{"memories": [], "queries": [{"q": "x"}]}')
    proc = benchd("qrels", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = benchd("qrels", "packaged:smoke", "--out", str(tmp_path))
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_pytrec_eval_reads_the_qrels_and_scores_as_benchd_does(
    fixture_file: Path, tmp_path: Path
) -> None:
    """pytrec_eval (trec_eval as a library) parses the file and agrees per query."""
    qrels_path = tmp_path / "tiny.qrels"
    assert benchd("qrels", str(fixture_file), "-o", str(qrels_path)).returncode == 0
    with qrels_path.open() as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    rankings = {"plain": ["c", "b%20b", "x", "a"], "graded": ["d", "a", "c", "b%20b"]}
    run = {
        qid: {doc: float(len(docs) - i) for i, doc in enumerate(docs)}  # rank order as scores
        for qid, docs in rankings.items()
    }
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3", "recall.3", "P.3"}).evaluate(run)
    for query in load_fixture(fixture_file).queries:
        ranked = [d.replace("%20", " ") for d in rankings[query.id]]
        ours = query_metrics(ranked, query.relevance, [3])
        assert scores[query.id]["ndcg_cut_3"] == pytest.approx(ours["ndcg@3"])
        assert scores[query.id]["recall_3"] == pytest.approx(ours["recall@3"])
        assert scores[query.id]["P_3"] == pytest.approx(ours["precision@3"])
