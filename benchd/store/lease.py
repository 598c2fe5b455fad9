"""One writer per namespace: the lease benchd keeps in its sentinel record.

The sentinel's metadata names the benchd instance that writes the namespace
(``[server] instance``, default the host name), its process id (for a human:
a pid means nothing in another pid namespace), a holder token, a heartbeat
time refreshed by every writing cycle, how long the holder promises to
heartbeat (``ttl_s``) and the fixture hash of the corpus it seeds. A writer
reads the lease, writes its own, reads it back (through the namespace's
listing where the server has no read-by-id route), and backs off if another
holder won.

Liveness is judged as Kubernetes leader election judges a Lease: a reader
remembers each lease record it lists and when *it* first saw that record,
by its own monotonic clock (:data:`OBSERVED`), and holds the lease expired
only once the record has stayed the same for the holder's ``ttl_s``. Every
heartbeat writes a new record (a new heartbeat value), so a live holder's
lease never expires, whatever its wall clock says; another machine's clock
is never compared with this one's, and no process table is read. A process
that has not watched a record for ``ttl_s`` (every ``once``, ``purge`` and
``baseline``, a daemon's first cycles) holds it live, unless it is released
or its own. The holder stops writing once its own last heartbeat, by its
monotonic clock from the moment it was sent, is older than ``ttl_s`` less
:data:`MARGIN` of it (:meth:`LeaseHolder.expiring`): every reader first saw
that heartbeat after it was sent, so none takes the lease while it writes.

A daemon's holder token is kept in its state directory
(:mod:`benchd.store.lease_token`): a restarted daemon finds its token and
takes its own lease at once; a twin in another container (another state
directory) has another token, and waits out the lease like anyone else.
``once``, ``baseline`` and ``purge`` use a token of their own process: they
never take over a live lease, not even their own host's daemon's; they
measure read-only beside it, or are refused, unless ``force`` asks for a
deliberate takeover. A daemon hands its lease back on shutdown
(:meth:`LeaseHolder.mark` with ``released``): the sentinel stays, its lease
expired.

"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MARGIN",
    "OBSERVED",
    "Holder",
    "LeaseHolder",
    "Observations",
    "Role",
    "default_instance",
    "holder_of",
    "new_token",
]

Role = Literal["run", "once", "baseline", "purge"]
"""What a lease holder is: the daemon, or a one-shot command beside it."""

Clock = Callable[[], float]

MARGIN = 0.25
"""The part of ``ttl_s`` a holder keeps in hand: it stops writing once its last heartbeat is
older than ``(1 - MARGIN) * ttl_s`` (rates of clocks differ; a write takes time to land)."""

_KEEP = 4096  # lease records remembered; beyond it, those not listed for longest are forgotten


def default_instance() -> str:
    """The host name: stable for a StatefulSet pod, a systemd host, a CI runner."""
    return socket.gethostname() or "benchd"


def new_token() -> str:
    """A random holder token (64 bits)."""
    return secrets.token_hex(8)


class Observations:
    """The lease records this process has listed, and when it first saw each, by ``clock``.

    A record is known by everything its holder writes into it (token,
    heartbeat, ttl, release): a new heartbeat is a new record. Shared by the
    whole process (:data:`OBSERVED`): what it saw is a fact about the store,
    whoever listed it.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._seen: dict[tuple[Any, ...], list[float]] = {}  # record -> [first, last] seen

    def age(self, holder: Holder) -> float:
        """Seconds since this process first saw ``holder``'s record (0 the first time)."""
        now = self.clock()
        seen = self._seen.get(holder.record)
        if seen is None:
            if len(self._seen) >= _KEEP:
                self._forget()
            seen = self._seen[holder.record] = [now, now]
        seen[1] = now
        return max(0.0, now - seen[0])

    def _forget(self) -> None:
        """Drop the half of the records listed longest ago (a record seen again after that
        starts its ttl anew: later, never sooner)."""
        by_last = sorted(self._seen.items(), key=lambda kv: kv[1][1])
        for key, _ in by_last[: len(by_last) // 2]:
            del self._seen[key]

    def clear(self) -> None:
        self._seen.clear()


OBSERVED = Observations()
"""This process's observations (tests give it another clock)."""


@dataclass(slots=True)
class _Renewal:
    at: float | None = None  # the monotonic time the last confirmed heartbeat was sent
    heartbeat: float = 0.0  # the last heartbeat value written (each next one is greater)


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """This process as a lease holder."""

    instance: str
    ttl_s: float
    fixture_hash: str = ""
    role: Role = "run"
    force: bool = False  # a deliberate takeover (--force): write over any live lease
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=new_token)
    renewal: _Renewal = field(default_factory=_Renewal, compare=False, repr=False)

    @property
    def read_only_beside_live(self) -> bool:
        """Beside a live holder, measure its corpus read-only instead of failing."""
        return self.role in ("once", "baseline") and not self.force

    def may_take(self, holder: Holder) -> bool:
        """Whether this process may write over ``holder``'s lease: its own (its token: a
        restarted daemon's, from its state directory), one seen to expire or released, any
        with ``force``."""
        return holder.token == self.token or self.force or not holder.live()

    def beat(self) -> float:
        """The time a heartbeat is sent (by this process's monotonic clock)."""
        return OBSERVED.clock()

    def renewed(self, sent: float) -> None:
        """The heartbeat sent at ``sent`` is confirmed (written and read back as this one's)."""
        self.renewal.at = sent

    def expiring(self) -> bool:
        """Whether the last confirmed heartbeat is older than ``ttl_s`` less the margin: this
        holder writes no more until it heartbeats again."""
        at = self.renewal.at
        return at is not None and OBSERVED.clock() - at > (1.0 - MARGIN) * self.ttl_s

    def mark(
        self, namespace: str, now: float | None = None, *, released: bool = False
    ) -> dict[str, Any]:
        """The sentinel's metadata for this holder, heartbeat now (0: a released lease).

        The heartbeat is this host's wall clock, shown to humans and making
        every heartbeat a new record; no reader compares it with its own clock.
        """
        beat = 0.0
        if not released:  # a clock stepped back must not repeat an earlier record
            wall = round(time.time() if now is None else now, 3)
            beat = self.renewal.heartbeat = max(wall, round(self.renewal.heartbeat + 0.001, 3))
        return {
            "namespace": namespace,
            "sentinel": "true",
            "instance": self.instance,
            "role": self.role,
            "pid": self.pid,
            "token": self.token,
            "heartbeat": beat,
            "ttl_s": self.ttl_s,
            "fixture_hash": self.fixture_hash,
            "released": released,
        }


