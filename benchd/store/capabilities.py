"""What a store kind declares it can do, and what ``purge`` reports: plain data, no imports.

Re-exported by :mod:`benchd.store.protocol` (the store seam, where a kind's
author reads it); kept apart so :mod:`benchd.store.target` can name them
without importing the seam.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities", "Purged"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store kind can do, declared in its registry entry (and read, never probed).

    Every field is a promise the flow relies on: a store that declares
    ``lists`` must list every record it holds in the namespace; one that
    declares ``deletes`` must delete exactly the id it is given.
    """

    lists: bool = False  # list benchd's records in its namespace (verify, ownership, purge)
    writes: bool = False  # write batches of records (seed); else indexed some other way
    deletes: bool = False  # delete one record by id (cleanup, migration, purge)
    # deletes up to this many ids in one call (delete_many), each only while it is in
    # benchd's namespace (the store's delete filters on it); 0: one call per record
    bulk_deletes: int = 0
    lease: bool = False  # the sentinel carries a lease: one writer per namespace
    owned_ids: bool = True  # keeps the ids benchd writes (else it assigns its own; benchd's
    # records are then recognised by the id the listing shows beside the store's)
    owned_keys: bool = False  # namespaces the fields it keys across tenants (facts' key, ...)
    load_sender: bool = False  # its own sender for the load pass (else the engine calls search)
    scores: bool = False  # search answers carry the store's score of each result
    unranked: bool = False  # search answers a set, not a ranking
    # a healthy search answers min(limit, records in the namespace) results (a kNN store):
    # fewer is counted as a short answer (benchd_short_answers_total)
    full_answers: bool = False
    retries: bool = False  # retries requests itself and counts them
    # reads ids whatever namespace holds them (Store.holders): before writing, the flow
    # refuses an id another tenant holds (many stores replace on an existing id)
    holders: bool = False
    # where what the store can do is only known once it is built (the python kind's
    # retriever): what decides it; the fields are then its best case
    decided_by: str = ""

    def lacks(self) -> tuple[str, ...]:
        """The guarantees a probe on this store does not have, one plain sentence each."""
        out: list[str] = []
        if not self.writes:
            out.append("benchd does not write the corpus: the store indexes it some other way")
        if not self.lists:
            out.append(
                "no listing: the seed is not verified by reading it back, the namespace's "
                "owner is not checked and leftovers are not known"
            )
        if not self.deletes or not self.lists:
            out.append("no verified delete: no cleanup and no purge")
        if not self.lease:
            out.append("no lease: a second writer on the same namespace is not detected")
        if self.unranked:
            out.append(
                "unranked answers: scored as sets (hit, recall, recall_all, precision over the "
                "whole answer); no rank measure (MRR, nDCG, MAP, P@k)"
            )
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Purged:
    """What ``purge`` deleted (as a listing after the deletes shows): benchd's records, its
    sentinels, what it left (not benchd's), and benchd's own still listed."""

    records: int
    sentinels: int
    foreign: int
    kept: int = 0  # benchd's records (or sentinels) still listed after their deletes
