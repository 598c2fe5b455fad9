"""One writer per namespace: the lease benchd keeps in its sentinel record.

The sentinel's metadata names the benchd instance that writes the namespace
(``[server] instance``, default the host name, which a StatefulSet pod keeps
across restarts), its process id, a per-process token, a heartbeat time
refreshed by every writing cycle, how long the holder promises to heartbeat
(``ttl_s``) and the fixture hash of the corpus it seeds. A writer reads the
lease, writes its own, reads it back, and backs off if another holder won.

What this guarantees, and what not: the store has no compare-and-swap, so two
writers starting within one read-write-read window can both believe they
won; the read-back makes that window a few requests wide and the loser of
any later cycle backs off. Detection is per cycle: a second writer is
refused on its first cycle, not prevented at the store. A holder that stops
heartbeating (killed, partitioned) keeps the namespace until its lease is
``ttl_s`` old, unless it restarts under the same instance name.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Holder", "LeaseHolder", "default_instance", "holder_of"]


def default_instance() -> str:
    """The host name: stable for a StatefulSet pod, a systemd host, a CI runner."""
    return socket.gethostname() or "benchd"


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """This process as a lease holder."""

    instance: str
    ttl_s: float
    fixture_hash: str = ""
    read_only_beside_live: bool = False  # benchd once: measure read-only instead of failing
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: secrets.token_hex(8))

    def mark(self, namespace: str, now: float | None = None) -> dict[str, Any]:
        """The sentinel's metadata for this holder, heartbeat now."""
        return {
            "namespace": namespace,
            "sentinel": "true",
            "instance": self.instance,
            "pid": self.pid,
            "token": self.token,
            "heartbeat": round(time.time() if now is None else now, 3),
            "ttl_s": self.ttl_s,
            "fixture_hash": self.fixture_hash,
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

    def live(self, now: float | None = None) -> bool:
        """Whether the holder heartbeated within its own ``ttl_s``."""
        return (time.time() if now is None else now) - self.heartbeat <= self.ttl_s

    def same_process(self, me: LeaseHolder) -> bool:
        return self.token == me.token

    def describe(self, now: float | None = None) -> str:
        age = max(0.0, (time.time() if now is None else now) - self.heartbeat)
        return (
            f"benchd instance {self.instance!r} (pid {self.pid}, heartbeat {age:.0f}s ago, "
            f"lease {self.ttl_s:.0f}s)"
        )


def holder_of(mark: Any) -> Holder | None:
    """The lease in a sentinel's ``benchd_owner`` metadata; None for a sentinel without one."""
    if not isinstance(mark, Mapping) or "instance" not in mark:
        return None
    try:
        return Holder(
            instance=str(mark["instance"]),
            pid=int(mark.get("pid", 0)),
            token=str(mark.get("token", "")),
            heartbeat=float(mark.get("heartbeat", 0.0)),
            ttl_s=float(mark.get("ttl_s", 0.0)),
            fixture_hash=str(mark.get("fixture_hash", "")),
        )
    except (TypeError, ValueError):
        return None
