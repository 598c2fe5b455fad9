"""What a kind keeps about its store between calls, forgotten when the store restarts.

A store kind keeps handles across calls and cycles: pooled connections, a
collection's id, the table it checked, the fact that a collection is loaded.
A store that restarts makes them stale — a pooled connection is closed, an id
names nothing when the store comes back empty, a collection comes back
released — and a kind that trusted them would fail every cycle after the
store is back. So a kind notes, where it translates a store's error, that a
call showed a handle stale (a connection refused or dropped, a not-found for
what it cached): :meth:`Handles.stale` forgets them all at once. A call
wrapped in :func:`fresh_after_restart` that failed after its handles were
forgotten runs once more with fresh ones, so the first cycle after the store
is back succeeds and a restart costs only the cycles that ran while it was
down.

Only the kind can tell a stale handle from any other failure (Chroma's 404,
Milvus's codes, PostgreSQL's SQLSTATE), and only the kind knows what it
keeps: the flow never sees either.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from benchd.errors import TargetError
from benchd.logging import get_logger

__all__ = ["Handles", "HasHandles", "fresh_after_restart"]

log = get_logger("benchd.targets")

P = ParamSpec("P")
T = TypeVar("T")


class Handles:
    """A kind's handles on its store: forgotten together, counted, logged once an outage."""

    def __init__(self, where: str, forget: Callable[[], Awaitable[None]]) -> None:
        self.where = where  # how the log names the store ("pgvector table t", ...)
        self._forget = forget
        self.resets = 0  # times the handles were forgotten
        self._quiet = False  # forgotten since the last call that succeeded: not logged again

    async def stale(self, why: str) -> None:
        """A call showed the handles stale (``why``: the store's error): forget them."""
        self.resets += 1
        if not self._quiet:
            self._quiet = True
            log.info("store handles reset", store=self.where, why=why)
        await self._forget()

    def working(self) -> None:
        """A call succeeded: the next stale handle starts a new outage (and is logged)."""
        self._quiet = False


class HasHandles(Protocol):
    @property
    def handles(self) -> Handles: ...


S = TypeVar("S", bound=HasHandles)


def fresh_after_restart(
    call: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """``call``, run once more when it failed after its store's handles were forgotten.

    A call that is run twice must be safe to repeat: a listing or a search, a
    delete scoped to benchd's namespace, a write that replaces benchd's own
    records.
    """

    @functools.wraps(call)
    async def once_more(io: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        handles = io.handles
        resets = handles.resets
        try:
            done = await call(io, *args, **kwargs)
        except TargetError:
            if handles.resets == resets:
                raise
            done = await call(io, *args, **kwargs)
        handles.working()
        return done

    return once_more
