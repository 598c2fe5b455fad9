"""Reading trec_eval's input files: whole-line chunks, and the qrels.

Both files are read in chunks of whole lines (``_CHUNK`` bytes at a time,
with the number of each chunk's first line for error messages). A qrels
chunk of plain lines is split column-wise (``trec_columns``); otherwise it
is split into tokens, and a chunk with anything unusual (comments, blank
lines, a bad field, a repeated docno) is parsed line by line, which also
words the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from pathlib import Path

import numpy as np

from benchd.errors import RunFileError
from benchd.scoring.trec.columns import split_qrels_chunk
from benchd.scoring.trec.parallel import WHOLE, Span

__all__ = ["QRELS_FORMAT", "RUN_FORMAT", "Qrels", "chunks", "find_line", "read_qrels", "text"]

Qrels = dict[bytes, dict[bytes, int]]
RUN_FORMAT = "expected: qid Q0 docno rank score tag"
QRELS_FORMAT = "expected: qid 0 docno rel"
_CHUNK = 1 << 20  # bytes per read: large enough to amortise the per-chunk numpy calls


def text(raw: bytes) -> str:
    """An id for a message: bytes decoded, undecodable bytes replaced."""
    return raw.decode("utf-8", "replace")


def chunks(path: Path, span: Span = WHOLE) -> Iterator[tuple[int, bytes]]:
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
    for start, chunk in chunks(path):
        if not (_column_qrels(chunk, qrels) or _fast_qrels(chunk, qrels)):
            _slow_qrels(chunk, path, start, qrels)
    if not qrels:
        raise RunFileError(f"{path}: no judgments found ({QRELS_FORMAT})")
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
            raise RunFileError(f"{where}: {len(fields)} fields, not 4 ({QRELS_FORMAT})")
        qid, _, docno, rel = fields
        try:
            grade = int(rel)
        except ValueError:
            raise RunFileError(
                f"{where}: relevance {text(rel)!r} is not an integer ({QRELS_FORMAT})"
            ) from None
        judged = qrels.setdefault(qid, {})
        if docno in judged:
            first = find_line(path, qid, docno, 2)
            raise RunFileError(
                f"{where}: topic {text(qid)} judges {text(docno)} twice (first at line "
                f"{first}); keep one line per topic and docno"
            )
        judged[docno] = grade


def find_line(path: Path, qid: bytes, docno: bytes, docno_field: int) -> int:
    """Number of the first line for (qid, docno); used only to word an error."""
    for start, chunk in chunks(path):
        for offset, line in enumerate(chunk.split(b"\n")):
            fields = line.split()
            if len(fields) > docno_field and fields[0] == qid and fields[docno_field] == docno:
                return start + offset
    return 0
