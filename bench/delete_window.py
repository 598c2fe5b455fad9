"""The window between benchd's listing and each delete, against the real server's budgets.

The store's ``DELETE /memory/{id}`` carries no namespace (#20 item 7): during
the time between the listing that showed a record in benchd's namespace and
the delete's answer, another tenant importing under that id would lose the
record. This measures that window for every delete of a ``cleanup =
"before"`` cycle re-seeding N records, against a reference store in the
``zengram-4.3`` profile on loopback (in process) with the real server's write
budget (60 a minute), three ways:

- ``paced``: as benchd runs now: the deletes are kept within the probe's
  share of the key's write budget (``write_rate``, :mod:`benchd.store.pacing`:
  one minute's share at once, then spaced), use the latest listing (the
  lease's read-back), and the namespace is listed again before a delete once
  the listing is older than ``RELIST_AFTER_S`` (15 s);
- ``relist``: the same without pacing: deletes past the first minute's
  budget wait on the store's 429s (benchd before #27's pacing);
- ``once``: unpaced, one listing for the whole cleanup (benchd before #20).

Prints p50 / p99 / max of the windows, the listings each way took and the
retries (429s answered) it met. Run from the repo root::

    .venv/bin/python bench/delete_window.py [--records 100] [--writes-per-min 60]
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import anyio

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore
from benchd.store import deletion
from benchd.store.lease import LeaseHolder

KEY = "bench-key-delete-window-0123"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


async def _one(records: int, writes_per_min: int, relist: bool, paced: bool) -> dict[str, Any]:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=writes_per_min,
        profile="zengram-4.3",
        import_pacing=0.0,
    )
    memories = [{"id": f"d{i}", "content": f"delete window note {i}"} for i in range(records)]
    deletion.RELIST_AFTER_S = 15.0 if relist else math.inf
    async with running_refstore(config) as store:
        settings = ZengramConfig(
            url=store.url, cleanup="before", max_retries=50, searchable_timeout_s=0.0
        )
        # the probe's share of the key's write budget: this probe alone on the key
        rate = writes_per_min / 60.0 if paced and writes_per_min > 0 else None
        t = ZengramTarget(
            settings,
            Secret(KEY, "bench"),
            lease=LeaseHolder(instance="bench", ttl_s=3600.0),
            write_rate=lambda: rate,
        )
        listings = 0
        list_page = t.store.list_page

        async def counting(cursor: str | None, *, compare: bool = True) -> Any:
            nonlocal listings
            if cursor is None:  # a listing's first page
                listings += 1
            return await list_page(cursor, compare=compare)

        t.store.list_page = counting  # type: ignore[method-assign]
        try:
            await t.seed(memories)  # first cycle: nothing to delete
            t.delete_windows.clear()
            listings = 0
            retries_before = t.retries
            started = time.monotonic()
            await t.seed(memories)  # the cycle measured: deletes every record, then imports
            took = time.monotonic() - started
            retries = t.retries - retries_before
        finally:
            await t.aclose()
    windows = [w for w in t.delete_windows]
    return {
        "deletes": len(windows),
        "p50": _pct(windows, 0.5),
        "p99": _pct(windows, 0.99),
        "max": max(windows),
        "listing_calls": listings,
        "cycle_s": took,
        "retries": retries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--writes-per-min", type=int, default=60)
    args = parser.parse_args()
    print(f"{args.records} records, {args.writes_per_min} writes/min, cleanup = before")
    ways = (("paced", True, True), ("relist", True, False), ("once", False, False))
    for name, relist, paced in ways:
        row = anyio.run(_one, args.records, args.writes_per_min, relist, paced)
        print(
            f"{name:>6}: {row['deletes']} deletes, window p50 {row['p50']:.3f} s, "
            f"p99 {row['p99']:.3f} s, max {row['max']:.3f} s; {row['listing_calls']} "
            f"listings, {row['retries']} retries (429s), cycle {row['cycle_s']:.1f} s"
        )


if __name__ == "__main__":
    main()
