"""trec_eval-compatible offline scoring: read qrels and a run, score every topic.

Inputs are trec_eval's: qrels lines ``qid iter docno rel`` and run lines
``qid Q0 docno rank score tag``. As in trec_eval (``get_qrels.c``,
``get_trec_results.c``, ``form_res_rels.c``):

- a line starting with ``#`` is a comment; blank lines are skipped;
- the run's rank column is ignored: documents are ordered by score
  descending, ties broken by docno descending (byte order, like ``strcmp``);
- a docno listed twice for one topic, in either file, is an error (in the
  run, for the topics that are scored);
- ``-M N`` keeps the first N documents of each topic after that ordering;
- only topics in the qrels are scored; run topics absent from the qrels are
  ignored; the runid is the tag of the run's last line.

Ids are handled as bytes, as trec_eval does, and decoded only for output.
The run is streamed topic by topic (runs are written grouped by topic), so
memory holds one topic plus the per-topic values; a run whose topics are
interleaved is re-read and grouped in memory.
"""

from __future__ import annotations

import gc
import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from itertools import compress, count, groupby, islice
from pathlib import Path

import numpy as np

from benchd.errors import RunFileError
from benchd.scoring.trec_columns import Groups, judged_lines, split_chunk, split_qrels_chunk
from benchd.scoring.trec_measures import Selection, Topic
from benchd.scoring.trec_parallel import WHOLE, Span, map_forked, topic_spans

__all__ = [
    "Qrels",
    "ScoreOptions",
    "ScoredRun",
    "read_qrels",
    "read_run_topics",
    "score_files",
]

Qrels = dict[bytes, dict[bytes, int]]
_RUN_FORMAT = "expected: qid Q0 docno rank score tag"
_QRELS_FORMAT = "expected: qid 0 docno rel"
_CHUNK = 1 << 20  # bytes per read: large enough to amortise the per-chunk numpy calls


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """What ``benchd score`` was asked to do (trec_eval's flags)."""

    selection: Selection
    rel_level: int = 1
    max_docs: int | None = None  # -M
    complete: bool = False  # -c: average over every qrels topic, missing ones score 0
    jobs: int = 1  # processes to score a large run with


@dataclass(slots=True)
class ScoredRun:
    """Per-topic values, in trec_eval's order (qrels qid order), and what the summary needs."""

    runid: str
    per_query: list[tuple[str, list[float]]]
    num_rel_all: int  # qrels entries with rel > 0 over all topics (trec_eval's -c num_rel)
    unscored: list[str] = field(default_factory=list)  # qrels topics with no run lines


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _chunks(path: Path, span: Span = WHOLE) -> Iterator[tuple[int, bytes]]:
    """Whole lines of a span of ``path``, ``_CHUNK`` bytes at a time, with line numbers."""
    first, end, line = span
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        handle.seek(first)
        left = -1 if end is None else end - first
        carry = b""
        while left and (block := handle.read(_CHUNK if left < 0 else min(_CHUNK, left))):
            left -= len(block) if left > 0 else 0
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield line, block[:cut]
                # numpy's compare is vectorised; bytes.count goes a byte at a time
                line += int(np.count_nonzero(np.frombuffer(block, np.uint8, cut) == 10))
        if carry:
            yield line, carry + b"\n"


def read_qrels(path: Path) -> Qrels:
    """Parse a qrels file into ``{qid: {docno: rel}}``; every bad line is an error."""
    qrels: Qrels = {}
    for start, chunk in _chunks(path):
        if not (_column_qrels(chunk, qrels) or _fast_qrels(chunk, qrels)):
            _slow_qrels(chunk, path, start, qrels)
    if not qrels:
        raise RunFileError(f"{path}: no judgments found ({_QRELS_FORMAT})")
    return qrels


def _column_qrels(chunk: bytes, qrels: Qrels) -> bool:
    """Add a chunk of plain lines split column-wise; False (``qrels`` untouched) if it cannot."""
    cols = split_qrels_chunk(chunk)
    if cols is None:
        return False
    qids, starts, docs, grades = cols
    return _stage(qrels, qids, starts, docs, grades)


