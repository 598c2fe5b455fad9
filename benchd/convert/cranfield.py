"""Cranfield 1400 (``cran.all.1400``, ``cran.qry``, ``cranqrel``) → fixture.

Two quirks of the Glasgow distribution decide the conversion (see its MANIFEST):

* ``cranqrel``'s query ids are the query's *ordinal position* in ``cran.qry``
  (1..225), not its ``.I`` number (001..365, with gaps). Query ids in the
  fixture are those ordinals, so trec_eval runs and qrels line up.
* Cleverdon's codes run the wrong way for nDCG: 1 = complete answer ...
  4 = minimum interest, and -1 marks a judged non-relevant document. The
  fixture grade is ``5 - code`` (1→4, 2→3, 3→2, 4→1), so the best documents
  gain most; -1 (and anything else outside 1..4) is not relevant and dropped.

Documents with no text at all (471 and 995 in the real collection) are
skipped, and judgments pointing at them dropped: a store cannot hold an
empty record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchd.convert.common import CorpusTracker, Tally
from benchd.convert.reading import bad_line, iter_lines, require_file
from benchd.convert.writer import FixtureWriter

__all__ = ["CRANFIELD_FILES", "convert_cranfield", "cranfield_grade"]

CRANFIELD_FILES = ("cran.all.1400", "cran.qry", "cranqrel")
_FIELDS = frozenset({".T", ".A", ".B", ".W"})


def cranfield_grade(code: int) -> int:
    """Map a Cleverdon relevance code to a fixture grade (higher = more relevant; 0 = not)."""
    return 5 - code if 1 <= code <= 4 else 0


@dataclass(frozen=True, slots=True)
class _Record:
    """One ``.I`` block: its number, the line it starts on, and its fields' text."""

    number: str
    line: int
    fields: dict[str, str]


def _iter_records(path: Path) -> Iterator[_Record]:
    """Parse the SMART-style ``.I n`` / ``.X`` field layout both Cranfield files use."""
    number: str | None = None
    start = 0
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for lineno, raw in iter_lines(path):
        line = raw.rstrip()
        if line.startswith(".I"):
            if number is not None:
                yield _Record(number, start, {k: " ".join(v) for k, v in fields.items()})
            number = line[2:].strip()
            if not number:
                raise bad_line(path, lineno, "'.I' without a number; write '.I <number>'")
            start, fields, current = lineno, {}, None
        elif line in _FIELDS:
            if number is None:
                raise bad_line(path, lineno, f"'{line}' before the first '.I <number>' line")
            current = fields.setdefault(line, [])
        elif current is not None:
            current.append(line.strip())
        elif line.strip():
            raise bad_line(path, lineno, "text outside a field; expected '.I', '.T' or '.W'")
    if number is not None:
        yield _Record(number, start, {k: " ".join(v) for k, v in fields.items()})


def _doc_content(fields: dict[str, str]) -> str:
    """The abstract (``.W``, which opens with the title), else the title alone."""
    text = " ".join(fields.get(".W", "").split())
    return text or " ".join(fields.get(".T", "").split())


def _read_qrels(path: Path) -> dict[int, dict[str, int]]:
    """``{ordinal: {docid: grade}}`` with positive grades only (see :func:`cranfield_grade`)."""
    qrels: dict[int, dict[str, int]] = {}
    for lineno, raw in iter_lines(path):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != 3 or not all(_is_int(p) for p in parts):
            raise bad_line(path, lineno, "expected 'QUERY_ORDINAL DOCID CODE' (three integers)")
        grade = cranfield_grade(int(parts[2]))
        judged = qrels.setdefault(int(parts[0]), {})
        if grade > 0:
            judged[str(int(parts[1]))] = grade
    return qrels


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def convert_cranfield(
    root: Path, writer: FixtureWriter, tally: Tally, *, max_queries: int | None = None
) -> None:
    """Write Cranfield's documents, then its judged queries, to ``writer``."""
    docs_path, qry_path, qrel_path = (
        require_file(root / name, f"Cranfield's {name}") for name in CRANFIELD_FILES
    )
    qrels = _read_qrels(qrel_path)
    corpus = CorpusTracker()
    for rec in _iter_records(docs_path):
        doc_id = str(int(rec.number)) if rec.number.isdigit() else rec.number
        content = _doc_content(rec.fields)
        if corpus.admit(doc_id, content, tally):
            writer.add_memory({"id": doc_id, "content": content})
    for ordinal, rec in enumerate(_iter_records(qry_path), start=1):
        if max_queries is not None and writer.queries >= max_queries:
            break
        text = " ".join(rec.fields.get(".W", "").split())
        if not text:
            raise bad_line(qry_path, rec.line, f"query .I {rec.number} has no '.W' text")
        relevance = corpus.relevance(qrels.get(ordinal, {}), tally)
        if not relevance:
            tally.dropped_queries += 1
            continue
        query = {"id": str(ordinal), "q": text, "relevance": relevance, "_qry_id": rec.number}
        writer.add_query(query)
