"""``benchd convert beir``: corpus/queries/qrels layout, graded scores, dropped queries."""

from __future__ import annotations

import json
from pathlib import Path

from benchd.fixtures import load_fixture


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _dataset(root: Path, test_qrels: str | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    _jsonl(
        root / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Flu vaccines", "text": "Annual flu shots reduce risk."},
            {"_id": "d2", "title": "", "text": "Masks lower droplet spread."},
            {"_id": "d3", "title": "Vitamin C", "text": "No effect on colds was found."},
            {"_id": "d4", "title": "", "text": ""},
            {"_id": "d5", "title": "Flu vaccines", "text": "Annual flu shots reduce risk."},
        ],
    )
    _jsonl(
        root / "queries.jsonl",
        [
            {"_id": "q1", "text": "do flu shots work"},
            {"_id": "q2", "text": "does vitamin c cure colds"},
            {"_id": "q3", "text": "only judged non-relevant"},
            {"_id": "q4", "text": "only judges a missing document"},
            {"_id": "q9", "text": "a training query"},
        ],
    )
    qrels = test_qrels or (
        "query-id\tcorpus-id\tscore\n"
        "q1\td1\t2\nq1\td2\t1\nq1\td3\t0\n"
        "q2\td3\t1\n"
        "q3\td2\t0\n"
        "q4\td404\t1\n"
        "q2\td5\t2\n"
    )
    (root / "qrels" / "test.tsv").write_text(qrels)
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td2\t1\n")
    return root


def test_graded_scores_become_grades(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "f.json"
    code, _, _ = run_benchd("convert", "beir", _dataset(tmp_path / "ds"), "--out", out)
    assert code == 0
    queries = {q.id: q for q in load_fixture(out).queries}
    assert dict(queries["q1"].relevance) == {"d1": 2, "d2": 1}  # score 0: judged non-relevant
    assert queries["q1"].q == "do flu shots work"


def test_queries_without_a_relevant_document_are_dropped_and_counted(
    tmp_path: Path, run_benchd
) -> None:
    out = tmp_path / "f.json"
    code, stdout, _ = run_benchd("convert", "beir", _dataset(tmp_path / "ds"), "--out", out)
    assert code == 0
    assert [q.id for q in load_fixture(out).queries] == ["q1", "q2"]
    assert "2 queries dropped (no relevant document)" in stdout
    assert "1 judgments dropped" in stdout  # q4 -> d404


def test_title_and_text_are_joined_and_empty_documents_skipped(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "f.jsonl"
    code, stdout, _ = run_benchd("convert", "beir", _dataset(tmp_path / "ds"), "--out", out)
    assert code == 0
    memories = {m["id"]: m["content"] for m in load_fixture(out).memories}
    assert memories["d1"] == "Flu vaccines\n\nAnnual flu shots reduce risk."
    assert memories["d2"] == "Masks lower droplet spread."
    assert "d4" not in memories
    assert "1 empty documents skipped" in stdout


def test_duplicate_text_is_merged_and_its_judgments_follow(tmp_path: Path, run_benchd) -> None:
    """A store keeps one record per text, so d5 (a copy of d1) becomes d1."""
    out = tmp_path / "f.json"
    code, stdout, _ = run_benchd("convert", "beir", _dataset(tmp_path / "ds"), "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    assert "d5" not in {m["id"] for m in fixture.memories}
    q2 = next(q for q in fixture.queries if q.id == "q2")
    assert dict(q2.relevance) == {"d1": 2, "d3": 1}
    assert "1 duplicate documents merged" in stdout


def test_split_flag_selects_the_qrels_file(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "f.json"
    root = _dataset(tmp_path / "ds")
    code, _, _ = run_benchd("convert", "beir", root, "--split", "train", "--out", out)
    assert code == 0
    assert [q.id for q in load_fixture(out).queries] == ["q9"]


def test_bad_corpus_line_names_file_and_line(tmp_path: Path, run_benchd) -> None:
    root = _dataset(tmp_path / "ds")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "d6", "text": "unterminated\n')
    out = tmp_path / "f.json"
    code, _, err = run_benchd("convert", "beir", root, "--out", out)
    assert code == 2
    assert err.startswith(f"benchd: error: {root / 'corpus.jsonl'}:6: not valid JSON")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_non_integer_score_names_qrels_line(tmp_path: Path, run_benchd) -> None:
    root = _dataset(tmp_path / "ds", test_qrels="query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    code, _, err = run_benchd("convert", "beir", root, "--out", tmp_path / "f.json")
    assert code == 2
    assert f"{root / 'qrels' / 'test.tsv'}:2: score 'high' is not an integer" in err


def test_missing_split_names_the_file_it_wanted(tmp_path: Path, run_benchd) -> None:
    root = _dataset(tmp_path / "ds")
    code, _, err = run_benchd(
        "convert", "beir", root, "--split", "dev", "--out", tmp_path / "f.json"
    )
    assert code == 2
    assert "dev.tsv: no such file (expected BEIR's qrels/dev.tsv)" in err


def test_non_utf8_qrels_line_names_file_and_line(tmp_path: Path, run_benchd) -> None:
    root = _dataset(tmp_path / "ds")
    (root / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq1\td\xe91\t1\n")
    code, _, err = run_benchd("convert", "beir", root, "--out", tmp_path / "f.json")
    assert code == 2
    assert f"{root / 'qrels' / 'test.tsv'}:2: not UTF-8 text (bad byte at column 5)" in err


def test_split_without_any_relevant_judgment_writes_nothing(tmp_path: Path, run_benchd) -> None:
    root = _dataset(tmp_path / "ds", test_qrels="query-id\tcorpus-id\tscore\nq1\td1\t0\n")
    out = tmp_path / "f.json"
    code, _, err = run_benchd("convert", "beir", root, "--out", out)
    assert code == 2
    assert "nothing to write (3 memories, 0 judged queries)" in err
    assert not out.exists()
