"""A bounded pool of workers over a stream of items, for the flow and the kinds."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TypeVar

import anyio

from benchd.errors import BenchdError, TargetError

__all__ = ["chunks", "run_bounded"]

T = TypeVar("T")


async def run_bounded(
    items: Iterable[T], fn: Callable[[T], Awaitable[None]], *, limit: int
) -> None:
    """Run ``fn(item)`` for every item, at most ``limit`` at a time.

    A fixed pool of ``limit`` workers pulls items from one iterator, so memory
    does not grow with the item count (no task per item waits up front for the
    limit to admit it). Each worker starts with an item in hand, so there are
    never more workers than items, however large a ``limit`` config allows (it
    checks only that it is positive). The first :class:`TargetError` stops the pool and is
    re-raised as itself (not wrapped in an ExceptionGroup), so callers see one
    error; so is a :class:`BenchdError` the items raise as they are read (a
    streamed fixture changed since it was loaded), once the items in flight end.
    """
    failure: list[BenchdError] = []

    def guarded() -> Iterator[T]:
        try:
            yield from items
        except BenchdError as exc:
            failure.append(exc)

    feed = guarded()

    async def worker(first: T, scope: anyio.CancelScope) -> None:
        for item in itertools.chain((first,), feed):
            if failure:
                return
            try:
                await fn(item)
            except TargetError as exc:
                failure.append(exc)
                scope.cancel()
                return

    async with anyio.create_task_group() as tg:
        for first in itertools.islice(feed, max(1, limit)):
            tg.start_soon(worker, first, tg.cancel_scope)
    if failure:
        raise failure[0]


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last shorter), cut as they are read."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
