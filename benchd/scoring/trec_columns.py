"""Splitting a chunk of plain run lines into columns with numpy, without a token per field.

A run line ``qid Q0 docno rank score tag`` becomes six Python objects when
split with ``bytes.split``, and a float when its score is parsed: that was most
of ``benchd score``'s time. Here a chunk of whole lines is read as a byte
array: the separators are located at once, the scores are parsed column-wise
and only the docnos (and one qid per topic) become Python objects.

The fast path takes a chunk only when every line is exactly six fields
separated by one space or tab, no line is a comment, and every score is a
plain decimal (``-12.3456``) of at most 15 digits. Such a score is parsed as
an exact integer divided by an exact power of ten, which IEEE division rounds
correctly (Clinger's fast path), so the value is bit-identical to ``float()``.
Anything else returns None and the caller parses the chunk line by line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Groups", "split_chunk"]

_Ints = npt.NDArray[np.int64]
_Bytes = npt.NDArray[np.uint8]
_MAX_DIGITS = 15  # below 2**53: the integer mantissa converts to a float exactly
_MAX_SCORE_WIDTH = _MAX_DIGITS + 2  # a sign and a decimal point
_MAX_WIDTH = 256  # a longer qid or docno takes the line-by-line path (keeps tables small)
_POW10 = np.array([10.0**k for k in range(_MAX_DIGITS + 1)])  # each one exact
_SPACE, _TAB, _NEWLINE, _HASH, _DOT, _MINUS, _ZERO = 32, 9, 10, 35, 46, 45, 48


@dataclass(frozen=True, slots=True)
class Groups:
    """A chunk's lines as runs of one topic each (a topic may continue in the next chunk).

    Group ``i`` is lines ``starts[i]:starts[i + 1]`` (the last ends at
    ``len(docs)``) of topic ``qids[i]``; ``ordered[i]`` says its scores
    strictly decrease, so the file order is already trec_eval's order.
    """

    qids: list[bytes]
    starts: list[int]
    ordered: list[bool]
    docs: list[bytes]
    scores: npt.NDArray[np.float64]
    tag: bytes


def split_chunk(chunk: bytes) -> Groups | None:
    """Columns of a chunk of whole, plain six-field lines; None if any line is not plain."""
    buf: _Bytes = np.frombuffer(chunk, np.uint8)
    seps = _separators(buf)
    if seps is None:
        return None
    line_starts = np.empty(len(seps), np.int64)
    line_starts[0] = 0
    line_starts[1:] = seps[:-1, 5] + 1
    if (buf[line_starts] == _HASH).any():
        return None  # a comment line that happens to have six fields
    scores = _scores(buf, seps[:, 3] + 1, seps[:, 4])
    if scores is None:
        return None
    first = _topic_starts(buf, line_starts, seps[:, 0])
    docs = _column(buf, seps[:, 1] + 1, seps[:, 2])
    if first is None or docs is None:
        return None
    heads = zip(line_starts[first].tolist(), seps[first, 0].tolist(), strict=True)
    qids = [chunk[a:b] for a, b in heads]
    last = seps[-1]
    return Groups(
        qids=qids,
        starts=first.tolist(),
        ordered=_ordered(scores, first),
        docs=docs,
        scores=scores,
        tag=chunk[int(last[4]) + 1 : int(last[5])],
    )


def _separators(buf: _Bytes) -> npt.NDArray[np.intp] | None:
    """Positions of the five field separators and the newline of each line, or None."""
    seps = np.flatnonzero(buf <= _SPACE)
    if len(seps) == 0 or len(seps) % 6 or buf[-1] != _NEWLINE:
        return None
    if seps[0] == 0 or (np.diff(seps) == 1).any():
        return None  # an empty field: leading or doubled whitespace, or a blank line
    table = seps.reshape(-1, 6)
    if not (buf[table[:, 5]] == _NEWLINE).all():
        return None
    inner = buf[table[:, :5]]
    if not ((inner == _SPACE) | (inner == _TAB)).all():
        return None
    return table


def _topic_starts(buf: _Bytes, starts: _Ints, ends: _Ints) -> _Ints | None:
    """Indexes of the lines whose qid differs from the line before (line 0 included)."""
    lengths = ends - starts
    if int(lengths.max()) > _MAX_WIDTH:
        return None
    changed = np.empty(len(starts), bool)
    changed[0] = True
    changed[1:] = lengths[1:] != lengths[:-1]
    for j in range(int(lengths.max())):
        column = buf[np.minimum(starts + j, ends)]  # past the end: the separator itself
        changed[1:] |= column[1:] != column[:-1]
    return np.flatnonzero(changed)


def _column(buf: _Bytes, starts: _Ints, ends: _Ints) -> list[bytes] | None:
    """The field ``buf[starts[i]:ends[i]]`` of every line, as bytes objects."""
    lengths = ends - starts
    width = int(lengths.max())
    if width > _MAX_WIDTH:
        return None
    table = np.zeros((len(starts), width), np.uint8)
    for j in range(width):
        table[:, j] = buf[np.minimum(starts + j, ends)]
        table[lengths <= j, j] = 0
    # A fixed-width bytes array drops the zero padding when converted; a field
    # holds no zero byte (zero is below the separator test in _separators).
    out: list[bytes] = table.view(f"S{width}").ravel().tolist()
    return out


def _scores(buf: _Bytes, starts: _Ints, ends: _Ints) -> npt.NDArray[np.float64] | None:
    """Plain decimal scores parsed exactly, or None if any is not plain."""
    lengths = ends - starts
    if int(lengths.max()) > _MAX_SCORE_WIDTH:
        return None
    mantissa = np.zeros(len(starts), np.int64)
    digits = np.zeros(len(starts), np.int64)
    decimals = np.zeros(len(starts), np.int64)
    dotted = np.zeros(len(starts), bool)
    negative = buf[starts] == _MINUS
    for j in range(int(lengths.max())):
        char = buf[np.minimum(starts + j, ends)]
        inside = lengths > j
        value = char - np.uint8(_ZERO)  # wraps around for bytes below '0'
        is_digit = inside & (value < 10)
        is_dot = inside & (char == _DOT)
        allowed = is_digit | is_dot | (negative if j == 0 else False)
        if not allowed[inside].all() or (is_dot & dotted).any():
            return None
        mantissa = np.where(is_digit, mantissa * 10 + value, mantissa)
        digits += is_digit
        decimals += is_digit & dotted
        dotted |= is_dot
    if not ((digits > 0) & (digits <= _MAX_DIGITS)).all():
        return None
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
