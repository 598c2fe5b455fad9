"""trec_eval-compatible offline scoring: qrels and run files in, trec_eval's table out.

Inputs are trec_eval's: qrels lines ``qid iter docno rel`` and run lines
``qid Q0 docno rank score tag``. As in trec_eval (``get_qrels.c``,
``get_trec_results.c``, ``form_res_rels.c``):

- a line starting with ``#`` is a comment; blank lines are skipped;
- the run's rank column is ignored: documents are ordered by score
  descending, ties broken by docno descending (byte order);
- a docno listed twice for one topic, in either file, is an error;
- ``-M N`` keeps the first N documents of each topic after that ordering;
- only topics in the qrels are scored; run topics absent from the qrels are
  ignored; the runid is the tag of the run's last line.

The run is streamed topic by topic (runs are written grouped by topic), so
memory stays proportional to one topic plus the per-topic values; a run whose
topics are interleaved is re-read and grouped in memory.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby, repeat
from pathlib import Path

from benchd.errors import RunFileError
from benchd.scoring.trec_measures import MIN_GEO_MEAN, Selection, Topic

__all__ = [
    "Qrels",
    "ScoreOptions",
    "ScoredRun",
    "format_json",
    "format_text",
    "read_qrels",
    "read_run_topics",
    "score_files",
    "summarize",
]

Qrels = dict[str, dict[str, int]]
_RUN_FORMAT = "expected: qid Q0 docno rank score tag"
_QRELS_FORMAT = "expected: qid 0 docno rel"
_CHUNK = 1 << 22  # bytes read at a time from a run file


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """What ``benchd score`` was asked to do (trec_eval's flags)."""

    selection: Selection
    rel_level: int = 1
    max_docs: int | None = None  # -M
    complete: bool = False  # -c: average over every qrels topic, missing ones score 0


@dataclass(slots=True)
class ScoredRun:
    """Per-topic values (qrels order) and what the summary needs."""

    runid: str
    names: list[str]
    per_query: list[tuple[str, list[float]]]
    num_q_rels: int
    num_rel_all: int  # qrels entries with rel > 0 over all topics (trec_eval's -c num_rel)
    unscored: list[str] = field(default_factory=list)  # qrels topics with no run lines


def _decode(raw: bytes, path: Path, first_line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + raw[: exc.start].count(b"\n")
        raise RunFileError(f"{path}:{line}: not UTF-8 text (save the file as UTF-8)") from None


def _chunks(path: Path, size: int = _CHUNK) -> Iterator[tuple[int, str]]:
    """Whole lines of ``path``, a few MiB at a time, with the first line's number."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        carry, line = b"", 1
        while block := handle.read(size):
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                text = _decode(block[:cut], path, line)
                yield line, text
                line += text.count("\n")
        if carry:
            yield line, _decode(carry, path, line) + "\n"


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def read_qrels(path: Path) -> Qrels:
    """Parse a qrels file into ``{qid: {docno: rel}}``; every bad line is an error."""
    qrels: Qrels = {}
    for start, text in _chunks(path):
        for offset, line in enumerate(text.split("\n")[:-1]):
            if not line.strip() or line.startswith("#"):
                continue
            lineno = start + offset
            fields = line.split()
            if len(fields) != 4:
                raise RunFileError(
                    f"{path}:{lineno}: {len(fields)} fields, not 4 ({_QRELS_FORMAT})"
                )
            qid, _, docno, rel = fields
            try:
                grade = int(rel)
            except ValueError:
                raise RunFileError(
                    f"{path}:{lineno}: relevance {rel!r} is not an integer ({_QRELS_FORMAT})"
                ) from None
            judged = qrels.setdefault(qid, {})
            if docno in judged:
                earlier = _find_line(path, qid, docno, 2)
                raise RunFileError(
                    f"{path}:{lineno}: topic {qid} judges {docno} twice (first at line "
                    f"{earlier}); keep one line per topic and docno"
                )
            judged[docno] = grade
    if not qrels:
        raise RunFileError(f"{path}: no judgments found ({_QRELS_FORMAT})")
    return qrels


def _find_line(path: Path, qid: str, docno: str, field_index: int) -> int:
    """Line number of the first line for (qid, docno); used only to word errors."""
    for start, text in _chunks(path):
        for offset, line in enumerate(text.split("\n")):
            fields = line.split()
            if len(fields) > field_index and fields[0] == qid and fields[field_index] == docno:
                return start + offset
    return 0


_Columns = tuple[list[str], list[str], list[float], str]


def _fast_columns(text: str) -> _Columns | None:
    """Split a chunk of well-formed six-field lines column-wise, or None.

    Whitespace-splitting the whole chunk is several times faster than a
    per-line split. It is only trusted when the token count is exactly six
    per line and the iter and tag columns are each constant, which a line
    with a missing or extra field would break; anything else (comments,
    blank lines, extra fields, bad numbers) takes the line-by-line path,
    which also words the errors.
    """
    if text.startswith("#") or "\n#" in text:
        return None
    tokens = text.split()
    lines = text.count("\n")
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


def _slow_columns(text: str, path: Path, start: int) -> _Columns | None:
    """Parse a chunk line by line, raising RunFileError at the first bad line."""
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    tag = ""
    for offset, line in enumerate(text.split("\n")[:-1]):
        if not line.strip() or _is_comment(line):
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
            raise RunFileError(f"{where}: score {fields[4]!r} is not a number ({_RUN_FORMAT})")
        qids.append(fields[0])
        docs.append(fields[2])
        scores.append(score)
        tag = fields[5]
    return (qids, docs, scores, tag) if qids else None


class _Interleaved(Exception):
    """A topic reappeared after another one: the run must be grouped in memory."""


def _rank(docs: list[str], scores: list[float]) -> list[str]:
    """Order by score descending, then docno descending (trec_eval's comp_sim_docno)."""
    if sorted(scores, reverse=True) == scores and len(set(scores)) == len(scores):
        return docs
    return [doc for _, doc in sorted(zip(scores, docs, strict=True), reverse=True)]


def read_run_topics(
    path: Path, max_docs: int | None = None
) -> Generator[tuple[str, list[str]], None, str]:
    """Yield ``(qid, ranked docnos)`` per topic; returns the runid (StopIteration.value)."""
    try:
        return (yield from _topics(path, max_docs, grouped=False))
    except _Interleaved:
        pass
    return (yield from _topics(path, max_docs, grouped=True))


def _topics(
    path: Path, max_docs: int | None, *, grouped: bool
) -> Generator[tuple[str, list[str]], None, str]:
    pending: dict[str, tuple[list[str], list[float]]] = {}
    done: set[str] = set()
    runid = ""
    for start, text in _chunks(path):
        cols = _fast_columns(text) or _slow_columns(text, path, start)
        if cols is None:
            continue
        qids, docs, scores, runid = cols
        pos = 0
        for qid, members in groupby(qids):
            n = len(list(members))
            if qid not in pending:
                if not grouped:
                    if qid in done:
                        raise _Interleaved(qid)
                    for old in list(pending):
                        yield _finish(path, old, *pending.pop(old), max_docs)
                        done.add(old)
                pending[qid] = ([], [])
            bucket = pending[qid]
            bucket[0].extend(docs[pos : pos + n])
            bucket[1].extend(scores[pos : pos + n])
            pos += n
    if not runid:
        raise RunFileError(f"{path}: no result lines ({_RUN_FORMAT})")
    for qid, (docs, scores) in pending.items():
        yield _finish(path, qid, docs, scores, max_docs)
    return runid


def _finish(
    path: Path, qid: str, docs: list[str], scores: list[float], max_docs: int | None
) -> tuple[str, list[str]]:
    if len(set(docs)) != len(docs):
        seen: set[str] = set()
        dup = next(d for d in docs if d in seen or seen.add(d))  # type: ignore[func-returns-value]
        line = _find_line(path, qid, dup, 2)
        raise RunFileError(
            f"{path}: topic {qid} lists docno {dup} more than once (first at line {line}); "
            "trec_eval rejects duplicates: keep one line per topic and docno"
        )
    ranked = _rank(docs, scores)
    return qid, ranked if max_docs is None else ranked[:max_docs]


def score_files(qrels_path: Path, run_path: Path, options: ScoreOptions) -> ScoredRun:
    """Score a run against qrels the way trec_eval does, topic by topic."""
    qrels = read_qrels(qrels_path)
    selection, level = options.selection, options.rel_level
    values: dict[str, list[float]] = {}
    topics = read_run_topics(run_path, options.max_docs)
    while True:
        try:
            qid, ranked = next(topics)
        except StopIteration as stop:
            runid = str(stop.value)
            break
        judged = qrels.get(qid)
        if judged is not None:
            grades = list(map(judged.get, ranked, repeat(-1)))
            values[qid] = selection.evaluate(Topic(grades, judged, level), level)
    return _collect(qrels, values, runid, options)


def _collect(
    qrels: Mapping[str, Mapping[str, int]],
    values: dict[str, list[float]],
    runid: str,
    options: ScoreOptions,
) -> ScoredRun:
    """Order topics as trec_eval does (qrels qid order) and fill in -c zeros."""
    per_query: list[tuple[str, list[float]]] = []
    unscored: list[str] = []
    for qid in sorted(qrels):
        row = values.get(qid)
        if row is None:
            unscored.append(qid)
            if not options.complete:
                continue
            empty = Topic([], qrels[qid], options.rel_level)
            row = options.selection.evaluate(empty, options.rel_level)
        per_query.append((qid, row))
    if not values:
        raise RunFileError(
            "no topic of the run is in the qrels, so nothing can be scored "
            "(check that the qids match)"
        )
    num_rel_all = sum(1 for judged in qrels.values() for g in judged.values() if g > 0)
    return ScoredRun(
        runid=runid,
        names=options.selection.names(),
        per_query=per_query,
        num_q_rels=len(qrels),
        num_rel_all=num_rel_all,
        unscored=unscored,
    )


def summarize(run: ScoredRun, options: ScoreOptions) -> list[tuple[str, float | str]]:
    """The ``all`` rows: means, sums for counts, geometric means for gm_*."""
    rows: list[tuple[str, float | str]] = []
    n = len(run.per_query)
    for index, (name, fam) in enumerate(options.selection.columns()):
        column = [row[index] for _, row in run.per_query]
        if fam.aggregate == "runid":
            rows.append((name, run.runid))
        elif fam.aggregate == "count":
            rows.append((name, float(n)))
        elif fam.aggregate == "sum":
            total = float(sum(column))
            if name == "num_rel" and options.complete:
                total = float(run.num_rel_all)  # trec_eval counts rel > 0 over all qrels here
            rows.append((name, total))
        elif fam.aggregate == "gmean":
            logs = 0.0
            for value in column:
                logs += math.log(max(value, MIN_GEO_MEAN))
            rows.append((name, math.exp(logs / n) if n else 0.0))
        else:
            total = 0.0
            for value in column:
                total += value
            rows.append((name, total / n if n else 0.0))
    return rows


def _cell(value: float | str, integer: bool) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if integer else f"{value:6.4f}"


def format_text(run: ScoredRun, options: ScoreOptions, per_query: bool) -> Iterator[str]:
    """trec_eval's lines, ``printf("%-22s<TAB>%s<TAB>%6.4f")`` (counts as integers).

    Per-topic rows (with ``per_query``) come first, in qrels qid order, then the
    ``all`` rows.
    """
    columns = options.selection.columns()
    if per_query:
        for qid, row in run.per_query:
            for (name, fam), value in zip(columns, row, strict=True):
                if fam.per_query:
                    yield f"{name:<22}\t{qid}\t{_cell(value, fam.integer)}"
    for (name, fam), (_, summary) in zip(columns, summarize(run, options), strict=True):
        yield f"{name:<22}\tall\t{_cell(summary, fam.integer)}"


def _json_value(value: float | str, integer: bool) -> float | int | str:
    if isinstance(value, str) or not integer:
        return value
    return int(value)


def format_json(run: ScoredRun, options: ScoreOptions, per_query: bool) -> dict[str, object]:
    """The same numbers as a JSON-ready dict, unrounded."""
    columns = options.selection.columns()
    summary: dict[str, float | int | str] = {
        name: _json_value(value, fam.integer)
        for (name, fam), (_, value) in zip(columns, summarize(run, options), strict=True)
    }
    out: dict[str, object] = {"runid": run.runid, "all": summary}
    if per_query:
        out["per_query"] = {
            qid: {
                name: _json_value(value, fam.integer)
                for (name, fam), value in zip(columns, row, strict=True)
                if fam.per_query
            }
            for qid, row in run.per_query
        }
    if run.unscored:
        out["topics_without_results"] = run.unscored
    return out