@dataclass(frozen=True, slots=True)
class Holder:
    """The lease as read from a sentinel record."""

    instance: str
    pid: int
    token: str
    heartbeat: float
    ttl_s: float
    fixture_hash: str
    role: str = "run"
    released: bool = False

    @property
    def record(self) -> tuple[Any, ...]:
        """What tells this lease record from the holder's next one."""
        return (self.instance, self.token, self.role, self.heartbeat, self.ttl_s, self.released)

    def live(self) -> bool:
        """Whether the lease is live as this process sees it: not released, and its record
        not seen unchanged for the holder's ``ttl_s`` (:class:`Observations`)."""
        return not self.released and OBSERVED.age(self) < self.ttl_s

    def same_fixture(self, fixture_hash: str) -> bool:
        """Whether the holder seeds the corpus of ``fixture_hash``. A lease kept in a record's
        name (the mcp kind) carries only the hash's first 16 hex digits."""
        mine = self.fixture_hash
        return mine == fixture_hash or (len(mine) >= 16 and fixture_hash.startswith(mine))

    def describe(self) -> str:
        age = OBSERVED.age(self)
        role = "" if self.role == "run" else f"benchd {self.role}, "
        return (
            f"benchd instance {self.instance!r} ({role}pid {self.pid}, lease {self.ttl_s:.0f}s, "
            f"its record unchanged for {age:.0f}s as seen here)"
        )


def holder_of(mark: Any) -> Holder | None:
    """The lease in a sentinel's ``benchd_owner`` metadata; None for a sentinel without one."""
    if type(mark) is dict:  # the usual mark (a listed record's): no ABC check
        if "instance" not in mark:
            return None
    elif not isinstance(mark, Mapping) or "instance" not in mark:
        return None
    try:
        return Holder(
            instance=str(mark["instance"]),
            pid=int(mark.get("pid", 0)),
            token=str(mark.get("token", "")),
            heartbeat=float(mark.get("heartbeat", 0.0)),
            ttl_s=float(mark.get("ttl_s", 0.0)),
            fixture_hash=str(mark.get("fixture_hash", "")),
            role=str(mark.get("role", "run")),
            released=mark.get("released") is True,
        )
    except (TypeError, ValueError):
        return None
