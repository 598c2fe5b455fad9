"""Where recent ``GET /export`` pages ended, so the next page costs O(page), not O(offset).

``ORDER BY rid LIMIT n OFFSET k`` makes SQLite step over k rows, and
``COUNT(*)`` counts them all, on every page: listing N records in pages of
500 cost O(N²/500). A page that ended at offset k on row ``rid`` means the
page at offset k is ``rid > last LIMIT n`` — exactly the same rows, in the
same order — as long as no row of the table changed since. So every cursor
(and every cached total) belongs to one *generation* of the table; any other
generation drops them all and the index answers by OFFSET again. The
zengram-4.3 profile's listing keeps its walk's state the same way (rows
walked, the millisecond cursor reached), so a page resumes the walk.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["ListingKey", "PageCursors"]

# A listing: the filter's SQL condition and its parameters (active_only is in the SQL).
ListingKey = tuple[str, tuple[object, ...]]

State = TypeVar("State")  # where a listing stands after a page: a row id, a time cursor

_LISTINGS = 8  # filters remembered at once: a handful of namespaces listed concurrently
_ENDS = 4  # page ends kept per filter: a few readers of one namespace at different offsets


@dataclass(slots=True)
class _Listing(Generic[State]):
    total: int | None = None
    ends: OrderedDict[int, State] = field(default_factory=OrderedDict)  # offset -> state


class PageCursors(Generic[State]):
    """A small LRU of page ends and totals per listing, valid for one table generation."""

    def __init__(self, listings: int = _LISTINGS, ends: int = _ENDS) -> None:
        self._max_listings = listings
        self._max_ends = ends
        self._generation: Hashable = None
        self._listings: OrderedDict[ListingKey, _Listing[State]] = OrderedDict()
        self.hits = 0  # pages served from a cursor (for benches and tests)

    def sync(self, generation: Hashable) -> None:
        """Forget everything unless the table is still at ``generation``."""
        if generation != self._generation:
            self._listings.clear()
            self._generation = generation

    def total(self, key: ListingKey) -> int | None:
        listing = self._listings.get(key)
        return None if listing is None else listing.total

    def set_total(self, key: ListingKey, total: int) -> None:
        self._listing(key).total = total

    def start(self, key: ListingKey, offset: int) -> tuple[int, State] | None:
        """The nearest page end at or before ``offset``: ``(its offset, the state there)``."""
        listing = self._listings.get(key)
        if listing is None:
            return None
        ends = [end for end in listing.ends if end <= offset]
        if not ends:
            return None
        end = max(ends)
        listing.ends.move_to_end(end)
        self.hits += 1
        return end, listing.ends[end]

    def remember(self, key: ListingKey, end: int, state: State) -> None:
        """A page ended at offset ``end`` (exclusive), the listing then at ``state``."""
        ends = self._listing(key).ends
        ends[end] = state
        ends.move_to_end(end)
        while len(ends) > self._max_ends:
            ends.popitem(last=False)

    def _listing(self, key: ListingKey) -> _Listing[State]:
        listing = self._listings.get(key)
        if listing is None:
            listing = self._listings[key] = _Listing[State]()
            while len(self._listings) > self._max_listings:
                self._listings.popitem(last=False)
        else:
            self._listings.move_to_end(key)
        return listing
