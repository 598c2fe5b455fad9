"""One writer per namespace: the lease benchd keeps in its sentinel record.

The sentinel's metadata names the benchd instance that writes the namespace
(``[server] instance``, default the host name, which a StatefulSet pod keeps
across restarts), its process id, a per-process token, a heartbeat time
refreshed by every writing cycle, how long the holder promises to heartbeat
(``ttl_s``) and the fixture hash of the corpus it seeds. A writer reads the
lease, writes its own, reads it back (through the namespace's listing: the
real server has no read-by-id route), and backs off if another holder won.

The lease knows the *role* of its holder. Only ``run`` (the daemon) takes
over a live lease of its own instance name at once: a restarted pod must not
wait out the TTL. ``once``, ``baseline`` and ``purge`` never take over a live
lease, not even one of their own instance name (by default the host name, so
a second process on the daemon's host is another holder): they measure
read-only beside it, or are refused, unless ``force`` asks for a deliberate
takeover. A daemon hands its lease back on shutdown (:meth:`LeaseHolder.mark`
with ``released``): the sentinel stays, its lease expired.

"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Holder", "LeaseHolder", "Role", "benchd_running", "default_instance", "holder_of"]

Role = Literal["run", "once", "baseline", "purge"]
"""What a lease holder is: the daemon, or a one-shot command beside it."""


def default_instance() -> str:
    """The host name: stable for a StatefulSet pod, a systemd host, a CI runner."""
    return socket.gethostname() or "benchd"


def benchd_running(pid: int) -> bool:
    """Whether another process ``pid`` on this host runs ``benchd run`` (from ``/proc``).

    False for this process, a pid that is gone or runs something else, and
    where there is no ``/proc``: a restarted daemon in a new container (a
    new pid namespace) finds its old pid unused, or used by something else.
    """
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = {os.path.basename(a.decode("utf-8", "replace")) for a in argv}
    return "benchd" in words and "run" in words


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """This process as a lease holder."""

    instance: str
    ttl_s: float
    fixture_hash: str = ""
    role: Role = "run"
    force: bool = False  # a deliberate takeover (--force): write over any live lease
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: secrets.token_hex(8))

    @property
    def read_only_beside_live(self) -> bool:
        """Beside a live holder, measure its corpus read-only instead of failing."""
        return self.role in ("once", "baseline") and not self.force

    def may_take(self, holder: Holder, now: float | None = None) -> bool:
        """Whether this process may write over ``holder``'s lease.

        Its own, an expired or released one, any with ``force``; a live one of
        the same instance name only when this is ``run`` (a restarted daemon)
        and the holder's pid runs no ``benchd run`` on this host (else it is a
        second daemon beside the first, refused).
        """
        if holder.token == self.token or self.force or not holder.live(now):
            return True
        restart = self.role == "run" and holder.role == "run" and holder.instance == self.instance
        # a second daemon beside a running one on this host (the same config, the host name
        # as instance) is no restart: its holder's process is still running benchd
        return restart and not benchd_running(holder.pid)

    def mark(
        self, namespace: str, now: float | None = None, *, released: bool = False
    ) -> dict[str, Any]:
        """The sentinel's metadata for this holder, heartbeat now (0: a released lease)."""
        return {
            "namespace": namespace,
            "sentinel": "true",
            "instance": self.instance,
            "role": self.role,
            "pid": self.pid,
            "token": self.token,
            "heartbeat": 0.0 if released else round(time.time() if now is None else now, 3),
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

    def live(self, now: float | None = None) -> bool:
        """Whether the holder heartbeated within its own ``ttl_s`` and has not released it."""
        age = (time.time() if now is None else now) - self.heartbeat
        return not self.released and age <= self.ttl_s

    def same_fixture(self, fixture_hash: str) -> bool:
        """Whether the holder seeds the corpus of ``fixture_hash``. A lease kept in a record's
        name (the mcp kind) carries only the hash's first 16 hex digits."""
        mine = self.fixture_hash
        return mine == fixture_hash or (len(mine) >= 16 and fixture_hash.startswith(mine))

    def same_process(self, me: LeaseHolder) -> bool:
        return self.token == me.token

    def describe(self, now: float | None = None) -> str:
        age = max(0.0, (time.time() if now is None else now) - self.heartbeat)
        role = "" if self.role == "run" else f"benchd {self.role}, "
        return (
            f"benchd instance {self.instance!r} ({role}pid {self.pid}, heartbeat {age:.0f}s ago, "
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
            role=str(mark.get("role", "run")),
            released=mark.get("released") is True,
        )
    except (TypeError, ValueError):
        return None
