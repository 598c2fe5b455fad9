"""Scoring a large run on several cores: split it at topic boundaries, fork workers.

A run file is cut into byte spans that each start at the first line of a new
topic, so a topic written contiguously is never split. Workers are forked
after the qrels are loaded and share them copy-on-write; each returns only
its per-topic values. A run whose topics are interleaved across spans is
detected by the caller (a topic scored twice) and re-scored in one process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

__all__ = ["PARALLEL_MIN_BYTES", "Span", "default_jobs", "map_forked", "topic_spans"]

# (first byte, end byte or None for end of file, number of the first line)
Span = tuple[int, int | None, int]
WHOLE: Span = (0, None, 1)
PARALLEL_MIN_BYTES = 32 << 20  # below this, starting workers costs more than it saves
_SCAN = 1 << 20  # bytes read at a time when looking for a topic boundary
_MAX_SCAN = 64 << 20  # give up on a cut point inside a topic longer than this

T = TypeVar("T")
S = TypeVar("S")
_STATE: Any = None  # what forked workers inherit (set just before forking)


def default_jobs() -> int:
    """Cores this process may use, at most 4 (more brings little: reading is shared)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, 4))


def _first_token(line: bytes) -> bytes:
    parts = line.split(None, 1)
    return parts[0] if parts else b""


def _boundary(handle: BinaryIO, target: int) -> int | None:
    """Offset of the first line at or after ``target`` that starts a new topic."""
    handle.seek(target)
    buf = handle.read(_SCAN)
    newline = buf.find(b"\n")
    if newline < 0:
        return None
    offset = target + newline + 1
    buf = buf[newline + 1 :]
    qid: bytes | None = None
    scanned = 0
    while scanned < _MAX_SCAN:
        lines = buf.split(b"\n")
        for line in lines[:-1]:  # the last piece may be a partial line
            token = _first_token(line)
            if qid is None:
                qid = token
            elif token != qid:
                return offset
            offset += len(line) + 1
        more = handle.read(_SCAN)
        if not more:
            return None
        scanned += len(more)
        buf = lines[-1] + more
    return None


def _line_numbers(path: Path, cuts: Sequence[int]) -> list[int]:
    """The line number at each (ascending) byte offset."""
    numbers, line, pos = [], 1, 0
    with path.open("rb") as handle:
        for cut in cuts:
            while pos < cut:
                block = handle.read(min(_SCAN, cut - pos))
                # numpy's compare is vectorised; bytes.count goes a byte at a time
                line += int(np.count_nonzero(np.frombuffer(block, np.uint8) == 10))
                pos += len(block)
            numbers.append(line)
    return numbers


def topic_spans(path: Path, jobs: int) -> list[Span]:
    """Split ``path`` into at most ``jobs`` spans that start where a topic starts."""
    try:
        size = path.stat().st_size
    except OSError:
        return [WHOLE]  # the reader reports the error with its own wording
    if jobs <= 1 or size < PARALLEL_MIN_BYTES:
        return [WHOLE]
    cuts = [0]
    with path.open("rb") as handle:
        for i in range(1, jobs):
            cut = _boundary(handle, max(size * i // jobs, cuts[-1]))
            if cut is not None and cuts[-1] < cut < size:
                cuts.append(cut)
    if len(cuts) == 1:
        return [WHOLE]
    ends: list[int | None] = [*cuts[1:], None]
    return list(zip(cuts, ends, _line_numbers(path, cuts), strict=True))


def _call(task: tuple[Callable[[Any, S], T], S]) -> T:
    fn, item = task
    return fn(_STATE, item)


def map_forked(fn: Callable[[Any, S], T], items: Sequence[S], state: Any) -> list[T]:
    """``[fn(state, item) for item in items]`` in forked workers that inherit ``state``.

    Exceptions raised by ``fn`` (e.g. a RunFileError) are re-raised here. A
    process that already runs other threads is not forked (a fork copies
    their locks mid-use); the items are then done here, one after another.
    """
    global _STATE
    if threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(state, item) for item in items]
    _STATE = state
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=len(items), mp_context=context) as pool:
            return list(pool.map(_call, [(fn, item) for item in items]))
    finally:
        _STATE = None
