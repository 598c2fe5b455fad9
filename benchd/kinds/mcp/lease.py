"""The lease on an MCP server whose listing gives ids only: a lease record named by its holder.

server-memory's ``read_graph`` (like many memory tools) lists names, not
metadata, so the lease cannot ride in the sentinel's metadata as it does
for the other kinds. It lives in the name of a record of its own, written
through the write tool and listed by the list tool::

    benchd-lease:<namespace>:<instance>:<role>:<pid>:<heartbeat ms>:<ttl s>:<fixture>:<token>

(the instance percent-encoded; ``<fixture>`` the first
:data:`FIXTURE_CHARS` hex digits of the fixture hash; a namespace too long
for the sentinel's id is hashed as the sentinel's is). About 95 characters
for ``benchd-eval`` and a short host name, the holder first for a human
reading the server's records. Earlier versions named it::

    benchd-sentinel:<namespace>:lease:<token>:<heartbeat ms>:<ttl s>:<role>:<pid>:
        <fixture hash>:<instance>                              (one name, no break)

(~180 characters, the whole fixture hash); such a record is still read (a daemon killed before the
upgrade leaves one, live until its TTL) and deleted as every lease record is.

A heartbeat writes a new lease record and deletes the holder's older ones;
handing the lease back deletes them. Which lease a listing shows
(:func:`shown`): another holder's live lease first (the earliest: it was
there first), else this process's own, else the latest expired one. A
writer that finds another live lease beside its own after writing deletes
its own and backs off, so of two writers racing for a free namespace at
most one keeps writing (each lists after it wrote: the later of the two
sees the other's record).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from benchd.store.lease import Holder
from benchd.store.owned import sentinel_id

__all__ = [
    "FIXTURE_CHARS",
    "is_lease_name",
    "lease_name",
    "lease_prefix",
    "legacy_lease_prefix",
    "parse_lease",
    "shown",
]

FIXTURE_CHARS = 16
"""Hex digits of the fixture hash a lease name keeps (64 bits: which corpus the holder seeds)."""

_FIELDS = 7  # instance, role, pid, heartbeat, ttl, fixture hash, token (either version)


def lease_prefix(namespace: str) -> str:
    """What every lease record's name in ``namespace`` starts with."""
    return "benchd-lease:" + sentinel_id(namespace).removeprefix("benchd-sentinel:") + ":"


def legacy_lease_prefix(namespace: str) -> str:
    """What an earlier version's lease records in ``namespace`` start with."""
    return f"{sentinel_id(namespace)}:lease:"


def is_lease_name(namespace: str, name: str) -> bool:
    """Whether ``name`` has the form of a lease record's name in ``namespace`` (either version)."""
    return name.startswith((lease_prefix(namespace), legacy_lease_prefix(namespace)))


def lease_name(namespace: str, mark: Mapping[str, Any]) -> str:
    """The lease record's name for a sentinel mark (:meth:`LeaseHolder.mark`)."""
    fields = (
        quote(str(mark["instance"]), safe=""),
        str(mark["role"]),
        str(int(mark["pid"])),
        str(round(float(mark["heartbeat"]) * 1000)),
        f"{float(mark['ttl_s']):g}",
        str(mark.get("fixture_hash", ""))[:FIXTURE_CHARS],
        str(mark["token"]),
    )
    return lease_prefix(namespace) + ":".join(fields)


def parse_lease(namespace: str, name: str) -> Holder | None:
    """The lease a record's name carries (this version's or an earlier one's); None for any
    other record."""
    new, old = lease_prefix(namespace), legacy_lease_prefix(namespace)
    prefix = new if name.startswith(new) else old if name.startswith(old) else None
    if prefix is None:
        return None
    fields = name[len(prefix) :].split(":")
    if len(fields) != _FIELDS:
        return None
    if prefix == new:
        instance, role, pid, heartbeat, ttl, fixture_hash, token = fields
    else:
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


def shown(leases: Iterable[Holder], mine: str | None) -> Holder | None:
    """The lease a listing holding ``leases`` shows this process (token ``mine``).

    Another holder's live lease wins over this process's own (live as this
    process sees it: :meth:`~benchd.store.lease.Holder.live`; the one with
    the earliest heartbeat, ties by token, so readers agree on which to name);
    then this process's latest; then the latest of the expired ones.
    """
    held = list(leases)
    others = [h for h in held if h.token != mine and h.live()]
    if others:
        return min(others, key=lambda h: (h.heartbeat, h.token))
    own = [h for h in held if h.token == mine]
    pool = own or held
    return max(pool, key=lambda h: (h.heartbeat, h.token)) if pool else None
