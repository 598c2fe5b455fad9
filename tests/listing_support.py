"""What a store lists in benchd's namespace, read the way any caller reads it.

:func:`listed_in` pages through the store protocol's own listing
(:meth:`benchd.store.protocol.Store.list_page`) of a flow's store, so tests
see what the store shows, not what the flow keeps of it.
"""

from __future__ import annotations

from benchd.store.flow import NamespaceFlow
from benchd.store.protocol import Listed

__all__ = ["listed_in"]

MAX_PAGES = 10_000


async def listed_in(flow: NamespaceFlow) -> dict[str, Listed]:
    """Every record listed in the flow's namespace, by store id."""
    records: dict[str, Listed] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await flow.store.list_page(cursor)
        records.update((record.id, record) for record in page.records)
        if page.next is None:
            return records
        cursor = page.next
    raise AssertionError(f"the listing did not end after {MAX_PAGES} pages")
