"""The lease on an MCP server whose listing gives ids only: a lease record named by its holder.

server-memory's ``read_graph`` (like many memory tools) lists names, not
metadata, so the lease cannot ride in the sentinel's metadata as it does
for the other kinds. It lives in the name of a record of its own, written
through the write tool and listed by the list tool::

    benchd-sentinel:<namespace>:lease:<token>:<heartbeat ms>:<ttl s>:<role>:<pid>:
        <fixture hash>:<instance>                              (one name, no break)

(the instance percent-encoded). A heartbeat writes a new lease record and
deletes the holder's older ones; handing the lease back deletes them. Which
lease a listing shows (:func:`shown`): another holder's live lease first
(the earliest: it was there first), else this process's own, else the
latest expired one. A writer that finds another live lease beside its own
after writing deletes its own and backs off, so of two writers racing for
a free namespace at most one keeps writing (each lists after it wrote:
the later of the two sees the other's record).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from benchd.targets.lease import Holder
from benchd.targets.owned import sentinel_id

__all__ = ["lease_name", "lease_prefix", "parse_lease", "shown"]

_FIELDS = 7  # token, heartbeat, ttl, role, pid, fixture hash, instance


def lease_prefix(namespace: str) -> str:
    """What every lease record's name in ``namespace`` starts with."""
    return f"{sentinel_id(namespace)}:lease:"


def lease_name(namespace: str, mark: Mapping[str, Any]) -> str:
    """The lease record's name for a sentinel mark (:meth:`LeaseHolder.mark`)."""
    fields = (
        str(mark["token"]),
        str(round(float(mark["heartbeat"]) * 1000)),
        f"{float(mark['ttl_s']):g}",
        str(mark["role"]),
        str(int(mark["pid"])),
        str(mark.get("fixture_hash", "")),
        quote(str(mark["instance"]), safe=""),
    )
    return lease_prefix(namespace) + ":".join(fields)


def parse_lease(namespace: str, name: str) -> Holder | None:
    """The lease a record's name carries; None for any other record."""
    prefix = lease_prefix(namespace)
    if not name.startswith(prefix):
        return None
    fields = name[len(prefix) :].split(":")
    if len(fields) != _FIELDS:
        return None
    token, heartbeat, ttl, role, pid, fixture_hash, instance = fields
    try:
        return Holder(
            instance=unquote(instance),
            pid=int(pid),
            token=token,
            heartbeat=int(heartbeat) / 1000,
            ttl_s=float(ttl),
            fixture_hash=fixture_hash,
            role=role,
        )
    except ValueError:
        return None


def shown(leases: Iterable[Holder], mine: str | None, now: float | None = None) -> Holder | None:
    """The lease a listing holding ``leases`` shows this process (token ``mine``).

    Another holder's live lease wins over this process's own (the earliest
    of them, ties by token, so every reader picks the same); then this
    process's latest; then the latest of the expired ones.
    """
    held = list(leases)
    others = [h for h in held if h.token != mine and h.live(now)]
    if others:
        return min(others, key=lambda h: (h.heartbeat, h.token))
    own = [h for h in held if h.token == mine]
    pool = own or held
    return max(pool, key=lambda h: (h.heartbeat, h.token)) if pool else None
