"""Streaming a run's topics in trec_eval's order, from chunks of whole lines.

A chunk of plain lines is split column-wise (``trec_columns``); anything
else is split into tokens or, failing that, parsed line by line (which words
the errors). Runs are written grouped by topic, so a topic is finished when
a line of another topic follows it and is yielded then; a run whose topics
turn out interleaved is re-read and grouped in memory.

Each topic comes as its docnos in trec_eval's order (score descending, then
docno descending), cut at ``-M``. When the scorer passes the qrels, a whole
topic of a column-split chunk whose file order already is that order and
whose docnos are distinct comes *located* instead: the number of documents
kept and ``(rank, grade)`` of its judged ones, found without making an
object of every docno.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Generator
from itertools import compress, count, groupby, islice
from pathlib import Path

import numpy as np

from benchd.errors import RunFileError
from benchd.scoring.trec.columns import Groups, judged_lines, split_chunk
from benchd.scoring.trec.parallel import WHOLE, Span
from benchd.scoring.trec.read import RUN_FORMAT, Qrels, chunks, text

__all__ = ["Located", "TopicStream", "read_run_topics", "span_topics"]

_Columns = tuple[list[bytes], list[bytes], list[float], bytes]


def _fast_columns(chunk: bytes) -> _Columns | None:
    """Split a chunk of well-formed six-field lines column-wise, or None.

    Trusted only when the token count is exactly six per line and the iter
    and tag columns are each constant, which a line with a missing or extra
    field would break; anything else (comments, blank lines, extra fields,
    bad numbers) takes the line-by-line path, which also words the errors.
    """
    if chunk.startswith(b"#") or b"\n#" in chunk:
        return None
    tokens = chunk.split()
    lines = chunk.count(b"\n")
    if not lines or len(tokens) != 6 * lines:
        return None
    tags, iters = tokens[5::6], tokens[1::6]
    if tags.count(tags[0]) != lines or iters.count(iters[0]) != lines:
        return None
    try:
        scores = list(map(float, tokens[4::6]))
    except ValueError:
        return None
    total = sum(scores)
    if total != total:  # a NaN somewhere (or inf - inf): let the slow path decide
        return None
    return tokens[0::6], tokens[2::6], scores, tags[-1]


def _slow_columns(chunk: bytes, path: Path, start: int) -> _Columns | None:
    """Parse a chunk line by line, raising RunFileError at the first bad line."""
    qids: list[bytes] = []
    docs: list[bytes] = []
    scores: list[float] = []
    tag = b""
    for offset, line in enumerate(chunk.split(b"\n")[:-1]):
        stripped = line.strip()
        if not stripped or stripped.startswith(b"#"):
            continue
        fields = line.split()
        where = f"{path}:{start + offset}"
        if len(fields) < 6:
            raise RunFileError(f"{where}: {len(fields)} fields, not 6 ({RUN_FORMAT})")
        try:
            score = float(fields[4])
        except ValueError:
            score = math.nan
        if math.isnan(score):
            raise RunFileError(f"{where}: score {text(fields[4])!r} is not a number ({RUN_FORMAT})")
        qids.append(fields[0])
        docs.append(fields[2])
        scores.append(score)
        tag = fields[5]
    return (qids, docs, scores, tag) if qids else None


class _Interleaved(Exception):
    """A topic reappeared after another one: the run must be grouped in memory."""


class _Bucket:
    """One topic's documents and scores so far, and whether they are strictly decreasing."""

    __slots__ = ("docs", "ordered", "scores")

    def __init__(self) -> None:
        self.docs: list[bytes] = []
        self.scores: list[float] = []
        self.ordered = True

    def add(self, docs: list[bytes], scores: list[float], ordered: bool) -> None:
        if self.scores and self.scores[-1] <= scores[0]:
            ordered = False
        self.ordered = self.ordered and ordered
        self.docs.extend(docs)
        self.scores.extend(scores)


def _slow_groups(chunk: bytes, path: Path, start: int) -> Groups | None:
    """A chunk the column splitter refused, parsed token- or line-wise, as topic groups."""
    cols = _fast_columns(chunk) or _slow_columns(chunk, path, start)
    if cols is None:
        return None
    qids, docs, scores, tag = cols
    # Positions i where scores[i-1] <= scores[i]: the file order is not
    # already trec_eval's order there (unless a new topic starts at i).
    steps = list(compress(count(1), map(operator.le, scores, islice(scores, 1, None))))
    heads: list[bytes] = []
    starts: list[int] = []
    ordered: list[bool] = []
    pos = 0
    for qid, members in groupby(qids):
        end = pos + len(list(members))
        heads.append(qid)
        starts.append(pos)
        ordered.append(bisect_left(steps, pos + 1) == bisect_right(steps, end - 1))
        pos = end
    return Groups(heads, starts, ordered, np.array(scores, np.float64), tag, docs)


# A topic already located in the qrels: (documents retrieved, [(rank, grade)] of
# the judged ones, by rank). The column-split path yields these instead of a
# ranked docno list when the file order is trec_eval's and no docno repeats.
Located = tuple[int, list[tuple[int, int]]]
TopicStream = Generator[tuple[bytes, list[bytes] | Located], None, bytes]


