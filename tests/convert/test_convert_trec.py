"""``benchd convert trec``: <DOC> files, <top> topics, four-column qrels."""

from __future__ import annotations

import gzip
from pathlib import Path

from benchd.fixtures import load_fixture

DOCS = """\
<DOC>
<DOCNO> FT911-1 </DOCNO>
<HEADLINE>
Oil prices rise &amp; fall
</HEADLINE>
<TEXT>
Crude oil <F P=10>prices</F> rose sharply on Monday.
</TEXT>
</DOC>
<DOC>
<DOCNO>FT911-2</DOCNO>
<TEXT>
The central bank held interest rates.
</TEXT>
<TEXT>
Analysts expected a cut.
</TEXT>
</DOC>
"""

MORE_DOCS = """\
<DOC>
<DOCNO>LA010189-0001</DOCNO>
<TEXT>Wildfires spread across the hills.</TEXT>
</DOC>
"""

TOPICS = """\
<top>
<num> Number: 301
<title> Oil price changes

<desc> Description:
What made crude oil prices move?

<narr> Narrative:
Relevant documents name a cause.
</top>

<top>
<num> Number: 302
<title> Topic: Interest rates
<desc> Description:
Decisions by central banks on rates.
</top>

<top>
<num> Number: 303
<title> Nothing relevant
</top>
"""

QRELS = """\
301 0 FT911-1 1
301 0 FT911-2 0
302 0 FT911-2 2
302 0 LA010189-0001 1
303 0 FT911-2 0
"""


def _files(root: Path, qrels: str = QRELS, docs: str = DOCS) -> list[Path]:
    root.mkdir()
    (root / "ft.sgml").write_text(docs)
    with gzip.open(root / "la.sgml.gz", "wt") as fh:
        fh.write(MORE_DOCS)
    (root / "topics").write_text(TOPICS)
    (root / "qrels").write_text(qrels)
    return [root / "ft.sgml", root / "la.sgml.gz", root / "topics", root / "qrels"]


def _convert(run_benchd, files: list[Path], out: Path, *extra: str) -> tuple[int, str, str]:
    ft, la, topics, qrels = files
    return run_benchd(
        "convert", "trec", "--docs", ft, "--docs", la, "--topics", topics, "--qrels", qrels,
        "--out", out, *extra,
    )  # fmt: skip


def test_documents_keep_docnos_and_headline_plus_text(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "trec.jsonl"
    code, _, _ = _convert(run_benchd, _files(tmp_path / "in"), out)
    assert code == 0
    memories = {m["id"]: m["content"] for m in load_fixture(out).memories}
    assert memories == {
        "FT911-1": "Oil prices rise & fall Crude oil prices rose sharply on Monday.",
        "FT911-2": "The central bank held interest rates. Analysts expected a cut.",
        "LA010189-0001": "Wildfires spread across the hills.",
    }


def test_topic_titles_become_queries_with_qrels_grades(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "trec.json"
    code, stdout, _ = _convert(run_benchd, _files(tmp_path / "in"), out)
    assert code == 0
    queries = {q.id: q for q in load_fixture(out).queries}
    assert set(queries) == {"301", "302"}
    assert queries["301"].q == "Oil price changes"
    assert queries["302"].q == "Interest rates"  # the "Topic:" label is not query text
    assert dict(queries["302"].relevance) == {"FT911-2": 2, "LA010189-0001": 1}
    assert "1 queries dropped" in stdout  # 303 has no relevant document


def test_query_field_desc_uses_the_description(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "trec.json"
    code, _, _ = _convert(run_benchd, _files(tmp_path / "in"), out, "--query-field", "title+desc")
    assert code == 0
    first = load_fixture(out).queries[0]
    assert first.q == "Oil price changes What made crude oil prices move?"


def test_three_column_qrels_line_names_file_and_line(tmp_path: Path, run_benchd) -> None:
    files = _files(tmp_path / "in", qrels="301 0 FT911-1 1\n302 FT911-2 2\n")
    code, _, err = _convert(run_benchd, files, tmp_path / "trec.json")
    assert code == 2
    assert err.strip() == (
        f"benchd: error: {files[3]}:2: expected 'QID ITER DOCNO REL' (four columns)"
    )


def test_unclosed_doc_names_the_line_it_opened_on(tmp_path: Path, run_benchd) -> None:
    files = _files(tmp_path / "in", docs=DOCS + "<DOC>\n<DOCNO>X</DOCNO>\n")
    code, _, err = _convert(run_benchd, files, tmp_path / "trec.json")
    assert code == 2
    opened_on = DOCS.count("\n") + 1
    assert f"{files[0]}:{opened_on}: <DOC> never closed; add </DOC>" in err


def test_doc_without_docno_is_an_error(tmp_path: Path, run_benchd) -> None:
    files = _files(tmp_path / "in", docs="<DOC>\n<TEXT>orphan</TEXT>\n</DOC>\n")
    code, _, err = _convert(run_benchd, files, tmp_path / "trec.json")
    assert code == 2
    assert f"{files[0]}:1: <DOC> without a <DOCNO>" in err


def test_one_line_and_latin1_documents_are_read(tmp_path: Path, run_benchd) -> None:
    files = _files(tmp_path / "in")
    files[0].write_bytes(
        b"<DOC><DOCNO>FT911-1</DOCNO><TEXT>Oil prices rose.</TEXT></DOC>\n"
        b"<DOC>\n<DOCNO>FT911-2</DOCNO>\n<TEXT>Caf\xe9 prices fell.</TEXT>\n</DOC>\n"
    )
    out = tmp_path / "trec.json"
    code, _, _ = _convert(run_benchd, files, out)
    assert code == 0
    memories = {m["id"]: m["content"] for m in load_fixture(out).memories}
    assert memories["FT911-1"] == "Oil prices rose."
    assert memories["FT911-2"] == "Café prices fell."
