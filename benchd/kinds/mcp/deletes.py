"""Deletes sent as sets, each set verified by one listing after it.

An MCP delete tool's success is no proof (server-memory says "deleted" for
a name it never held), so every delete is checked by listing again; one
listing per record made a cleanup of ``n`` records cost ``n`` listings of
the whole namespace. Here the deletes in flight together form one set (a
group commit: whoever holds the lock sends everything queued, up to
``batch_size`` ids), the tool is called for the set, and one listing
verifies all of it; every caller of the set hears the same outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from benchd.errors import TargetError, TargetProtocolError

__all__ = ["VerifiedDeletes"]

Send = Callable[[Sequence[str]], Awaitable[None]]
"""Call the delete tool for these ids."""

Listed = Callable[[], Awaitable[set[str]]]
"""Every id a fresh listing of the namespace shows."""

Still = Callable[[Sequence[str]], str]
"""The error text for ids still listed after their delete."""


@dataclass(slots=True)
class _Ask:
    ids: tuple[str, ...]
    done: bool = False
    error: TargetError | None = None


class VerifiedDeletes:
    """Group deletes into sets, each verified by one listing (see the module docstring)."""

    def __init__(self, send: Send, listed: Listed, still: Still, *, batch_size: int) -> None:
        self._send = send
        self._listed = listed
        self._still = still
        self._batch_size = batch_size
        self._queue: list[_Ask] = []
        self._lock = anyio.Lock()
        self.listings = 0  # verification listings taken so far
        self.sets = 0  # sets sent so far

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete ``ids`` (with whatever else is in flight); a TargetError if any is still
        listed after it."""
        if not ids:
            return
        ask = _Ask(tuple(ids))
        self._queue.append(ask)
        async with self._lock:
            if not ask.done:
                await anyio.lowlevel.checkpoint()  # deletes started beside this one join its set
            while not ask.done:  # sets go in order: the ones queued before this one first
                await self._flush(self._take())
        if ask.error is not None:
            raise ask.error

    def _take(self) -> list[_Ask]:
        """The queued asks of the next set: up to ``batch_size`` ids (at least one ask)."""
        taken: list[_Ask] = []
        count = 0
        while self._queue and (not taken or count + len(self._queue[0].ids) <= self._batch_size):
            ask = self._queue.pop(0)
            taken.append(ask)
            count += len(ask.ids)
        return taken

    async def _flush(self, asks: list[_Ask]) -> None:
        ids = list(dict.fromkeys(i for ask in asks for i in ask.ids))
        error: TargetError | None = None
        try:
            self.sets += 1
            await self._send(ids)
            self.listings += 1
            still = (await self._listed()) & set(ids)
            if still:
                error = TargetProtocolError(self._still([i for i in ids if i in still]))
        except TargetError as exc:
            error = exc
        except BaseException:  # cancelled: the others of the set do not pass as deleted
            for ask in asks:
                ask.done, ask.error = True, TargetProtocolError("the delete was cut short")
            raise
        for ask in asks:
            ask.done, ask.error = True, error