def read_run_topics(
    path: Path, max_docs: int | None = None
) -> Generator[tuple[bytes, list[bytes]], None, bytes]:
    """Yield ``(qid, ranked docnos)`` per topic; the generator returns the runid."""
    topics = span_topics(path, max_docs, WHOLE, None)
    while True:
        try:
            qid, ranked = next(topics)
        except StopIteration as stop:
            runid: bytes = stop.value
            break
        if isinstance(ranked, list):  # always, without qrels
            yield qid, ranked
    if not runid:
        raise RunFileError(f"{path}: no result lines ({RUN_FORMAT})")
    return runid


def span_topics(path: Path, max_docs: int | None, span: Span, qrels: Qrels | None) -> TopicStream:
    """Stream the span's topics; regroup in memory if they turn out interleaved."""
    try:
        return (yield from _topics(path, max_docs, span, qrels, grouped=False))
    except _Interleaved:
        pass
    return (yield from _topics(path, max_docs, span, qrels, grouped=True))


def _topics(
    path: Path, max_docs: int | None, span: Span, qrels: Qrels | None, *, grouped: bool
) -> TopicStream:
    """Topics in trec_eval order; streaming raises _Interleaved if a finished topic returns.

    A topic is finished when a line of another topic follows it. Streaming
    yields it then; ``grouped`` keeps every topic until the end of the span.
    With ``qrels``, a whole topic of a column-split chunk may come located.
    """
    pending: dict[bytes, _Bucket] = {}
    done: set[bytes] = set()
    runid = b""
    for start, chunk in chunks(path, span):
        groups = split_chunk(chunk) or _slow_groups(chunk, path, start)
        if groups is None:
            continue
        scores, runid, last = groups.scores, groups.tag, len(groups.qids) - 1
        located = None if grouped else _locate(groups, qrels, max_docs)
        ends = [*groups.starts[1:], len(scores)]
        for i, (qid, pos, end) in enumerate(zip(groups.qids, groups.starts, ends, strict=True)):
            bucket = pending.get(qid)
            if bucket is None:
                if not grouped:
                    if qid in done:
                        raise _Interleaved
                    if pending:
                        for old in list(pending):
                            yield _finish(old, pending.pop(old), max_docs)
                            done.add(old)
                    if i < last:  # another topic follows in this chunk: this one is whole
                        done.add(qid)
                        found = located[i] if located is not None else None
                        yield qid, found or _ranked(groups, pos, end, groups.ordered[i], max_docs)
                        continue
                bucket = pending[qid] = _Bucket()
            bucket.add(groups.docnos(pos, end), scores[pos:end].tolist(), groups.ordered[i])
    for qid, bucket in pending.items():
        yield _finish(qid, bucket, max_docs)
    return runid


def _locate(
    groups: Groups, qrels: Qrels | None, max_docs: int | None
) -> list[Located | None] | None:
    """Per group of a column-split chunk: the topic located, or None where it cannot be.

    A group can be located when its file order is trec_eval's (strictly
    decreasing scores) and no topic of the chunk repeats a docno hash.
    """
    if qrels is None or not groups.distinct:
        return None
    empty: dict[bytes, int] = {}
    judged = [qrels.get(qid, empty) for qid in groups.qids]
    found = judged_lines(groups, judged)
    if found is None:
        return None
    ends = [*groups.starts[1:], len(groups.scores)]
    out: list[Located | None] = []
    rows = zip(groups.starts, ends, groups.ordered, judged, found, strict=True)
    for pos, end, ordered, table, (lines, docs) in rows:
        if not ordered:
            out.append(None)
            continue
        kept = end - pos if max_docs is None else min(end - pos, max_docs)
        get, stop = table.get, pos + kept
        hits = [
            (line - pos + 1, grade)
            for line, doc in zip(lines, docs, strict=True)
            if line < stop and (grade := get(doc, -1)) >= 0
        ]
        out.append((kept, hits))
    return out


def _ranked(groups: Groups, pos: int, end: int, ordered: bool, max_docs: int | None) -> list[bytes]:
    """Lines ``pos:end`` of a chunk (one whole topic) in trec_eval's order, cut at -M."""
    part = None if ordered else groups.scores[pos:end].tolist()
    return _order(groups.docnos(pos, end), part, max_docs)


def _finish(qid: bytes, bucket: _Bucket, max_docs: int | None) -> tuple[bytes, list[bytes]]:
    return qid, _order(bucket.docs, None if bucket.ordered else bucket.scores, max_docs)


def _order(docs: list[bytes], scores: list[float] | None, max_docs: int | None) -> list[bytes]:
    """trec_eval's order (score descending, docno descending), cut at -M.

    ``scores`` is None when the documents are already in that order.
    """
    if scores is not None:
        pairs = sorted(zip(scores, docs, strict=True), reverse=True)
        docs = [doc for _, doc in pairs]
    return docs if max_docs is None else docs[:max_docs]
