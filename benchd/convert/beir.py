"""BEIR dataset folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/SPLIT.tsv``) → fixture.

The layout is BEIR's own (``beir.datasets.data_loader.GenericDataLoader``):
``corpus.jsonl`` lines ``{"_id", "title", "text"}``, ``queries.jsonl`` lines
``{"_id", "text"}``, and a tab-separated qrels file with the header
``query-id corpus-id score``. Scores are kept as grades (graded sets such as
TREC-COVID use 0/1/2); non-positive scores are judged non-relevant and left
out, which changes no measure benchd computes. A query whose judged documents
are all non-relevant, or missing from the corpus, is dropped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchd.convert.common import CorpusTracker, Tally
from benchd.convert.reading import bad_line, iter_jsonl, iter_lines, require_file
from benchd.convert.writer import FixtureWriter

__all__ = ["convert_beir", "read_beir_qrels"]


def read_beir_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{query_id: {corpus_id: score}}`` from a BEIR qrels TSV (header optional)."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, raw in iter_lines(path):
        parts = raw.rstrip("\n").split("\t")
        if not raw.strip():
            continue
        if lineno == 1 and parts[0].strip() == "query-id":
            continue
        if len(parts) != 3:
            parts = raw.split()
        if len(parts) != 3:
            raise bad_line(path, lineno, "expected 'query-id<TAB>corpus-id<TAB>score'")
        qid, doc_id, score = (part.strip() for part in parts)
        try:
            grade = int(score)
        except ValueError:
            raise bad_line(path, lineno, f"score {score!r} is not an integer") from None
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


def _text_field(path: Path, line: int, obj: dict[str, Any], name: str) -> str:
    value = obj.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise bad_line(path, line, f'"{name}" must be a string')
    return value


def _record_id(path: Path, line: int, obj: dict[str, Any]) -> str:
    raw = obj.get("_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    if not isinstance(raw, str) or not raw:
        raise bad_line(path, line, 'missing "_id" (a non-empty string)')
    return raw


def _doc_content(title: str, text: str) -> str:
    """Title and text as BEIR's own models see them: title first, then the body."""
    title, text = title.strip(), text.strip()
    if title and text:
        return f"{title}\n\n{text}"
    return title or text


def _write_corpus(path: Path, writer: FixtureWriter, tally: Tally, corpus: CorpusTracker) -> None:
    for line, obj in iter_jsonl(path):
        doc_id = _record_id(path, line, obj)
        content = _doc_content(
            _text_field(path, line, obj, "title"), _text_field(path, line, obj, "text")
        )
        if corpus.admit(doc_id, content, tally):
            writer.add_memory({"id": doc_id, "content": content})


def convert_beir(
    root: Path,
    writer: FixtureWriter,
    tally: Tally,
    *,
    split: str = "test",
    max_queries: int | None = None,
) -> None:
    """Write a BEIR dataset's corpus, then its judged queries of ``split``, to ``writer``."""
    corpus_path = require_file(root / "corpus.jsonl", "BEIR's corpus.jsonl")
    queries_path = require_file(root / "queries.jsonl", "BEIR's queries.jsonl")
    qrels_path = require_file(root / "qrels" / f"{split}.tsv", f"BEIR's qrels/{split}.tsv")
    qrels = read_beir_qrels(qrels_path)
    judged = {doc for docs in qrels.values() for doc in docs}
    corpus = CorpusTracker(judged)
    _write_corpus(corpus_path, writer, tally, corpus)
    for line, obj in iter_jsonl(queries_path):
        qid = _record_id(queries_path, line, obj)
        if qid not in qrels:
            continue  # a query of another split
        if max_queries is not None and writer.queries >= max_queries:
            break
        text = _text_field(queries_path, line, obj, "text").strip()
        relevance = corpus.relevance(qrels[qid], tally)
        if not text or not relevance:
            tally.dropped_queries += 1
            continue
        writer.add_query({"id": qid, "q": text, "relevance": relevance})
