"""Splitting a chunk of plain run (or qrels) lines into columns with numpy.

A run line ``qid Q0 docno rank score tag`` becomes six Python objects when
split with ``bytes.split``, and a float when its score is parsed; building a
dict of each topic's docnos then hashes every one of them. That was nearly all
of ``benchd score``'s time. Here a chunk of whole lines is read as a byte
array: the separators are located at once, scores are parsed column-wise,
qids are compared eight bytes at a time, and docnos are hashed column-wise.
A topic's docnos never become Python objects unless they may be judged.
Qrels chunks (``split_qrels_chunk``) are split the same way.

The fast path takes a chunk only when every line is exactly six fields (four
in qrels) separated by one space or tab, no line is a comment, and every
score is a plain decimal (``-12.3456``; a grade, a plain integer) of at most
15 digits. Such a score is parsed as an exact integer divided by an exact
power of ten, which IEEE division rounds correctly (Clinger's fast path), so
the value is bit-identical to ``float()``.
Anything else returns None and the caller parses the chunk line by line.
Hashes only ever pre-select: every docno they pick is checked against the
qrels exactly, and a repeated hash sends the chunk to the exact path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, pairwise

import numpy as np
import numpy.typing as npt

__all__ = ["Groups", "judged_lines", "split_chunk", "split_qrels_chunk"]

_Ints = npt.NDArray[np.intp]
_Bytes = npt.NDArray[np.uint8]
_Words = npt.NDArray[np.uint64]
_MAX_DIGITS = 15  # below 2**53: the integer mantissa converts to a float exactly
_MAX_SCORE_WIDTH = _MAX_DIGITS + 2  # a sign and a decimal point
_MAX_WIDTH = 256  # a longer qid or docno takes the line-by-line path
_POW10 = np.array([10.0**k for k in range(_MAX_DIGITS + 1)])  # each one exact
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], np.uint64)
_PROBE_BITS = 18  # size of the judged-docno filter: 2**18 flags
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))
_WORD_MIX = np.array(
    [(0x9E3779B97F4A7C15 * (2 * k + 3)) % 2**64 | 1 for k in range(_MAX_WIDTH // 8 + 1)],
    np.uint64,
)
_SPACE, _TAB, _NEWLINE, _HASH, _DOT, _MINUS, _ZERO = 32, 9, 10, 35, 46, 45, 48


@dataclass(frozen=True, slots=True)
class Groups:
    """A chunk's lines as runs of one topic each (a topic may continue in the next chunk).

    Group ``i`` is lines ``starts[i]:starts[i + 1]`` (the last ends at the
    chunk's end) of topic ``qids[i]``; ``ordered[i]`` says its scores strictly
    decrease, so the file order is already trec_eval's order. A chunk parsed
    line by line has its docnos as a list; a column-split one has each
    docno's span in ``chunk`` and a hash per docno, and is ``distinct`` when
    no topic repeats a hash in it.
    """

    qids: list[bytes]
    starts: list[int]
    ordered: list[bool]
    scores: npt.NDArray[np.float64]
    tag: bytes
    docs: list[bytes] | tuple[_Ints, _Ints]
    chunk: bytes = b""
    words: _Words | None = None
    hashes: _Words | None = None
    distinct: bool = False

    def docnos(self, pos: int, end: int) -> list[bytes]:
        """The docnos of lines ``pos:end``, in file order."""
        if isinstance(self.docs, list):
            return self.docs[pos:end]
        firsts, ends = self.docs
        pairs = zip(firsts[pos:end].tolist(), ends[pos:end].tolist(), strict=True)
        return [self.chunk[a:b] for a, b in pairs]


def split_chunk(chunk: bytes) -> Groups | None:
    """Columns of a chunk of whole, plain six-field lines; None if any line is not plain."""
    buf: _Bytes = np.frombuffer(chunk, np.uint8)
    seps = _separators(buf)
    if seps is None:
        return None
    line_starts = np.empty(len(seps), np.intp)
    line_starts[0] = 0
    line_starts[1:] = seps[:-1, 5] + 1
    if (buf[line_starts] == _HASH).any():
        return None  # a comment line that happens to have six fields
    words = _words(chunk + bytes(8))  # every offset of the chunk starts a whole word
    scores = _scores(buf, seps[:, 3] + 1, seps[:, 4])
    if scores is None:
        return None
    first = _topic_starts(words, line_starts, seps[:, 0])
    doc_starts, doc_ends = seps[:, 1] + 1, seps[:, 2]
    hashes = _hash(words, doc_starts, doc_ends)
    if first is None or hashes is None:
        return None
    heads = zip(line_starts[first].tolist(), seps[first, 0].tolist(), strict=True)
    last = seps[-1]
    return Groups(
        qids=[chunk[a:b] for a, b in heads],
        starts=first.tolist(),
        ordered=_ordered(scores, first),
        scores=scores,
        tag=chunk[int(last[4]) + 1 : int(last[5])],
        docs=(doc_starts, doc_ends),
        chunk=chunk,
        words=words,
        hashes=hashes,
        distinct=_distinct(hashes, first),
    )


def split_qrels_chunk(chunk: bytes) -> tuple[list[bytes], list[int], list[bytes], list[int]] | None:
    """A chunk of plain ``qid iter docno rel`` lines as (qids, group starts, docnos, grades).

    Group ``i`` is lines ``starts[i]:starts[i + 1]`` of topic ``qids[i]``.
    None if a line is not four plain fields or a grade is not a plain integer.
    """
    buf: _Bytes = np.frombuffer(chunk, np.uint8)
    seps = _separators(buf, 4)
    if seps is None:
        return None
    line_starts = np.empty(len(seps), np.intp)
    line_starts[0] = 0
    line_starts[1:] = seps[:-1, 3] + 1
    if (buf[line_starts] == _HASH).any():
        return None
    grades = _scores(buf, seps[:, 2] + 1, seps[:, 3], dot=False)
    words = _words(chunk + bytes(8))
    first = _topic_starts(words, line_starts, seps[:, 0])
    docs = _as_bytes(words, seps[:, 1] + 1, seps[:, 2])
    if grades is None or first is None or docs is None:
        return None
    heads = zip(line_starts[first].tolist(), seps[first, 0].tolist(), strict=True)
    qids = [chunk[a:b] for a, b in heads]
    return qids, first.tolist(), docs, grades.astype(np.int64).tolist()


def _as_bytes(words: _Words, starts: _Ints, ends: _Ints) -> list[bytes] | None:
    """Every field ``[starts[i], ends[i])`` as a bytes object, or None if one is too long."""
    lengths = ends - starts
    width = int(lengths.max())
    if width > _MAX_WIDTH:
        return None
    count = (width + 7) // 8
    table = np.stack([_word_at(words, starts, lengths, k) for k in range(count)], axis=1)
    # A fixed-width bytes array drops the zero padding when converted; a
    # plain field holds no zero byte (_separators rejects control bytes).
    out: list[bytes] = table.view(f"S{8 * count}").ravel().tolist()
    return out


def judged_lines(
    groups: Groups, judged: Iterable[Iterable[bytes]]
) -> list[tuple[list[int], list[bytes]]] | None:
    """Per group, the lines (ascending) whose docno may be judged, and those docnos.

    ``groups`` is a column-split chunk (else None is returned); ``judged``
    holds the judged docnos of each group's topic. The answer is a superset
    (a hash filter): the caller checks each docno against the qrels.
    """
    hashes, words, spans = groups.hashes, groups.words, groups.docs
    if hashes is None or words is None or isinstance(spans, list):
        return None
    flags = np.zeros(1 << _PROBE_BITS, bool)
    mask = np.uint64((1 << _PROBE_BITS) - 1)
    wanted = _blob_hashes(b"\n".join(chain.from_iterable(judged)))
    if wanted is None:  # a judged docno too long to hash: every line is a candidate
        flags[:] = True
    else:
        flags[(wanted & mask).astype(np.intp)] = True
    found = np.flatnonzero(flags[(hashes & mask).astype(np.intp)])
    docs = _as_bytes(words, spans[0][found], spans[1][found]) if len(found) else []
    if docs is None:
        return None
    cuts = np.searchsorted(found, [*groups.starts, len(hashes)]).tolist()
    lines: list[int] = found.tolist()
    return [(lines[a:b], docs[a:b]) for a, b in pairwise(cuts)]


def _blob_hashes(blob: bytes) -> _Words | None:
    """The hash of every newline-separated field of ``blob`` (none when it is empty)."""
    if not blob:
        return np.zeros(0, np.uint64)
    padded = blob + b"\n" * 8  # _hash reads up to seven bytes past a field's end
    ends = np.flatnonzero(np.frombuffer(padded, np.uint8)[: len(blob) + 1] == _NEWLINE)
    starts = np.empty(len(ends), np.intp)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    return _hash(_words(padded), starts, ends)


def _separators(buf: _Bytes, fields: int = 6) -> _Ints | None:
    """Positions of the field separators and the newline of each line, or None.

    None unless every line has exactly ``fields`` fields, one space or tab apart.
    """
    # (bytes.count is a byte-at-a-time loop; numpy's compare is vectorised.) Newlines,
    # spaces and tabs are all <= _SPACE: counted among those bytes, not the whole chunk.
    seps = np.flatnonzero(buf <= _SPACE)
    kinds = buf[seps]
    lines = np.count_nonzero(kinds == _NEWLINE)
    if not lines or len(seps) != fields * lines or buf[-1] != _NEWLINE:
        return None
    if len(seps) != lines + np.count_nonzero(kinds == _SPACE) + np.count_nonzero(kinds == _TAB):
        return None  # another control byte (NUL, CR, ...): not a plain line
    if seps[0] == 0 or (np.diff(seps) == 1).any():
        return None  # an empty field: leading or doubled whitespace, or a blank line
    table = seps.reshape(-1, fields)
    if not (buf[table[:, -1]] == _NEWLINE).all():
        return None  # with the counts above: every line has exactly ``fields`` fields
    return table


def _words(data: bytes) -> _Words:
    """The little-endian eight-byte word starting at every offset of ``data``."""
    return np.ndarray((max(len(data) - 7, 0),), "<u8", data, strides=(1,))


def _word_at(words: _Words, starts: _Ints, lengths: _Ints, k: int) -> _Words:
    """Bytes ``8k:8k+8`` of each field (zero past its end), as one word."""
    if int(lengths.min()) >= 8 * (k + 1):  # every field covers these bytes: nothing to mask
        whole: _Words = words[starts + 8 * k if k else starts]
        return whole
    valid = np.minimum(np.maximum(lengths - 8 * k, 0), 8)
    where = np.minimum(starts + 8 * k, len(words) - 1)  # moved only where valid == 0
    out: _Words = words[where] & _MASKS[valid]
    return out


def _topic_starts(words: _Words, starts: _Ints, ends: _Ints) -> _Ints | None:
    """Indexes of the lines whose qid differs from the line before (line 0 included)."""
    lengths = ends - starts
    width = int(lengths.max())
    if width > _MAX_WIDTH:
        return None
    changed = np.empty(len(starts), bool)
    changed[0] = True
    changed[1:] = lengths[1:] != lengths[:-1]
    for k in range((width + 7) // 8):
        column = _word_at(words, starts, lengths, k)
        changed[1:] |= column[1:] != column[:-1]
    return np.flatnonzero(changed)


def _hash(words: _Words, starts: _Ints, ends: _Ints) -> _Words | None:
    """A 64-bit hash of every field ``[starts[i], ends[i])``, or None if one is too long.

    Reads eight bytes from each eight-byte step inside a field, so the data
    must extend seven bytes past every field (a run line's later fields do).
    """
    lengths = ends - starts
    width = int(lengths.max())
    if width > _MAX_WIDTH:
        return None
    # Each word gets its own odd multiplier; a zero word (past the field's
    # end) adds nothing, so the hash does not depend on the widest field.
    h: _Words = lengths.astype(np.uint64) * _MIX[0]
    for k in range((width + 7) // 8):
        h ^= _word_at(words, starts, lengths, k) * _WORD_MIX[k]
    h ^= h >> np.uint64(31)
    h *= _MIX[1]
    h ^= h >> np.uint64(29)
    h *= _MIX[2]
    h ^= h >> np.uint64(32)
    return h


def _distinct(hashes: _Words, first: _Ints) -> bool:
    """True if no group repeats a docno hash (so no topic repeats a docno)."""
    group = np.zeros(len(hashes), np.uint64)
    group[first[1:]] = 1
    keys = np.sort(hashes ^ (np.cumsum(group, dtype=np.uint64) * _MIX[0]))
    return not bool((keys[1:] == keys[:-1]).any())


def _scores(
    buf: _Bytes, starts: _Ints, ends: _Ints, *, dot: bool = True
) -> npt.NDArray[np.float64] | None:
    """Plain decimal scores parsed exactly one byte column at a time, or None.

    None if any is not plain; with ``dot=False`` they must be integers too.
    A column past a field's end reads the separator after it (neither a digit
    nor a dot); a field is plain when its digits, dots and leading minus are
    all its bytes.
    """
    lengths = ends - starts
    width = int(lengths.max())
    if width > _MAX_SCORE_WIDTH:
        return None
    count = len(starts)
    mantissa = np.zeros(count, np.int64)
    digits = np.zeros(count, np.int8)  # at most _MAX_SCORE_WIDTH: small counters suffice
    dots = np.zeros(count, np.int8)
    at_dot = np.zeros(count, np.int8)  # digits before the (last) dot
    negative = buf.take(starts) == _MINUS
    for j in range(width):
        char = buf.take(np.minimum(starts + j, ends))
        value = char - np.uint8(_ZERO)  # wraps around for bytes below '0'
        is_digit = value < 10
        mantissa = np.where(is_digit, mantissa * 10 + value, mantissa)
        digits += is_digit
        is_dot = char == _DOT
        dots += is_dot
        np.copyto(at_dot, digits, where=is_dot)
    if (dots > (1 if dot else 0)).any() or not ((digits > 0) & (digits <= _MAX_DIGITS)).all():
        return None
    if (digits + dots + negative != lengths).any():
        return None  # a byte of a field that is none of those
    decimals = np.where(dots > 0, digits - at_dot, 0)
    scores: npt.NDArray[np.float64] = mantissa.astype(np.float64) / _POW10[decimals]
    np.negative(scores, out=scores, where=negative)
    return scores


def _ordered(scores: npt.NDArray[np.float64], first: _Ints) -> list[bool]:
    """Per group: do its scores strictly decrease (the file order is trec_eval's)?"""
    ordered = np.ones(len(first), bool)
    rises = np.flatnonzero(scores[1:] >= scores[:-1]) + 1  # line i does not drop below i - 1
    group = np.searchsorted(first, rises, side="right") - 1
    inside = first[group] != rises  # a rise at a group's first line is a new topic
    ordered[group[inside]] = False
    out: list[bool] = ordered.tolist()
    return out