def _stage(
    qrels: Qrels, qids: list[bytes], starts: list[int], docs: list[bytes], grades: list[int]
) -> bool:
    """Add each topic's run of judgments; False (nothing added) if a docno repeats."""
    staged: Qrels = {}
    ends = [*starts[1:], len(docs)]
    for qid, pos, end in zip(qids, starts, ends, strict=True):
        earlier = staged.get(qid) or qrels.get(qid)
        judged = dict(zip(docs[pos:end], grades[pos:end], strict=True))
        if earlier:
            judged = {**earlier, **judged}
        if len(judged) != (len(earlier) if earlier else 0) + end - pos:
            return False
        staged[qid] = judged
    qrels.update(staged)
    return True


def _fast_qrels(chunk: bytes, qrels: Qrels) -> bool:
    """Add a chunk of plain four-field lines column-wise; False if it needs care.

    Splitting a whole chunk is several times faster than splitting each line.
    It is trusted only when the chunk holds exactly four tokens per line and
    every grade is an integer; a repeated docno or anything unusual leaves
    ``qrels`` untouched and sends the chunk to the line-by-line parser.
    """
    if chunk.startswith(b"#") or b"\n#" in chunk:
        return False
    tokens = chunk.split()
    lines = chunk.count(b"\n")
    if not lines or len(tokens) != 4 * lines:
        return False
    try:
        grades = list(map(int, tokens[3::4]))
    except ValueError:
        return False
    qids, docs = tokens[0::4], tokens[2::4]
    staged: Qrels = {}
    pos = 0
    for qid, members in groupby(qids):
        n = len(list(members))
        earlier = staged.get(qid) or qrels.get(qid) or {}
        judged = dict(earlier)
        judged.update(zip(docs[pos : pos + n], grades[pos : pos + n], strict=True))
        if len(judged) != len(earlier) + n:
            return False
        staged[qid] = judged
        pos += n
    qrels.update(staged)
    return True


def _slow_qrels(chunk: bytes, path: Path, start: int, qrels: Qrels) -> None:
    """Add a chunk line by line, raising RunFileError at the first bad line."""
    for offset, line in enumerate(chunk.split(b"\n")[:-1]):
        if not line.strip() or line.startswith(b"#"):
            continue
        where = f"{path}:{start + offset}"
        fields = line.split()
        if len(fields) != 4:
            raise RunFileError(f"{where}: {len(fields)} fields, not 4 ({_QRELS_FORMAT})")
        qid, _, docno, rel = fields
        try:
            grade = int(rel)
        except ValueError:
            raise RunFileError(
                f"{where}: relevance {_text(rel)!r} is not an integer ({_QRELS_FORMAT})"
            ) from None
        judged = qrels.setdefault(qid, {})
        if docno in judged:
            first = _find_line(path, qid, docno, 2)
            raise RunFileError(
                f"{where}: topic {_text(qid)} judges {_text(docno)} twice (first at line "
                f"{first}); keep one line per topic and docno"
            )
        judged[docno] = grade


def _find_line(path: Path, qid: bytes, docno: bytes, docno_field: int) -> int:
    """Number of the first line for (qid, docno); used only to word an error."""
    for start, chunk in _chunks(path):
        for offset, line in enumerate(chunk.split(b"\n")):
            fields = line.split()
            if len(fields) > docno_field and fields[0] == qid and fields[docno_field] == docno:
                return start + offset
    return 0


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
            raise RunFileError(f"{where}: {len(fields)} fields, not 6 ({_RUN_FORMAT})")
        try:
            score = float(fields[4])
        except ValueError:
            score = math.nan
        if math.isnan(score):
            raise RunFileError(
                f"{where}: score {_text(fields[4])!r} is not a number ({_RUN_FORMAT})"
            )
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
_Located = tuple[int, list[tuple[int, int]]]
_TopicStream = Generator[tuple[bytes, "list[bytes] | _Located"], None, bytes]


