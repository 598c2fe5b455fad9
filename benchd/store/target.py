"""The one small protocol every store adapter implements, and its optional parts.

Adapters know HTTP (or in-process) details; nothing else does. Each method
translates transport failures and bad payloads into :mod:`benchd.errors`
``TargetError`` subclasses, so callers see a bounded ``kind``.
:class:`Target` is the small protocol (what a ``python`` factory may return
as it is); :class:`ProbeTarget` is what every registered kind builds and the
probe drives, with its declared capabilities
(:class:`~benchd.store.protocol.Capabilities`). Generic code times a call
with :func:`service_timer`, which the target's client fills in with the
answering attempt's service time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from benchd.result import RankedIds, SeedReport, TargetInfo

if TYPE_CHECKING:
    from benchd.store.capabilities import Capabilities, Purged

__all__ = [
    "Fire",
    "ProbeTarget",
    "Progress",
    "RankedIds",
    "SearchQuery",
    "ServiceTimer",
    "Target",
    "WriteRate",
    "note_service_time",
    "service_timer",
]

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while long work advances."""

Fire = Callable[[int], Awaitable[tuple[str, ...]]]
"""Send the search for one query index; return ranked ids or raise a TargetError.

What a target's own load sender (:meth:`ProbeTarget.load_sender`) opens and the
load engine calls."""


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


class ProbeTarget(Target, Protocol):
    """What a probe drives: the adapter a registered kind builds.

    Beyond :class:`Target`, everything here is present on every adapter and
    typed; what a store can do is read from ``capabilities`` (declared by its
    kind, see :mod:`benchd.store.protocol`), never probed. The lease it holds
    and the write share its deletes keep within are given to its builder
    (:func:`benchd.kinds.build_target`), never set on it.
    """

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def retries(self) -> int:
        """Requests retried so far (0 for a store that does not retry)."""
        ...

    @property
    def retry_wait_s(self) -> float:
        """Seconds waited before those retries (backoff, ``Retry-After``)."""
        ...

    @property
    def leftover_records(self) -> int:
        """Records benchd wrote (or may have) in its namespace and has not deleted."""
        ...

    async def release(self) -> int:
        """Delete the sentinel once nothing else of benchd's is left; how many went."""
        ...

    async def release_lease(self) -> bool:
        """Hand back the lease this process holds now (shutdown, the end of ``once``), so
        no one waits out its TTL; whether it did (False where no lease is kept)."""
        ...

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        """Delete everything benchd owns in the namespace (``benchd purge``)."""
        ...

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        """The load pass's own sender (only where ``capabilities.load_sender``).

        It opens a :data:`~benchd.store.target.Fire` whose ``fire(i)`` searches
        ``queries[i % len(queries)]`` over connections it owns.
        """
        ...


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


WriteRate = Callable[[], float | None]
"""The probe's share of its key's write budget (req/s) as it stands now, read as each set of
deletes begins (a daemon's reload may plan it anew); None: not spaced."""
