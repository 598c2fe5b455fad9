"""The one small protocol every store adapter implements, and its optional parts.

Adapters know HTTP (or in-process) details; nothing else does. Each method
translates transport failures and bad payloads into :mod:`benchd.errors`
``TargetError`` subclasses, so callers see a bounded ``kind``. Generic code
(the cycle, the load engine) asks a target for more only through the
optional protocols here: :class:`SendsLoad` (its own sender for the load
pass), :class:`CleansUpAfter` and :class:`CountsRetries`; and it times a call with
:func:`service_timer`, which the target's client fills in with the
answering attempt's service time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from benchd.hooks import Fire
from benchd.result import SeedReport, TargetInfo

__all__ = [
    "CleansUpAfter",
    "CountsRetries",
    "Progress",
    "RankedIds",
    "SearchQuery",
    "SendsLoad",
    "ServiceTimer",
    "Target",
    "cleans_up_after",
    "note_service_time",
    "service_timer",
]

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while long work advances."""


class RankedIds(tuple[str, ...]):
    """Ids in rank order, carrying the store's own score of each where it gave one.

    Still a plain tuple of ids to everything that ranks or scores; the drift
    stage reads ``scores`` for its label-free score-shift signal. An adapter
    whose store reports no scores returns a plain tuple.
    """

    scores: tuple[float | None, ...]

    def __new__(cls, ids: Sequence[str], scores: Sequence[float | None] = ()) -> RankedIds:
        ranked = super().__new__(cls, ids)
        ranked.scores = tuple(scores)
        return ranked


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a target needs to run one labeled query."""

    q: str
    limit: int
    reference_date: str | None = None


@runtime_checkable
class Target(Protocol):
    """A retrieval store as benchd sees it."""

    async def info(self) -> TargetInfo:
        """Describe the store (kind, endpoint, model label); cheap, no auth side effects."""
        ...

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Write the corpus into the reserved namespace and verify it is there."""
        ...

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        """Return fixture ids in the store's rank order (at most ``query.limit``)."""
        ...

    async def cleanup(self, ids: Sequence[str]) -> int:
        """Delete these fixture ids from the reserved namespace; return how many went."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class SendsLoad(Protocol):
    """Optional: a target with its own sender for the load pass.

    ``load_sender(queries, ...)`` opens a :data:`~benchd.hooks.Fire` whose
    ``fire(i)`` searches ``queries[i % len(queries)]``, over connections it
    owns (for HTTP targets, one fast pool sized to the load). Without it the
    load engine calls :meth:`Target.search`.
    """

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]: ...


@runtime_checkable
class CleansUpAfter(Protocol):
    """Optional: a target whose own settings ask it to delete its corpus after each cycle."""

    @property
    def cleans_up_after(self) -> bool: ...


def cleans_up_after(target: Target) -> bool:
    """Whether ``target`` deletes its corpus after each cycle and on shutdown (False if unsaid)."""
    return isinstance(target, CleansUpAfter) and target.cleans_up_after


@runtime_checkable
class CountsRetries(Protocol):
    """Optional: a target that retries requests says how many, and how long it waited."""

    @property
    def retries(self) -> int: ...

    @property
    def retry_wait_s(self) -> float: ...


@dataclass(slots=True)
class ServiceTimer:
    """The service time of one call: its answering attempt's, when the target noted one."""

    started: float = field(default_factory=time.perf_counter)
    answered_s: float | None = None  # noted by the target's client

    def service_s(self) -> float:
        """The answering attempt's service time, else the whole call's (no retries then)."""
        if self.answered_s is not None:
            return self.answered_s
        return time.perf_counter() - self.started


_TIMER: ContextVar[ServiceTimer | None] = ContextVar("benchd_service_timer", default=None)


@contextlib.contextmanager
def service_timer() -> Iterator[ServiceTimer]:
    """Time the call made inside the block; backoff and ``Retry-After`` waits are excluded."""
    timer = ServiceTimer()
    token = _TIMER.set(timer)
    try:
        yield timer
    finally:
        _TIMER.reset(token)


def note_service_time(seconds: float) -> None:
    """Called by a target's client when an attempt is answered (the last one counts)."""
    timer = _TIMER.get()
    if timer is not None:
        timer.answered_s = seconds