def read_run_topics(
    path: Path, max_docs: int | None = None
) -> Generator[tuple[bytes, list[bytes]], None, bytes]:
    """Yield ``(qid, ranked docnos)`` per topic; the generator returns the runid."""
    topics = _span_topics(path, max_docs, WHOLE, None)
    while True:
        try:
            qid, ranked = next(topics)
        except StopIteration as stop:
            runid: bytes = stop.value
            break
        if isinstance(ranked, list):  # always, without qrels
            yield qid, ranked
    if not runid:
        raise RunFileError(f"{path}: no result lines ({_RUN_FORMAT})")
    return runid


def _span_topics(path: Path, max_docs: int | None, span: Span, qrels: Qrels | None) -> _TopicStream:
    """Stream the span's topics; regroup in memory if they turn out interleaved."""
    try:
        return (yield from _topics(path, max_docs, span, qrels, grouped=False))
    except _Interleaved:
        pass
    return (yield from _topics(path, max_docs, span, qrels, grouped=True))


def _topics(
    path: Path, max_docs: int | None, span: Span, qrels: Qrels | None, *, grouped: bool
) -> _TopicStream:
    """Topics in trec_eval order; streaming raises _Interleaved if a finished topic returns.

    A topic is finished when a line of another topic follows it. Streaming
    yields it then; ``grouped`` keeps every topic until the end of the span.
    With ``qrels``, a whole topic of a column-split chunk may come located.
    """
    pending: dict[bytes, _Bucket] = {}
    done: set[bytes] = set()
    runid = b""
    for start, chunk in _chunks(path, span):
        groups = split_chunk(chunk) or _slow_groups(chunk, path, start)
        if groups is None:
            continue
        scores, runid, last = groups.scores, groups.tag, len(groups.qids) - 1
        probe = _probe(groups, qrels) if not grouped else None
        ends = [*groups.starts[1:], len(scores)]
        for i, (qid, pos, end) in enumerate(zip(groups.qids, groups.starts, ends, strict=True)):
            bucket = pending.get(qid)
            if bucket is None:
                if not grouped:
                    if qid in done:
                        raise _Interleaved
                    for old in list(pending):
                        yield _finish(old, pending.pop(old), max_docs)
                        done.add(old)
                    if i < last:  # another topic follows in this chunk: this one is whole
                        done.add(qid)
                        yield qid, _whole(groups, i, pos, end, probe, qrels, max_docs)
                        continue
                bucket = pending[qid] = _Bucket()
            bucket.add(groups.docnos(pos, end), scores[pos:end].tolist(), groups.ordered[i])
    for qid, bucket in pending.items():
        yield _finish(qid, bucket, max_docs)
    return runid


_Probe = list[tuple[list[int], list[bytes]]]


def _probe(groups: Groups, qrels: Qrels | None) -> _Probe | None:
    """Per group, the lines and docnos that may be judged, if the chunk allows locating."""
    if qrels is None or not groups.distinct:
        return None
    empty: dict[bytes, int] = {}
    return judged_lines(groups, [qrels.get(qid, empty) for qid in groups.qids])


def _whole(
    groups: Groups,
    i: int,
    pos: int,
    end: int,
    probe: _Probe | None,
    qrels: Qrels | None,
    max_docs: int | None,
) -> list[bytes] | _Located:
    """Group ``i``, a whole topic: located if it can be, else its ranked docnos."""
    if probe is None or qrels is None or not groups.ordered[i]:
        part = None if groups.ordered[i] else groups.scores[pos:end].tolist()
        return _order(groups.docnos(pos, end), part, max_docs)
    kept = end - pos if max_docs is None else min(end - pos, max_docs)
    judged = qrels.get(groups.qids[i])
    if not judged:
        return kept, []
    get = judged.get
    lines, docs = probe[i]
    stop = pos + kept
    hits = [
        (line - pos + 1, grade)
        for line, doc in zip(lines, docs, strict=True)
        if line < stop and (grade := get(doc, -1)) >= 0
    ]
    return kept, hits


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


