"""``benchd convert cranfield``: ordinal query ids, reversed grades, empty documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.convert import cranfield_grade
from benchd.fixtures import load_fixture

DOCS = """\
.I 1
.T
wing flutter
.A
someone
.B
j. ae. 1958
.W
wing flutter at
supersonic speed .
.I 2
.T
boundary layers
.W
boundary layer transition on flat plates .
.I 3
.T
.A
.B
.W
.I 4
.T
heat transfer
.W
heat transfer in hypersonic flow .
"""

# Query .I numbers skip (001, 004): cranqrel refers to them by position (1, 2).
QUERIES = """\
.I 001
.W
what causes wing
flutter .
.I 004
.W
how does heat transfer behave at hypersonic speed .
.I 007
.W
a query whose only judgment is non-relevant .
"""

QRELS = """\
1 1 1 \r
1 2 4 \r
1 3 2 \r
2 4 2 \r
2 1 -1\r
3 2 -1\r
"""


def _collection(root: Path, qrels: str = QRELS) -> Path:
    root.mkdir(exist_ok=True)
    (root / "cran.all.1400").write_text(DOCS)
    (root / "cran.qry").write_text(QUERIES)
    (root / "cranqrel").write_text(qrels)
    return root


@pytest.mark.parametrize(("code", "grade"), [(1, 4), (2, 3), (3, 2), (4, 1), (-1, 0), (5, 0)])
def test_cleverdon_code_1_gets_the_highest_grade(code: int, grade: int) -> None:
    assert cranfield_grade(code) == grade


def test_queries_take_ordinal_ids_and_reversed_grades(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "cran.json"
    code, stdout, _ = run_benchd("convert", "cranfield", _collection(tmp_path / "c"), "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    by_id = {q.id: q for q in fixture.queries}
    assert set(by_id) == {"1", "2"}  # ordinals, not the .I numbers 001 / 004
    assert by_id["1"].q == "what causes wing flutter ."
    assert dict(by_id["1"].relevance) == {"1": 4, "2": 1}  # doc 3 is empty: judgment dropped
    assert dict(by_id["2"].relevance) == {"4": 3}  # -1 is judged non-relevant
    assert "1 queries dropped" in stdout and "1 empty documents skipped" in stdout


def test_documents_keep_their_numbers_and_abstract_text(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "cran.jsonl"
    code, _, _ = run_benchd("convert", "cranfield", _collection(tmp_path / "c"), "--out", out)
    assert code == 0
    memories = {m["id"]: m["content"] for m in load_fixture(out).memories}
    assert memories == {
        "1": "wing flutter at supersonic speed .",
        "2": "boundary layer transition on flat plates .",
        "4": "heat transfer in hypersonic flow .",
    }


def test_max_queries_keeps_the_first_judged_queries(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "cran.json"
    root = _collection(tmp_path / "c")
    code, _, _ = run_benchd("convert", "cranfield", root, "--out", out, "--max-queries", "1")
    assert code == 0
    assert [q.id for q in load_fixture(out).queries] == ["1"]


def test_malformed_qrels_line_names_file_and_line(tmp_path: Path, run_benchd) -> None:
    root = _collection(tmp_path / "c", qrels="1 1 1\n1 two 3\n")
    out = tmp_path / "cran.json"
    code, _, err = run_benchd("convert", "cranfield", root, "--out", out)
    assert code == 2
    assert err.strip() == (
        f"benchd: error: {root / 'cranqrel'}:2: expected 'QUERY_ORDINAL DOCID CODE' "
        "(three integers)"
    )
    assert not out.exists()


def test_missing_collection_file_is_a_usage_error(tmp_path: Path, run_benchd) -> None:
    code, _, err = run_benchd("convert", "cranfield", tmp_path, "--out", tmp_path / "x.json")
    assert code == 2
    assert "cran.all.1400: no such file" in err
    assert list(tmp_path.iterdir()) == []


def test_shared_cranfield_collection_converts_completely(
    tmp_path: Path, run_benchd, shared_dir: Path
) -> None:
    root = shared_dir / "data" / "cranfield"
    if not (root / "cranqrel").is_file():
        pytest.skip(f"shared Cranfield collection not found at {root}")
    out = tmp_path / "cranfield.jsonl"
    code, _, _ = run_benchd("convert", "cranfield", root, "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    qry_count = (root / "cran.qry").read_text().count(".I ")
    doc_count = (root / "cran.all.1400").read_text().count(".I ")
    assert len(fixture.queries) == qry_count  # every query has a relevant document
    assert len(fixture.memories) == doc_count - 2  # the two empty abstracts (471, 995)
    codes = {
        (int(q), int(d)): int(c)
        for q, d, c in (line.split() for line in (root / "cranqrel").read_text().splitlines())
    }
    for query in fixture.queries:
        for doc, grade in query.relevance.items():
            assert grade == 5 - codes[(int(query.id), int(doc))]
