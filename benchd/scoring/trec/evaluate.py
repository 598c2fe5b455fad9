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
The run is streamed topic by topic (``scoring.trec.run``), so memory holds the qrels,
one chunk of the run and the per-topic values.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

from benchd.errors import RunFileError
from benchd.scoring.trec.measures import Selection, Topic
from benchd.scoring.trec.parallel import WHOLE, Span, map_forked, topic_spans
from benchd.scoring.trec.read import RUN_FORMAT, Qrels, find_line, read_qrels, text
from benchd.scoring.trec.run import read_run_topics, span_topics

__all__ = [
    "Qrels",
    "ScoreOptions",
    "ScoredRun",
    "gc_paused",
    "read_qrels",
    "read_run_topics",
    "score_files",
]


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


def _topic(
    path: Path, qid: bytes, ranked: list[bytes], judged: dict[bytes, int], level: int
) -> Topic:
    """Where the judged documents landed in ``ranked`` (a docno twice is an error)."""
    rank_of = dict(zip(ranked, count(1)))
    if len(rank_of) != len(ranked):
        seen: set[bytes] = set()
        dup = next(d for d in ranked if d in seen or seen.add(d))  # type: ignore[func-returns-value]
        line = find_line(path, qid, dup, 2)
        raise RunFileError(
            f"{path}: topic {text(qid)} lists docno {text(dup)} more than once (first at "
            f"line {line}); trec_eval rejects duplicates: keep one line per topic and docno"
        )
    get = rank_of.get
    hits = [(rank, g) for d, g in judged.items() if g >= 0 and (rank := get(d)) is not None]
    hits.sort()
    return Topic(len(ranked), hits, judged.values(), level)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside, as it was after.

    Scoring allocates tens of millions of short-lived, acyclic objects; the
    collector would rescan the qrels dicts thousands of times for nothing
    (about a third of the run time on a large run), and its first passes
    after scoring walk every topic's row again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def score_files(qrels_path: Path, run_path: Path, options: ScoreOptions) -> ScoredRun:
    """Score a run against qrels the way trec_eval does, topic by topic."""
    with gc_paused():
        return _score_files(qrels_path, run_path, options)


def _score_files(qrels_path: Path, run_path: Path, options: ScoreOptions) -> ScoredRun:
    qrels = read_qrels(qrels_path)
    state = (qrels, options, run_path)
    spans = topic_spans(run_path, options.jobs)
    scored = _score_forked(spans, state) if len(spans) > 1 else None
    values, runid = scored or _score_span(state, WHOLE)
    if not runid:
        raise RunFileError(f"{run_path}: no result lines ({RUN_FORMAT})")
    if not values:
        raise RunFileError(
            f"{run_path}: no topic of the run is in {qrels_path}, so nothing can be "
            "scored (check that the qids match)"
        )
    return _collect(qrels, values, text(runid), options)


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
    topics = span_topics(run_path, options.max_docs, span, qrels)
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
            unscored.append(text(qid))
            if not options.complete:
                continue
            empty = Topic(0, [], qrels[qid].values(), options.rel_level)
            row = options.selection.evaluate(empty, options.rel_level)
        per_query.append((text(qid), row))
    num_rel_all = 0
    if options.complete:
        num_rel_all = sum(g > 0 for judged in qrels.values() for g in judged.values())
    return ScoredRun(runid, per_query, num_rel_all, unscored)