def _topic(
    path: Path, qid: bytes, ranked: list[bytes], judged: dict[bytes, int], level: int
) -> Topic:
    """Where the judged documents landed in ``ranked`` (a docno twice is an error)."""
    rank_of = dict(zip(ranked, count(1)))
    if len(rank_of) != len(ranked):
        seen: set[bytes] = set()
        dup = next(d for d in ranked if d in seen or seen.add(d))  # type: ignore[func-returns-value]
        line = _find_line(path, qid, dup, 2)
        raise RunFileError(
            f"{path}: topic {_text(qid)} lists docno {_text(dup)} more than once (first at "
            f"line {line}); trec_eval rejects duplicates: keep one line per topic and docno"
        )
    get = rank_of.get
    hits = [(rank, g) for d, g in judged.items() if g >= 0 and (rank := get(d)) is not None]
    hits.sort()
    return Topic(len(ranked), hits, judged.values(), level)


def score_files(qrels_path: Path, run_path: Path, options: ScoreOptions) -> ScoredRun:
    """Score a run against qrels the way trec_eval does, topic by topic."""
    # Scoring allocates tens of millions of short-lived, acyclic objects; the
    # cyclic collector would rescan the qrels dicts thousands of times for
    # nothing (about a third of the run time on a large run).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _score_files(qrels_path, run_path, options)
    finally:
        if enabled:
            gc.enable()


def _score_files(qrels_path: Path, run_path: Path, options: ScoreOptions) -> ScoredRun:
    qrels = read_qrels(qrels_path)
    state = (qrels, options, run_path)
    spans = topic_spans(run_path, options.jobs)
    scored = _score_forked(spans, state) if len(spans) > 1 else None
    values, runid = scored or _score_span(state, WHOLE)
    if not runid:
        raise RunFileError(f"{run_path}: no result lines ({_RUN_FORMAT})")
    if not values:
        raise RunFileError(
            f"{run_path}: no topic of the run is in {qrels_path}, so nothing can be "
            "scored (check that the qids match)"
        )
    return _collect(qrels, values, _text(runid), options)


_State = tuple[Qrels, ScoreOptions, Path]
_Values = dict[bytes, list[float]]


def _score_forked(spans: list[Span], state: _State) -> tuple[_Values, bytes] | None:
    """Score the spans in forked workers; None if a topic turned up in two spans."""
    parts = map_forked(_score_span, spans, state)
    merged: _Values = {}
    for values, _ in parts:
        merged.update(values)
    if len(merged) != sum(len(values) for values, _ in parts):
        return None  # interleaved topics: only a single pass can group them
    return merged, next((runid for _, runid in reversed(parts) if runid), b"")


def _score_span(state: _State, span: Span) -> tuple[_Values, bytes]:
    """Per-topic values of the scored topics in one span of the run, and its runid."""
    qrels, options, run_path = state
    evaluate, level = options.selection.evaluate, options.rel_level
    values: _Values = {}
    topics = _span_topics(run_path, options.max_docs, span, qrels)
    while True:
        try:
            qid, ranked = next(topics)
        except StopIteration as stop:
            return values, stop.value
        judged = qrels.get(qid)
        if judged is None:
            continue
        if isinstance(ranked, list):
            topic = _topic(run_path, qid, ranked, judged, level)
        else:
            topic = Topic(ranked[0], ranked[1], judged.values(), level)
        values[qid] = evaluate(topic, level)


def _collect(
    qrels: Qrels, values: dict[bytes, list[float]], runid: str, options: ScoreOptions
) -> ScoredRun:
    """Order topics as trec_eval does (qrels qid order) and fill in -c zeros."""
    per_query: list[tuple[str, list[float]]] = []
    unscored: list[str] = []
    for qid in sorted(qrels):
        row = values.get(qid)
        if row is None:
            unscored.append(_text(qid))
            if not options.complete:
                continue
            empty = Topic(0, [], qrels[qid].values(), options.rel_level)
            row = options.selection.evaluate(empty, options.rel_level)
        per_query.append((_text(qid), row))
    num_rel_all = 0
    if options.complete:
        num_rel_all = sum(g > 0 for judged in qrels.values() for g in judged.values())
    return ScoredRun(runid, per_query, num_rel_all, unscored)
