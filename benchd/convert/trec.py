"""TREC ad hoc collections (``<DOC>`` files, ``<top>`` topics, qrels) → fixture.

Documents are the SGML-ish form NIST ships (``<DOC><DOCNO>..</DOCNO><TEXT>..
</TEXT></DOC>``); a document's content is its headline-like fields (``HEAD``,
``HEADLINE``, ``HL``, ``TITLE``) followed by its ``TEXT`` blocks, with inner
markup removed. Topics are ``<top>`` blocks whose ``<num>``, ``<title>``,
``<desc>`` and ``<narr>`` tags are not closed; the query text is the title by
default. Qrels are ``QID ITER DOCNO REL`` lines; REL is kept as the grade.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchd.convert.common import CorpusTracker, Tally
from benchd.convert.reading import bad_line, iter_lines, read_text, require_file
from benchd.convert.writer import FixtureWriter

__all__ = ["Topic", "convert_trec", "iter_docs", "read_qrels", "read_topics"]

_TAG = re.compile(r"<[^>]*>")
_TITLE_TAGS = ("HEAD", "HEADLINE", "HL", "TITLE")
_TOPIC_FIELD = re.compile(r"<(num|title|desc|narr)>", re.IGNORECASE)
_LABEL = re.compile(r"^\s*(number|topic|description|narrative)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Topic:
    """One TREC topic: its number and its title and description texts."""

    number: str
    title: str
    desc: str
    line: int

    def text(self, field: str) -> str:
        """The query text for ``field``: ``title``, ``desc`` or ``title+desc``."""
        if field == "title":
            return self.title
        if field == "desc":
            return self.desc
        return " ".join(part for part in (self.title, self.desc) if part)


# ------------------------------------------------------------------ documents


def _clean(text: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", text)).split())


def _doc_from_lines(path: Path, start: int, lines: list[str]) -> tuple[str, str]:
    """``(docno, content)`` of one ``<DOC>`` body."""
    body = "".join(lines)
    match = re.search(r"<DOCNO>\s*(.*?)\s*</DOCNO>", body, re.IGNORECASE | re.DOTALL)
    if match is None or not match.group(1).strip():
        raise bad_line(path, start, "<DOC> without a <DOCNO>; every document needs one")
    docno = match.group(1).strip()
    pieces: list[str] = []
    for tag in (*_TITLE_TAGS, "TEXT"):
        pattern = rf"<{tag}\b[^>]*>(.*?)</{tag}>"
        pieces.extend(_clean(m) for m in re.findall(pattern, body, re.IGNORECASE | re.DOTALL))
    return docno, " ".join(piece for piece in pieces if piece)


def iter_docs(path: Path) -> Iterator[tuple[str, str]]:
    """Yield ``(docno, content)`` per ``<DOC>``; only one document is held at a time.

    Lines that are not UTF-8 are read as Latin-1, the encoding of the older TREC disks.
    """
    start: int | None = None
    lines: list[str] = []
    for lineno, line in iter_lines(path, latin1_fallback=True):
        upper = line.upper()
        if start is None:
            if not upper.lstrip().startswith("<DOC>"):
                if line.strip():
                    raise bad_line(path, lineno, "text outside <DOC>...</DOC>")
                continue
            start, lines = lineno, []
            line = line[upper.index("<DOC>") + 5 :]  # a document may sit on one line
            upper = line.upper()
        elif upper.lstrip().startswith("<DOC>"):
            raise bad_line(path, lineno, f"<DOC> inside the <DOC> opened on line {start}")
        if "</DOC>" in upper:
            lines.append(line[: upper.index("</DOC>")])
            yield _doc_from_lines(path, start, lines)
            start = None
        else:
            lines.append(line)
    if start is not None:
        raise bad_line(path, start, "<DOC> never closed; add </DOC>")


# ------------------------------------------------------------------ topics


def read_topics(path: Path) -> list[Topic]:
    """Parse ``<top>`` blocks; ``<num>``, ``<title>``, ``<desc>`` run to the next tag."""
    text = read_text(path)
    topics: list[Topic] = []
    for match in re.finditer(r"<top>(.*?)</top>", text, re.IGNORECASE | re.DOTALL):
        line = text.count("\n", 0, match.start()) + 1
        topics.append(_topic(path, line, match.group(1)))
    if not topics:
        raise bad_line(path, 1, "no <top>...</top> topic found")
    return topics


def _topic(path: Path, line: int, block: str) -> Topic:
    pieces = _TOPIC_FIELD.split(block)
    fields: dict[str, str] = {}
    for name, value in zip(pieces[1::2], pieces[2::2], strict=True):
        fields[name.lower()] = " ".join(_LABEL.sub("", value.strip()).split())
    number = fields.get("num", "")
    if not number:
        raise bad_line(path, line, "topic without <num>; write '<num> Number: 301'")
    if not fields.get("title") and not fields.get("desc"):
        raise bad_line(path, line, f"topic {number} has neither <title> nor <desc> text")
    return Topic(number, fields.get("title", ""), fields.get("desc", ""), line)


# ------------------------------------------------------------------ qrels


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{qid: {docno: rel}}`` from ``QID ITER DOCNO REL`` lines."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, raw in iter_lines(path):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise bad_line(path, lineno, "expected 'QID ITER DOCNO REL' (four columns)")
        try:
            grade = int(parts[3])
        except ValueError:
            raise bad_line(path, lineno, f"relevance {parts[3]!r} is not an integer") from None
        qrels.setdefault(parts[0], {})[parts[2]] = grade
    return qrels


def convert_trec(
    docs: Sequence[Path],
    topics_path: Path,
    qrels_path: Path,
    writer: FixtureWriter,
    tally: Tally,
    *,
    query_field: str = "title",
    max_queries: int | None = None,
) -> None:
    """Write the documents, then every judged topic, to ``writer``."""
    for path in (*docs, topics_path, qrels_path):
        require_file(path, "a TREC documents, topics or qrels file")
    qrels = read_qrels(qrels_path)
    topics = read_topics(topics_path)
    corpus = CorpusTracker({doc for judged in qrels.values() for doc in judged})
    for path in docs:
        for docno, content in iter_docs(path):
            if corpus.admit(docno, content, tally):
                writer.add_memory({"id": docno, "content": content})
    for topic in topics:
        if max_queries is not None and writer.queries >= max_queries:
            break
        text = topic.text(query_field)
        relevance = corpus.relevance(qrels.get(topic.number, {}), tally)
        if not text or not relevance:
            tally.dropped_queries += 1
            continue
        writer.add_query({"id": topic.number, "q": text, "relevance": relevance})
